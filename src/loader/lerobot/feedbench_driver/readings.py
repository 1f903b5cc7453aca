"""How feedbench's LeRobot driver measures: CPU of its process and of its DataLoader workers,
their peak memory (read from what the kernel keeps anyway), the size of a batch, a loader's
batches taken epoch after epoch, and the `load` loop over them (`measure_load`)."""

import itertools
import os
import time

from feedbench_driver.policy_step import to_device
from feedbench_driver.protocol import ErrorKind, Refused, alive, emit, say_step



def compute_times_s(step):
    """A fixed step's compute, seconds, step after step without end: its `sequence_ms` in turn
    (a replayed step's), else `compute_ms` every step."""
    return itertools.cycle([ms / 1e3 for ms in step.get("sequence_ms") or [step["compute_ms"]]])

def child_pids():
    pids = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.extend(int(pid) for pid in f.read().split())
    except OSError:
        pass
    return pids


def process_cpu_s(pid):
    """utime + stime of a live process, seconds; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_s():
    """CPU of this process, of its workers alive now, and of those it has reaped, seconds."""
    times = os.times()
    own = times.user + times.system
    reaped = times.children_user + times.children_system
    return own, reaped + sum(process_cpu_s(pid) for pid in child_pids())


def kilobytes_field(path, name):
    """The `name:` line of a /proc file in kB, as bytes; None where absent."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rollup(pid):
    """(PSS, anonymous) bytes of a live process, from one read of its smaps_rollup; (None, 0)
    once it is gone."""
    fields = {}
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

    def __init__(self, warmup, loader):
        """For a measurement whose `warmup` batches `loader` hands over first: the first read
        is made once one warm-up batch came from each worker, so that it finds them started (a
        worker still importing holds a tenth of what it will, which read as growth), with a
        warm-up batch left after it to take up the read's pause; now, where there is none to
        wait for."""
        self.cpu_s, self.samples, self.started_at = 0.0, [], time.monotonic()
        self.pss = {}  # the last read: pid -> (PSS, anonymous) bytes
        self.settled = max(min(max(getattr(loader, "num_workers", 0), 1), warmup - 1), 0)
        if self.settled == 0:
            self.before()

    def read_pss(self):
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
            self.samples.append([at, main, [w for w, _ in workers if w is not None], anonymous])
        self.cpu_s += time.thread_time() - started

    def before(self):
        """Reads the PSS before the measured window, in its warm-up (a read between the
        warm-up and the window would let the workers fill their queue for its first batches)."""
        self.samples, self.started_at = [], time.monotonic()
        self.read_pss()

    def warmed(self, taken):
        """After the warm-up batch `taken` (from 1): the first read, where it is due."""
        if taken == self.settled:
            self.before()

    def start(self):
        """Resets the peaks, as the window begins."""
        started = time.thread_time()
        for pid in [os.getpid(), *child_pids()]:
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass  # older kernels, or a process gone: its lifetime peak then
        self.cpu_s += time.thread_time() - started

    def stop(self):
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


def rank():
    """This driver's rank among the ranks measured at once (`RANK`, as torch.distributed's
    launchers and feedbench set it); 0 where it runs alone."""
    return int(os.environ.get("RANK", "0") or 0)


def together():
    """Waits for every rank at a barrier of the run's process group, where this driver is one
    of several ranks measured at once (as DDP's all-reduce holds each step for the slowest
    rank); nothing where it runs alone."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def tensor_bytes(batch):
    import torch

    return sum(v.numel() * v.element_size() for v in batch.values() if isinstance(v, torch.Tensor))


def batch_size(batch):
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

    def __init__(self, loader):
        self.loader, self.stream = loader, None
        self.taken, self.position = 0, None

    def next(self):
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


def samples_per_epoch(loader):
    """The samples of one epoch of `loader`: its sampler's (its batch sampler's, where it has
    one: accelerate's prepared loader), else its dataset's."""
    sampler = getattr(loader.batch_sampler, "sampler", None) or loader.sampler
    return len(sampler) if sampler is not None else len(loader.dataset)


def video_backend(dataset):
    """The backend LeRobot decodes video with; None for a dataset without video."""
    if not getattr(dataset.meta, "video_keys", None):
        return None
    return getattr(dataset, "video_backend", None) or getattr(dataset, "_video_backend", None)


def camera_keys(dataset):
    return list(getattr(dataset.meta, "camera_keys", None) or [])


def measure_load(request, dataset, stream, installed, built=None):
    """The load loop over `stream`, a loader's batches epoch after epoch (the request's own
    loader, or lerobot-train's: `built` says what was built, and is said with `ready`)."""
    loader = stream.loader
    if len(loader) == 0:
        raise Refused(ErrorKind.KNOB, "the loader has no batch (too few samples for the batch size)")
    ready = {"event": "ready", "samples_per_epoch": samples_per_epoch(loader),
             "batches_per_epoch": len(loader), "video_backend": video_backend(dataset),
             **installed}
    if built is not None:
        ready["lerobot_train"] = built
    emit(ready)
    batches, warmup = request["batches"], request.get("warmup", 1)
    step = request.get("step")
    cameras = camera_keys(dataset)
    if step is not None:
        import torch

        device = torch.device(step["device"])
        compute_s = compute_times_s(step)

    def feed(batch):
        """The step on `batch`: the copy to its device, then its compute; seconds of the copy."""
        if step is None:
            return 0.0
        copied = time.perf_counter()
        to_device(batch, cameras, device)
        h2d_s = time.perf_counter() - copied
        time.sleep(next(compute_s))
        return h2d_s
    memory = PeakMemory(warmup, loader)
    started = time.perf_counter()
    next_batch = stream.next
    first_batch_s = None

    for taken in range(1, warmup + 1):
        batch = next_batch()
        if first_batch_s is None:
            first_batch_s = time.perf_counter() - started
        feed(batch)
        memory.warmed(taken)
    together()  # the ranks start their measured batches at once
    memory.start()
    own0, workers0 = cpu_s()
    start = last = time.perf_counter()
    batch_ms, wait_ms, h2d_ms, samples, size_bytes = [], [], [], 0, 0
    positions = []
    # feedbench may end the measurement early (a tune's verifying measurement, once it
    # decides): each measured batch is reported as it ends, and the stop file, once there,
    # ends the loop.
    stop_file = request.get("stop_file")
    for _ in range(batches):
        if stop_file is not None and batch_ms and os.path.exists(stop_file):
            break
        waited = time.perf_counter()
        batch = next_batch()
        now = time.perf_counter()
        if first_batch_s is None:
            first_batch_s = now - started
        wait_ms.append((now - waited) * 1e3)
        positions.append(stream.position)
        samples += batch_size(batch)
        size_bytes += tensor_bytes(batch)
        if step is not None:
            h2d_ms.append(feed(batch) * 1e3)
            now = time.perf_counter()
        batch_ms.append((now - last) * 1e3)
        last = now
        if stop_file is not None:
            say_step(wait_ms[-1], h2d_ms[-1] if h2d_ms else 0.0, batch_ms[-1])
    wall_s = time.perf_counter() - start
    own1, workers1 = cpu_s()
    peak, kind = memory.stop()
    del next_batch
    emit({
        "event": "result",
        "batches": len(batch_ms),
        "samples": samples,
        "bytes": size_bytes,
        "wall_s": wall_s,
        "batch_ms": batch_ms,
        "wait_ms": wait_ms,
        "h2d_ms": h2d_ms,
        "main_cpu_s": own1 - own0,
        "workers_cpu_s": workers1 - workers0,
        "peak_memory_bytes": peak,
        "memory": kind,
        "observer_cpu_s": memory.cpu_s,
        "memory_samples": memory.samples,
        "first_batch_s": first_batch_s,
        "epoch_position": positions,
        "rank": rank(),
        "pid": os.getpid(),
    })
