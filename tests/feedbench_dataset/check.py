"""Checks FeedbenchDataset (feedbench.lerobot, the wheel's native reader) against LeRobot's
LeRobotDataset in the LeRobot venv. Exits 0 with one line per check, else names what differs.

    check.py items ROOT COUNT            every key of every item at COUNT indices (evenly spread,
                                         the ends included) equals LeRobot's (torch.equal, same
                                         dtype and shape, same key order), in three requests: a
                                         diffusion-like window in uint8, no window in float32,
                                         two episodes with a window per modality (cameras 3 frames, state 1)
    check.py batches ROOT                a seeded DataLoader as lerobot-train builds it
                                         (EpisodeAwareSampler, shuffle, seed, drop_n_last_frames 7,
                                         batch 8) gives the same first 6 batches with either
                                         dataset: spawn with 2 workers, persistent, prefetch 4,
                                         pin_memory; fork with 1 worker; 0 workers; and with the
                                         batches collated by the reader, spawn with 2 and 0;
                                         a collate_fn of its own gets the items, one that
                                         reorders them the stack of its order
    check.py shards ROOT                 accelerate's sharding of that DataLoader across 2 ranks
                                         (`prepare_data_loader`, as `accelerator.prepare` calls it)
                                         gives each rank LeRobot's batches, the ranks disjoint
    check.py refusals ROOT               a dataset or request it cannot serve is refused naming the
                                         file, key or index: no info.json, a depth-map camera, a
                                         delta for no feature, an index past the end
    check.py stub                        feedbench/_native.pyi declares what the native module
                                         has: its module names, Reader's methods
    check.py self-check ROOT             FeedbenchDataset's self-check runs beside LeRobot (its
                                         cost said), refuses a value shifted in a copy of the
                                         reader's output naming item, key and both values, and
                                         is off with self_check=False
    check.py write-lerobot OUT           a small dataset written by LeRobot itself (LeRobotDataset
                                         .create: one video camera, one image feature, state,
                                         action, features of 2 to 5 dimensions; 3 episodes)
"""

import pickle
import sys
from pathlib import Path

import numpy as np
import torch

from check_requests import requests
from feedbench.lerobot import FeedbenchDataset
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def fail(message):
    sys.exit(f"check: {message}")


def same_value(what, ours, theirs):
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            fail(f"{what}: {type(ours).__name__} against LeRobot's tensor")
        if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
            fail(f"{what}: {ours.dtype}{list(ours.shape)} against LeRobot's "
                 f"{theirs.dtype}{list(theirs.shape)}")
        if not torch.equal(ours, theirs):
            differing = int((ours != theirs).sum())
            fail(f"{what}: {differing} of {theirs.numel()} values differ from LeRobot's")
    elif isinstance(theirs, dict):
        if list(ours) != list(theirs):
            fail(f"{what}: keys {list(ours)} against LeRobot's {list(theirs)}")
        for key in theirs:
            same_value(f"{what} {key}", ours[key], theirs[key])
    elif ours != theirs:
        fail(f"{what}: {ours!r} against LeRobot's {theirs!r}")


def items(root, count):
    for name, kwargs in requests(root):
        ours = FeedbenchDataset("local/check", root=root, **kwargs)
        theirs = LeRobotDataset("local/check", root=root, **kwargs)
        if len(ours) != len(theirs):
            fail(f"{name}: {len(ours)} items against LeRobot's {len(theirs)}")
        if ours.absolute_to_relative_idx != theirs.absolute_to_relative_idx:
            fail(f"{name}: absolute_to_relative_idx differs from LeRobot's")
        # lerobot-train's evaluation subset is picked from this column.
        if (ours.hf_dataset.data.column("task_index").to_pylist()
                != theirs.hf_dataset.data.column("task_index").to_pylist()):
            fail(f"{name}: hf_dataset's task_index column differs from LeRobot's")
        if (ours.num_frames, ours.num_episodes) != (theirs.num_frames, theirs.num_episodes):
            fail(f"{name}: num_frames, num_episodes {ours.num_frames, ours.num_episodes} against "
                 f"LeRobot's {theirs.num_frames, theirs.num_episodes}")
        indices = sorted(set(np.linspace(0, len(theirs) - 1, min(count, len(theirs))).round().astype(int)))
        # An item asked for alone is an item, also where the DataLoader gets whole batches.
        collated = FeedbenchDataset("local/check", root=root, collated_batches=True, **kwargs)
        same_value(f"{name}, item -1 of a dataset of whole batches:", collated[-1], theirs[-1])
        batch = ours.__getitems__(indices)
        for index, item in zip(indices, batch):
            same_value(f"{name}, item {index}:", item, theirs[int(index)])
        # A slice is the list of its items one at a time (LeRobot main's `dataset[a:b]`), a
        # stepped one from the end too.
        for cut in (slice(10, 20), slice(-1, -8, -3)):
            positions = range(*cut.indices(len(theirs)))
            sliced = ours[cut]
            if len(sliced) != len(positions):
                fail(f"{name}, [{cut.start}:{cut.stop}:{cut.step}]: {len(sliced)} items, not "
                     f"{len(positions)}")
            for index, item in zip(positions, sliced):
                same_value(f"{name}, item {index} of [{cut.start}:{cut.stop}:{cut.step}]:", item,
                           ours[index])
                same_value(f"{name}, item {index} of [{cut.start}:{cut.stop}:{cut.step}]:", item,
                           theirs[index])
        # A batch's indices as a list takes them: negative ones from the end, NumPy's integers.
        for index, item in zip([-1, -len(theirs)], ours.__getitems__([np.int64(-1), -len(theirs)])):
            same_value(f"{name}, item {index} of a batch:", item, theirs[index % len(theirs)])
        # What a spawned worker is sent: a handle, not the data (LeRobot's own for scale).
        payload, theirs_payload = len(pickle.dumps(ours)), len(pickle.dumps(theirs))
        if payload > max(64 << 10, theirs_payload):
            fail(f"{name}: FeedbenchDataset pickles to {payload} bytes for each worker "
                 f"(LeRobotDataset: {theirs_payload})")
        print(f"check: {root.name}, {name}: {len(indices)} items equal LeRobot's "
              f"({len(batch[0])} keys: {', '.join(batch[0])})")


def lerobot_loader(dataset, workers, context, pin_memory):
    from lerobot.datasets.sampler import EpisodeAwareSampler

    sampler = EpisodeAwareSampler(
        dataset.meta.episodes["dataset_from_index"],
        dataset.meta.episodes["dataset_to_index"],
        episode_indices_to_use=dataset.episodes,
        drop_n_last_frames=7,
        shuffle=True,
        seed=1000,
        absolute_to_relative_idx=dataset.absolute_to_relative_idx,
    )
    extra = {}
    if workers:
        extra = {"multiprocessing_context": context, "persistent_workers": True, "prefetch_factor": 4}
    return torch.utils.data.DataLoader(dataset, batch_size=8, sampler=sampler, num_workers=workers,
                                       pin_memory=pin_memory, drop_last=False, **extra)


def batches(root):
    fps = LeRobotDataset("local/check", root=root).meta.fps
    window = {"observation.state": [-1 / fps, 0.0], "action": [i / fps for i in range(-1, 15)]}
    for key, feature in LeRobotDataset("local/check", root=root).meta.features.items():
        if feature["dtype"] in ("video", "image"):
            window[key] = [-1 / fps, 0.0]
    kwargs = {"delta_timestamps": window, "return_uint8": True}
    theirs = list(zip(range(6), lerobot_loader(LeRobotDataset("local/check", root=root, **kwargs),
                                              0, None, False)))
    for workers, context, pin_memory, collated in [(2, "spawn", True, False), (1, "fork", False, False),
                                                   (0, None, False, False), (2, "spawn", True, True),
                                                   (0, None, False, True)]:
        ours = FeedbenchDataset("local/check", root=root, collated_batches=collated, **kwargs)
        ours[0]  # the reader's threads started here, before the workers are spawned or forked
        loader = lerobot_loader(ours, workers, context, pin_memory)
        taken, kept, starts = 0, None, []
        # Compared as they come and dropped, as a training loop does: the reader reuses the
        # memory of a batch nothing holds any more (0 workers), never of one a view still holds.
        for (step, batch), (_, expected) in zip(zip(range(6), loader), theirs):
            same_value(f"{workers} workers ({context}), batch {step}:", batch, expected)
            frames = next(v for v in batch.values() if isinstance(v, torch.Tensor) and v.dim() > 2)
            starts.append(frames.data_ptr())
            if step == 1:
                kept = frames[0]
                kept_copy = kept.clone()
            taken += 1
        if workers:
            # Its workers exit cleanly when the DataLoader shuts them down (no abort at exit).
            iterator = loader._iterator
            processes = list(iterator._workers)
            iterator._shutdown_workers()
            codes = [process.exitcode for process in processes]
            if any(codes):
                fail(f"{workers} workers ({context}): the workers exited with {codes}")
        if not torch.equal(kept, kept_copy):
            fail(f"{workers} workers ({context}): a view of batch 1 kept was overwritten")
        if taken != len(theirs):
            fail(f"{workers} workers ({context}): {taken} batches against LeRobot's {len(theirs)}")
        # Reused memory is the reader's batch array: the default collate passed the items'
        # frames through as the batch (the drop-in's rows, or the reader's collated batch), and
        # the reader keeps the arrays it made (none is freed for another to land on).
        if not workers and len(set(starts)) == len(starts):
            fail(f"0 workers{', collated' if collated else ''}: no batch's memory was reused")
        print(f"check: {root.name}: {taken} seeded batches of 8 equal LeRobot's with "
              f"{workers} workers{f' ({context})' if context else ''}"
              f"{', collated by the reader' if collated else ''}")
    # A collate of its own gets the items; one that reorders them gets the stack of its order.
    ours = FeedbenchDataset("local/check", root=root, **kwargs)
    reference = LeRobotDataset("local/check", root=root, **kwargs)
    indices = [3, 9, 1, 4]
    items = torch.utils.data.DataLoader(ours, batch_size=4, sampler=indices,
                                        collate_fn=lambda items: items)
    for index, item in zip(indices, next(iter(items))):
        same_value(f"a collate of its own, item {index}:", item, reference[index])
    reordered = torch.utils.data.DataLoader(
        ours, batch_size=4, sampler=indices,
        collate_fn=lambda items: torch.utils.data.default_collate(items[::-1]))
    expected = torch.utils.data.default_collate([reference[i] for i in indices[::-1]])
    same_value("a collate of the items reversed:", next(iter(reordered)), expected)
    print(f"check: {root.name}: a collate of its own gets the items, reordered ones are stacked")


def shards(root):
    """accelerate's sharding of lerobot-train's DataLoader across 2 ranks (what
    `accelerator.prepare` does with it, by accelerate's own `prepare_data_loader`)."""
    from accelerate.data_loader import prepare_data_loader

    kwargs = {"delta_timestamps": {"action": [0.0, 0.1]}, "return_uint8": True}

    def sharded(dataset, rank, workers=0, context=None):
        loader = lerobot_loader(dataset, workers, context, False)
        shard = prepare_data_loader(loader, device=torch.device("cpu"), num_processes=2,
                                    process_index=rank, put_on_device=True)
        return [batch for _, batch in zip(range(3), shard)]

    theirs = [sharded(LeRobotDataset("local/check", root=root, **kwargs), rank) for rank in (0, 1)]
    seen = [{int(i) for batch in rank_batches for i in batch["index"]} for rank_batches in theirs]
    if seen[0] & seen[1] or not seen[0] or not seen[1]:
        fail("accelerate's ranks read the same frames: no sharding to compare against")
    for collated, workers, context in [(False, 0, None), (True, 0, None), (True, 2, "spawn")]:
        ours = FeedbenchDataset("local/check", root=root, collated_batches=collated, **kwargs)
        for rank in (0, 1):
            for step, (batch, expected) in enumerate(zip(sharded(ours, rank, workers, context),
                                                         theirs[rank], strict=True)):
                same_value(f"rank {rank} of 2, {workers} workers, batch {step}:", batch, expected)
    print(f"check: {root.name}: accelerate's 2 ranks get LeRobot's batches, each its own, with "
          "the drop-in and the reader's batches (0 workers, 2 spawned)")


def refused(what, call, error, *names):
    try:
        call()
    except error as refusal:
        message = str(refusal)
        missing = [name for name in names if name not in message]
        if missing:
            fail(f"{what}: the refusal does not name {missing}: {message}")
        print(f"check: {what}: refused: {message}")
        return
    fail(f"{what}: accepted")


def refusals(root):
    import json
    import shutil
    import tempfile

    from feedbench.lerobot import ReaderError

    with tempfile.TemporaryDirectory() as scratch:
        empty = Path(scratch) / "empty"
        empty.mkdir()
        refused("a directory without meta/info.json", lambda: FeedbenchDataset("local/x", root=empty),
                ReaderError, str(empty / "meta" / "info.json"))
        depth = Path(scratch) / "depth"
        shutil.copytree(root, depth)
        info_path = depth / "meta" / "info.json"
        info = json.loads(info_path.read_text())
        camera = next(key for key, f in info["features"].items() if f["dtype"] == "video")
        info["features"][camera]["info"]["video.is_depth_map"] = True
        info_path.write_text(json.dumps(info, indent=4))
        refused("a depth-map camera", lambda: FeedbenchDataset("local/x", root=depth), ReaderError,
                camera, "depth map")
        corrupt = Path(scratch) / "corrupt"
        shutil.copytree(root, corrupt)
        (corrupt / "meta" / "info.json").write_text('{"codebase_version": "v3.0", "fps": ')
        refused("a corrupt meta/info.json", lambda: FeedbenchDataset("local/x", root=corrupt),
                ReaderError, str(corrupt / "meta" / "info.json"))
    refused("a delta for no feature",
            lambda: FeedbenchDataset("local/x", root=root, delta_timestamps={"observation.nothing": [0.0]}),
            ReaderError, "observation.nothing")
    refused("a negative episode", lambda: FeedbenchDataset("local/x", root=root, episodes=[0, -1]),
            ValueError, "episodes", "-1")
    refused("an episode that is no whole number",
            lambda: FeedbenchDataset("local/x", root=root, episodes=[1.5]), ValueError, "1.5")
    refused("episodes that are no list", lambda: FeedbenchDataset("local/x", root=root, episodes=3),
            TypeError, "episodes=3")
    dataset = FeedbenchDataset("local/x", root=root)
    refused("an index past the end", lambda: dataset[len(dataset)], IndexError, str(len(dataset)))
    refused("a float index", lambda: dataset[1.5], TypeError, "1.5")
    refused("an index far below the start", lambda: dataset[-10**6], IndexError, str(-10**6))
    refused("an index past any integer", lambda: dataset[2**64], IndexError, str(2**64))
    refused("a batch's index past the end", lambda: dataset.__getitems__([0, len(dataset)]),
            IndexError, str(len(dataset)))
    refused("a batch's float index", lambda: dataset.__getitems__([0, 1.5]), TypeError, "1.5")
    refused("a batch's index far below the start", lambda: dataset.__getitems__([-10**6]),
            IndexError, str(-10**6))
    with tempfile.TemporaryDirectory() as scratch:
        damaged = Path(scratch) / "damaged"
        shutil.copytree(root, damaged)
        video = sorted(damaged.glob("videos/**/*.mp4"))[0]
        video.write_bytes(video.read_bytes()[:2000])
        # The self-check would meet the damage first, in this process: it says the same file.
        refused("a damaged video, at the self-check",
                lambda: FeedbenchDataset("local/x", root=damaged), ReaderError, str(video))
        worker_error(FeedbenchDataset("local/x", root=damaged, self_check=False), str(video))


def worker_error(dataset, named):
    """A reader error in a DataLoader's spawned worker reaches the main process as the
    ReaderError it is, naming the file (it would not pickle, and the main process waited for
    it for ever); the DataLoader's own timeout bounds the wait here."""
    import torch

    from feedbench.lerobot import ReaderError

    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, timeout=120,
                                         multiprocessing_context="spawn")
    refused("a damaged video read by a DataLoader worker", lambda: [b for b in loader],
            ReaderError, named)


def write_lerobot(out):
    features = {
        "observation.images.front": {"dtype": "video", "shape": (48, 64, 3),
                                     "names": ["height", "width", "channels"]},
        "observation.images.wrist": {"dtype": "image", "shape": (24, 32, 3),
                                     "names": ["height", "width", "channels"]},
        "observation.state": {"dtype": "float32", "shape": (4,), "names": None},
        "action": {"dtype": "float32", "shape": (4,), "names": None},
        # Features of 2 to 5 dimensions: nested lists in parquet (HF Array2D..Array5D).
        "observation.grid": {"dtype": "float32", "shape": (2, 3), "names": None},
        "observation.cube": {"dtype": "int64", "shape": (2, 3, 4), "names": None},
        "observation.tesseract": {"dtype": "float64", "shape": (1, 2, 3, 2), "names": None},
        "observation.penteract": {"dtype": "float32", "shape": (2, 1, 2, 1, 3), "names": None},
    }
    dataset = LeRobotDataset.create("local/lerobot-written", fps=15, features=features, root=out,
                                    use_videos=True)
    generator = np.random.default_rng(7)
    for episode, length in enumerate([21, 17, 25]):
        for frame in range(length):
            dataset.add_frame({
                "observation.images.front": generator.integers(0, 256, (48, 64, 3), dtype=np.uint8),
                "observation.images.wrist": generator.integers(0, 256, (24, 32, 3), dtype=np.uint8),
                "observation.state": generator.standard_normal(4).astype(np.float32),
                "action": generator.standard_normal(4).astype(np.float32),
                "observation.grid": generator.standard_normal((2, 3)).astype(np.float32),
                "observation.cube": generator.integers(-9, 9, (2, 3, 4)),
                "observation.tesseract": generator.standard_normal((1, 2, 3, 2)),
                "observation.penteract": generator.standard_normal((2, 1, 2, 1, 3)).astype(np.float32),
                "task": ["pick", "place"][episode % 2],
            })
        dataset.save_episode()
    dataset.finalize()
    print(f"check: LeRobot wrote {out}")


def stub():
    import ast

    from feedbench import _native

    declared = ast.parse((Path(_native.__file__).parent / "_native.pyi").read_text())
    classes = {node.name: node for node in declared.body if isinstance(node, ast.ClassDef)}
    names = {n.name for n in declared.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    exported = {name for name in dir(_native) if not name.startswith("_")}
    if exported != names:
        fail(f"_native.pyi declares {sorted(names)}; the module has {sorted(exported)}")
    methods = {n.name for n in classes["Reader"].body if isinstance(n, ast.FunctionDef)}
    has = {name for name in dir(_native.Reader) if not name.startswith("_") or name == "__len__"}
    has.add("__init__")
    if methods != has:
        fail(f"_native.pyi declares Reader's {sorted(methods)}; it has {sorted(has)}")
    print(f"check: _native.pyi declares the module's {sorted(names)} and Reader's {sorted(methods)}")


def self_check(root):
    """The self-check: it runs beside LeRobot and says its cost; an item the reader got wrong (a
    value shifted in a copy of its output) is refused naming the item, the key and both values;
    self_check=False serves without it."""
    import feedbench.lerobot as module
    from feedbench.self_check import SelfCheckError

    window = {"observation.state": [-0.1, 0.0], "action": [i / 10 for i in range(-1, 15)]}
    cameras = [k for k, f in FeedbenchDataset("local/x", root=root, self_check=False).features.items()
               if f["dtype"] == "video"]
    window.update({camera: [-0.1, 0.0] for camera in cameras})
    dataset = FeedbenchDataset("local/x", root=root, delta_timestamps=window, return_uint8=True)
    if dataset.self_check_s is None:
        fail("the self-check did not run beside LeRobot")
    print(f"check: {root.name}: self-check against LeRobot in {dataset.self_check_s:.2f} s")
    honest = module.FeedbenchDataset._raw_items

    def shifted(self, indices, reader=None):
        items = honest(self, indices, reader)
        items[-1]["observation.state"][0, 0] += 1.0
        return items

    module.FeedbenchDataset._raw_items = shifted
    try:
        FeedbenchDataset("local/x", root=root, delta_timestamps=window, return_uint8=True)
        fail("a shifted value passed the self-check")
    except SelfCheckError as error:
        said = str(error)
        if "key `observation.state` at [0, 0]" not in said or "LeRobot 0." not in said:
            fail(f"the refusal does not name the key, the position and the version: {said}")
    unchecked = FeedbenchDataset("local/x", root=root, delta_timestamps=window, self_check=False)
    module.FeedbenchDataset._raw_items = honest
    if unchecked.self_check_s is not None:
        fail("self_check=False checked")
    print(f"check: {root.name}: a shifted value is refused: {said}")


def main():
    command = sys.argv[1]
    if command == "items":
        items(Path(sys.argv[2]), int(sys.argv[3]))
    elif command == "batches":
        batches(Path(sys.argv[2]))
    elif command == "shards":
        shards(Path(sys.argv[2]))
    elif command == "refusals":
        refusals(Path(sys.argv[2]))
    elif command == "stub":
        stub()
    elif command == "write-lerobot":
        write_lerobot(Path(sys.argv[2]))
    elif command == "self-check":
        self_check(Path(sys.argv[2]))
    else:
        fail(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
