"""LeRobot's plain pair, `--loader lerobot`: `LeRobotDataset(root=...)` with the request's
episodes, `delta_timestamps` and video backend, and `torch.utils.data.DataLoader` with the
request's sampler, `num_workers`, `prefetch_factor`, `persistent_workers`, `pin_memory`,
`batch_size` and `drop_last`, built as LeRobot's training script builds it. Its commands:
`load` (measured by `readings.measure`), `batches` (the given lists of absolute frame
indices loaded as batches, every tensor saved as .npy under `out`) and `sampler` (the
episode-aware sampler's unshuffled indices, as absolute frame indices)."""

import importlib.metadata
import inspect
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Union

from feedbench_driver.readings import (
    Cycle, fed_nothing, fixed_step, measure, take_timed, video_backend)
from feedbench_driver.digest import item_digests
from feedbench_driver.startup import watch_starts
from feedbench_driver.protocol import (
    BatchesDatasetRequest, DatasetReads, DigestsRequest, DigestsResult, DoneResult, ErrorKind, IndicesResult, LoadDatasetRequest,
    Refused, SamplerRequest, Versions, alive, emit, ready)


def open_dataset(request: DatasetReads) -> Any:
    """LeRobotDataset at the request's root, with its episodes, window and video backend."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    parameters = inspect.signature(LeRobotDataset.__init__).parameters
    kwargs: Dict[str, Any] = {
        "repo_id": "local/" + os.path.basename(os.path.normpath(request["root"])),
        "root": request["root"],
        "episodes": request["episodes"],
        "delta_timestamps": request["delta_timestamps"] or None,
        "video_backend": request["video_backend"],
    }
    if request["uint8"]:
        if "return_uint8" not in parameters:
            raise Refused(ErrorKind.KNOB,
                f"LeRobot {importlib.metadata.version('lerobot')} returns frames as float32 "
                "only (uint8 frames need LeRobot ≥ 0.6)",
            )
        kwargs["return_uint8"] = True
    return LeRobotDataset(**kwargs)


def episode_aware_sampler(dataset: Any, request: DatasetReads, shuffle: bool) -> Any:
    """LeRobot's EpisodeAwareSampler over the dataset's episodes, seeded by the request."""
    from lerobot.datasets.sampler import EpisodeAwareSampler

    import torch

    parameters = inspect.signature(EpisodeAwareSampler.__init__).parameters
    kwargs: Dict[str, Any] = {
        "episode_indices_to_use": dataset.episodes,
        "drop_n_last_frames": request["drop_n_last_frames"],
        "shuffle": shuffle,
    }
    if "seed" in parameters:
        kwargs["seed"] = request["seed"]
    else:
        # Before 0.6 the sampler shuffles with torch's global generator.
        torch.manual_seed(request["seed"])
    if "absolute_to_relative_idx" in parameters:
        kwargs["absolute_to_relative_idx"] = getattr(dataset, "absolute_to_relative_idx", None)
    episodes = dataset.meta.episodes
    return EpisodeAwareSampler(
        episodes["dataset_from_index"], episodes["dataset_to_index"], **kwargs
    )


def make_loader(dataset: Any, request: DatasetReads,
                batch_sampler: Optional[List[List[int]]] = None, measured: bool = False) -> Any:
    """PyTorch's DataLoader over `dataset` with the request's sampler and keywords, or over
    the given batches (rows) where `batch_sampler` is given; its batch sampler kept as it
    yields (`RecordedBatches`), and where `measured`, its workers noting their start."""
    import torch

    # The DataLoader's keywords as feedbench's table of knobs sends them (num_workers, …).
    kwargs = dict(request["dataloader"])
    if kwargs.get("num_workers", 0) == 0:
        # PyTorch refuses both for a DataLoader without workers.
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
        kwargs.pop("multiprocessing_context", None)
    batch_size, drop_last = kwargs.pop("batch_size", 1), kwargs.pop("drop_last", False)
    rows = row_positions(dataset)
    if batch_sampler is not None:
        # The batches are given: no batch size, nothing to drop.
        batches: Any = batch_sampler
        yields_rows = True
    else:
        batches = torch.utils.data.BatchSampler(sampler_of(dataset, request), batch_size, drop_last)
        yields_rows = request["sampler"] != "episode-aware" or sampler_yields_rows()
    absolute = {row: index for index, row in rows.items()} if rows is not None and yields_rows else None
    if measured:
        watch_starts(kwargs)
    return torch.utils.data.DataLoader(dataset, batch_sampler=RecordedBatches(batches, absolute),
                                       **kwargs)


def sampler_of(dataset: Any, request: DatasetReads) -> Any:
    """The request's sampler over `dataset`."""
    import torch

    kind = request["sampler"]
    if kind == "episode-aware":
        return episode_aware_sampler(dataset, request, shuffle=True)
    if kind == "shuffled":
        generator = torch.Generator().manual_seed(request["seed"])
        return torch.utils.data.RandomSampler(dataset, generator=generator)
    if kind == "sequential":
        return torch.utils.data.SequentialSampler(dataset)
    raise Refused(ErrorKind.KNOB, f"sampler {kind!r}: expected episode-aware, shuffled or sequential")


class RecordedBatches:
    """A batch sampler that keeps every batch it yields as absolute frame indices (what each
    item's `index` says; `absolute` maps a row to its index where the two differ), so that the
    batches a loader delivers can be held against the sampler's: the DataLoader's main process
    draws them, ahead of its workers, epoch after epoch."""

    def __init__(self, batches: Any, absolute: Optional[Dict[int, int]]) -> None:
        self.batches = batches
        self.absolute = absolute
        self.recorded: List[List[int]] = []

    def __iter__(self) -> Iterator[List[int]]:
        for batch in self.batches:
            rows = [int(row) for row in batch]
            self.recorded.append(rows if self.absolute is None else [self.absolute[r] for r in rows])
            yield batch

    def __len__(self) -> int:
        return len(self.batches)


def run_load(request: LoadDatasetRequest, dataset: Any, installed: Versions) -> None:
    """`load`: the loader's batches measured, alone or each fed to a step of fixed cost."""
    order = request.get("order")
    given = None if order is None else as_rows(dataset, order)
    stream = Cycle(make_loader(dataset, request, batch_sampler=given, measured=True))
    step = request.get("step")
    feed = fed_nothing if step is None else fixed_step(step, camera_keys(dataset))
    measure(request, stream, ready(installed, video_backend(dataset)), take_timed(stream), feed)
    del stream


def camera_keys(dataset: Any) -> List[str]:
    """The dataset's camera features."""
    return list(getattr(dataset.meta, "camera_keys", None) or [])


def row_positions(dataset: Any) -> Any:
    """Absolute frame index -> the row `dataset[...]` takes, for an episode subset (LeRobot
    reads the subset's rows by position); None where the two are the same. A property from
    0.6 on; before, an attribute set when the rows are loaded."""
    if hasattr(type(dataset), "absolute_to_relative_idx"):
        return dataset.absolute_to_relative_idx
    load = getattr(dataset, "_ensure_hf_dataset_loaded", None)
    if load is not None:
        load()
    return getattr(dataset, "_absolute_to_relative_idx", None)


def sampler_yields_rows() -> bool:
    """Whether this LeRobot's EpisodeAwareSampler yields row positions (it is given the
    absolute-to-row map, from 0.6 on) rather than absolute frame indices."""
    from lerobot.datasets.sampler import EpisodeAwareSampler

    return "absolute_to_relative_idx" in inspect.signature(EpisodeAwareSampler.__init__).parameters


def save_batch(batch: Dict[str, Any], directory: str) -> None:
    """Every tensor of `batch` as `<key>.npy` in `directory`, strings in strings.json."""
    import numpy

    os.makedirs(directory, exist_ok=True)
    strings: Dict[str, List[Any]] = {}
    for key, value in batch.items():
        if hasattr(value, "numpy"):
            numpy.save(os.path.join(directory, key + ".npy"), value.numpy())
        else:
            strings[key] = list(value)
    with open(os.path.join(directory, "strings.json"), "w") as f:
        json.dump(strings, f)


def as_rows(dataset: Any, batches: List[List[int]]) -> List[List[int]]:
    """`batches` of global frame indices as the rows `dataset[...]` takes."""
    rows = row_positions(dataset)
    if rows is None:
        return batches
    return [[rows[index] for index in batch] for batch in batches]


def given_batches(request: Union[BatchesDatasetRequest, DigestsRequest], dataset: Any,
                  installed: Versions) -> Iterator[Any]:
    """LeRobot's DataLoader's batches of the request's given global indices, in order, once
    `ready` is said."""
    loader = make_loader(dataset, request, batch_sampler=as_rows(dataset, request["index_batches"]))
    emit(ready(installed, video_backend(dataset)))
    for batch in loader:
        alive()
        yield batch


def run_batches(request: BatchesDatasetRequest, dataset: Any, installed: Versions) -> None:
    """`batches`: the given batches of global indices loaded and saved under `out`."""
    for number, batch in enumerate(given_batches(request, dataset, installed)):
        save_batch(batch, os.path.join(request["out"], f"batch-{number}"))
    emit(DoneResult(event="result"))


def run_digests(request: DigestsRequest, dataset: Any, installed: Versions) -> None:
    """`digests`: the given batches of global indices loaded, each item digested."""
    digests = [item_digests(batch, request["keys"], request["cameras"])
               for batch in given_batches(request, dataset, installed)]
    emit(DigestsResult(event="result", item_digests=digests))


def run_sampler(request: SamplerRequest, dataset: Any, installed: Versions) -> None:
    """`sampler`: the episode-aware sampler's indices, as absolute frame indices."""
    sampler = episode_aware_sampler(dataset, request, shuffle=request["shuffle"])
    emit(ready(installed, video_backend(dataset)))
    rows = row_positions(dataset) if sampler_yields_rows() else None
    absolute = {row: index for index, row in rows.items()} if rows is not None else None
    indices = [int(i) for i in sampler]
    if absolute is not None:
        indices = [absolute[i] for i in indices]
    emit(IndicesResult(event="result", indices=indices))
