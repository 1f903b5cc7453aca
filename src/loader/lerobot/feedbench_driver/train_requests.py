"""A lerobot-train run's requests (`--lerobot-train "ARGS"`): `load` measures the DataLoader the
run builds (with `step`, in lerobot-train's loop: its hand-over and its policy's
`update_policy`, or a fixed-length step), `batches` saves its first `count` batches, `describe`
says what it built, `model` steps its policy alone. The run is built once per driver and kept
between requests (`train_run.Run`)."""

import os
import time

from feedbench_driver.readings import (
    PeakMemory, batch_size, compute_times_s, cpu_s, measure_load, rank, samples_per_epoch,
    tensor_bytes, together, video_backend)
from feedbench_driver.plain import save_batch
from feedbench_driver.protocol import ErrorKind, Refused, alive, emit, say_step
from feedbench_driver.train_run import Run, close_loader, videos_named


def run_lerobot_train(request, installed, runs):
    """lerobot-train's run for the request's arguments (built once per driver, in `runs`):
    `load` measures its DataLoader (kept for the next `load` with the same knobs: its workers
    stay up), `batches` saves the first `count` batches of a run built afresh (as lerobot-train
    yields them), `describe` says what it built, `model` steps its policy alone."""
    if request["ranks"] != int(os.environ.get("WORLD_SIZE", "1") or 1):
        raise Refused(ErrorKind.VERSION, f"a request for {request['ranks']} ranks to a driver "
                      f"started as one of {os.environ.get('WORLD_SIZE', '1')}")
    key = (tuple(request["lerobot_train"]), request.get("reader", "lerobot"))
    if request["command"] == "batches" or key not in runs:
        for kept in runs.values():
            kept.close()  # its workers, its dataset and policy: one run at a time
        runs.clear()
    if request["command"] == "batches":
        return save_run_batches(request, Run(request), installed)
    if key not in runs:
        runs[key] = Run(request)
    run = runs[key]
    if request["command"] == "load":
        stream, built = run.stream(request)
        with videos_named(run.dataset):
            if request.get("step") is not None:
                return measure_training(request, run, stream, installed, built)
            built.update(Run.counts())
            return measure_load(request, run.dataset, stream, installed, built)
    run.close()
    loader, built = run.loader(request)
    try:
        if request["command"] == "model":
            return measure_policy_step(request, run, loader, installed, built)
        built.update(Run.counts())
        emit({"event": "ready", "lerobot_train": built, "video_backend": video_backend(run.dataset),
              **installed})
        emit({"event": "result", "lerobot_train": built})
    finally:
        close_loader(loader)


def save_run_batches(request, run, installed):
    """The first `count` batches of a run built afresh for this request, saved as .npy; of
    several ranks at once, each rank's (its shard, as lerobot-train's accelerator prepares the
    DataLoader) under `out/rank-<rank>`."""
    loader, built = run.loader(request)
    out = request["out"]
    if request["ranks"] > 1:
        loader, out = run.prepare(loader), os.path.join(out, f"rank-{rank()}")
    built.update(Run.counts())
    emit({"event": "ready", "lerobot_train": built, "video_backend": video_backend(run.dataset),
          **installed})
    if "seed" not in (built.get("sampler") or {}):
        # Before LeRobot 0.6 the shuffle draws from torch's global generator, which
        # lerobot-train has drawn from to build the policy and optimizer: built here too,
        # so that the batches come in the run's order.
        run.step()
    stream = iter(loader)
    for number in range(request["count"]):
        alive()
        save_batch(next(stream), os.path.join(out, f"batch-{number}"))
    close_loader(loader, stream)
    emit({"event": "result", "lerobot_train": built})


def measure_training(request, run, stream, installed, built):
    """lerobot-train's loop on its own DataLoader: each step the wait for the batch (accelerate's
    prepared loader, which puts it on the device), the hand-over (the uint8 conversion and the
    pre-processor) and the step, which is the policy's own `update_policy` or, with
    `step.compute_ms`, a stand-in for it (of each `step.sequence_ms` in turn where given); `warmup` steps, then `batches` measured
    ones, reported as `load` reports them, with the step's parts."""
    training, dataset, loader = run.step(), run.dataset, stream.loader
    built.update(step=training.facts, **Run.counts())
    step, compute_s = request["step"], None
    if step.get("compute_ms") is not None:
        compute_s = compute_times_s(step)
    emit({"event": "ready", "samples_per_epoch": samples_per_epoch(loader),
          "batches_per_epoch": len(loader), "video_backend": video_backend(dataset),
          "lerobot_train": built, **installed})
    timer = training.timer
    warmup = request.get("warmup", 1)
    memory = PeakMemory(warmup, loader)
    parts = {"forward_ms": [], "backward_ms": [], "optimizer_ms": [], "update_ms": []}
    modules = {name: [] for name in training.module_ms}
    batch_ms, wait_ms, h2d_ms, samples, size_bytes = [], [], [], 0, 0
    positions = []
    stop_file = request.get("stop_file")
    started = time.perf_counter()
    first_batch_s = None
    next_batch = stream.next

    def one_step(measured):
        nonlocal first_batch_s, samples, size_bytes
        timer.mark("waited")
        batch = next_batch()
        timer.mark("arrived")
        if first_batch_s is None:
            first_batch_s = time.perf_counter() - started
        if measured:
            samples += batch_size(batch)
            size_bytes += tensor_bytes(batch)
        batch = training.hand_over(batch)
        timer.mark("handed")
        wait, handed = timer.ms("waited", "arrived"), timer.ms("arrived", "handed")
        if compute_s is not None:
            compute = next(compute_s)
            time.sleep(compute)
            together()  # a step of several ranks ends with theirs, as DDP's all-reduce makes it
            step_parts = {"forward_ms": compute * 1e3, "backward_ms": 0.0,
                          "optimizer_ms": 0.0, "update_ms": compute * 1e3, "modules_ms": {}}
        else:
            step_parts = training.update(batch)
        return wait, handed, step_parts

    for taken in range(1, warmup + 1):
        one_step(False)
        memory.warmed(taken)
    together()  # the ranks start their measured steps at once
    memory.start()
    own0, workers0 = cpu_s()
    start = last = time.perf_counter()
    for _ in range(request["batches"]):
        if stop_file is not None and batch_ms and os.path.exists(stop_file):
            break
        wait, handed, step_parts = one_step(True)
        now = time.perf_counter()
        wait_ms.append(wait)
        positions.append(stream.position)
        h2d_ms.append(handed)
        batch_ms.append((now - last) * 1e3)
        last = now
        for key in parts:
            parts[key].append(step_parts[key])
        for name, ms in step_parts["modules_ms"].items():
            modules[name].append(ms)
        if stop_file is not None:
            say_step(wait, handed, batch_ms[-1])
    wall_s = time.perf_counter() - start
    own1, workers1 = cpu_s()
    peak, kind = memory.stop()
    del next_batch
    emit({
        "event": "result", "batches": len(batch_ms), "samples": samples, "bytes": size_bytes,
        "wall_s": wall_s, "batch_ms": batch_ms, "wait_ms": wait_ms, "h2d_ms": h2d_ms,
        "main_cpu_s": own1 - own0, "workers_cpu_s": workers1 - workers0,
        "peak_memory_bytes": peak, "memory": kind, "observer_cpu_s": memory.cpu_s,
        "memory_samples": memory.samples,
        "first_batch_s": first_batch_s, "epoch_position": positions, "parts": parts,
        "modules_ms": {name: ms for name, ms in modules.items() if ms},
        "peak_device_bytes": peak_device_bytes(training.device),
        "rank": rank(), "pid": os.getpid(),
    })


def measure_policy_step(request, run, raw_loader, installed, built):
    """The run's step alone: one batch from its DataLoader, handed over and stepped by
    `update_policy` `warmup` times, then `steps` measured times (a copy each, since the hand-over
    changes the batch it is given)."""
    import torch

    training = run.step()
    built.update(step=training.facts, **Run.counts())
    emit({"event": "ready", "lerobot_train": built, "video_backend": video_backend(run.dataset),
          **installed})
    loader = run.prepare(raw_loader)
    stream = iter(loader)
    first = next(stream)
    close_loader(loader, stream)
    run.release(loader)
    del stream
    timer, steps = training.timer, []
    for number in range(request.get("warmup", 1) + request["steps"]):
        alive()
        batch = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in first.items()}
        timer.mark("given")
        batch = training.hand_over(batch)
        timer.mark("handed")
        handed = timer.ms("given", "handed")
        parts = training.update(batch)
        if number >= request.get("warmup", 1):
            steps.append({"h2d_ms": handed, **parts})
    emit({"event": "result", "steps": steps, "parameters": training.facts["parameters"],
          "device": str(training.device), "batch": batch_size(first),
          "mixed_precision": training.accelerator.mixed_precision,
          "threads": torch.get_num_threads(), "loss": float(training.tracker.loss.val),
          "peak_device_bytes": peak_device_bytes(training.device)})


def peak_device_bytes(device):
    """The most device memory the steps took (CUDA); None on the CPU."""
    import torch

    if device.type != "cuda":
        return None
    return int(torch.cuda.max_memory_allocated(device))
