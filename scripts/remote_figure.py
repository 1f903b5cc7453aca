#!/usr/bin/env python3
"""FeedbenchDataset from a URL root against the same reader on the local copy, in lerobot-train's
DataLoader (scripts/reader_bench.py's: episode-aware, shuffled, seeded; the diffusion window;
uint8 frames; spawned, persistent workers, prefetch 4), local and URL alternated for --rounds
rounds, each a fresh DataLoader. Per round: the first batch's time from the DataLoader's making,
samples/s over --batches timed batches after --warmup, CPU ms per sample (this process and its
workers), and for the URL root what the workers asked of the store over the timed batches
(feedbench._native.remote_reads, returned by each worker beside its batches): requests, bytes,
read amplification (bytes received over the bytes the samples needed), time to first byte.
Run by scripts/remote-figure.sh, which sets up the store, the link and tune's answer.

    remote_figure.py LOCAL URL --workers W --requests-in-flight R [--batch 8] [--rounds 2]
"""

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reader_bench import loader, window, worker_cpu_s  # noqa: E402


def with_reads(items):
    """A batch collated as PyTorch collates it, with this worker's reads so far and its pid."""
    from torch.utils.data import default_collate

    from feedbench import _native

    return default_collate(items), os.getpid(), _native.remote_reads()


def one_round(make, options):
    """One fresh DataLoader: its first batch, then the timed batches and their reads."""
    started = time.perf_counter()
    dataset = make()
    iterator = iter(loader(dataset, options.workers, options.batch, collate_fn=with_reads))
    next(iterator)
    first_batch_s = time.perf_counter() - started
    for _ in range(options.warmup):
        next(iterator)
    pids = [worker.pid for worker in getattr(iterator, "_workers", [])]
    wall, main_cpu, workers_cpu = time.perf_counter(), time.process_time(), worker_cpu_s(pids)
    samples, start, end = 0, {}, {}
    for _ in range(options.batches):
        batch, pid, reads = next(iterator)
        samples += len(batch["index"])
        if reads is not None:
            start.setdefault(pid, reads)
            end[pid] = reads
    wall = time.perf_counter() - wall
    cpu = time.process_time() - main_cpu + worker_cpu_s(pids) - workers_cpu
    del iterator
    row = {"samples_per_s": samples / wall, "first_batch_s": first_batch_s,
           "cpu_ms_per_sample": 1e3 * cpu / samples}
    if end:
        delta = {key: sum(end[pid][key] - start[pid][key] for pid in end)
                 for key in ("requests", "retries", "bytes", "needed_bytes")}
        row.update(delta)
        row["amplification"] = delta["bytes"] / max(delta["needed_bytes"], 1)
        row["mb_per_s"] = delta["bytes"] / wall / 1e6
        row["first_byte_p50_ms"] = max(reads["first_byte_p50_ms"] for reads in end.values())
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("local")
    parser.add_argument("url")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--requests-in-flight", type=int, required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batches", type=int, default=60)
    options = parser.parse_args()
    # Tune may answer more workers than cores for a stream that waits on its store.
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from feedbench.lerobot import FeedbenchDataset

    deltas = window(LeRobotDataset("local/bench", root=options.local).meta)
    common = {"delta_timestamps": deltas, "return_uint8": True, "self_check": False}
    roots = {
        "local": lambda: FeedbenchDataset("local/bench", root=options.local, **common),
        "url": lambda: FeedbenchDataset("local/bench", root=options.url,
                                        requests_in_flight=options.requests_in_flight, **common),
    }
    print(f"remote-figure: {options.url} against {options.local}, {options.workers} workers, "
          f"{options.requests_in_flight} requests in flight, batch {options.batch}, "
          f"{options.batches} timed batches after {options.warmup}, "
          f"{len(os.sched_getaffinity(0))} cores", file=sys.stderr)
    for round_number in range(options.rounds):
        for name, make in roots.items():
            row = {"root": name, "round": round_number, **one_round(make, options)}
            said = (f"{name:>5} round {round_number}: {row['samples_per_s']:6.1f} samples/s, first "
                    f"batch {row['first_batch_s']:.2f} s, CPU/sample {row['cpu_ms_per_sample']:.2f} ms")
            if "amplification" in row:
                said += (f", {row['requests']} requests, {row['mb_per_s']:.1f} MB/s, amplification "
                         f"{row['amplification']:.3f}, first byte p50 {row['first_byte_p50_ms']:.0f} ms")
            print(said, file=sys.stderr)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
