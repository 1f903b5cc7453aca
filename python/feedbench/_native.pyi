"""Types of `feedbench._native`, the reader's Python module (python/native, PyO3): the Rust
reader that `feedbench.lerobot.FeedbenchDataset` wraps."""

from typing import Callable, Literal, Optional, Union

import numpy

class ReaderError(Exception):
    """A dataset or request the reader cannot serve, naming the file, key or index."""

Value = Union[numpy.ndarray, list[str], str]

class Reader:
    """A dataset opened as LeRobot opens it: its selected episodes, a window of
    `delta_timestamps`, items as NumPy arrays decoded by the reader's own threads."""

    def __init__(
        self,
        root: str,
        episodes: Optional[list[int]],
        delta_timestamps: Optional[dict[str, list[float]]],
        tolerance_s: float,
        uint8: bool,
        cache_bytes: Optional[int] = None,
        cache_path: Optional[str] = None,
        contract: Literal["released", "main"] = "released",
        requests_in_flight: Optional[int] = None,
    ) -> None:
        """Opens the dataset at `root`: `episodes` (None for all), `delta_timestamps` (key →
        seconds), `tolerance_s`, `uint8` (camera frames as uint8); `contract`, the LeRobot whose
        reading to follow where versions differ ("released": 0.4.4 to 0.6.1, a frame strictly
        within the tolerance; "main": LeRobot's main, within it inclusively). `cache_bytes` makes a
        decoded-frame cache of that many bytes in shared memory (ValueError where it holds no
        frame or does not fit); `cache_path` opens the one another process's reader made.
        `requests_in_flight` (1 to 64, ValueError else): range requests a batch of a URL root's
        frames keeps in flight, the loader's knob of that name (its default, 8, where None).
        Features the reader does not read are refused by name (ReaderError)."""

    def cache_path(self) -> Optional[str]:
        """The decoded-frame cache's file, for another process's reader; None without one."""

    def cache_stats(self) -> Optional[dict[str, Union[int, bool]]]:
        """What the decoded-frame cache holds and has done, over every process using it:
        `slots`, `slot_bytes`, `frames`, `bytes`, `copied`, `not_kept`, `full`; None without one."""

    def info_json(self) -> str:
        """meta/info.json as the reader read it, in JSON."""

    def __len__(self) -> int:
        """Items in the selected episodes (LeRobot's `num_frames`)."""

    def indices(self) -> numpy.ndarray:
        """The global `index` of every item position, in order (uint64)."""

    def items(self, positions: list[int], threads: int) -> list[dict[str, Value]]:
        """The items at `positions` (0 ≤ position < len), each a dict of key → NumPy array (or
        string), decoded by `threads` threads; IndexError for a position past the end."""

    def batch(
        self,
        positions: list[int],
        threads: int,
        allocate: Optional[Callable[[str, list[int], str], numpy.ndarray]] = None,
    ) -> dict[str, Union[numpy.ndarray, list[str]]]:
        """The items at `positions` collated as `default_collate` collates them: every key a
        NumPy array `[B, …]` or a list of strings. Camera frames are decoded into the arrays
        `allocate(key, shape, dtype)` returns (C-contiguous, of that shape and dtype, "uint8" or
        "float32"), which the result leaves out; without `allocate`, into arrays the reader
        keeps and hands out again once nothing else refers to them (no tensor, view or name)."""

def size_bytes(text: str) -> int:
    """`text` (`2GB`, `512MiB`, `1.5GB`, `123456`) as bytes; ValueError naming it where it is none."""

def set_storage_options(root: str, options: dict[str, str]) -> None:
    """Sets the storage options (`endpoint`, `region`, `access_key_id`, `secret_access_key`,
    `allow_http`, `timeout`, …) of the URL roots under `root`, in this process."""

def local_metadata_of(root: str) -> str:
    """The metadata of the dataset at `root` in a local directory: `root` itself where it is
    one; a URL root's copied into feedbench's cache (FEEDBENCH_CACHE_DIR, else
    ~/.cache/feedbench) and kept while its files' versions are the same. ReaderError naming
    the URL where it cannot be read."""

def remote_reads() -> Optional[dict[str, Union[int, float]]]:
    """What this process has asked of stores since it started: `requests`, `retries`, `bytes`
    (received), `needed_bytes` (what the readers needed of them: bytes / needed_bytes is the
    read amplification), `first_byte_s` and `request_s` (summed), `receiving_s` (the time any
    answer was arriving), `first_byte_p10_ms`, `first_byte_p50_ms`, `first_byte_p99_ms`; None
    where it asked nothing. A DataLoader worker's are its own."""
