"""How feedbench's LeRobot driver measures: CPU of its process and of its DataLoader workers,
their peak memory (read from what the kernel keeps anyway), the size of a batch, a loader's
batches taken epoch after epoch, and the one `load` loop over them (`measure`), whose loader
and step are given (`take`, `feed`): LeRobot's plain pair's (plain.py) or a lerobot-train
run's (train_requests.py)."""

import itertools
import os
import time
from typing import (
    Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, TypedDict, Union)

from feedbench_driver.policy_step import to_device
from feedbench_driver.startup import note_start, startup
from feedbench_driver.protocol import (
    ErrorKind, FixedStep, LoadRequest, LoadResult, PolicyStep, ReadyEvent, Refused,
    SamplerOrder, StepParts, alive, as_fixed, emit, say_step)


def compute_times_s(step: FixedStep) -> Iterator[float]:
    """A fixed step's compute, seconds, step after step without end: its `sequence_ms` in turn
    (a replayed step's), else `compute_ms` every step."""
    return itertools.cycle([ms / 1e3 for ms in step.get("sequence_ms") or [step["compute_ms"]]])


def child_pids(pid: str = "self") -> List[int]:
    """The processes this one started, and theirs, that are alive: its DataLoader's workers,
    also where a `forkserver` (itself a child) forks them."""
    pids: List[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids.extend(int(child) for child in f.read().split())
    except OSError:
        pass
    return [grand for child in pids for grand in [child, *child_pids(str(child))]]


def process_cpu_s(pid: int) -> float:
    """utime + stime of a live process, seconds; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_s() -> Tuple[float, float]:
    """CPU of this process, of its workers alive now, and of those it has reaped, seconds."""
    times = os.times()
    own = times.user + times.system
    reaped = times.children_user + times.children_system
    return own, reaped + sum(process_cpu_s(pid) for pid in child_pids())


def kilobytes_field(path: str, name: str) -> Optional[int]:
    """The `name:` line of a /proc file in kB, as bytes; None where absent."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rollup(pid: int) -> Tuple[Optional[int], int]:
    """(PSS, anonymous) bytes of a live process, from one read of its smaps_rollup; (None, 0)
    once it is gone."""
    fields: Dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("Pss", "Anonymous"):
                    fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return fields.get("Pss"), fields.get("Anonymous", 0)


class PeakMemory:
    """The memory of this process and its workers over a timed window, from what the kernel
    keeps anyway, so that measuring costs the loader nothing while it runs. `start` reads each
    process's PSS (shared pages counted once: forked workers share most of the main process)
    before the window and resets its high-water mark (VmHWM); `stop` reads each one's PSS again
    after it and how far its RSS rose above where it is now: the peak is their sum, the PSS at
    the end plus each process's rise. `samples` holds the two reads (seconds since `start`, this
    process's PSS, each worker's). A read walks the process's page tables (13 ms of CPU for a
    700 MB process) and holds its memory map: a thread that read PSS during the window doubled
    the wait of the epochs' first batches on a loaded machine, so none is read inside it.
    `cpu_s` is what measuring cost."""

    def __init__(self, warmup: int, loader: Any) -> None:
        """For a measurement whose `warmup` batches `loader` hands over first: the first read
        is made once one warm-up batch came from each worker, so that it finds them started (a
        worker still importing holds a tenth of what it will, which read as growth), with a
        warm-up batch left after it to take up the read's pause; now, where there is none to
        wait for."""
        self.cpu_s, self.started_at = 0.0, time.monotonic()
        self.samples: List[Tuple[float, int, List[int], int]] = []
        # The last read: pid -> (PSS, anonymous) bytes.
        self.pss: Dict[int, Tuple[Optional[int], int]] = {}
        self.settled = max(min(max(getattr(loader, "num_workers", 0), 1), warmup - 1), 0)
        if self.settled == 0:
            self.before()

    def read_pss(self) -> None:
        """A read of this process's PSS and each worker's, and of their anonymous memory (a
        leak grows it; the PSS also rises when another process sharing a library exits), into
        `samples`."""
        started = time.thread_time()
        self.pss = {pid: rollup(pid) for pid in [os.getpid(), *child_pids()]}
        main, anonymous = self.pss[os.getpid()]
        workers = [read for pid, read in self.pss.items() if pid != os.getpid()]
        if main is not None:
            at = time.monotonic() - self.started_at
            anonymous += sum(a for _, a in workers)
            self.samples.append((at, main, [w for w, _ in workers if w is not None], anonymous))
        self.cpu_s += time.thread_time() - started

    def before(self) -> None:
        """Reads the PSS before the measured window, in its warm-up (a read between the
        warm-up and the window would let the workers fill their queue for its first batches)."""
        self.samples, self.started_at = [], time.monotonic()
        self.read_pss()

    def warmed(self, taken: int) -> None:
        """After the warm-up batch `taken` (from 1): the first read, where it is due."""
        if taken == self.settled:
            self.before()

    def start(self) -> None:
        """Resets the peaks, as the window begins."""
        started = time.thread_time()
        for pid in [os.getpid(), *child_pids()]:
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass  # older kernels, or a process gone: its lifetime peak then
        self.cpu_s += time.thread_time() - started

    def stop(self) -> Tuple[int, str]:
        """The peak in bytes, and `pss` (shared pages once) or `rss` where the kernel gives
        no PSS; the PSS read after the window into `samples`."""
        self.read_pss()
        started = time.thread_time()
        peak, kind = 0, "pss"
        for pid, (pss, _) in self.pss.items():
            status = f"/proc/{pid}/status"
            rss = kilobytes_field(status, "VmRSS") or 0
            rise = max((kilobytes_field(status, "VmHWM") or rss) - rss, 0)
            if pss is None and not rss:
                continue  # a worker gone since the read
            if pss is None:
                pss, kind = rss, "rss"
            peak += pss + rise
        self.cpu_s += time.thread_time() - started
        return peak, kind


def rank() -> int:
    """This driver's rank among the ranks measured at once (`RANK`, as torch.distributed's
    launchers and feedbench set it); 0 where it runs alone."""
    return int(os.environ.get("RANK", "0") or 0)


def together() -> None:
    """Waits for every rank at a barrier of the run's process group, where this driver is one
    of several ranks measured at once (as DDP's all-reduce holds each step for the slowest
    rank); nothing where it runs alone."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def tensor_bytes(batch: Dict[str, Any]) -> int:
    """Bytes of the batch's tensors."""
    import torch

    return sum(v.numel() * v.element_size() for v in batch.values() if isinstance(v, torch.Tensor))


def batch_size(batch: Dict[str, Any]) -> int:
    """Samples in the batch: its first tensor's length."""
    import torch

    for value in batch.values():
        if isinstance(value, torch.Tensor):
            return int(value.shape[0])
    return 0


class Cycle:
    """The batches of a loader epoch after epoch, with the same persistent workers (as
    lerobot-train cycles its loader), saying it is alive between batches. Its workers start
    with the first batch asked for. `position` is which batch of its epoch the last one was
    (0: the first), counted from the stream's start: every epoch has the loader's length,
    whether the loader ends each one or takes them back to back."""

    def __init__(self, loader: Any) -> None:
        self.loader: Any = loader
        self.stream: Optional[Iterator[Any]] = None
        self.taken, self.position = 0, 0

    def next(self) -> Any:
        """The next batch, the loader's next epoch begun where the last one ended."""
        alive()
        if self.stream is None:
            self.stream = iter(self.loader)
        try:
            batch = next(self.stream)
        except StopIteration:
            self.stream = iter(self.loader)
            batch = next(self.stream)
        self.position = self.taken % max(len(self.loader), 1)
        self.taken += 1
        return batch


def video_backend(dataset: Any) -> Optional[str]:
    """The backend LeRobot decodes video with; None for a dataset without video."""
    if not getattr(dataset.meta, "video_keys", None):
        return None
    return getattr(dataset, "video_backend", None) or getattr(dataset, "_video_backend", None)


class Taken(NamedTuple):
    """A batch as the `load` loop took it: the ms it waited for it, and when it came
    (`time.perf_counter`)."""

    batch: Any
    wait_ms: float
    arrived: float


class StepTimes(TypedDict):
    """A lerobot-train run's step, ms: `update_policy`'s parts, the whole, and each top-level
    module's forward."""

    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    update_ms: float
    modules_ms: Dict[str, float]


class Fed(NamedTuple):
    """What feeding a batch to the step measured: its copy to the step's device or its
    hand-over, ms (None without a step), and the step's parts where it has them."""

    h2d_ms: Optional[float]
    parts: Optional[StepTimes]


def measure(request: LoadRequest, stream: Cycle, ready: ReadyEvent, take: Callable[[], Taken],
            feed: Callable[[Any], Fed], device: Any = None) -> None:
    """The `load` loop, whoever's loader and step: said `ready`, `warmup` batches taken and fed
    unmeasured, then `batches` measured (fewer where the request's stop file appears), each
    taken by `take` and fed by `feed`, and the `result` (the most memory `device` took, where
    given)."""
    loader = stream.loader
    if len(loader) == 0:
        raise Refused(ErrorKind.KNOB, "the loader has no batch (too few samples for the batch size)")
    # Its workers note their start where the driver made the loader (LeRobot's plain one).
    watched = getattr(loader, "worker_init_fn", None) is note_start
    emit(ready)
    warmup, stop_file = request["warmup"], request.get("stop_file")
    memory = PeakMemory(warmup, loader)
    started, began = time.perf_counter(), time.time()
    first_batch_s: Optional[float] = None
    delivered: List[Optional[List[int]]] = []
    # When each worker's first batch came (batch i is worker i's), `time.time()`.
    arrivals: List[float] = []
    workers = getattr(loader, "num_workers", 0)
    for taken in range(1, warmup + 1):
        batch, _, arrived = take()
        if first_batch_s is None:
            first_batch_s = arrived - started
        if len(arrivals) < workers:
            arrivals.append(time.time())
        delivered.append(column(batch, "index"))
        feed(batch)
        memory.warmed(taken)
    together()  # the ranks start their measured batches at once
    memory.start()
    own0, workers0 = cpu_s()
    start = last = time.perf_counter()
    batch_ms: List[float] = []
    wait_ms: List[float] = []
    h2d_ms: List[float] = []
    positions: List[int] = []
    episodes_per_batch: List[int] = []
    samples = size_bytes = 0
    parts: Optional[StepParts] = None
    modules: Dict[str, List[float]] = {}
    # feedbench may end the measurement early (a tune's verifying measurement, once it
    # decides): each measured batch is reported as it ends, and the stop file, once there,
    # ends the loop.
    for _ in range(request["batches"]):
        if stop_file is not None and batch_ms and os.path.exists(stop_file):
            break
        batch, wait, arrived = take()
        if first_batch_s is None:
            first_batch_s = arrived - started
        if len(arrivals) < workers:
            arrivals.append(time.time())
        wait_ms.append(wait)
        positions.append(stream.position)
        delivered.append(column(batch, "index"))
        episodes = column(batch, "episode_index")
        if episodes is not None:
            episodes_per_batch.append(len(set(episodes)))
        samples += batch_size(batch)
        size_bytes += tensor_bytes(batch)
        fed = feed(batch)
        now = time.perf_counter()
        batch_ms.append((now - last) * 1e3)
        last = now
        if fed.h2d_ms is not None:
            h2d_ms.append(fed.h2d_ms)
        if fed.parts is not None:
            if parts is None:
                parts = StepParts(forward_ms=[], backward_ms=[], optimizer_ms=[])
            parts["forward_ms"].append(fed.parts["forward_ms"])
            parts["backward_ms"].append(fed.parts["backward_ms"])
            parts["optimizer_ms"].append(fed.parts["optimizer_ms"])
            for name, ms in fed.parts["modules_ms"].items():
                modules.setdefault(name, []).append(ms)
        if stop_file is not None:
            say_step(wait, fed.h2d_ms or 0.0, batch_ms[-1])
    wall_s = time.perf_counter() - start
    own1, workers1 = cpu_s()
    peak, kind = memory.stop()
    emit(LoadResult(
        event="result", batches=len(batch_ms), samples=samples, bytes=size_bytes, wall_s=wall_s,
        batch_ms=batch_ms, wait_ms=wait_ms, h2d_ms=h2d_ms, main_cpu_s=own1 - own0,
        workers_cpu_s=workers1 - workers0, peak_memory_bytes=peak, memory=kind,
        observer_cpu_s=memory.cpu_s, memory_samples=memory.samples,
        first_batch_s=first_batch_s or 0.0, epoch_position=positions, parts=parts,
        modules_ms=modules, peak_device_bytes=None if device is None else peak_device_bytes(device),
        rank=rank(), pid=os.getpid(), episodes_per_batch=episodes_per_batch,
        sampler_order=sampler_order(loader, delivered),
        startup=startup(loader, loader.dataset, began, arrivals) if watched else None,
    ))


def column(batch: Any, key: str) -> Optional[List[int]]:
    """The integers of `batch`'s tensor `key` (one per sample), where it has one."""
    value = batch.get(key) if isinstance(batch, dict) else None
    if value is None or not hasattr(value, "tolist"):
        return None
    values = value.tolist()
    return [int(v) for v in values] if isinstance(values, list) else None


def sampler_order(loader: Any, delivered: List[Optional[List[int]]]) -> Optional[SamplerOrder]:
    """The `delivered` batches' indices held against those the loader's batch sampler yielded
    (where it keeps them, `plain.RecordedBatches`), from the first; None where it does not or
    the batches do not say their indices."""
    recorded = getattr(getattr(loader, "batch_sampler", None), "recorded", None)
    if recorded is None or any(batch is None for batch in delivered):
        return None
    first = next((n for n, batch in enumerate(delivered)
                  if n >= len(recorded) or batch != recorded[n]), None)
    return SamplerOrder(batches_checked=len(delivered), first_out_of_order=first)


def take_timed(stream: Cycle) -> Callable[[], Taken]:
    """Takes the next batch of `stream`, timed by the clock."""

    def take() -> Taken:
        waited = time.perf_counter()
        batch = stream.next()
        now = time.perf_counter()
        return Taken(batch, (now - waited) * 1e3, now)

    return take


def fed_nothing(batch: Any) -> Fed:
    """The loader alone: a batch fed to no step."""
    return Fed(None, None)


def fixed_step(step: Union[FixedStep, PolicyStep], cameras: List[str]) -> Callable[[Any], Fed]:
    """A step of fixed cost (`compute_ms`, or each of `sequence_ms` in turn) on its device,
    after the batch's copy to it, as LeRobot's training loop copies it. Only a lerobot-train
    run has a policy's step."""
    import torch

    fixed = as_fixed(step)
    if fixed is None:
        raise Refused(ErrorKind.VERSION, "a `load` of a dataset feeds no policy's step (only a "
                      "lerobot-train run has one): a feedbench of another version?")
    device, compute_s = torch.device(fixed["device"]), compute_times_s(fixed)

    def feed(batch: Any) -> Fed:
        copied = time.perf_counter()
        to_device(batch, cameras, device)
        h2d_s = time.perf_counter() - copied
        time.sleep(next(compute_s))
        return Fed(h2d_s * 1e3, None)

    return feed


def peak_device_bytes(device: Any) -> Optional[int]:
    """The most device memory the steps took (CUDA); None on the CPU."""
    import torch

    if device.type != "cuda":
        return None
    return int(torch.cuda.max_memory_allocated(device))
