#!/usr/bin/env python3
"""A plain loop over the DataLoader a lerobot-train run builds for the given arguments, with
nothing measuring it but the clock: `--warmup` batches, then `--batches` timed ones, as
lerobot-train takes them (cycling its loader). With `--step-ms MS`, each batch is handed over as
lerobot-train's main process hands it over (uint8 cameras to float32, the policy's
pre-processor) and a step of MS ms follows. Prints one JSON object: samples/s, and CPU ms per
sample of the main process and its workers over the timed batches (as feedbench counts them),
and of the main process alone.

The DataLoader is built by feedbench's driver (src/loader/lerobot/feedbench_driver/train_run.py) and prepared by the
run's accelerator as lerobot-train's loop takes it, which
tests/lerobot_train.rs holds equal to lerobot-train's own (its arguments and first batches);
scripts/lerobot-parity.sh runs this loop interleaved with `feedbench load/train --lerobot-train`
to show that the harness does not slow the run it measures.

usage: lerobot_train_loop.py [--batches N] [--warmup N] [--step-ms MS] -- LEROBOT_TRAIN_ARGS...
"""

import argparse
import json
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--step-ms", type=float)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = [a for a in options.args if a != "--"]
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src", "loader", "lerobot"))
    from feedbench_driver.readings import cpu_s
    from feedbench_driver.train_run import Run

    # The DataLoader as lerobot-train's loop takes it: prepared by the run's accelerator.
    # A RunReads, as feedbench sends one: the arguments' own knobs, LeRobot's reader, one rank.
    request = {"lerobot_train": args, "overrides": {}, "reader": "lerobot", "ranks": 1}
    run = Run(request)
    loader, _ = run.loader(request)
    training = run.step() if options.step_ms is not None else None
    source = run.prepare(loader)

    def batches():
        while True:
            yield from source

    stream = batches()
    samples = 0
    for number in range(options.warmup + options.batches):
        if number == options.warmup:
            start, samples, cpu0 = time.perf_counter(), 0, cpu_s()
        batch = next(stream)
        samples += len(batch["index"])
        if training is not None:
            training.hand_over(batch)
            time.sleep(options.step_ms / 1e3)
    wall_s, cpu1 = time.perf_counter() - start, cpu_s()
    main_ms, workers_ms = ((after - before) * 1e3 for after, before in zip(cpu1, cpu0))
    print(json.dumps({"samples_per_s": samples / wall_s,
                      "cpu_ms_per_sample": (main_ms + workers_ms) / samples,
                      "main_cpu_ms_per_sample": main_ms / samples}))


if __name__ == "__main__":
    main()
