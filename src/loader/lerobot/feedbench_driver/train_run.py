"""lerobot-train's own run (`--lerobot-train "ARGS"`), built from the user's arguments by
LeRobot's own code: its parser (`TrainPipelineConfig`, `--config_path` included), its dataset
factory, and the sampler and DataLoader as `lerobot/scripts/lerobot_train.py` builds them.

What lerobot-train does inline (not in a function feedbench can call) is written once here,
keyed by LeRobot version:
- 0.6: every map-style dataset gets `EpisodeAwareSampler(shuffle=True, seed=cfg.seed or 0,
  drop_n_last_frames=` the policy's or 0 `, absolute_to_relative_idx=…)`; the DataLoader takes
  `num_workers`, `batch_size`, `pin_memory=(device is cuda)`, `drop_last=False`, LeRobot's
  language collate where the dataset has language columns, and the worker options of
  `_dataloader_worker_kwargs(cfg)` (prefetch_factor 4, persistent workers, spawn).
- 0.4 and 0.5: the sampler only where the policy has `drop_n_last_frames` (else plain
  shuffling), `prefetch_factor=2`, forked workers, not persistent.

Nothing is downloaded: the driver runs with HF_HUB_OFFLINE=1, and a dataset without a local
`--dataset.root` is refused with what to pass.
"""

import collections.abc
import contextlib
import functools
import importlib
import inspect
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from feedbench_driver.readings import Cycle, video_backend
from feedbench_driver.protocol import (
    BuiltRun, ErrorKind, LoadRunRequest, Refused, RunReads, RunsBuilt)
from feedbench_driver.run_config import (
    apply_overrides, backend_like_lerobot_train, backend_settings, device_type, parse_arguments,
    policy_drop_n_last_frames, seed_like_lerobot_train, trained_config, training_module)
from feedbench_driver.train_step import TrainingStep, make_accelerator


def make_dataset(cfg: Any) -> Any:
    """The training dataset, by LeRobot's factory (its train/eval split where it has one). Where
    LeRobot fails because files of the selected episodes are missing (it would download them:
    offline, it says only that it cannot reach the Hub), the first missing file is named."""
    factory = importlib.import_module("lerobot.datasets.factory")
    split = getattr(factory, "make_train_eval_datasets", None)
    try:
        if split is not None:
            return split(cfg)[0]
        return factory.make_dataset(cfg)
    except Exception:
        missing = missing_files(cfg)
        if not missing:
            raise
        more = f" ({len(missing)} files of the selected episodes are missing)" if len(missing) > 1 else ""
        raise Refused(ErrorKind.ARGUMENTS, f"{missing[0]}: no such file{more}: the dataset at "
                      f"--dataset.root={cfg.dataset.root} lacks it (a partial download?), which "
                      "LeRobot would download; feedbench downloads nothing") from None


def missing_files(cfg: Any) -> List[str]:
    """The data and video files of the run's episodes that are not under its root, by the
    dataset's own metadata; empty where that cannot be read."""
    try:
        try:
            from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
        except ImportError:  # before 0.6
            from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata
        meta = LeRobotDatasetMetadata(cfg.dataset.repo_id, root=cfg.dataset.root)
        episodes = cfg.dataset.episodes or range(meta.total_episodes)
        wanted = []
        for episode in episodes:
            wanted.append(meta.get_data_file_path(episode))
            wanted.extend(meta.get_video_file_path(episode, key) for key in meta.video_keys)
    except Exception:
        return []
    root = str(cfg.dataset.root)
    paths = dict.fromkeys(os.path.join(root, str(path)) for path in wanted)
    return [path for path in paths if not os.path.isfile(path)]


@contextlib.contextmanager
def videos_named(dataset: Any) -> Iterator[None]:
    """Where reading the dataset fails (LeRobot's decoders name no file: torchcodec's "Failed to
    open input buffer"), the first of its videos that cannot be decoded named in the error, found
    by opening each with LeRobot's backend, after the failure."""
    try:
        yield
    except Refused:
        raise
    except Exception as error:
        found = unreadable_video(dataset)
        if found is None:
            raise
        path, why = found
        raise UnreadableVideo(f"{path} cannot be decoded ({why}); LeRobot's loader failed on "
                              f"the dataset: {type(error).__name__}: {error}") from error


class UnreadableVideo(RuntimeError):
    """A video of the dataset LeRobot's backend cannot decode, named."""


def unreadable_video(dataset: Any) -> Optional[Tuple[str, str]]:
    """(path, why) of the first video of `dataset`'s episodes its backend cannot open or decode
    the first and last frame of; None where all can, or where LeRobot's metadata cannot say
    which files they are."""
    meta: Any = getattr(dataset, "meta", None)
    keys = list(getattr(meta, "video_keys", None) or [])
    if not keys or not hasattr(meta, "get_video_file_path"):
        return None
    backend = video_backend(dataset)
    paths: Dict[str, None] = {}
    for episode in getattr(dataset, "episodes", None) or range(meta.total_episodes):
        for key in keys:
            paths.setdefault(os.path.join(str(dataset.root), str(meta.get_video_file_path(episode, key))))
    for path in paths:
        try:
            if backend == "torchcodec":
                from torchcodec.decoders import VideoDecoder

                decoder = VideoDecoder(path)
                decoder[0], decoder[len(decoder) - 1]
            else:
                import av

                with av.open(path) as container:
                    next(container.decode(video=0))
                    for _ in container.demux(video=0):
                        pass
        except Exception as error:
            return path, f"{type(error).__name__}: {error}"
    return None


def make_sampler(cfg: Any, dataset: Any) -> Any:
    """lerobot-train's sampler; None where the DataLoader shuffles instead."""
    from lerobot.datasets.sampler import EpisodeAwareSampler

    parameters = inspect.signature(EpisodeAwareSampler.__init__).parameters
    drop = policy_drop_n_last_frames(cfg)
    seeded = "seed" in parameters
    if drop is None and not seeded:
        return None  # before 0.6: the sampler only where the policy asks for one
    kwargs: Dict[str, Any] = {
        "episode_indices_to_use": dataset.episodes,
        "drop_n_last_frames": drop or 0,
        "shuffle": True,
    }
    if seeded:
        kwargs["seed"] = cfg.seed if cfg.seed is not None else 0
    if "absolute_to_relative_idx" in parameters:
        kwargs["absolute_to_relative_idx"] = dataset.absolute_to_relative_idx
    episodes = dataset.meta.episodes
    return EpisodeAwareSampler(
        episodes["dataset_from_index"], episodes["dataset_to_index"], **kwargs
    )


def dataloader_kwargs(cfg: Any, dataset: Any, device: str) -> Dict[str, Any]:
    """lerobot-train's DataLoader arguments but the dataset and the sampler."""
    kwargs: Dict[str, Any] = {
        "num_workers": cfg.num_workers,
        "batch_size": cfg.batch_size,
        "pin_memory": device == "cuda",
        "drop_last": False,
    }
    try:  # from 0.6: LeRobot's language collate where the dataset has language columns
        from lerobot.utils.collate import lerobot_collate_fn
    except ImportError:
        pass
    else:
        language = getattr(dataset.meta, "has_language_columns", False)
        kwargs["collate_fn"] = lerobot_collate_fn if language else None
    helper = getattr(training_module(), "_dataloader_worker_kwargs", None)
    if helper is not None:
        kwargs.update(helper(cfg))
    else:
        kwargs["prefetch_factor"] = getattr(cfg, "prefetch_factor", 2) if cfg.num_workers > 0 else None
    return kwargs


def jsonable(value: Any) -> Any:
    """`value` in JSON: plain values as they are, tensors and arrays as lists, any other object
    by its type's name (a dataset, a sampler, a collate function)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, collections.abc.Sequence):  # a `datasets` column of the episodes
        return [jsonable(item) for item in value]
    return getattr(value, "__name__", type(value).__name__)


class Recorder:
    """Records the arguments LeRobot's dataset, its episode-aware sampler and PyTorch's
    DataLoader are constructed with (the first construction of each), in JSON: what feedbench
    built, and in a test what lerobot-train built, recorded alike."""

    def __init__(self, *datasets: type) -> None:
        self.datasets = datasets  # dataset classes beside LeRobot's (feedbench's reader)

    def __enter__(self) -> "Recorder":
        import torch
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
        from lerobot.datasets.sampler import EpisodeAwareSampler

        self.calls: Dict[str, Any] = {}
        self.originals: List[Tuple[Any, Any]] = []
        classes = [("dataset", cls) for cls in (LeRobotDataset, *self.datasets)]
        for name, cls in (*classes, ("sampler", EpisodeAwareSampler),
                          ("dataloader", torch.utils.data.DataLoader)):
            self.originals.append((cls, cls.__init__))
            cls.__init__ = self.recording(name, cls.__init__)
        return self

    def recording(self, name: str, original: Callable[..., None]) -> Callable[..., None]:
        calls = self.calls

        @functools.wraps(original)  # its signature stays the constructor's
        def init(obj: Any, *args: Any, **kwargs: Any) -> None:
            if name not in calls:
                parameters = list(inspect.signature(original).parameters)[1:]
                given = dict(zip(parameters, args))
                given.update(kwargs)
                calls[name] = jsonable(given)
            return original(obj, *args, **kwargs)

        return init

    def __exit__(self, *_: object) -> None:
        for cls, original in self.originals:
            cls.__init__ = original


def feedbench_reader(request: RunReads) -> Tuple[Any, ...]:
    """With `"reader": "feedbench"`: LeRobot's factory made to build feedbench's reader as the
    run's dataset, as feedbench-lerobot-train does (by its own function, from the wheel installed
    in this environment); the reader's class, for the Recorder, and the function that makes a
    DataLoader take its epochs back to back, as feedbench-lerobot-train's loop does. Else
    nothing."""
    if request["reader"] != "feedbench":
        return ()
    try:
        from feedbench.lerobot import FeedbenchDataset
        from feedbench.lerobot_train import chain_epochs, use_feedbench_reader
    except ImportError as error:
        raise Refused(ErrorKind.READER, f"feedbench's reader is not installed for {sys.executable} "
                      f"({error}): pip install feedbench's wheel into that environment")
    use_feedbench_reader()
    return (FeedbenchDataset, chain_epochs)


class Run:
    """One lerobot-train run, built once per driver: its config (LeRobot's parser), the seed set
    as lerobot-train sets it, its training dataset (LeRobot's factory, or feedbench's reader)
    and, when first asked for, its training step (`TrainingStep`, train_step.py:
    policy, pre-processor,
    optimizer and scheduler). A measurement builds only a new DataLoader over that dataset
    ([`Run.loader`]), with its own workers, shut down when it ends ([`close_loader`]).
    `Run.builds` counts the runs this process built, `Run.build_s` the seconds it took (the
    training steps' included)."""

    builds, build_s = 0, 0.0

    def __init__(self, request: RunReads) -> None:
        started = time.monotonic()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.readers: Tuple[type, ...] = ()
        self.chain_epochs: Optional[Callable[[Any], None]] = None
        reader = feedbench_reader(request)
        if reader:
            self.readers, self.chain_epochs = reader[:1], reader[1]
        self.cfg = parse_arguments(request["lerobot_train"])
        self.own: Dict[str, Any] = {}  # the arguments' own value of each field a request set
        seed_like_lerobot_train(self.cfg)
        backend_like_lerobot_train(self.cfg)
        self.backend = backend_settings()  # as set, for what was built
        self.device = device_type(self.cfg)
        with Recorder(*self.readers) as recorded:
            self.dataset = make_dataset(self.cfg)
        self.recorded_dataset = recorded.calls.get("dataset")
        self.accelerator: Any = None
        self.training: Optional[TrainingStep] = None
        # The DataLoader measured last: (its knobs, its batches, what was built).
        self.kept: Optional[Tuple[List[Tuple[str, Any]], Cycle, BuiltRun]] = None
        Run.builds += 1
        Run.build_s += time.monotonic() - started

    @staticmethod
    def counts() -> RunsBuilt:
        """The runs this process built and the seconds it took: each request's `ready` says
        them once, after all that request built (its step included)."""
        return RunsBuilt(runs=Run.builds, seconds=Run.build_s)

    def loader(self, request: RunReads) -> Tuple[Any, BuiltRun]:
        """lerobot-train's DataLoader over the run's dataset with the request's overrides over
        the run's own arguments, and what was built (the dataset's, the sampler's and the
        DataLoader's arguments, in JSON)."""
        import torch

        for field in request["overrides"]:
            self.own.setdefault(field, getattr(self.cfg, field, None))
        for field, value in self.own.items():
            setattr(self.cfg, field, value)
        apply_overrides(self.cfg, request)
        with Recorder(*self.readers) as recorded:
            sampler = make_sampler(self.cfg, self.dataset)
            kwargs = dataloader_kwargs(self.cfg, self.dataset, self.device)
            loader = torch.utils.data.DataLoader(
                self.dataset, sampler=sampler, shuffle=sampler is None, **kwargs
            )
        if self.chain_epochs is not None:
            self.chain_epochs(loader)
        facts = BuiltRun(
            policy=trained_config(self.cfg).type,
            device=self.device,
            # lerobot-train's workers' prefetch, which a DataLoader without workers does not say.
            worker_prefetch_factor=getattr(self.cfg, "prefetch_factor", 2),
            num_frames=self.dataset.num_frames,
            num_episodes=self.dataset.num_episodes,
            dataset=self.recorded_dataset,
            backend=self.backend,
            dataloader=recorded.calls["dataloader"],
        )
        if "sampler" in recorded.calls:
            facts["sampler"] = recorded.calls["sampler"]
        return loader, facts

    def step(self) -> TrainingStep:
        """The run's training step, built on first use and kept (with the run's accelerator)."""
        if self.training is None:
            started = time.monotonic()
            self.training = TrainingStep(self.cfg, self.dataset, self.prepared_by())
            Run.build_s += time.monotonic() - started
        return self.training

    def prepared_by(self) -> Any:
        """lerobot-train's Accelerator for this run, made on first use: a DataLoader it prepares
        yields batches as lerobot-train's loop takes them; the training step prepares its policy
        with the same one. A loader measured alone builds no policy."""
        if self.accelerator is None:
            self.accelerator = make_accelerator(self.cfg)
        return self.accelerator

    def prepare(self, loader: Any) -> Any:
        """`loader` as lerobot-train's accelerator prepares its DataLoader (batches put on the
        device); [`release`] lets it go."""
        return self.prepared_by().prepare(loader)

    def release(self, prepared: Any) -> None:
        """Forgets a DataLoader [`prepare`] made (accelerate keeps a list of them), after
        [`close_loader`] shut its workers down."""
        kept = getattr(self.prepared_by(), "_dataloaders", [])
        if prepared in kept:
            kept.remove(prepared)

    def stream(self, request: LoadRunRequest) -> Tuple[Cycle, BuiltRun]:
        """The batches, epoch after epoch, of the DataLoader lerobot-train iterates (prepared by
        its accelerator, as its loop takes them) with the request's knobs, and what was built:
        the one measured last where its knobs are the same (its workers up, its queue full),
        else a new one, the last one's workers shut down first."""
        knobs = sorted(request["overrides"].items())
        if self.kept is not None and self.kept[0] == knobs:
            return self.kept[1], self.kept[2]
        self.close()
        loader, built = self.loader(request)
        stream = Cycle(self.prepare(loader))
        self.kept = (knobs, stream, built)
        return stream, built

    def close(self) -> None:
        """Shuts down the workers of the DataLoader kept, if any."""
        if self.kept is not None:
            stream = self.kept[1]
            close_loader(stream.loader, stream.stream)
            self.release(stream.loader)
            self.kept = None


def close_loader(loader: Any, stream: Any = None) -> None:
    """Shuts down the workers of `loader` (and of `stream`, an iterator over it) now, rather
    than when the garbage collector gets to them: the next DataLoader of the same run must not
    share the cores with them."""
    if stream is not None and hasattr(stream, "close"):
        stream.close()  # a generator (accelerate's prepared loader) drops its iterator
    base = getattr(loader, "base_dataloader", loader)  # accelerate's wraps PyTorch's
    for iterator in (stream, getattr(base, "_iterator", None)):
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            try:
                shutdown()
            except RuntimeError as error:
                # A worker that dies as it is shut down (LeRobot's spawned workers abort now and
                # then as they exit, in PyTorch's feeder thread): its batches were all taken, and
                # the driver goes on to the next request. Said, not raised.
                sys.stderr.write(f"feedbench: as its workers were shut down: {error}\n")
    if hasattr(base, "_iterator"):
        base._iterator = None
