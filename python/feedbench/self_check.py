"""FeedbenchDataset's self-check at start-up: a few of its items read both by feedbench's reader
and by the installed LeRobot's own LeRobotDataset, compared exactly (keys and their order,
dtypes, shapes, values, pad masks, frames). The items are those where readers go wrong: each
end of the first episodes and of the last, the first frame of each data file, one in the middle,
each with the dataset's windows. Equal, the reader serves whatever LeRobot's version (one newer
than any it was checked against gets a warning line naming it); unequal, it refuses, naming the
version, the item, the key and both values, and how to run without it."""

import logging
import time

import torch

from feedbench import _native
from feedbench._installed import NEWEST_CHECKED, installed_lerobot

logger = logging.getLogger("feedbench")

# The most items checked: their decoding by both readers is the check's cost.
MOST_ITEMS = 12


class SelfCheckError(_native.ReaderError):
    """FeedbenchDataset's items differ from the installed LeRobot's: the message names the
    LeRobot version, the item, the key and both values."""


def probe_positions(meta, episodes, count):
    """The positions (indices of a FeedbenchDataset over `episodes`, None for all, of a
    dataset whose LeRobot metadata is `meta`, `count` items) worth checking: the first and last
    frame of the first two episodes and of the last, the first frame of each data file, the
    middle item; at most MOST_ITEMS."""
    table = meta.episodes
    wanted = None if episodes is None else set(episodes)
    ranges: list = []
    files: list = []
    offset = 0
    rows = sorted(range(len(table)), key=lambda row: int(table[row]["dataset_from_index"]))
    for row in rows:
        episode = table[row]
        if wanted is not None and int(episode["episode_index"]) not in wanted:
            continue
        length = int(episode["dataset_to_index"]) - int(episode["dataset_from_index"])
        if length > 0:
            ranges.append((offset, offset + length - 1))
            data_file = (episode.get("data/chunk_index"), episode.get("data/file_index"))
            if not files or files[-1][1] != data_file:
                files.append((offset, data_file))
            offset += length
    picked = [end for first_last in ranges[:2] + ranges[-1:] for end in first_last]
    picked += [first for first, _ in files[1:]] + [count // 2]
    unique = sorted({p for p in picked if 0 <= p < count})
    return unique[:MOST_ITEMS]


def describe(value):
    """`value` in a few words: a tensor's dtype, shape and first values."""
    if isinstance(value, torch.Tensor):
        flat = value.flatten()[:4].tolist()
        return f"{value.dtype}{list(value.shape)} starting {flat}"
    return repr(value)[:80]


def first_difference(key, ours, theirs):
    """Where `ours` differs from `theirs` under `key`, in words; None where equal."""
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            return f"key `{key}`: {describe(ours)} against LeRobot's {describe(theirs)}"
        if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
            return f"key `{key}`: {describe(ours)} against LeRobot's {describe(theirs)}"
        if not torch.equal(ours, theirs):
            at = (ours != theirs).nonzero()[0].tolist()
            return (f"key `{key}` at {at}: {ours[tuple(at)].item()} against LeRobot's "
                    f"{theirs[tuple(at)].item()}")
        return None
    if ours != theirs:
        return f"key `{key}`: {describe(ours)} against LeRobot's {describe(theirs)}"
    return None


def check(dataset):
    """Compares `dataset`'s items (a FeedbenchDataset's, before its image transforms) with the
    installed LeRobot's LeRobotDataset of the same arguments; SelfCheckError where one differs.
    Returns the seconds it took, or None where it could not run (no LeRobot; a dataset this
    LeRobot does not read, said once)."""
    installed = installed_lerobot()
    if installed is None or dataset.meta is None:
        return None
    if isinstance(dataset.root, str):
        # A URL root: LeRobot reads local roots only (it would look for the dataset on the Hub).
        logger.info("FeedbenchDataset: not checked against LeRobot, which reads local roots only, "
                    "not %s", dataset.root)
        return None
    text, version = installed
    started = time.perf_counter()
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    try:
        theirs = LeRobotDataset(dataset.repo_id, root=dataset.root, episodes=dataset.episodes,
                                delta_timestamps=dataset.delta_timestamps,
                                tolerance_s=dataset.tolerance_s, revision=dataset.revision,
                                return_uint8=dataset._return_uint8)
    except Exception as error:  # LeRobot's own refusal of the dataset: nothing to compare with
        logger.warning("FeedbenchDataset: not checked against LeRobot %s, which does not read "
                       "%s (%s)", text, dataset.root, str(error).splitlines()[0][:120])
        return None
    positions = probe_positions(dataset.meta, dataset.episodes, len(dataset))
    # A reader of its own, without the frame cache: the check's frames are no training step's.
    ours = dataset._raw_items(positions, dataset._open(cached=False))
    for position, item in zip(positions, ours):
        expected = theirs[position]
        wrong = None
        if list(item) != list(expected):
            wrong = f"keys {list(item)} against LeRobot's {list(expected)}"
        else:
            wrong = next(filter(None, (first_difference(key, item[key], expected[key])
                                       for key in expected)), None)
        if wrong is not None:
            raise SelfCheckError(
                f"{dataset.root}: item {position} differs from LeRobot {text}'s: {wrong}. "
                f"feedbench's reader does not read this dataset as this LeRobot does: train "
                f"with lerobot-train itself (without feedbench's reader), or report it")
    if version > NEWEST_CHECKED:
        logger.warning("FeedbenchDataset: LeRobot %s is newer than any feedbench was checked "
                       "against (%s); its items equal LeRobot's at the %d checked", text,
                       ".".join(map(str, NEWEST_CHECKED)), len(positions))
    return time.perf_counter() - started
