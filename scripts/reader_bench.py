#!/usr/bin/env python3
"""LeRobot's LeRobotDataset against feedbench's FeedbenchDataset in lerobot-train's data path,
side by side in one run (FeedbenchDataset twice: as the drop-in, its items collated by PyTorch,
and as feedbench-lerobot-train runs it, `collated`: whole batches collated by the reader): the DataLoader lerobot-train builds (EpisodeAwareSampler, shuffled,
seeded, the diffusion policy's window and drop_n_last_frames 7; uint8 camera frames; spawned,
persistent workers with prefetch 4; batch 64), its batches consumed as they come (as on a GPU
box, where the conversion to float32 runs on the device). For each worker count, the two
readers alternate for --rounds rounds; each round is a fresh DataLoader: --warmup batches, then
--batches timed ones. Per round: samples/s, and CPU ms per sample of the main process (every
thread: the DataLoader, the collate, the reader's own threads at 0 workers) and of the workers
(their user + system time from /proc over the timed batches); afterwards each worker's RSS.

With --native BINARY, feedbench's own loader (`BINARY load --uint8`, the same workers, batch,
episode-aware order and window) runs in each round as well: the reader without PyTorch's
DataLoader around it, for what the DataLoader costs.

Run it in an environment with LeRobot and feedbench's wheel (or PYTHONPATH at a package laid out
as the wheel's, see tests/feedbench_dataset.rs):

    python scripts/reader_bench.py DATASET [--workers 0 1 2] [--rounds 2] [--batches 12] [--native feedbench]

Prints one line per round and a JSON object per round on stdout with --json.

With --memory N, instead: one spawned worker per reader, N batches of --batch, and the worker's
RSS after 10, N/10, N/2 and N batches (what one worker holds as it goes on).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch


def worker_cpu_s(pids):
    """User + system seconds of these processes, from /proc/PID/stat."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def window(meta):
    fps = meta.fps
    deltas = {key: [-1 / fps, 0.0] for key in meta.features if key.startswith("observation.")}
    deltas["action"] = [i / fps for i in range(-1, 15)]
    return deltas


def loader(dataset, workers, batch, collate_fn=None):
    """lerobot-train's DataLoader of `dataset`: the episode-aware sampler, shuffled and seeded;
    spawned, persistent workers with prefetch 4; `collate_fn` where given."""
    from lerobot.datasets.sampler import EpisodeAwareSampler

    sampler = EpisodeAwareSampler(
        dataset.meta.episodes["dataset_from_index"], dataset.meta.episodes["dataset_to_index"],
        episode_indices_to_use=dataset.episodes, drop_n_last_frames=7, shuffle=True, seed=1000,
        absolute_to_relative_idx=dataset.absolute_to_relative_idx)
    extra = {}
    if workers:
        extra = {"multiprocessing_context": "spawn", "persistent_workers": True, "prefetch_factor": 4}
    return torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=sampler,
                                       num_workers=workers, drop_last=False,
                                       collate_fn=collate_fn, **extra)


def one_round(make_dataset, workers, options):
    dataset = make_dataset()
    iterator = iter(loader(dataset, workers, options.batch))
    for _ in range(options.warmup):
        next(iterator)
    pids = [worker.pid for worker in getattr(iterator, "_workers", [])]
    wall, main_cpu, workers_cpu = time.perf_counter(), time.process_time(), worker_cpu_s(pids)
    samples = 0
    for _ in range(options.batches):
        samples += len(next(iterator)["index"])
    wall = time.perf_counter() - wall
    main_cpu = time.process_time() - main_cpu
    workers_cpu = worker_cpu_s(pids) - workers_cpu
    rss = [rss_mb(pid) for pid in pids]
    del iterator
    return {
        "samples_per_s": samples / wall,
        "main_cpu_ms_per_sample": 1e3 * main_cpu / samples,
        "workers_cpu_ms_per_sample": 1e3 * workers_cpu / samples,
        "cpu_ms_per_sample": 1e3 * (main_cpu + workers_cpu) / samples,
        "worker_rss_mb": rss,
    }


def memory(readers, options):
    for name, make in readers.items():
        data = loader(make(), 1, options.batch)
        iterator = iter(data)
        pid = iterator._workers[0].pid
        marks = sorted({10, options.memory // 10, options.memory // 2, options.memory})
        seen = {}
        for number in range(1, options.memory + 1):
            try:
                next(iterator)
            except StopIteration:  # the next epoch, in the same persistent worker
                iterator = iter(data)
                next(iterator)
            if number in marks:
                seen[number] = rss_mb(pid)
        del iterator, data
        print(f"{name:>16}: one worker's RSS after " + ", ".join(
            f"{n} batches {mb:.0f} MB" for n, mb in seen.items()), file=sys.stderr)
        if options.json:
            print(json.dumps({"reader": name, "batch": options.batch, "worker_rss_mb": seen}), flush=True)


def native_round(binary, dataset, workers, options):
    """feedbench's own loader in lerobot-train's shape (uint8, batch, diffusion window)."""
    out = subprocess.run(
        [binary, "load", dataset, "--uint8", "--workers", str(workers), "--batch", str(options.batch),
         "--batches", str(options.batches), "--warmup", str(options.warmup), "--window", "diffusion",
         "--sampler", "episode-aware", "--json"], check=True, capture_output=True, text=True).stdout
    phase = json.loads(out)
    return {"samples_per_s": phase["samples_per_s"],
            "main_cpu_ms_per_sample": phase["process_cpu_ms_per_sample"],
            "workers_cpu_ms_per_sample": 0.0,
            "cpu_ms_per_sample": phase["process_cpu_ms_per_sample"],
            "worker_rss_mb": []}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--memory", type=int, metavar="N")
    parser.add_argument("--native", metavar="BINARY")
    options = parser.parse_args()

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from feedbench.lerobot import FeedbenchDataset

    meta = LeRobotDataset("local/bench", root=options.dataset).meta
    kwargs = {"root": options.dataset, "delta_timestamps": window(meta), "return_uint8": True}
    readers = {
        "LeRobotDataset": lambda: LeRobotDataset("local/bench", **kwargs),
        "FeedbenchDataset": lambda: FeedbenchDataset("local/bench", **kwargs),
        # feedbench-lerobot-train's: whole batches, collated by the reader.
        "collated": lambda: FeedbenchDataset("local/bench", collated_batches=True, **kwargs),
    }
    if options.memory:
        return memory(readers, options)
    print(f"reader-bench: {options.dataset}, batch {options.batch}, {options.batches} timed "
          f"batches after {options.warmup}, {len(os.sched_getaffinity(0))} cores", file=sys.stderr)
    rounds = dict(readers)
    if options.native:
        rounds["native loader"] = None
    for workers in options.workers:
        for round_number in range(options.rounds):
            for name, make in rounds.items():
                measured = (native_round(options.native, options.dataset, workers, options)
                            if make is None else one_round(make, workers, options))
                row = {"reader": name, "workers": workers, "round": round_number, **measured}
                print(f"{name:>16} {workers} workers round {round_number}: "
                      f"{row['samples_per_s']:7.1f} samples/s, CPU/sample {row['cpu_ms_per_sample']:.2f} ms "
                      f"(main {row['main_cpu_ms_per_sample']:.2f}, workers "
                      f"{row['workers_cpu_ms_per_sample']:.2f}), worker RSS "
                      f"{', '.join(f'{r:.0f}' for r in row['worker_rss_mb'])} MB", file=sys.stderr)
                if options.json:
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
