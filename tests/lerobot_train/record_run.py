"""Runs the real `lerobot-train` (LeRobot's own `main()`) with the arguments given, and records
what it builds: the arguments its LeRobotDataset, EpisodeAwareSampler and DataLoader are
constructed with (by feedbench's Recorder, the one feedbench records its own build with), and
the first COUNT batches its training loop takes from the DataLoader, as .npy files (by
feedbench's save_batch), and torch's backend settings it made (`backend`). It trains COUNT
steps.

With --feedbench-reader first among the arguments, the run is feedbench-lerobot-train's
(feedbench.lerobot_train.main, importable from PYTHONPATH) and built.json also counts the
FeedbenchDatasets it made (`feedbench_datasets`).

usage: record_run.py OUT COUNT DRIVER_DIR [--feedbench-reader] LEROBOT_TRAIN_ARGS...
"""

import json
import os
import sys


def main():
    out, count, modules = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    args = sys.argv[4:]
    feedbench_reader = args[:1] == ["--feedbench-reader"]
    if feedbench_reader:
        args = args[1:]
    sys.path.append(modules)  # the driver package (feedbench_driver), after PYTHONPATH
    from feedbench_driver.plain import save_batch
    from feedbench_driver.run_config import backend_settings
    from feedbench_driver.train_run import Recorder

    import lerobot.scripts.lerobot_train as lerobot_train

    taken = []
    cycle = lerobot_train.cycle

    def recording_cycle(iterable):
        for batch in cycle(iterable):
            if len(taken) < count:
                save_batch(batch, os.path.join(out, f"batch-{len(taken)}"))
                taken.append(True)
            yield batch

    lerobot_train.cycle = recording_cycle
    run, made = lerobot_train.main, []
    if feedbench_reader:
        from feedbench.lerobot import FeedbenchDataset
        from feedbench.lerobot_train import main as run

        original = FeedbenchDataset.__init__

        def counting(dataset, *args, **kwargs):
            made.append(True)
            original(dataset, *args, **kwargs)

        FeedbenchDataset.__init__ = counting
    sys.argv = ["feedbench-lerobot-train" if feedbench_reader else "lerobot-train", *args,
                f"--steps={count}"]
    with Recorder() as recorded:
        run()
    recorded.calls["backend"] = backend_settings()  # as the run left torch's settings
    if feedbench_reader:
        recorded.calls["feedbench_datasets"] = len(made)
    with open(os.path.join(out, "built.json"), "w") as f:
        json.dump(recorded.calls, f)
    print(f"recorded {len(taken)} batches of lerobot-train's run")


if __name__ == "__main__":
    main()
