"""How feedbench's LeRobot driver measures the processes it runs: CPU of the main process and
of its DataLoader workers, their peak memory (read from what the kernel keeps anyway), the size
of a batch, and a loader's batches taken epoch after epoch."""

import os
import time

from feedbench_lerobot_protocol import alive


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


class PeakMemory:
    """The peak memory of this process and its workers over a timed window, from what the
    kernel keeps anyway, so that measuring costs the loader nothing while it runs. `start`
    resets each process's high-water mark (VmHWM); `stop` reads, once, each one's PSS (shared
    pages counted once: forked workers share most of the main process) and how far its RSS
    rose above where it is now. The peak is their sum: the PSS at the end plus each process's
    rise. A sampler that read PSS every 100 ms cost about 22 ms of CPU per read of a 1.5 GB
    process: half a core of a 2-core machine with three such processes. `cpu_s` is what
    measuring cost this thread."""

    def __init__(self):
        self.cpu_s = 0.0

    def start(self):
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
        no PSS."""
        started = time.thread_time()
        peak, kind = 0, "pss"
        for pid in [os.getpid(), *child_pids()]:
            status = f"/proc/{pid}/status"
            rss = kilobytes_field(status, "VmRSS") or 0
            rise = max((kilobytes_field(status, "VmHWM") or rss) - rss, 0)
            pss = kilobytes_field(f"/proc/{pid}/smaps_rollup", "Pss")
            if pss is None:
                pss, kind = rss, "rss"
            peak += pss + rise
        self.cpu_s += time.thread_time() - started
        return peak, kind


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
