"""Checks feedbench-lerobot-train's epoch chain (feedbench.lerobot_train.EpochChain) against
LeRobot's own sampling in the LeRobot venv. Exits 0 with one line per check, else names what
differs.

    epochs.py     for LeRobot's EpisodeAwareSampler under PyTorch's BatchSampler, as
                  lerobot-train builds them — shuffled or not, an episode subset with
                  absolute-to-relative indices, frames dropped at both ends, a resumed sampler
                  state, a last short batch kept or dropped — the chain's batches over four
                  epochs equal the batch sampler's epoch after epoch, the sampler's state after
                  them is the same, and each epoch was drawn at once (not index by index); a
                  sampler of another class is iterated as it is
"""

import itertools

from torch.utils.data import BatchSampler

from feedbench.lerobot_train import EpochChain, episode_aware_order
from lerobot.datasets.sampler import EpisodeAwareSampler

EPOCHS = 4

# Five episodes of unequal length, as lerobot-train passes their bounds.
FROM = [0, 30, 41, 90, 97]
TO = [30, 41, 90, 97, 140]


def sampler(case):
    """A fresh EpisodeAwareSampler for `case` (state restored where it has one)."""
    made = EpisodeAwareSampler(FROM, TO, **case.get("sampler", {}))
    if "state" in case:
        made.load_state_dict(case["state"])
    return made


def theirs(case):
    """The batches and final state of the batch sampler, epoch by epoch (lerobot-train's
    `cycle` asks the DataLoader for a new iterator at each)."""
    made = sampler(case)
    batches = BatchSampler(made, case["batch"], case["drop_last"])
    taken = [list(batch) for _ in range(EPOCHS) for batch in batches]
    return taken, made.state_dict()


def ours(case, count):
    """The first `count` batches of the chain over the same batch sampler, and the state."""
    made = sampler(case)
    chain = EpochChain(BatchSampler(made, case["batch"], case["drop_last"]))
    taken = [list(batch) for batch in itertools.islice(chain, count)]
    return taken, made.state_dict()


CASES = {
    "shuffled": {"sampler": {"shuffle": True, "seed": 1000, "drop_n_last_frames": 7},
                 "batch": 8, "drop_last": False},
    "in order": {"sampler": {"drop_n_first_frames": 2, "drop_n_last_frames": 3},
                 "batch": 7, "drop_last": False},
    "an episode subset, relative indices": {
        "sampler": {"episode_indices_to_use": [0, 2, 4], "shuffle": True, "seed": 7,
                    "drop_n_last_frames": 1,
                    "absolute_to_relative_idx": {a: r for r, a in enumerate(
                        [*range(0, 30), *range(41, 90), *range(97, 140)])}},
        "batch": 16, "drop_last": True},
    "resumed mid-epoch": {"sampler": {"shuffle": True, "seed": 3}, "state":
                          {"epoch": 2, "start_index": 37}, "batch": 9, "drop_last": False},
}


def main():
    for name, case in CASES.items():
        expected, expected_state = theirs(case)
        probe = sampler(case)
        if episode_aware_order(probe) is None:
            raise SystemExit(f"{name}: the chain would iterate LeRobot's sampler index by index")
        got, state = ours(case, len(expected))
        for n, (a, b) in enumerate(zip(got, expected)):
            if a != b:
                raise SystemExit(f"{name}: batch {n} is {a}, lerobot-train's {b}")
        if len(got) != len(expected) or state != expected_state:
            raise SystemExit(f"{name}: {len(got)} batches, state {state}; lerobot-train "
                             f"{len(expected)}, {expected_state}")
        print(f"check: {name}: {len(got)} batches over {EPOCHS} epochs equal lerobot-train's")

    class Subsampler(EpisodeAwareSampler):
        def __iter__(self):
            return iter(sorted(super().__iter__(), reverse=True))

    other = Subsampler(FROM, TO)
    if episode_aware_order(other) is not None:
        raise SystemExit("a sampler of another class was drawn as LeRobot's")
    chain = EpochChain(BatchSampler(Subsampler(FROM, TO), 50, False))
    first = next(iter(chain))
    if first != list(range(139, 89, -1)):
        raise SystemExit(f"another class's sampler: first batch {first}")
    print("check: a sampler of another class is iterated as it is")


if __name__ == "__main__":
    main()
