#!/usr/bin/env python3
"""A plain LeRobot loading loop, as a training script would write it and with nothing
measuring it but the clock: LeRobotDataset with the diffusion policy's delta_timestamps, a
torch DataLoader (shuffled with a seeded RandomSampler, persistent workers), `--warmup` batches,
then `--batches` timed ones, epoch after epoch. Prints one JSON object: samples/s.

scripts/lerobot-parity.sh runs it interleaved with `feedbench load --loader lerobot` on the same
data and knobs, to show that the harness does not slow the loader it measures.
"""

import argparse
import json
import os
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--uint8", action="store_true")
    args = parser.parse_args()

    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

    repo_id = "local/" + os.path.basename(os.path.normpath(args.root))
    meta = LeRobotDatasetMetadata(repo_id, root=args.root)
    step = 1.0 / meta.fps
    # The diffusion policy's window: observations at offsets [-1, 0], the action at [-1 … 14].
    deltas = {key: [-step, 0.0] for key in meta.features if key.startswith("observation.")}
    deltas["action"] = [i * step for i in range(-1, 15)]
    kwargs = {"repo_id": repo_id, "root": args.root, "delta_timestamps": deltas}
    if args.uint8:
        kwargs["return_uint8"] = True
    dataset = LeRobotDataset(**kwargs)
    generator = torch.Generator().manual_seed(args.seed)
    loader_kwargs = {"num_workers": args.workers}
    if args.workers > 0:
        loader_kwargs.update(prefetch_factor=args.prefetch, persistent_workers=True)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=args.batch,
        sampler=torch.utils.data.RandomSampler(dataset, generator=generator),
        **loader_kwargs,
    )
    stream = iter(loader)

    def next_batch():
        nonlocal stream
        try:
            return next(stream)
        except StopIteration:
            stream = iter(loader)
            return next(stream)

    for _ in range(args.warmup):
        next_batch()
    samples, started = 0, time.perf_counter()
    for _ in range(args.batches):
        batch = next_batch()
        samples += len(batch["index"])
    wall = time.perf_counter() - started
    print(json.dumps({"samples": samples, "wall_s": wall, "samples_per_s": samples / wall}))


if __name__ == "__main__":
    main()
