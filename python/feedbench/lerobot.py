"""feedbench's reader as a torch Dataset in LeRobot's place: `FeedbenchDataset`.

    from feedbench.lerobot import FeedbenchDataset
    dataset = FeedbenchDataset("me/pick", root="/data/pick", delta_timestamps=..., return_uint8=True)

It takes `LeRobotDataset`'s constructor arguments for what lerobot-train passes and has the
attributes lerobot-train and LeRobot's `EpisodeAwareSampler` read (`meta`, `episodes`,
`absolute_to_relative_idx`, `num_frames`, `num_episodes`, `repo_id`, `root`, `features`, `fps`).
Its items are LeRobot's, key for key and bit for bit: the parquet columns (windowed where
`delta_timestamps` asks), each window's `<key>_is_pad`, camera frames `(T, C, H, W)` (uint8 with
`return_uint8`, else float32 in [0, 1]), images in parquet as float32, and `task`.

The native reader (feedbench._native, Rust) decodes; `__getitems__`, which PyTorch's DataLoader
calls for a whole batch, decodes the batch on the reader's own threads: by default the cores
this process may use shared among the DataLoader's workers (all of them at `num_workers=0`),
else `reader_threads`. It pickles as its arguments, so it runs in spawned and forked workers
alike; each process opens the dataset once, on first use.

The reader decodes a batch's frames straight into one tensor per camera (in shared memory in a
worker, as PyTorch's collate allocates the batches a worker sends), and each item's frames are a
row of it: PyTorch's default collate, given every row of that tensor in order, passes the tensor
through rather than stacking copies of the rows (a `collate_fn` of the user's own gets the items
as they are, tensors like any other). With `collated_batches=True` (feedbench-lerobot-train's),
`__getitems__` hands the DataLoader the batch itself, which the default collate passes through
unchanged. Either way the batch is the one `default_collate` makes of the items. PyTorch collates
datasets with string features itself, and `image_transforms` apply per item.

With `cache_bytes`, decoded camera frames are kept in one file of shared memory (/dev/shm) that
the process making the dataset creates and removes, and every DataLoader worker maps: the epochs
after the first copy the frames that fit instead of decoding them. Frames are never evicted; the
cache is for datasets that fit in it (`cache_stats` says what it holds).
"""

import atexit
import functools
import json
import logging
import math
import os
import re
import threading
import weakref
from pathlib import Path

import torch
from torch.utils.data._utils.collate import collate_tensor_fn, default_collate_fn_map

from feedbench import _native
from feedbench._arguments import cache_bytes_of, episode_list, position, remove_cache
from feedbench._installed import installed_lerobot

ReaderError = _native.ReaderError

logger = logging.getLogger(__name__)


def _lerobot_home():
    """LeRobot's dataset cache, as LeRobot resolves it ($HF_LEROBOT_HOME, else under HF_HOME)."""
    try:
        from lerobot.utils.constants import HF_LEROBOT_HOME
    except ImportError:
        home = os.environ.get("HF_HOME", os.path.join(os.path.expanduser("~"), ".cache", "huggingface"))
        return Path(os.environ.get("HF_LEROBOT_HOME", os.path.join(home, "lerobot")))
    return Path(HF_LEROBOT_HOME)


def is_url(root):
    """Whether `root` is a URL (`scheme://…`) rather than a path."""
    return isinstance(root, str) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", root) is not None


def _lerobot_meta(repo_id, root, revision):
    """LeRobot's own LeRobotDatasetMetadata of the dataset, or None where LeRobot is not installed."""
    try:
        from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
    except ImportError:
        try:
            from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata
        except ImportError:
            return None
    return LeRobotDatasetMetadata(repo_id, root=root, revision=revision)


@functools.lru_cache(maxsize=None)
def lerobot_contract():
    """The LeRobot whose reading the reader follows where LeRobot's versions differ: "main" where
    the installed LeRobot is past 0.6.1 (its main: a frame within the tolerance inclusively),
    else "released" (0.4.4 to 0.6.1, and where LeRobot is absent)."""
    installed = installed_lerobot()
    return "main" if installed is not None and installed[1] > (0, 6, 1) else "released"


def _cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_reader_threads():
    """The reader's threads in this process: the cores it may use shared among the DataLoader's
    workers (all of them in the main process or with no workers)."""
    info = torch.utils.data.get_worker_info()
    workers = info.num_workers if info is not None else 1
    return max(1, _cores() // max(1, workers))


class _Collated:
    """A batch the reader collated itself, on its way through PyTorch's default collate."""

    __slots__ = ("batch",)

    def __init__(self, batch):
        self.batch = batch


def _pass_through(batch, *, collate_fn_map=None):
    """PyTorch's default collate, given [_Collated]: the batch inside, unchanged."""
    return batch[0].batch


default_collate_fn_map[_Collated] = _pass_through


class _BatchRow(torch.Tensor):
    """One item's camera frames as `__getitems__` gives them: a view of the batch tensor the
    reader decoded the whole batch into. To anything else it is a tensor like any other (what
    is computed from it is a plain tensor); PyTorch's default collate, given every row of one
    batch in order, hands back that batch tensor instead of stacking copies of the rows."""

    __torch_function__ = torch._C._disabled_torch_function_impl


def _collate_rows(batch, *, collate_fn_map=None):
    """PyTorch's default collate of one key's frames: the batch tensor they are the rows of, or
    (rows of several batches, some left out, reordered) the stack PyTorch makes."""
    whole = getattr(batch[0], "_whole", None)
    if (whole is not None and len(batch) == len(whole)
            and all(getattr(row, "_whole", None) is whole and row._row == i
                    for i, row in enumerate(batch))):
        return whole
    plain = [row.as_subclass(torch.Tensor) for row in batch]
    return collate_tensor_fn(plain, collate_fn_map=collate_fn_map)


default_collate_fn_map[_BatchRow] = _collate_rows


def _rows(whole):
    """The rows of the batch tensor `whole`, each knowing it."""
    rows = []
    for i in range(len(whole)):
        row = whole[i].as_subclass(_BatchRow)
        row._whole, row._row = whole, i
        rows.append(row)
    return rows


def _shared_tensor(shape, dtype):
    """An uninitialised tensor for a batch in fresh shared memory, as PyTorch's collate allocates
    the batches a DataLoader worker sends to the main process."""
    dtype = getattr(torch, dtype)
    storage = torch.empty(0, dtype=dtype)._typed_storage()._new_shared(math.prod(shape), device="cpu")
    return torch.empty(0, dtype=dtype).new(storage).resize_(shape)


_FEEDER_JOIN_S = 5.0


@functools.cache
def _join_feeder_at_exit():
    """In a DataLoader worker: at exit, waits (at most `_FEEDER_JOIN_S`) for the thread that
    sends its batches to the main process to finish. PyTorch's worker lets the process exit
    while that thread may still be dropping the last batch it sent; under a spawned worker's
    interpreter shutdown (Python 3.12) the thread is then stopped inside the tensors' C++
    destructors, which aborts the worker (`terminate called without an active exception`,
    "DataLoader worker … is killed by signal: Aborted" in the main process). Once per process
    (cached)."""

    def join():
        for thread in threading.enumerate():
            if thread.name == "QueueFeederThread" and thread is not threading.current_thread():
                thread.join(timeout=_FEEDER_JOIN_S)

    atexit.register(join)


class FeedbenchDataset(torch.utils.data.Dataset):
    """A LeRobot dataset read by feedbench's native reader: `LeRobotDataset`'s items, decoded
    by native threads. Arguments as `LeRobotDataset`'s; `video_backend` is accepted and ignored
    (said once); `reader_threads` sets the reader's threads per process (default: see
    `default_reader_threads`); `collated_batches` hands the DataLoader whole batches (see the
    module's documentation); `cache_bytes` (bytes, or a size such as "2GB") keeps decoded
    camera frames in shared memory for every DataLoader worker, so that epochs after the first
    copy the frames that fit instead of decoding them (see `cache_stats`). `self_check` (on by
    default, and off where LeRobot is not installed) first compares a few items with the
    installed LeRobot's own and refuses to serve on a difference (`feedbench.self_check`); its
    cost in seconds is `self_check_s`.

    `root` may be a URL (a str: `s3://BUCKET/PREFIX`, `gs://…`, `http(s)://…`,
    `hf://datasets/OWNER/NAME[@REVISION]`), read in place by ranged requests (docs/remote.md);
    `storage_options` (a dict of str, as LeRobot's PRs name them: `endpoint`, `region`,
    `access_key_id`, `secret_access_key`, `allow_http`, …) set the store's settings over the
    environment's (`AWS_*`, `HF_TOKEN`); `requests_in_flight` (1 to 64, default 8) the range
    requests each reader keeps in flight, as `feedbench tune` answers it for the root, and
    `feedbench._native.remote_reads()` what a process has asked of the store. Its metadata is copied into feedbench's cache for
    LeRobot's `LeRobotDatasetMetadata` (kept while its files' versions are the same); LeRobot
    itself reads local roots only, so the self-check and `hf_dataset` are not available there."""

    def __init__(
        self,
        repo_id,
        root=None,
        episodes=None,
        image_transforms=None,
        delta_timestamps=None,
        tolerance_s=1e-4,
        revision=None,
        force_cache_sync=False,
        download_videos=True,
        video_backend=None,
        return_uint8=False,
        depth_output_unit=None,
        *,
        reader_threads=None,
        collated_batches=False,
        cache_bytes=None,
        self_check=True,
        storage_options=None,
        requests_in_flight=None,
    ):
        super().__init__()
        if image_transforms is not None and not callable(image_transforms):
            raise TypeError("image_transforms must be callable or None")
        if reader_threads is not None and (not isinstance(reader_threads, int) or reader_threads < 1):
            raise ValueError(f"reader_threads={reader_threads!r}: expected a whole number ≥ 1 or None")
        if video_backend is not None:
            logger.info("FeedbenchDataset: video_backend=%r is ignored: feedbench's reader decodes "
                        "with FFmpeg itself", video_backend)
        if storage_options is not None and not (
                isinstance(storage_options, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in storage_options.items())):
            raise TypeError(f"storage_options={storage_options!r}: expected a dict of str to str")
        if requests_in_flight is not None and (
                isinstance(requests_in_flight, bool) or not isinstance(requests_in_flight, int)
                or not 1 <= requests_in_flight <= 64):
            raise ValueError(f"requests_in_flight={requests_in_flight!r}: expected a whole number "
                             f"from 1 to 64 or None")
        self.repo_id = repo_id
        # A URL stays text (a Path would fold its `//`).
        if isinstance(root, str) and is_url(root):
            self.root: "str | Path" = root
        else:
            self.root = Path(root) if root is not None else _lerobot_home() / repo_id
        self.storage_options = dict(storage_options or {})
        self.requests_in_flight = requests_in_flight
        self.episodes = episode_list(episodes)
        self.image_transforms = image_transforms
        self.delta_timestamps = delta_timestamps
        self.tolerance_s = tolerance_s
        self.revision = revision
        self.video_backend = video_backend
        self.reader_threads = reader_threads
        self.collated_batches = bool(collated_batches)
        self.cache_bytes = cache_bytes_of(cache_bytes)
        self._cache_path = None
        self._return_uint8 = bool(return_uint8)
        info = self.root if is_url(self.root) else Path(self.root) / "meta" / "info.json"
        if not is_url(self.root) and not Path(info).is_file():
            raise ReaderError(
                f"{info}: no such file: FeedbenchDataset reads a dataset on disk and downloads "
                f"nothing (pass root= the dataset's directory)")
        # The reader refuses what it cannot read naming the file and key (a corrupt info.json
        # among them); the features, fps and episodes are of the info.json it read.
        self._reader = self._open()
        self._cache_path = self._reader.cache_path()
        if self._cache_path is not None:
            # The reader that made the cache removes it when it goes; this, at the latest at exit.
            weakref.finalize(self, remove_cache, self._cache_path, os.getpid())
        self._info = json.loads(self._reader.info_json())
        self.meta = _lerobot_meta(repo_id, Path(_native.local_metadata_of(str(self.root))), revision)
        self._order = None
        self._hf_dataset = None
        self._threads_of = None  # (process id, the reader's default threads there)
        # Language columns (LeRobot main's `language_persistent`, `language_events`): read here,
        # not by the reader, as LeRobot's items carry them (lists of dicts).
        language = [key for key, feature in self.features.items() if feature["dtype"] == "language"]
        if language and is_url(self.root):
            raise ReaderError(f"{self.root}: its language columns ({', '.join(language)}) are read "
                              f"from local roots only (feedbench stage URL copies one)")
        self._language = _LanguageColumns(self.root, language)
        # Whether the reader collates batches: not of string features (PyTorch's collate makes
        # lists of them), nor of language columns (which only a collate of the run's own takes,
        # LeRobot's lerobot_collate_fn: it gets the items).
        self._batches = not any(f["dtype"] in ("string", "language") for f in self.features.values())
        # A few items against the installed LeRobot's own (feedbench.self_check): the seconds it
        # took, None where it did not run.
        self.self_check_s = None
        if self_check:
            from feedbench.self_check import check

            self.self_check_s = check(self)

    def _open(self, cached=True):
        """The native reader of these arguments; with the frame cache unless `cached` is
        False (the self-check's, whose frames no training step reads)."""
        deltas = None
        if self.delta_timestamps is not None:
            deltas = {key: [float(d) for d in values] for key, values in self.delta_timestamps.items()}
        # A spawned worker opens the cache its dataset's maker made; the maker makes it.
        cache = ({"cache_path": self._cache_path} if self._cache_path is not None
                 else {"cache_bytes": self.cache_bytes})
        if not cached:
            cache = {}
        if self.storage_options:
            # In each process that opens a reader: a spawned worker has its own registry.
            _native.set_storage_options(str(self.root), self.storage_options)
        return _native.Reader(str(self.root), self.episodes, deltas, float(self.tolerance_s),
                              self._return_uint8, contract=lerobot_contract(),
                              requests_in_flight=self.requests_in_flight, **cache)

    # What a spawned worker receives: the arguments, not the open reader (it opens its own), and
    # not LeRobot's metadata, which the reader does not need and whose unpickling would import
    # LeRobot into every worker (`meta` is None there).
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_reader"] = None
        state["meta"] = None
        state["_hf_dataset"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _native(self):
        if self._reader is None:
            self._reader = self._open()
            if torch.utils.data.get_worker_info() is not None:
                _join_feeder_at_exit()
        return self._reader

    @property
    def cache_stats(self):
        """What the decoded-frame cache (`cache_bytes`) holds and has done, summed over this
        process and the DataLoader's workers: `frames` and `bytes` held, `copied` (frames not
        decoded again), `not_kept` (decoded, no room), `full` (shared memory refused more),
        `slots`, `slot_bytes`; None without a cache."""
        return self._native().cache_stats()

    @property
    def fps(self):
        """Frames per second of the dataset."""
        return self._info["fps"]

    @property
    def features(self):
        """LeRobot's feature specification (meta/info.json's `features`)."""
        return self._info["features"]

    @property
    def camera_keys(self):
        """The video and image features."""
        return [key for key, feature in self.features.items() if feature["dtype"] in ("video", "image")]

    @property
    def num_frames(self):
        """Frames in the selected episodes."""
        return len(self._native())

    @property
    def num_episodes(self):
        """Episodes selected."""
        return len(self.episodes) if self.episodes is not None else self._info["total_episodes"]

    @property
    def hf_dataset(self):
        """LeRobot's Hugging Face dataset of the selected episodes, as LeRobotDataset has it
        (lerobot-train picks its evaluation subset from it), loaded by LeRobot on first use; the
        reader itself never reads it."""
        if self._hf_dataset is None:
            from lerobot.datasets.lerobot_dataset import LeRobotDataset

            if is_url(self.root):
                raise ReaderError(f"{self.root}: hf_dataset is LeRobot's, and LeRobot reads local "
                                  f"roots only (feedbench stage URL copies one)")

            self._hf_dataset = LeRobotDataset(self.repo_id, root=self.root, episodes=self.episodes,
                                              revision=self.revision).hf_dataset
        return self._hf_dataset

    @property
    def absolute_to_relative_idx(self):
        """Absolute frame index → item position, where episodes are selected (else None), as
        LeRobot's."""
        if self.episodes is None:
            return None
        return {int(index): position for position, index in enumerate(self._native().indices())}

    def __len__(self):
        return self.num_frames

    def __getitem__(self, idx):
        """An item (a list of them for a slice), as LeRobotDataset's, whatever `collated_batches`."""
        if isinstance(idx, slice):
            return self._items(list(range(*idx.indices(len(self)))))
        return self._items([idx])[0]

    def __getitems__(self, indices):
        """The items at `indices`, decoded together by the reader's threads into one batch
        tensor per camera whose rows are the items' frames (`_BatchRow`: PyTorch's default
        collate passes that tensor through); with `collated_batches`, the batch itself."""
        if not self._batches:
            return self._items(indices)
        batch = self._batch(indices)
        if self.collated_batches and self.image_transforms is None:
            return [_Collated(batch)]
        cameras = set(self.camera_keys)
        columns = {key: _rows(value) if key in cameras else value
                   for key, value in batch.items()}
        items = [{key: rows[i] for key, rows in columns.items()} for i in range(len(indices))]
        return self._transformed(items)

    def _positions(self, reader, indices):
        """`indices` as positions in `reader` (negative ones from the end); TypeError or
        IndexError naming a bad one."""
        count = len(reader)
        return [position(idx, count) for idx in indices]

    def _threads(self):
        """The reader's threads in this process (the default worked out once per process)."""
        if self.reader_threads:
            return self.reader_threads
        pid = os.getpid()
        if self._threads_of is None or self._threads_of[0] != pid:
            self._threads_of = (pid, default_reader_threads())
        return self._threads_of[1]

    def _items(self, indices):
        return self._transformed(self._raw_items(indices))

    def _raw_items(self, indices, reader=None):
        """The items at `indices` as the reader (this dataset's, or `reader`) gives them, before
        the image transforms."""
        reader = reader if reader is not None else self._native()
        positions = self._positions(reader, indices)
        return [self._tensors(self._language.of(raw)) for raw in reader.items(positions, self._threads())]

    def _transformed(self, items):
        """`items` with `image_transforms` applied to each camera's frames."""
        if self.image_transforms is not None:
            for item in items:
                for camera in self.camera_keys:
                    if camera in item:
                        frames = item[camera].as_subclass(torch.Tensor)
                        item[camera] = self.image_transforms(frames)
        return items

    def _batch(self, indices):
        """The batch `default_collate` makes of the items at `indices`, collated natively: in
        the main process into arrays the reader keeps and reuses once nothing refers to them
        (no fresh pages to fault in), in a DataLoader worker into shared memory."""
        frames, allocate = {}, None
        if torch.utils.data.get_worker_info() is not None:

            def allocate(key, shape, dtype):
                frames[key] = _shared_tensor(shape, dtype)
                return frames[key].numpy()

        reader, threads = self._native(), self._threads()
        try:
            # The sampler's indices as they come: positions the reader takes as they are.
            raw = reader.batch(indices, threads, allocate)
        except (TypeError, OverflowError, IndexError):
            # Negative indices, or ones refused: as a list takes them, or named.
            raw = reader.batch(self._positions(reader, indices), threads, allocate)
        raw.update(frames)
        return self._tensors(raw)

    def _tensors(self, raw):
        """An item or batch from the reader in LeRobot's key order, its NumPy arrays as tensors
        that share their memory (tensors and strings as they are)."""
        if self._order is None:
            self._order = self._key_order(raw)
        return {key: raw[key] if isinstance(raw[key], (torch.Tensor, list, str))
                else torch.from_numpy(raw[key]) for key in self._order}

    def _key_order(self, raw):
        """LeRobot's order of an item's keys: cameras, the row's columns, the pad masks, task."""
        video_keys = [key for key, feature in self.features.items() if feature["dtype"] == "video"]
        columns = [key for key in self.features if key not in video_keys]
        pads = [f"{key}_is_pad" for key in (self.delta_timestamps or {})]
        order = [key for key in video_keys + columns + pads + ["task"] if key in raw]
        return order + sorted(key for key in raw if key not in order)

    def __repr__(self):
        return (f"FeedbenchDataset({self.repo_id!r}, root={str(self.root)!r}, "
                f"{self.num_episodes} episodes, {self.num_frames} frames)")


class _LanguageColumns:
    """A dataset's language columns, read with pyarrow from its data files on first use (in each
    process), as LeRobot main's items carry them: per row a list of dicts, JSON fields (its
    `tool_calls`) decoded as its `datasets.Json` decodes them."""

    def __init__(self, root, keys):
        self.root = Path(root)
        self.keys = list(keys)
        self._rows = None

    def __getstate__(self):
        return {"root": self.root, "keys": self.keys, "_rows": None}

    def of(self, raw):
        """`raw` (an item from the reader) with its row's language values added."""
        if not self.keys:
            return raw
        if self._rows is None:
            self._rows = self._read()
        index = raw["index"]
        index = int(index.reshape(-1)[0]) if hasattr(index, "reshape") else int(index)
        values = self._rows.get(index)
        if values is None:
            raise ReaderError(f"{self.root / 'data'}: no row of index {index} in the language columns "
                              f"{', '.join(self.keys)}")
        raw.update(values)
        return raw

    def _read(self):
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise ReaderError(f"{self.root}: its language columns ({', '.join(self.keys)}) are read "
                              f"with pyarrow, which LeRobot's environment has: {e}") from e
        rows = {}
        for path in sorted((self.root / "data").glob("**/*.parquet")):
            table = pq.read_table(path, columns=["index", *self.keys])
            decoders = {key: _decoder(table.schema.field(key).type) for key in self.keys}
            columns = {key: table.column(key).to_pylist() for key in self.keys}
            for row, index in enumerate(table.column("index").to_pylist()):
                rows[index] = {key: decode(columns[key][row]) if decode else columns[key][row]
                               for key, decode in decoders.items()}
        return rows


def _decoder(arrow_type):
    """How a value of `arrow_type` as pyarrow's `to_pylist` gives it becomes the value LeRobot's
    `datasets` gives: its JSON fields (`arrow.json`) parsed; None where nothing changes."""
    import pyarrow as pa

    if isinstance(arrow_type, pa.BaseExtensionType):
        if arrow_type.extension_name == "arrow.json":
            return lambda value: None if value is None else json.loads(value)
        return None
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        inner = _decoder(arrow_type.value_type)
        return None if inner is None else (lambda value: None if value is None else [inner(v) for v in value])
    if pa.types.is_struct(arrow_type):
        fields = [(field.name, _decoder(field.type)) for field in arrow_type]
        if all(decode is None for _, decode in fields):
            return None
        return lambda value: None if value is None else {
            name: decode(value[name]) if decode else value[name] for name, decode in fields}
    return None
