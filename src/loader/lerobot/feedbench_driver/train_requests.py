"""A lerobot-train run's requests (`--lerobot-train "ARGS"`): `load` measures the DataLoader the
run builds (with `step`, in lerobot-train's loop: its hand-over and its policy's
`update_policy`, or a fixed-length step), `batches` saves its first `count` batches, `describe`
says what it built, `model` steps its policy alone. The run is built once per driver and kept
between requests (`train_run.Run`)."""

import os
import time
from typing import Any, Callable, Dict, Iterator, Optional

from feedbench_driver.readings import (
    Cycle, Fed, StepTimes, Taken, batch_size, compute_times_s, fed_nothing, measure,
    peak_device_bytes, rank, take_timed, together, video_backend)
from feedbench_driver.plain import save_batch
from feedbench_driver.protocol import (
    BatchesRunRequest, BuiltRun, DoneResult, ErrorKind, LoadRunRequest, ModelRunRequest,
    PolicyStepMs, PolicyStepsResult, ReadyEvent, Refused, RunRequest, Versions, alive, as_fixed,
    emit, ready)
from feedbench_driver.train_run import Run, close_loader, videos_named
from feedbench_driver.train_step import TrainingStep


def run_lerobot_train(request: RunRequest, installed: Versions, runs: Dict[Any, Run]) -> None:
    """lerobot-train's run for the request's arguments (built once per driver, in `runs`):
    `load` measures its DataLoader (kept for the next `load` with the same knobs: its workers
    stay up), `batches` saves the first `count` batches of a run built afresh (as lerobot-train
    yields them), `describe` says what it built, `model` steps its policy alone."""
    if request["ranks"] != int(os.environ.get("WORLD_SIZE", "1") or 1):
        raise Refused(ErrorKind.VERSION, f"a request for {request['ranks']} ranks to a driver "
                      f"started as one of {os.environ.get('WORLD_SIZE', '1')}")
    key = (tuple(request["lerobot_train"]), request["reader"])
    if request["command"] == "batches" or key not in runs:
        for kept in runs.values():
            kept.close()  # its workers, its dataset and policy: one run at a time
        runs.clear()
    if request["command"] == "batches":
        return save_run_batches(request, Run(request), installed)
    if key not in runs:
        runs[key] = Run(request)
    run = runs[key]
    if request["command"] == "load":
        return measure_run(request, run, installed)
    run.close()
    loader, built = run.loader(request)
    try:
        if request["command"] == "model":
            return measure_policy_step(request, run, loader, installed, built)
        emit(run_ready(run, built, installed))
        emit(DoneResult(event="result"))
    finally:
        close_loader(loader)


def run_ready(run: Run, built: BuiltRun, installed: Versions) -> ReadyEvent:
    """The `ready` of a request about `run`: what it built, and the runs built so far (said
    once all the request builds is built, its step included)."""
    said = ready(installed, video_backend(run.dataset))
    said["lerobot_train"], said["runs_built"] = built, Run.counts()
    return said


def save_run_batches(request: BatchesRunRequest, run: Run, installed: Versions) -> None:
    """The first `count` batches of a run built afresh for this request, saved as .npy; of
    several ranks at once, each rank's (its shard, as lerobot-train's accelerator prepares the
    DataLoader) under `out/rank-<rank>`."""
    loader, built = run.loader(request)
    out = request["out"]
    if request["ranks"] > 1:
        loader, out = run.prepare(loader), os.path.join(out, f"rank-{rank()}")
    emit(run_ready(run, built, installed))
    if "seed" not in (built.get("sampler") or {}):
        # Before LeRobot 0.6 the shuffle draws from torch's global generator, which
        # lerobot-train has drawn from to build the policy and optimizer: built here too,
        # so that the batches come in the run's order.
        run.step()
    stream = iter(loader)
    for number in range(request["count"]):
        alive()
        save_batch(next(stream), os.path.join(out, f"batch-{number}"))
    close_loader(loader, stream)
    emit(DoneResult(event="result"))


def measure_run(request: LoadRunRequest, run: Run, installed: Versions) -> None:
    """`load` of the run's DataLoader: alone, or in lerobot-train's loop, each batch taken as
    it takes it (accelerate's prepared loader, which puts it on the device), handed over (the
    uint8 conversion and the pre-processor) and fed to the step: the policy's own
    `update_policy` or, with `step.compute_ms`, a stand-in for it (of each `step.sequence_ms`
    in turn where given), measured by the `load` loop with the step's parts."""
    stream, built = run.stream(request)
    step = request.get("step")
    with videos_named(run.dataset):
        if step is None:
            return measure(request, stream, run_ready(run, built, installed), take_timed(stream),
                           fed_nothing)
        training = run.step()
        fixed = as_fixed(step)
        compute_s = None if fixed is None else compute_times_s(fixed)
        take, feed = training_loop(training, stream, compute_s)
        measure(request, stream, run_ready(run, built, installed), take, feed, training.device)


def training_loop(training: TrainingStep, stream: Cycle, compute_s: Optional[Iterator[float]]
                  ) -> "tuple[Callable[[], Taken], Callable[[Any], Fed]]":
    """How lerobot-train's loop takes a batch (timed with the device synchronised) and feeds
    it: the hand-over, then the policy's `update_policy`, or a sleep of each of `compute_s` in
    turn where given (the ranks' steps ending together, as DDP's all-reduce makes them)."""
    timer = training.timer

    def take() -> Taken:
        timer.mark("waited")
        batch = stream.next()
        timer.mark("arrived")
        return Taken(batch, timer.ms("waited", "arrived"), timer.marks["arrived"])

    def feed(batch: Any) -> Fed:
        batch = training.hand_over(batch)
        timer.mark("handed")
        handed = timer.ms("arrived", "handed")
        if compute_s is None:
            return Fed(handed, training.update(batch))
        compute = next(compute_s)
        time.sleep(compute)
        together()
        return Fed(handed, StepTimes(forward_ms=compute * 1e3, backward_ms=0.0, optimizer_ms=0.0,
                                     update_ms=compute * 1e3, modules_ms={}))

    return take, feed


def measure_policy_step(request: ModelRunRequest, run: Run, raw_loader: Any,
                        installed: Versions, built: BuiltRun) -> None:
    """The run's step alone: one batch from its DataLoader, handed over and stepped by
    `update_policy` `warmup` times, then `steps` measured times (a copy each, since the hand-over
    changes the batch it is given)."""
    import torch

    training = run.step()
    emit(run_ready(run, built, installed))
    loader = run.prepare(raw_loader)
    stream = iter(loader)
    first = next(stream)
    close_loader(loader, stream)
    run.release(loader)
    del stream
    timer, steps = training.timer, []
    for number in range(request["warmup"] + request["steps"]):
        alive()
        batch = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in first.items()}
        timer.mark("given")
        batch = training.hand_over(batch)
        timer.mark("handed")
        handed = timer.ms("given", "handed")
        parts = training.update(batch)
        if number >= request["warmup"]:
            steps.append(PolicyStepMs(
                h2d_ms=handed, forward_ms=parts["forward_ms"], backward_ms=parts["backward_ms"],
                optimizer_ms=parts["optimizer_ms"], update_ms=parts["update_ms"]))
    emit(PolicyStepsResult(
        event="result", steps=steps, parameters=training.parameters, device=str(training.device),
        batch=batch_size(first), mixed_precision=training.accelerator.mixed_precision,
        threads=torch.get_num_threads(), loss=float(training.tracker.loss.val),
        peak_device_bytes=peak_device_bytes(training.device)))
