"""Checks FeedbenchDataset's decoded-frame cache (`cache_bytes`) in the LeRobot venv. Exits 0
with one line per check, else names what differs.

    cache.py ROOT     a seeded DataLoader as lerobot-train builds it (check.py's), two epochs,
                      with the cache: every batch equals LeRobot's, and the second epoch copies
                      every frame it asks for and decodes none (the frames held do not grow) —
                      spawn with 2 workers, fork with 1, 0 workers; a cache too small for the
                      dataset keeps what fits and the batches still equal LeRobot's; the file in
                      /dev/shm goes with its dataset and is left by the workers; sizes it cannot
                      take are refused naming the argument
"""

import gc
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from check import fail, lerobot_loader, same_value  # noqa: E402
from feedbench.lerobot import FeedbenchDataset  # noqa: E402
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402


def arguments(root):
    """A diffusion-like window over every camera (two frames each), uint8."""
    meta = LeRobotDataset("local/check", root=root).meta
    fps = meta.fps
    window = {"observation.state": [-1 / fps, 0.0], "action": [i / fps for i in range(-1, 15)]}
    cameras = [key for key, feature in meta.features.items() if feature["dtype"] == "video"]
    for key in cameras:
        window[key] = [-1 / fps, 0.0]
    return {"delta_timestamps": window, "return_uint8": True}, cameras


def frames_asked(batch, cameras):
    """Camera frames in a batch: items × steps, per camera."""
    return sum(batch[key].shape[0] * batch[key].shape[1] for key in cameras)


def two_epochs(root, kwargs, cameras, theirs, workers, context, cache_bytes):
    """Two epochs of the seeded loader over a FeedbenchDataset with a cache, each batch compared
    with LeRobot's; the cache's figures after each epoch and the frames the second asked for."""
    ours = FeedbenchDataset("local/check", root=root, cache_bytes=cache_bytes, **kwargs)
    loader = lerobot_loader(ours, workers, context, False)
    after, asked = [], 0
    for epoch in range(2):
        for step, batch in enumerate(loader):
            same_value(f"{workers} workers, epoch {epoch}, batch {step}:", batch,
                       theirs[epoch][step])
            if epoch == 1:
                asked += frames_asked(batch, cameras)
        after.append(ours.cache_stats)
    if workers:
        loader._iterator._shutdown_workers()
    return ours, after, asked


def cached_epochs(root):
    kwargs, cameras = arguments(root)
    reference = lerobot_loader(LeRobotDataset("local/check", root=root, **kwargs), 0, None, False)
    theirs = [list(reference), list(reference)]
    for workers, context in [(2, "spawn"), (1, "fork"), (0, None)]:
        ours, (first, second), asked = two_epochs(root, kwargs, cameras, theirs, workers, context,
                                                  "64MB")
        path = Path(ours._cache_path)
        if not path.exists() or not str(path).startswith("/dev/shm/"):
            fail(f"{workers} workers: the cache's file {path} is not in /dev/shm")
        if first["frames"] == 0 or first["not_kept"] or first["full"]:
            fail(f"{workers} workers: after the first epoch the cache holds {first}")
        if second["frames"] != first["frames"]:
            fail(f"{workers} workers: the second epoch decoded frames again: "
                 f"{first['frames']} held, then {second['frames']}")
        if second["copied"] - first["copied"] != asked:
            fail(f"{workers} workers: the second epoch asked for {asked} frames and copied "
                 f"{second['copied'] - first['copied']}")
        del ours
        gc.collect()
        if path.exists():
            fail(f"{workers} workers: {path} is left after its dataset went")
        print(f"check: {root.name}: two epochs equal LeRobot's with {workers} workers"
              f"{f' ({context})' if context else ''}; the second copied all {asked} frames it "
              f"asked for from {first['frames']} held, decoding none")
    # Room for 9 frames: the rest decoded every time, the batches the same.
    ours, (first, second), _ = two_epochs(root, kwargs, cameras, theirs, 2, "spawn", 200_000)
    if not (0 < first["frames"] <= first["slots"] < 10 and second["not_kept"] > first["not_kept"] > 0):
        fail(f"a cache of 200 kB: {first}, then {second}")
    print(f"check: {root.name}: a cache of {first['slots']} frames keeps {first['frames']}, "
          f"the batches equal LeRobot's")


def refusals(root):
    for given, error, words in [("lots", ValueError, "cache_bytes='lots'"),
                                (-1, ValueError, "cache_bytes=-1"),
                                (True, TypeError, "cache_bytes=True"),
                                (1.5, TypeError, "cache_bytes=1.5"),
                                (1000, ValueError, "holds no frame"),
                                ("1TB", ValueError, "does not fit")]:
        try:
            FeedbenchDataset("local/check", root=root, cache_bytes=given)
        except error as refused:
            if words not in str(refused):
                fail(f"cache_bytes={given!r}: {refused!r} does not say {words!r}")
        else:
            fail(f"cache_bytes={given!r} was taken")
    left = [name for name in os.listdir("/dev/shm") if name.startswith(f"feedbench-frames-{os.getpid()}-")]
    if left:
        fail(f"refused caches left files in /dev/shm: {left}")
    print("check: cache sizes it cannot take are refused naming cache_bytes, leaving no file")


def main():
    root = Path(sys.argv[1])
    cached_epochs(root)
    refusals(root)


if __name__ == "__main__":
    main()
