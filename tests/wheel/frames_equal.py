"""Does `feedbench sample` (the installed, optimised binary) equal LeRobot's `dataset[index]`?

    python frames_equal.py DATASET INDEX SAMPLE_DIR

SAMPLE_DIR holds what `feedbench sample DATASET --index INDEX --window diffusion --out
SAMPLE_DIR` wrote. The same window is asked of LeRobot (observations at [-1, 0] frames, the
action at [-1 … 14]); every array is compared value for value, camera frames included. Prints
one line and exits 0 when all are equal, else names the first key that differs and exits 1.
"""

import json
import sys
from pathlib import Path

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

root, index, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
info = json.loads((root / "meta" / "info.json").read_text())
fps = info["fps"]
deltas = {}
for key in info["features"]:
    if key.startswith("observation."):
        deltas[key] = [-1 / fps, 0.0]
    elif key == "action":
        deltas[key] = [i / fps for i in range(-1, 15)]
item = LeRobotDataset("local/frames-equal", root=root, delta_timestamps=deltas)[index]
arrays = json.loads((out / "sample.json").read_text())["arrays"]
compared = []
for key in arrays:
    native = np.load(out / f"{key}.npy")
    theirs = item[key].numpy()
    if native.shape != theirs.shape or native.dtype != theirs.dtype:
        sys.exit(f"frames-equal: {key}: {native.dtype}{list(native.shape)} against LeRobot's "
                 f"{theirs.dtype}{list(theirs.shape)}")
    differing = int(np.count_nonzero(native != theirs))
    if differing:
        sys.exit(f"frames-equal: {key}: {differing} of {native.size} values differ from LeRobot's")
    compared.append(f"{key} {list(native.shape)}")
print(f"frames-equal: sample {index} equals LeRobot's value for value: {', '.join(compared)}")
