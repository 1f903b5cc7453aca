"""lerobot-train's configuration, as LeRobot's own parser makes it from the user's arguments
(`TrainPipelineConfig`, `--config_path` included), with feedbench's knobs over it, the seed and
torch's backend settings set as lerobot-train sets them, and what the run's other parts read of
it (the trained policy's config, its device, its `drop_n_last_frames`). Nothing is downloaded:
a dataset without a local `--dataset.root` is refused with what to pass."""

import contextlib
import importlib
import io
import json
import os
import sys
from typing import Any, Dict, Iterator, List, Optional

from feedbench_driver.protocol import ErrorKind, Refused, RunReads


def parse_arguments(args: List[str]) -> Any:
    """The TrainPipelineConfig lerobot-train would run with these arguments, parsed by LeRobot's
    own parser (as `lerobot-train ARGS` parses them), checked to need no download, and
    validated as `train()` validates it."""
    from lerobot.configs import parser
    from lerobot.configs.train import TrainPipelineConfig

    training_module()  # its imports register the policies' configs, as `lerobot-train` has them
    plugins = getattr(importlib.import_module("lerobot.utils.import_utils"),
                      "register_third_party_plugins", None)
    if plugins is not None:
        plugins()
    parsed: Dict[str, Any] = {}

    @parser.wrap()
    def capture(cfg: TrainPipelineConfig) -> None:
        parsed["cfg"] = cfg

    argv = sys.argv
    sys.argv = ["lerobot-train", *args]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), policy_path_named(args):
            capture()
    except SystemExit:
        lines = [line.strip() for line in said.getvalue().splitlines() if line.strip()]
        last = lines[-1] if lines else "it said nothing"
        if last.lower().startswith("error:"):
            last = last[len("error:"):].strip()
        raise Refused(ErrorKind.ARGUMENTS,
                      f"LeRobot's parser refused the lerobot-train arguments: {last}") from None
    except json.JSONDecodeError as error:
        # A --config_path that is no JSON: named, with where it stopped reading.
        raise Refused(ErrorKind.ARGUMENTS, f"--config_path={argument(args, 'config_path')}: not a "
                      f"lerobot-train config: {error}") from None
    except Exception as error:
        # LeRobot before 0.6 lets its parser's (draccus's) errors out as exceptions.
        if not type(error).__module__.startswith("draccus"):
            raise
        raise Refused(ErrorKind.ARGUMENTS, "LeRobot's parser refused the lerobot-train arguments: "
                      f"{error}") from None
    finally:
        sys.argv = argv
        # Whatever else it printed (warnings) stays where LeRobot's output goes.
        sys.stderr.write(said.getvalue())
    cfg = parsed["cfg"]
    # feedbench writes nothing there: a run's output directory that exists (the run is going
    # on, or it is the one a saved train_config.json names) is no reason to refuse.
    cfg.output_dir = None
    check_local(cfg)
    with policy_path_named(args):
        cfg.validate()
    return cfg


@contextlib.contextmanager
def policy_path_named(args: List[str]) -> Iterator[None]:
    """A `--policy.path` LeRobot cannot load (no such directory, nor in the Hub's cache: offline,
    LeRobot then says only that no policy is configured) named as the cause of what fails."""
    try:
        yield
    except Exception:
        path = argument(args, "policy.path")
        if path is None or os.path.isdir(path):
            raise
        raise Refused(ErrorKind.ARGUMENTS, f"--policy.path={path}: no such directory (a saved "
                      "policy's pretrained_model directory, with its config.json), and feedbench "
                      "downloads nothing") from None


def argument(args: List[str], name: str) -> Optional[str]:
    """The value of `--name` in lerobot-train's arguments (`--name=value` or `--name value`)."""
    flag = f"--{name}"
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def check_local(cfg: Any) -> None:
    """Refuses what would download, or what feedbench does not measure."""
    dataset = cfg.dataset
    if getattr(dataset, "streaming", False):
        raise Refused(ErrorKind.ARGUMENTS, "--dataset.streaming=true: feedbench measures map-style "
                      "datasets on local disk, not streamed ones")
    if dataset.root is None:
        raise Refused(ErrorKind.ARGUMENTS, f"--dataset.repo_id={dataset.repo_id} has no local copy "
                      "named: feedbench downloads nothing; add --dataset.root=DIR, the "
                      "directory that holds meta/info.json")
    info = os.path.join(str(dataset.root), "meta", "info.json")
    if not os.path.isfile(info):
        raise Refused(ErrorKind.ARGUMENTS, f"--dataset.root={dataset.root} holds no meta/info.json: "
                      "expected the root of a LeRobot dataset")
    try:
        with open(info, encoding="utf-8") as f:
            total = json.load(f).get("total_episodes")
    except (OSError, ValueError, AttributeError) as error:
        raise Refused(ErrorKind.ARGUMENTS, f"{info}: not a LeRobot dataset's info ({error})") from None
    for episode in getattr(dataset, "episodes", None) or []:
        if not isinstance(total, int) or isinstance(episode, int) and 0 <= episode < total:
            continue
        raise Refused(ErrorKind.ARGUMENTS, f"--dataset.episodes: episode {episode!r} is not in the "
                      f"dataset at {dataset.root} (its episodes are 0 to {total - 1}, {info})")


def apply_overrides(cfg: Any, request: RunReads) -> None:
    """feedbench's knobs over the user's arguments: the request's `overrides`, each under its
    DataLoader keyword, which is the TrainPipelineConfig field (feedbench's table of knobs names
    them: tune's search and `--workers` set num_workers, batch_size, prefetch_factor)."""
    for field, value in request["overrides"].items():
        if value is not None:
            setattr(cfg, field, value)


def training_module() -> Any:
    """lerobot-train's own module."""
    return importlib.import_module("lerobot.scripts.lerobot_train")


def trained_config(cfg: Any) -> Any:
    """The config of what the run trains: `cfg.trainable_config` (LeRobot 0.6), else the
    policy's (before 0.6 the policy is the only thing a run trains)."""
    return getattr(cfg, "trainable_config", None) or cfg.policy


def device_type(cfg: Any) -> str:
    """The device lerobot-train's accelerator picks: the CPU where the policy says so, else
    CUDA where there is one."""
    import torch

    if trained_config(cfg).device == "cpu" or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def policy_drop_n_last_frames(cfg: Any) -> Optional[int]:
    """The policy's drop_n_last_frames; None where the policy has none."""
    return getattr(trained_config(cfg), "drop_n_last_frames", None)


def backend_like_lerobot_train(cfg: Any) -> None:
    """torch's backend settings lerobot-train makes before it builds the run: cuDNN autotunes
    its convolutions (`benchmark`) unless the run asks for `--cudnn_deterministic=true` (LeRobot
    0.6; before it always autotunes), and float32 matmuls may use TF32. They change the step's
    speed on CUDA, not what it computes beyond TF32's rounding; a step measured without them is
    not the one lerobot-train takes."""
    import torch

    if getattr(cfg, "cudnn_deterministic", False):
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True


def backend_settings() -> Dict[str, bool]:
    """torch's backend settings as they stand (what [`backend_like_lerobot_train`] sets)."""
    import torch

    return {"cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32}


def seed_like_lerobot_train(cfg: Any) -> None:
    """The seed set as lerobot-train sets it, where the run has one."""
    if cfg.seed is not None:
        from lerobot.utils.random_utils import set_seed

        set_seed(cfg.seed)
