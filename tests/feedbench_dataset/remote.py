"""FeedbenchDataset of a URL root (a bucket of a real S3 server, a real web server) against
LeRobot's LeRobotDataset of the local copy, in the LeRobot venv. Exits 0 with one line per
check, else names what differs.

    remote.py URL LOCAL OPTIONS_JSON     at every request of check_requests (windows, no window,
                                         a window per modality) the items at the first frames
                                         (pads before), the last frame of the first episode and
                                         of the file (pads after) and between equal LeRobot's;
                                         a DataLoader of 2 spawned workers gives LeRobot's first
                                         batches; the metadata copy is made once and kept
"""

import json
import os
import sys
from pathlib import Path

import torch

from check import fail, same_value
from check_requests import requests
from feedbench import _native
from feedbench.lerobot import FeedbenchDataset
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def metadata_files(cache):
    """Each file of the metadata copies under `cache`, with when it was last written."""
    return {path: path.stat().st_mtime_ns for path in sorted(Path(cache).glob("meta/*/**/*"))
            if path.is_file()}


def main():
    url, local, options = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    for name, kwargs in requests(local):
        ours = FeedbenchDataset("local/remote", root=url, storage_options=options, **kwargs)
        theirs = LeRobotDataset("local/remote", root=local, **kwargs)
        if len(ours) != len(theirs):
            fail(f"{name}: {len(ours)} items against LeRobot's {len(theirs)}")
        # The last frame of the first episode read: its pads after, then the next episode's.
        episodes = theirs.meta.episodes
        selected = [row for row in range(len(episodes["episode_index"]))
                    if theirs.episodes is None or int(episodes["episode_index"][row]) in theirs.episodes]
        first_length = int(episodes["length"][selected[0]])
        positions = sorted({0, 1, first_length - 1, first_length, len(theirs) // 2, len(theirs) - 1})
        for position in positions:
            same_value(f"{name}, item {position} of {url}:", ours[position], theirs[position])
        print(f"check: {name}: {len(positions)} items of {url} equal LeRobot's of its local copy")

    ours = FeedbenchDataset("local/remote", root=url, storage_options=options)
    theirs = LeRobotDataset("local/remote", root=local)
    loaders = [torch.utils.data.DataLoader(d, batch_size=4, num_workers=2, multiprocessing_context="spawn")
               for d in (ours, theirs)]
    for step, (batch, expected) in enumerate(zip(*loaders)):
        same_value(f"batch {step} of 2 spawned workers:", batch, expected)
        if step == 2:
            break
    print(f"check: 3 batches of 2 spawned workers reading {url} equal LeRobot's")

    # requests_in_flight as tune answers it: the same items, the process's reads counted (the
    # bytes received cover the bytes needed), a value outside the knob's range refused by name.
    before = _native.remote_reads()
    one = FeedbenchDataset("local/remote", root=url, storage_options=options, requests_in_flight=1,
                           delta_timestamps=theirs.delta_timestamps, self_check=False)
    for position in (0, len(one) - 1):
        same_value(f"item {position} with one request in flight:", one[position], theirs[position])
    after = _native.remote_reads()
    if before is None or after is None or not after["requests"] > before["requests"]:
        fail(f"remote_reads did not count the reads: {before} then {after}")
    needed = after["needed_bytes"] - before["needed_bytes"]
    if not 0 < needed <= after["bytes"] - before["bytes"]:
        fail(f"remote_reads: {needed} bytes needed of {after['bytes'] - before['bytes']} received")
    for wrong in (0, 65, True, 2.0):
        try:
            FeedbenchDataset("local/remote", root=url, storage_options=options,
                             requests_in_flight=wrong, self_check=False)
            fail(f"requests_in_flight={wrong!r} was taken")
        except ValueError as error:
            if "requests_in_flight" not in str(error):
                fail(f"requests_in_flight={wrong!r}: {error}")
    print(f"check: requests_in_flight=1 reads the same items, remote_reads counts them "
          f"({needed} bytes needed), 0, 65, True and 2.0 are refused by name")

    cache = os.environ["FEEDBENCH_CACHE_DIR"]
    before = metadata_files(cache)
    FeedbenchDataset("local/remote", root=url, storage_options=options)
    if not before or metadata_files(cache) != before:
        fail(f"the metadata copy under {cache} was written again: {before}")
    print(f"check: the metadata copy ({len(before)} files) is kept while the store's versions hold")


if __name__ == "__main__":
    main()
