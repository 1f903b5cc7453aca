"""`feedbench-lerobot-train` (or `python -m feedbench.lerobot_train`): lerobot-train with its
dataset read by feedbench's reader.

    feedbench-lerobot-train --dataset.repo_id=me/pick --dataset.root=/data/pick --policy.type=diffusion ...

Every argument is lerobot-train's, and LeRobot's own `main()` runs: its parser, policy,
processors, optimizer, sampler, DataLoader, accelerate and logging. One name changes: the
dataset LeRobot's factory builds (`make_dataset`, `make_train_eval_datasets`) is a
`feedbench.lerobot.FeedbenchDataset` made with the same arguments, whose items equal
LeRobotDataset's, and which hands the DataLoader whole batches it collated itself (the batch
PyTorch's collate would make of the items, without the copy). Refused, with one line and exit status 2, rather than training on something
else: no LeRobot in this environment, a LeRobot outside the versions this was checked against,
a streaming dataset (`--dataset.streaming=true`: LeRobot's streaming reader would run), and a
dataset the reader does not read (named by the reader).
"""

import importlib.metadata
import re
import sys

# The LeRobot versions whose factory and lerobot-train this was checked against.
OLDEST, NEWEST = (0, 4, 4), (0, 6, 1)


class Refusal(Exception):
    """A run refused before it trains: the message says why and what to do."""


def lerobot_version():
    """LeRobot's version in this environment, as a tuple; refused where absent or unsupported."""
    try:
        text = importlib.metadata.version("lerobot")
    except importlib.metadata.PackageNotFoundError:
        raise Refusal(f"LeRobot is not installed for {sys.executable}: install lerobot "
                      f"{'.'.join(map(str, OLDEST))} to {'.'.join(map(str, NEWEST))} beside feedbench")
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    version = tuple(int(part) for part in found.groups()) if found else None
    if version is None or not OLDEST <= version <= NEWEST:
        raise Refusal(f"LeRobot {text} is installed; feedbench-lerobot-train supports LeRobot "
                      f"{'.'.join(map(str, OLDEST))} to {'.'.join(map(str, NEWEST))}, whose "
                      f"lerobot-train it was checked against")
    return version


def streaming_refused(*args, **kwargs):
    """Stands in for LeRobot's StreamingLeRobotDataset, which feedbench's reader does not replace."""
    raise Refusal("--dataset.streaming=true: a streaming dataset is read by LeRobot's streaming "
                  "reader, not feedbench's; run lerobot-train itself for it, or drop the flag")


def use_feedbench_reader():
    """Makes LeRobot's dataset factory build FeedbenchDataset where it builds LeRobotDataset."""
    import functools

    import lerobot.datasets.factory as factory

    from feedbench.lerobot import FeedbenchDataset

    factory.LeRobotDataset = functools.partial(FeedbenchDataset, collated_batches=True)
    if hasattr(factory, "StreamingLeRobotDataset"):
        factory.StreamingLeRobotDataset = streaming_refused


def main():
    """Runs LeRobot's lerobot-train (its `main()`, with this process's arguments) with
    feedbench's reader; refusals exit 2."""
    from feedbench.lerobot import ReaderError

    try:
        lerobot_version()
        use_feedbench_reader()
        from lerobot.scripts.lerobot_train import main as lerobot_train

        lerobot_train()
    except (Refusal, ReaderError) as refusal:
        print(f"feedbench-lerobot-train: {refusal}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
