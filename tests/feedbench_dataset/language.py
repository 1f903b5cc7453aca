"""Language columns (LeRobot main's `language_persistent` and `language_events`, features of
dtype "language") in FeedbenchDataset, against LeRobot main's LeRobotDataset in its venv.

    language.py annotate ROOT     adds both columns to every data file of the v3.0 dataset at ROOT,
                                  with LeRobot's own Arrow types, and declares them in its
                                  info.json as LeRobot's annotation pipeline does: a persistent
                                  subtask (and a plan on episode 0) on every row, an interjection
                                  event with a tool call on every 7th row
    language.py items ROOT        every item's language values (and every other key) equal
                                  LeRobot main's, and a DataLoader collating with LeRobot's
                                  lerobot_collate_fn (as lerobot-train does for such a dataset)
                                  gives the same batches over either dataset
"""

import json
import sys
from pathlib import Path

import numpy as np


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def storage(typed):
    """`typed` with every extension type as its storage type."""
    import pyarrow as pa

    if isinstance(typed, pa.BaseExtensionType):
        return typed.storage_type
    if pa.types.is_list(typed):
        return pa.list_(pa.field(typed.value_field.name, storage(typed.value_type), typed.value_field.nullable))
    if pa.types.is_struct(typed):
        return pa.struct([pa.field(f.name, storage(f.type), f.nullable) for f in typed])
    return typed


def annotate(root):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from lerobot.datasets.language import (
        LANGUAGE_EVENTS,
        LANGUAGE_PERSISTENT,
        language_events_arrow_type,
        language_feature_info,
        language_persistent_arrow_type,
    )

    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        episodes = table.column("episode_index").to_pylist()
        frames = table.column("frame_index").to_pylist()
        stamps = table.column("timestamp").to_pylist()
        persistent, events = [], []
        for episode, frame, stamp in zip(episodes, frames, stamps):
            rows = [{
                "role": "assistant",
                "content": f"subtask {frame // 10} of episode {episode}",
                "style": "subtask",
                "timestamp": float(np.float32(stamp - (frame % 10) / 10.0)),
                "camera": None,
                "tool_calls": None,
            }]
            if episode == 0:
                rows.append({
                    "role": "assistant",
                    "content": "plan: reach, grasp, lift",
                    "style": "plan",
                    "timestamp": 0.0,
                    "camera": None,
                    "tool_calls": [],
                })
            persistent.append(rows)
            if frame % 7 == 3:
                call = json.dumps({"name": "say", "arguments": {"text": f"frame {frame}", "loud": frame % 2 == 0}})
                events.append([{
                    "role": "user",
                    "content": f"stop at {frame}?",
                    "style": "interjection",
                    "camera": None,
                    "tool_calls": [call],
                }])
            else:
                events.append([])
        for name, values, typed in [
            (LANGUAGE_PERSISTENT, persistent, language_persistent_arrow_type()),
            (LANGUAGE_EVENTS, events, language_events_arrow_type()),
        ]:
            # Built with the JSON tool calls as their storage (strings), then cast to LeRobot's
            # type: pyarrow makes no JSON extension array from Python values.
            table = table.append_column(pa.field(name, typed), pa.array(values, type=storage(typed)).cast(typed))
        pq.write_table(table, path)
    info_path = root / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    for key, feature in language_feature_info().items():
        info["features"][key] = {**feature, "shape": list(feature["shape"])}
    info_path.write_text(json.dumps(info, indent=4))
    print(f"annotate: {root.name}: language columns in {len(list((root / 'data').glob('*/*.parquet')))} data files")


def same(what, ours, theirs, ordered=True):
    """`ours` equals `theirs`, tensor for tensor (dtype, shape, values) and value for value; the
    keys in the same order unless not `ordered` (lerobot_collate_fn adds its lists in the order
    of a set, which each process's string hashing orders its own way)."""
    import torch

    if isinstance(theirs, torch.Tensor):
        if not (isinstance(ours, torch.Tensor) and ours.dtype == theirs.dtype
                and ours.shape == theirs.shape and torch.equal(ours, theirs)):
            fail(f"{what}: {ours!r} against LeRobot's {theirs!r}")
    elif isinstance(theirs, dict):
        keys = (lambda d: list(d)) if ordered else (lambda d: sorted(d))
        if not isinstance(ours, dict) or keys(ours) != keys(theirs):
            fail(f"{what}: keys {list(ours) if isinstance(ours, dict) else ours!r} against LeRobot's {list(theirs)}")
        for key in theirs:
            same(f"{what}[{key!r}]", ours[key], theirs[key])
    elif isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            fail(f"{what}: {ours!r} against LeRobot's {theirs!r}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            same(f"{what}[{i}]", a, b)
    elif type(ours) is not type(theirs) or ours != theirs:
        fail(f"{what}: {ours!r} ({type(ours).__name__}) against LeRobot's {theirs!r} ({type(theirs).__name__})")


def items(root):
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.utils.collate import lerobot_collate_fn

    from feedbench.lerobot import FeedbenchDataset

    theirs = LeRobotDataset("local/x", root=root)
    if not theirs.meta.has_language_columns:
        fail(f"{root}: LeRobot sees no language column")
    window = {"observation.state": [-0.1, 0.0], "action": [0.0, 0.1, 0.2]}
    for delta in (None, window):
        ours = FeedbenchDataset("local/x", root=root, delta_timestamps=delta)
        lerobots = LeRobotDataset("local/x", root=root, delta_timestamps=delta)
        for i in range(len(lerobots)):
            same(f"item {i}", ours[i], lerobots[i])
    print(f"check: {root.name}: {len(theirs)} items, language columns and all, equal LeRobot main's, "
          f"with and without a window")
    for workers in (0, 2):
        loaders = [torch.utils.data.DataLoader(
            dataset, batch_size=4, num_workers=workers, collate_fn=lerobot_collate_fn,
            multiprocessing_context="spawn" if workers else None)
            for dataset in (FeedbenchDataset("local/x", root=root), theirs)]
        batches = 0
        for n, (a, b) in enumerate(zip(*loaders)):
            same(f"batch {n} at {workers} workers", a, b, ordered=False)
            batches += 1
        if batches != len(loaders[1]):
            fail(f"{batches} batches against LeRobot's {len(loaders[1])}")
    print(f"check: {root.name}: lerobot_collate_fn's batches over FeedbenchDataset equal LeRobot's "
          f"at 0 and 2 spawned workers")


def main():
    command = sys.argv[1]
    if command == "annotate":
        annotate(Path(sys.argv[2]))
    elif command == "items":
        items(Path(sys.argv[2]))
    else:
        fail(f"unknown command {command}")


if __name__ == "__main__":
    main()
