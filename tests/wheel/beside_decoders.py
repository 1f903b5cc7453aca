"""Does feedbench's reader live beside LeRobot's decoders in one process, in either order?

    python beside_decoders.py DATASET ORDER      (ORDER: feedbench-first or decoders-first)

Reads items of DATASET with feedbench's FeedbenchDataset (the installed wheel's module and its
bundled FFmpeg) and with LeRobot's LeRobotDataset under torchcodec and under PyAV (their own
FFmpeg, and the system libraries they pull in), in the order given, all in this one process.
The bundle's libraries have names of their own, so that neither side binds to the other's: the
camera frames of each item must equal torchcodec's value for value, and PyAV's within its
colour conversion (its own swscale). Prints one line and exits 0, else names what failed.
"""

import sys
from pathlib import Path

import numpy as np

root, order = Path(sys.argv[1]), sys.argv[2]
INDICES = [0, 7, 13]


def feedbench_items():
    from feedbench.lerobot import FeedbenchDataset

    dataset = FeedbenchDataset("local/beside", root=root)
    return dataset.meta.camera_keys, [dataset[i] for i in INDICES]


def lerobot_items(backend):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/beside", root=root, video_backend=backend)
    return [dataset[i] for i in INDICES]


def frames(item, camera):
    value = item[camera]
    array = value.numpy()
    return array.astype(np.float32) / 255.0 if array.dtype == np.uint8 else array


if order == "feedbench-first":
    cameras, ours = feedbench_items()
    torchcodec, pyav = lerobot_items("torchcodec"), lerobot_items("pyav")
elif order == "decoders-first":
    torchcodec, pyav = lerobot_items("torchcodec"), lerobot_items("pyav")
    cameras, ours = feedbench_items()
else:
    sys.exit(f"beside-decoders: order {order!r}: expected feedbench-first or decoders-first")
for index, mine, tc, av in zip(INDICES, ours, torchcodec, pyav):
    for camera in cameras:
        a, b, c = frames(mine, camera), frames(tc, camera), frames(av, camera)
        if a.shape != b.shape or not np.array_equal(a, b):
            sys.exit(f"beside-decoders ({order}): item {index}, {camera}: feedbench's frames "
                     "differ from torchcodec's")
        difference = float(np.abs(a - c).mean()) * 255.0
        if a.shape != c.shape or difference > 2.0:
            sys.exit(f"beside-decoders ({order}): item {index}, {camera}: PyAV's frames differ by "
                     f"{difference:.2f} levels on average")
print(f"beside-decoders ({order}): items {INDICES} of {root.name}, feedbench's frames equal "
      "torchcodec's and PyAV's, both decoders loaded in the same process")
