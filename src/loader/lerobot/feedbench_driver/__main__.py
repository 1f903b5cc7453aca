#!/usr/bin/env python3
"""feedbench's LeRobot driver: feedbench (the Rust binary) measuring LeRobot in the user's
Python. feedbench writes this package into its temporary directory and runs
`PYTHON DIR/feedbench_driver REQUEST_FILE` (or `--session`, requests on stdin); it answers each
request with JSON lines on stdout (`protocol`). What LeRobot prints goes to stderr.

The package, by what each module holds:
  protocol        the requests and answers, a TypedDict each, and the error kinds (the Rust
                  side: src/loader/lerobot/protocol.rs)
  readings        CPU, memory and batches of the processes; the one `load` loop
  plain           LeRobot's plain pair, `--loader lerobot`: LeRobotDataset + DataLoader
  startup         that DataLoader's start taken apart: what each worker is sent, when it starts
  digest          each item of a batch digested as feedbench digests its own
  policy_step     `model --impl lerobot`: LeRobot's DiffusionPolicy step on a resident batch
  run_config      a lerobot-train run's configuration, by LeRobot's parser
  train_run       the run's dataset, sampler and DataLoader, built as lerobot-train builds them
  train_step      the run's training step (accelerator, policy, optimizer, update_policy)
  train_requests  what feedbench asks of a run: load, batches, describe, model
"""

import importlib.metadata
import os
import sys
import traceback
from typing import Any, Dict, cast

if __package__ in (None, ""):
    # Run as `python DIR/feedbench_driver`: Python put the package's own directory first on the
    # path, where its modules would shadow the environment's (a `protocol`, a `measure`); the
    # package is imported from DIR instead, by its name.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path = [os.path.dirname(here), *(p for p in sys.path if os.path.abspath(p or ".") != here)]

from feedbench_driver.plain import (  # noqa: E402
    open_dataset, run_batches, run_digests, run_load, run_sampler)
from feedbench_driver.policy_step import run_model  # noqa: E402
from feedbench_driver.protocol import (  # noqa: E402
    BatchesDatasetRequest, DigestsRequest, ErrorKind, LoadDatasetRequest, ModelPolicyRequest, REQUESTS,
    Refused, RunRequest, SamplerRequest, Versions, check_request, end_with_feedbench, requests,
    say_error)
from feedbench_driver.train_requests import run_lerobot_train  # noqa: E402
from feedbench_driver.train_run import Run  # noqa: E402


SUPPORTED = ((0, 4), (0, 6))  # LeRobot 0.4.x to 0.6.x: v3.0 datasets, lerobot.datasets.*


def versions() -> Versions:
    import torch

    version = importlib.metadata.version("lerobot")
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if not (SUPPORTED[0] <= numbers <= SUPPORTED[1]):
        raise Refused(
            ErrorKind.VERSION,
            f"LeRobot {version} in {sys.executable} is not supported: feedbench drives LeRobot "
            f"{SUPPORTED[0][0]}.{SUPPORTED[0][1]} to {SUPPORTED[1][0]}.{SUPPORTED[1][1]}",
        )
    return Versions(lerobot=version, torch=torch.__version__, python=sys.version.split()[0],
                    executable=sys.executable)


# The shapes of requests that read a lerobot-train run.
RUN_REQUESTS = tuple(shape for shapes in REQUESTS.values() for shape in shapes
                     if "lerobot_train" in shape.__required_keys__)


def serve(request: Any, runs: Dict[Any, Run]) -> bool:
    """Answers one request (its messages on stdout), handed to its handler as the shape it was
    checked to have; False where it failed (said as an `error`)."""
    try:
        shape = check_request(request)  # one of the protocol's shapes, before any work
        try:
            import lerobot  # noqa: F401
            import torch  # noqa: F401
        except ImportError as error:
            # The facts only: feedbench words the advice as the front end names its Python
            # (`--python`, a sweep's `loader.python`).
            raise Refused(
                ErrorKind.ENVIRONMENT,
                f"{error.name or error} is not installed in {sys.executable} (Python "
                f"{sys.version.split()[0]})",
            ) from None
        installed = versions()  # refuses an unsupported LeRobot before any work
        if shape in RUN_REQUESTS:
            run_lerobot_train(cast(RunRequest, request), installed, runs)
        elif shape is ModelPolicyRequest:
            run_model(cast(ModelPolicyRequest, request), installed)
        elif shape is LoadDatasetRequest:
            load = cast(LoadDatasetRequest, request)
            run_load(load, open_dataset(load), installed)
        elif shape is BatchesDatasetRequest:
            batches = cast(BatchesDatasetRequest, request)
            run_batches(batches, open_dataset(batches), installed)
        elif shape is DigestsRequest:
            digests = cast(DigestsRequest, request)
            run_digests(digests, open_dataset(digests), installed)
        else:
            sampler = cast(SamplerRequest, request)
            run_sampler(sampler, open_dataset(sampler), installed)
        return True
    except Refused as refused:
        say_error(refused.kind, str(refused))
    except Exception as error:  # LeRobot's own errors, with its message, and where they arose
        traceback.print_exc(file=sys.stderr)
        say_error(ErrorKind.LEROBOT, one_line(error))
    return False


def one_line(error: BaseException) -> str:
    """`TypeName: message`, with each cause it was raised from that says more (PyTorch's
    "DataLoader worker (pid(s) N) exited unexpectedly" is raised from the worker's "is killed by
    signal: Killed."), in brackets."""
    line = f"{type(error).__name__}: {error}"
    cause, seen = error.__cause__, {id(error)}
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if str(cause) and str(cause) not in line:
            line += f" ({type(cause).__name__}: {cause})"
        cause = cause.__cause__
    return line


def main() -> None:
    """One request from the file named on the command line, or, with `--session`, one request
    a line on stdin until it closes, the run a lerobot-train request builds kept between them:
    a failed request ends the session (exit status 1)."""
    end_with_feedbench()
    runs: Dict[Any, Run] = {}
    for request in requests(sys.argv[1:]):
        if not serve(request, runs):
            sys.exit(1)
    for run in runs.values():
        run.close()  # the kept DataLoader's workers, before the interpreter goes


if __name__ == "__main__":
    main()
