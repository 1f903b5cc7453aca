"""FeedbenchDataset's frame cache in lerobot-train's own loop: runs feedbench-lerobot-train
(LeRobot's `main()`, feedbench's reader) with the arguments given, times each batch its training
loop takes from `cycle(dataloader)` (what lerobot-train's `data_s` times), and stops the run
after EPOCHS epochs of the DataLoader. Prints a line per epoch: its batches, data ms per batch
(mean and median) and how many times faster than the first it was, and of that the reader's
own ms per batch (FeedbenchDataset.__getitems__ in this process: 0 workers; the rest is
LeRobot's sampler, the DataLoader and accelerate); then what the frame cache held.

    cache_epochs.py EPOCHS -- LEROBOT_TRAIN_ARGS...   (with feedbench importable)

Add --feedbench.cache=SIZE to the arguments for the cache.
"""

import statistics
import sys
import time


class Enough(Exception):
    """The epochs asked for are taken: the run stops here."""


def main():
    epochs = int(sys.argv[1])
    if sys.argv[2] != "--":
        sys.exit(__doc__)
    import lerobot.scripts.lerobot_train as train

    from feedbench import lerobot_train
    from feedbench.lerobot import FeedbenchDataset

    times, per_epoch, reader = [], [], []
    getitems = FeedbenchDataset.__getitems__

    def timed_getitems(dataset, indices):
        start = time.perf_counter()
        items = getitems(dataset, indices)
        reader.append(time.perf_counter() - start)
        return items

    FeedbenchDataset.__getitems__ = timed_getitems
    original = train.cycle

    def timed_cycle(iterable):
        per_epoch.append(len(iterable))  # one epoch's batches (the chained loader's too)
        batches = original(iterable)
        while len(times) < epochs * per_epoch[0]:
            start = time.perf_counter()
            batch = next(batches)
            times.append(time.perf_counter() - start)
            yield batch
        raise Enough

    train.cycle = timed_cycle
    sys.argv = ["feedbench-lerobot-train", *sys.argv[3:], "--steps=1000000",
                "--save_checkpoint=false", "--log_freq=1000000"]
    try:
        lerobot_train.main()
    except (Enough, RuntimeError) as stopped:
        # A generator that raises hands its caller a RuntimeError (PEP 479).
        if not isinstance(stopped, Enough) and not isinstance(stopped.__cause__, Enough):
            raise
    n = per_epoch[0]
    first = None
    for epoch in range(epochs):
        taken = times[epoch * n:(epoch + 1) * n]
        ms = 1000 * sum(taken) / len(taken)
        median = 1000 * statistics.median(taken)
        # The reader's calls of the epoch (accelerate fetches one batch ahead: off by one at its edges).
        own = reader[epoch * n:(epoch + 1) * n]
        own_ms = 1000 * sum(own) / len(own) if own else float("nan")
        first = first or (ms, median, own_ms)
        print(f"  epoch {epoch + 1}: {len(taken)} batches, {ms:.2f} data ms per batch "
              f"({first[0] / ms:.2f}x the first), median {median:.2f} "
              f"({first[1] / median:.2f}x); the reader's own {own_ms:.2f} "
              f"({first[2] / own_ms:.2f}x)")
    summary = lerobot_train.cache_summary()
    if summary:
        print(f"  {summary}")


if __name__ == "__main__":
    main()
