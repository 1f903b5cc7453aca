"""`feedbench-lerobot-train` (or `python -m feedbench.lerobot_train`): lerobot-train with its
dataset read by feedbench's reader.

    feedbench-lerobot-train --dataset.repo_id=me/pick --dataset.root=/data/pick --policy.type=diffusion ...

Every argument is lerobot-train's, and LeRobot's own `main()` runs: its parser, policy,
processors, optimizer, sampler, DataLoader, accelerate and logging. One name changes: the
dataset LeRobot's factory builds (`make_dataset`, `make_train_eval_datasets`) is a
`feedbench.lerobot.FeedbenchDataset` made with the same arguments, whose items equal
LeRobotDataset's, and which hands the DataLoader whole batches it collated itself (the batch
PyTorch's collate would make of the items, without the copy). One argument is feedbench's:
`--feedbench.cache=SIZE` (`2GB`, `512MiB`) keeps the decoded camera frames in shared memory
for every DataLoader worker (FeedbenchDataset's `cache_bytes`), so that epochs after the first
copy the frames that fit instead of decoding them; what it held is said at the end.
`--dataset.root` may be a URL (`s3://BUCKET/PREFIX`, `gs://…`, `http(s)://…`,
`hf://datasets/OWNER/NAME`), read in place (docs/remote.md), with the store's settings from the
environment (`AWS_*`, `HF_TOKEN`) and `--feedbench.storage_option=KEY=VALUE` (repeatable). Before it
trains, the dataset checks a few of its items against the installed LeRobot's own
(`feedbench.self_check`: episode edges, data file starts, with the run's windows) and refuses on
a difference; `--feedbench.self_check=false` skips that, for the LeRobots it was checked
against only. Refused, with one line and exit status 2, rather than training on something
else: no LeRobot in this environment, a LeRobot older than any this was checked against (a
newer one runs where the self-check passes, said in a warning), a streaming dataset
(`--dataset.streaming=true`: LeRobot's streaming reader would run), items that differ from
LeRobot's, and a dataset the reader does not read (named by the reader). A DataLoader worker
killed mid-run ends it with PyTorch's one line and exit status 1.
"""

import sys

# The oldest LeRobot whose factory and lerobot-train this was checked against (the newest is
# feedbench._installed's NEWEST_CHECKED; a newer one runs where the self-check passes).
OLDEST = (0, 4, 4)


def dotted(version):
    """A version tuple as people write it: 0.6.2."""
    return ".".join(map(str, version))


class Refusal(Exception):
    """A run refused before it trains: the message says why and what to do."""


def lerobot_version():
    """LeRobot's version in this environment, as a tuple; refused where absent or unsupported."""
    from feedbench._installed import NEWEST_CHECKED, installed_lerobot

    installed = installed_lerobot()
    if installed is None:
        raise Refusal(f"LeRobot is not installed for {sys.executable}: install lerobot "
                      f"{dotted(OLDEST)} or later (checked to {dotted(NEWEST_CHECKED)}) beside "
                      f"feedbench")
    text, version = installed
    if version < OLDEST:
        raise Refusal(f"LeRobot {text} is installed; feedbench-lerobot-train supports LeRobot "
                      f"{dotted(OLDEST)} and later, whose lerobot-train it was checked against "
                      f"to {dotted(NEWEST_CHECKED)}")
    return version


SELF_CHECK_FLAG = "--feedbench.self_check"


def self_check_flag(args, version):
    """`--feedbench.self_check=false|true` taken out of `args`: whether the dataset checks its
    items against LeRobot's first (true where absent). Off is refused for a LeRobot newer than
    any this was checked against (`version`): only the check stands between it and items that
    differ."""
    for i, arg in enumerate(args):
        if arg.split("=", 1)[0] != SELF_CHECK_FLAG:
            continue
        value = arg.split("=", 1)[1] if "=" in arg else None
        if value not in ("true", "false"):
            raise Refusal(f"{SELF_CHECK_FLAG}: expected {SELF_CHECK_FLAG}=false or =true")
        del args[i]
        from feedbench._installed import NEWEST_CHECKED

        if value == "false" and version > NEWEST_CHECKED:
            raise Refusal(f"{SELF_CHECK_FLAG}=false: LeRobot {dotted(version)} is newer than any "
                          f"feedbench was checked against ({dotted(NEWEST_CHECKED)}); the "
                          f"self-check is what stands for that: leave it on")
        return value == "true"
    return True


def streaming_refused(*args, **kwargs):
    """Stands in for LeRobot's StreamingLeRobotDataset, which feedbench's reader does not replace."""
    raise Refusal("--dataset.streaming=true: a streaming dataset is read by LeRobot's streaming "
                  "reader, not feedbench's; run lerobot-train itself for it, or drop the flag")


class EpochChain:
    """A DataLoader's batch sampler taken epoch after epoch without end: the batches of each
    epoch exactly as the batch sampler gives them (its last, short batch included), the next
    epoch's drawn from the sampler as soon as this one's are all handed out. The DataLoader then
    never drains at an epoch boundary: its workers decode the next epoch's first batches while
    the training loop takes this one's last. Its length is one epoch's, as the DataLoader's
    length was; `sampler` is the batch sampler's, where accelerate sets the epoch."""

    def __init__(self, batch_sampler):
        self.batch_sampler = batch_sampler
        self.sampler = batch_sampler.sampler
        self.batch_size, self.drop_last = batch_sampler.batch_size, batch_sampler.drop_last

    def __iter__(self):
        while True:
            empty = True
            for batch in self._epoch():
                empty = False
                yield batch
            if empty:  # an epoch without a batch would loop here for ever
                return

    def _epoch(self):
        """The next epoch's batches: PyTorch's BatchSampler over the whole epoch's indices where
        the sampler draws them at once ([`episode_aware_order`]), else the batch sampler's."""
        import torch

        order = episode_aware_order(self.sampler)
        if order is None:
            return self.batch_sampler
        return torch.utils.data.BatchSampler(order, self.batch_size, self.drop_last)

    def __len__(self):
        return len(self.batch_sampler)


def episode_aware_order(sampler):
    """The indices LeRobot's EpisodeAwareSampler gives for its next epoch, drawn at once rather
    than one by one (a tensor index and a searchsorted each, ~2–6 µs: a third of a cached batch
    of 64's wait): the sampler advances its epoch as its own iteration does, the epoch's
    permutation comes from the sampler's generator for it, and positions become frames with one
    searchsorted over its episode bounds. None where the sampler is not one whose state this
    knows (another class, or a LeRobot whose sampler keeps other state): it is then iterated."""
    import numpy as np
    import torch
    from lerobot.datasets.sampler import EpisodeAwareSampler

    state = ("_epoch", "_start_index", "_num_frames", "_cum_lengths", "_starts",
             "_absolute_to_relative", "_epoch_generator", "shuffle")
    if type(sampler) is not EpisodeAwareSampler or not all(hasattr(sampler, a) for a in state):
        return None
    epoch, start, frames = sampler._epoch, sampler._start_index, sampler._num_frames
    iter(sampler)  # the sampler's own step to its next epoch; its lazy iterator is not run
    if sampler.shuffle:
        order = torch.randperm(frames, generator=sampler._epoch_generator(epoch))
        positions = order.numpy()[start:]
    else:
        positions = np.arange(start, frames, dtype=np.int64)
    ends = np.asarray(sampler._cum_lengths, dtype=np.int64)
    episodes = np.searchsorted(ends, positions, side="right")
    firsts = np.concatenate(([0], ends[:-1]))
    frames_at = (np.asarray(sampler._starts, dtype=np.int64)[episodes] + positions
                 - firsts[episodes]).tolist()
    relative = sampler._absolute_to_relative
    return frames_at if relative is None else [relative[index] for index in frames_at]


def chain_epochs(loader):
    """Makes `loader` (PyTorch's DataLoader, or accelerate's around one) take its epochs back to
    back ([`EpochChain`]) where it batches an EpisodeAwareSampler's indices in one process, as
    lerobot-train's does; any other loader is left as it is (accelerate's shards for several
    processes pad each epoch's end, which a chain would change). Whether it did."""
    import torch
    from lerobot.datasets.sampler import EpisodeAwareSampler

    base = getattr(loader, "base_dataloader", loader)
    batches = getattr(base, "batch_sampler", None)
    if batches is None or type(batches) is not torch.utils.data.BatchSampler:
        return isinstance(batches, EpochChain)
    if not isinstance(batches.sampler, EpisodeAwareSampler):
        return False
    # PyTorch refuses to set a DataLoader's batch sampler once it is built; its iterators read
    # it when they start, as they would read the one it was built with.
    object.__setattr__(base, "batch_sampler", EpochChain(batches))
    return True


CACHE_FLAG = "--feedbench.cache"


def cache_flag(args):
    """`--feedbench.cache=SIZE` (or `--feedbench.cache SIZE`) taken out of `args` (LeRobot's
    parser would refuse it): the size as given, None where absent; refused where it has no
    value."""
    for i, arg in enumerate(args):
        if arg.startswith(CACHE_FLAG + "="):
            size, at, taken = arg.split("=", 1)[1], i, 1
        elif arg == CACHE_FLAG:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise Refusal(f"{CACHE_FLAG}: expected a size such as {CACHE_FLAG}=2GB")
            size, at, taken = args[i + 1], i, 2
        else:
            continue
        del args[at:at + taken]
        from feedbench import _native

        try:
            _native.size_bytes(size)
        except ValueError as error:
            raise Refusal(f"{CACHE_FLAG}={size}: {error}") from None
        return size
    return None


STORAGE_FLAG = "--feedbench.storage_option"


def storage_option_flags(args):
    """Each `--feedbench.storage_option=KEY=VALUE` taken out of `args` (LeRobot's parser would
    refuse it): the settings of the store a URL --dataset.root is read from (`endpoint`,
    `region`, `access_key_id`, …, over the AWS_* environment), put where this process's reader
    and its DataLoader workers, forked or spawned, find them (FEEDBENCH_STORAGE_OPTIONS)."""
    import json
    import os

    options = {}
    for arg in [a for a in args if a.startswith(STORAGE_FLAG + "=")]:
        key, equals, value = arg.split("=", 1)[1].partition("=")
        if not equals or not key.strip():
            raise Refusal(f"{arg}: expected {STORAGE_FLAG}=KEY=VALUE, e.g. "
                          f"{STORAGE_FLAG}=endpoint=http://127.0.0.1:9000")
        options[key.strip()] = value
        args.remove(arg)
    if options:
        os.environ["FEEDBENCH_STORAGE_OPTIONS"] = json.dumps(options)


# The datasets this run made (the cache's figures are said at the end).
MADE: list = []


def cache_summary():
    """One line on what each dataset's frame cache held and saved, or None without one."""
    lines = []
    for dataset in MADE:
        stats = dataset.cache_stats
        if stats is None or not stats["frames"]:
            continue
        line = (f"frame cache: {stats['frames']} frames held ({stats['bytes'] / 1e6:.1f} MB of "
                f"{stats['slots'] * stats['slot_bytes'] / 1e6:.1f} MB), {stats['copied']} copied "
                "instead of decoded")
        if stats["full"]:
            line += "; shared memory ran out (give the container more: docker run --shm-size)"
        elif stats["not_kept"]:
            line += (f"; {stats['not_kept']} decoded frames did not fit (a larger "
                     f"{CACHE_FLAG} holds them)")
        lines.append(line)
    return "\n".join(lines) or None


def use_feedbench_reader(cache=None, self_check=True):
    """Makes LeRobot's dataset factory build FeedbenchDataset where it builds LeRobotDataset
    (with a frame cache of `cache`, a size, where given), and lerobot-train's loop take its
    DataLoader's epochs back to back ([`chain_epochs`]: the same batches in the same order,
    without the stall at each epoch's start)."""
    import lerobot.datasets.factory as factory
    import lerobot.scripts.lerobot_train as train

    from feedbench.lerobot import FeedbenchDataset

    def feedbench_dataset(*args, **kwargs):
        if cache is not None:
            kwargs["cache_bytes"] = cache
        try:
            dataset = FeedbenchDataset(*args, collated_batches=True, self_check=self_check,
                                       **kwargs)
        except ValueError as error:
            if cache is None:
                raise
            raise Refusal(f"{CACHE_FLAG}={cache}: {error}") from None
        MADE.append(dataset)
        return dataset

    factory.LeRobotDataset = feedbench_dataset
    # LeRobot's metadata reads local files: a URL root's is read from feedbench's copy of it.
    metadata = factory.LeRobotDatasetMetadata
    if not getattr(metadata, "reads_urls", False):
        from feedbench import _native
        from feedbench.lerobot import is_url

        def url_metadata(repo_id, root=None, *args, **kwargs):
            if is_url(root):
                root = _native.local_metadata_of(root)
            return metadata(repo_id, root, *args, **kwargs)

        url_metadata.reads_urls = True  # type: ignore[attr-defined]
        factory.LeRobotDatasetMetadata = url_metadata
    if hasattr(factory, "StreamingLeRobotDataset"):
        factory.StreamingLeRobotDataset = streaming_refused
    if not getattr(train.cycle, "chains_epochs", False):
        cycle = train.cycle

        def chaining_cycle(iterable):
            chain_epochs(iterable)
            return cycle(iterable)

        chaining_cycle.chains_epochs = True  # type: ignore[attr-defined]
        train.cycle = chaining_cycle


def dataset_on_disk(args):
    """Refuses a --dataset.root that holds no dataset: LeRobot would try to download it and
    fail offline deep in a traceback; feedbench's reader reads what is on disk."""
    import os

    root = None
    for i, arg in enumerate(args):
        if arg.startswith("--dataset.root="):
            root = arg.split("=", 1)[1]
        elif arg == "--dataset.root" and i + 1 < len(args):
            root = args[i + 1]
    from feedbench.lerobot import is_url

    # A URL root is read in place; the reader says what it cannot read, naming the URL.
    if root is not None and not is_url(root) and not os.path.isfile(os.path.join(root, "meta", "info.json")):
        raise Refusal(f"--dataset.root={root} holds no meta/info.json: feedbench's reader reads "
                      "a LeRobot dataset on disk and downloads nothing; point --dataset.root at "
                      "the dataset's directory")


def one_line(error):
    """`error`'s own words. PyTorch re-raises a DataLoader worker's error in the main process
    as "Caught ReaderError in DataLoader worker process 0. Original Traceback (most recent call
    last): …": that is the worker's error, said last; at `--num_workers=0` the same fault says
    only that, so it is what is said at any worker count. `FEEDBENCH_TRACEBACK=1` keeps
    PyTorch's whole text."""
    import os

    text = str(error)
    if (os.environ.get("FEEDBENCH_TRACEBACK") == "1" or not text.startswith("Caught ")
            or "\nOriginal Traceback" not in text):
        return text
    lines = text.rstrip("\n").split("\n")
    for at in range(len(lines) - 1, 0, -1):
        name, colon, rest = lines[at].partition(": ")
        if colon and name.rsplit(".", 1)[-1] == type(error).__name__:
            return "\n".join([rest, *lines[at + 1:]])
    return lines[-1]


def say(line):
    """`line` on stderr on a line of its own: lerobot-train's progress bar is ended first (its
    monitor thread redraws it, with no newline, after 10 s without a step, as while spawned
    workers start on a loaded machine: the line would be appended to the bar's)."""
    tqdm = sys.modules.get("tqdm.std")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        bar.close()
    print(f"feedbench-lerobot-train: {line}", file=sys.stderr)


def leave(code):
    """Exits with `code` after the one line said: PyTorch's SIGCHLD handler, which reports a
    DataLoader worker's death while the loop waits for a batch, is put back to the default
    first, as the workers are ended on the way out (multiprocessing's exit joins them) and it
    would otherwise report that as a traceback."""
    import signal

    if hasattr(signal, "SIGCHLD"):
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sys.exit(code)


def main():
    """Runs LeRobot's lerobot-train (its `main()`, with this process's arguments) with
    feedbench's reader; refusals exit 2."""
    from feedbench.lerobot import ReaderError

    try:
        version = lerobot_version()
        cache = cache_flag(sys.argv)
        self_check = self_check_flag(sys.argv, version)
        storage_option_flags(sys.argv)
        dataset_on_disk(sys.argv[1:])
        try:
            use_feedbench_reader(cache, self_check)
            from lerobot.scripts.lerobot_train import main as lerobot_train
        except ImportError as error:
            raise Refusal(f"LeRobot {dotted(version)} is installed for {sys.executable}, but its "
                          f"lerobot-train does not import: {error}")

        lerobot_train()
        summary = cache_summary()
        if summary:
            say(summary)
    except (Refusal, ReaderError) as refusal:
        say(one_line(refusal))
        leave(2)
    except RuntimeError as error:
        # A DataLoader worker killed mid-run (the OOM killer's SIGKILL, say): PyTorch's words,
        # one line, rather than the traceback of the training loop that waited for it.
        if not str(error).startswith("DataLoader worker"):
            raise
        say(f"{error} (out of memory? fewer --num_workers or a smaller --batch_size need less)")
        leave(1)


if __name__ == "__main__":
    main()
