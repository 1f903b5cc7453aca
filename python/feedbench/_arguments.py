"""FeedbenchDataset's arguments checked as LeRobot takes them, each refused by name where it is
not one: episodes, an index, the frame cache's size; and the cache's removal."""

import collections.abc
import numbers
import operator
import os

from feedbench import _native


def episode_list(episodes):
    """`episodes` as a list of episode indices (whole numbers ≥ 0), or None for all; refused,
    named, where it is not one."""
    if episodes is None:
        return None
    if isinstance(episodes, (str, bytes)) or not isinstance(episodes, collections.abc.Iterable):
        raise TypeError(f"episodes={episodes!r}: expected a list of episode indices, or None")
    listed = list(episodes)
    for episode in listed:
        if isinstance(episode, bool) or not isinstance(episode, numbers.Integral) or episode < 0:
            raise ValueError(f"episodes: {episode!r} is not an episode index (a whole number ≥ 0)")
    return [int(episode) for episode in listed]


def cache_bytes_of(cache_bytes):
    """`cache_bytes` (None, a whole number of bytes, or a size such as "2GB") as bytes, None
    for no cache; refused, named, where it is none of these."""
    if cache_bytes is None:
        return None
    if isinstance(cache_bytes, str):
        try:
            return _native.size_bytes(cache_bytes)
        except ValueError as error:
            raise ValueError(f"cache_bytes={cache_bytes!r}: {error}") from None
    if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, numbers.Integral):
        raise TypeError(f"cache_bytes={cache_bytes!r}: expected bytes (a whole number), a size "
                        "such as \"2GB\", or None")
    if cache_bytes < 0:
        raise ValueError(f"cache_bytes={cache_bytes}: expected a number of bytes ≥ 0")
    return int(cache_bytes) or None


def remove_cache(path, maker):
    """Removes the frame cache at `path`, in the process that made it (`maker`) only."""
    if os.getpid() == maker:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def position(index, count):
    """`index` of a dataset of `count` items as a position from 0 (a negative one from the
    end), as a list takes it: an integer (not a float, which a list refuses too) within range,
    else TypeError or IndexError naming it."""
    try:
        number = operator.index(index)
    except TypeError:
        raise TypeError(f"dataset index {index!r}: expected an integer (or a slice), not "
                        f"{type(index).__name__}") from None
    at = number + count if number < 0 else number
    if not 0 <= at < count:
        raise IndexError(f"dataset index {number} is out of range: the dataset has {count} items "
                         f"(0 to {count - 1}, or -{count} to -1 from the end)")
    return at
