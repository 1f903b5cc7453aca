"""What FeedbenchDataset reads, written to a file in one environment and compared with another's:
the reader wheel beside the oldest torch and NumPy it declares against the same wheel beside
LeRobot's torch (where tests/feedbench_dataset/check.py has found its items equal LeRobot's).
Needs no LeRobot: the requests are check.py's (check_requests.py), from the dataset's info.json.

    batches_file.py write OUT ROOT...   for each dataset, check.py's three requests (a diffusion-
                                        like window in uint8, no window in float32, the last two
                                        episodes with a window per modality): items at evenly spread
                                        indices, and the first 6 batches of 8 of a DataLoader in
                                        a fixed shuffled order with 0 and 2 spawned workers, the items
                                        collated by PyTorch and by the reader; every key's value
                                        as an array, in the items' key order, into OUT (.npz)
    batches_file.py compare A B         A and B hold the same entries in the same order, each of
                                        the same dtype, shape and bytes
"""

import random
import sys
from pathlib import Path

import numpy as np
import torch

from feedbench.lerobot import FeedbenchDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "feedbench_dataset"))
from check_requests import requests  # noqa: E402  (check.py's requests, which need no LeRobot)


def fail(message):
    sys.exit(f"batches_file: {message}")


def as_array(value):
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, str):
        return np.array([value])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return np.array(value)
    fail(f"a value of type {type(value).__name__}")


def write(out, roots):
    entries = {}

    def add(what, item):
        for key, value in item.items():
            entries[f"{what} | {key}"] = as_array(value)

    for root in roots:
        for name, kwargs in requests(root):
            dataset = FeedbenchDataset("local/check", root=root, **kwargs)
            count = len(dataset)
            for index in sorted(set(np.linspace(0, count - 1, 12).round().astype(int).tolist())):
                add(f"{root.name} | {name} | item {index}", dataset[index])
            order = list(range(count))
            random.Random(7).shuffle(order)  # the same order in every Python 3
            for workers in (0, 2):
                for collated in (False, True):
                    dataset = FeedbenchDataset("local/check", root=root, collated_batches=collated,
                                               **kwargs)
                    extra = {"multiprocessing_context": "spawn"} if workers else {}
                    loader = torch.utils.data.DataLoader(dataset, batch_size=8, sampler=order,
                                                         num_workers=workers, **extra)
                    for step, batch in zip(range(6), loader):
                        add(f"{root.name} | {name} | {workers} workers"
                            f"{', collated' if collated else ''} | batch {step}", batch)
    names = list(entries)
    np.savez(out, __order__=np.array(names), **{f"e{i}": entries[n] for i, n in enumerate(names)})
    print(f"batches_file: {len(names)} entries of {len(roots)} datasets beside torch "
          f"{torch.__version__}, numpy {np.__version__}")


def compare(a, b):
    first, second = np.load(a), np.load(b)
    names, other = first["__order__"].tolist(), second["__order__"].tolist()
    if names != other:
        missing = sorted(set(names) ^ set(other))[:3]
        fail(f"{a} and {b} hold different entries or orders (e.g. {missing or names[:3]})")
    for i, name in enumerate(names):
        x, y = first[f"e{i}"], second[f"e{i}"]
        if x.dtype != y.dtype or x.shape != y.shape:
            fail(f"{name}: {x.dtype}{list(x.shape)} against {y.dtype}{list(y.shape)}")
        if x.tobytes() != y.tobytes():
            fail(f"{name}: values differ")
    print(f"batches_file: {len(names)} entries equal")


def main():
    if sys.argv[1:2] == ["write"] and len(sys.argv) >= 4:
        write(sys.argv[2], [Path(root) for root in sys.argv[3:]])
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
