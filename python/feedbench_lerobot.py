#!/usr/bin/env python3
"""feedbench's driver of LeRobot's own loader (`--loader lerobot`) and of its DiffusionPolicy
step (`model --impl lerobot`).

feedbench starts this script with the user's Python (their training environment) and the path
of a file holding one JSON request, and reads JSON lines from its stdout:
`{"event": "ready", ...}` once LeRobot's dataset and DataLoader are built, then
`{"event": "result", ...}` or `{"event": "error", "kind": ..., "message": ...}`; between them,
`{"event": "alive"}` at least every 30 s while it loads or steps (feedbench stops a silent one).
Everything
else LeRobot prints goes to stderr. The dataset is `LeRobotDataset(root=...)` with the request's episodes,
`delta_timestamps` and video backend; the loader is `torch.utils.data.DataLoader` with the
request's sampler, `num_workers`, `prefetch_factor`, `persistent_workers`, `pin_memory`,
`batch_size` and `drop_last`, built as LeRobot's training script builds it.

Commands:
  load     warm up, then time `batches` batches (epoch after epoch, same workers; with
           `stop_file`, each reported as a `step` event as it ends, and fewer once feedbench
           writes that file): wall ms per
           batch, time to the first batch, CPU of this process and every worker process,
           peak memory summed over them (PSS where the kernel gives it, read once at the end,
           plus each process's rise from the kernel's high-water mark), the CPU that measuring
           cost (`observer_cpu_s`); with `step`, each
           batch is handed to the step's device as LeRobot's training loop hands it (uint8
           cameras to float32 in [0, 1], `.to(device)`), timed as h2d, and the main process
           then blocks for the step's compute, as it blocks on a GPU step.
  batches  load the given lists of (absolute) frame indices as batches and save every tensor
           as .npy under `out`.
  sampler  the episode-aware sampler's unshuffled indices, as absolute frame indices.
  model    LeRobot's DiffusionPolicy training step (feedbench_lerobot_step.py).

With `lerobot_train` (the arguments of a lerobot-train run, `--lerobot-train`), the loader is the
DataLoader that run builds (feedbench_lerobot_train.py): `describe` says what it built, `load`
measures it (with `step`, in lerobot-train's loop: its hand-over and its policy's update_policy,
or a fixed-length step), `batches` saves its first `count` batches, `model` steps its policy
alone.

feedbench writes this script beside its modules: feedbench_lerobot_protocol.py (the messages),
feedbench_lerobot_measure.py (CPU, memory, batches of the processes), feedbench_lerobot_step.py
(the hand-over to the device and the step), feedbench_lerobot_train.py (lerobot-train's run) and
feedbench_lerobot_train_step.py (its training step).
"""

import importlib.metadata
import inspect
import json
import os
import sys
import time
import traceback

from feedbench_lerobot_measure import Cycle, PeakMemory, batch_size, cpu_s, tensor_bytes
from feedbench_lerobot_protocol import Refused, alive, emit, end_with_feedbench, requests
from feedbench_lerobot_step import run_model, to_device

SUPPORTED = ((0, 4), (0, 6))  # LeRobot 0.4.x to 0.6.x: v3.0 datasets, lerobot.datasets.*


def versions():
    import torch

    version = importlib.metadata.version("lerobot")
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if not (SUPPORTED[0] <= numbers <= SUPPORTED[1]):
        raise Refused(
            "version",
            f"LeRobot {version} in {sys.executable} is not supported: feedbench drives LeRobot "
            f"{SUPPORTED[0][0]}.{SUPPORTED[0][1]} to {SUPPORTED[1][0]}.{SUPPORTED[1][1]}",
        )
    return {
        "lerobot": version,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "executable": sys.executable,
    }


def open_dataset(request):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    parameters = inspect.signature(LeRobotDataset.__init__).parameters
    kwargs = {
        "repo_id": "local/" + os.path.basename(os.path.normpath(request["root"])),
        "root": request["root"],
        "episodes": request.get("episodes"),
        "delta_timestamps": request.get("delta_timestamps") or None,
        "video_backend": request.get("video_backend"),
    }
    if request.get("uint8"):
        if "return_uint8" not in parameters:
            raise Refused(
                "knob",
                f"LeRobot {importlib.metadata.version('lerobot')} returns frames as float32 "
                "only (uint8 frames need LeRobot ≥ 0.6)",
            )
        kwargs["return_uint8"] = True
    return LeRobotDataset(**kwargs)


def episode_aware_sampler(dataset, request, shuffle):
    from lerobot.datasets.sampler import EpisodeAwareSampler

    import torch

    parameters = inspect.signature(EpisodeAwareSampler.__init__).parameters
    kwargs = {
        "episode_indices_to_use": dataset.episodes,
        "drop_n_last_frames": request.get("drop_n_last_frames", 0),
        "shuffle": shuffle,
    }
    if "seed" in parameters:
        kwargs["seed"] = request.get("seed", 0)
    else:
        # Before 0.6 the sampler shuffles with torch's global generator.
        torch.manual_seed(request.get("seed", 0))
    if "absolute_to_relative_idx" in parameters:
        kwargs["absolute_to_relative_idx"] = getattr(dataset, "absolute_to_relative_idx", None)
    episodes = dataset.meta.episodes
    return EpisodeAwareSampler(
        episodes["dataset_from_index"], episodes["dataset_to_index"], **kwargs
    )


def make_loader(dataset, request, batch_sampler=None):
    import torch

    workers = request.get("num_workers", 0)
    kwargs = {
        "num_workers": workers,
        "pin_memory": request.get("pin_memory", False),
    }
    if workers > 0:
        kwargs["prefetch_factor"] = request.get("prefetch_factor", 2)
        kwargs["persistent_workers"] = request.get("persistent_workers", True)
    if batch_sampler is not None:
        return torch.utils.data.DataLoader(dataset, batch_sampler=batch_sampler, **kwargs)
    kind = request.get("sampler", "episode-aware")
    if kind == "episode-aware":
        sampler = episode_aware_sampler(dataset, request, shuffle=True)
    elif kind == "shuffled":
        generator = torch.Generator().manual_seed(request.get("seed", 0))
        sampler = torch.utils.data.RandomSampler(dataset, generator=generator)
    elif kind == "sequential":
        sampler = torch.utils.data.SequentialSampler(dataset)
    else:
        raise Refused("knob", f"sampler {kind!r}: expected episode-aware, shuffled or sequential")
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=request["batch_size"],
        sampler=sampler,
        drop_last=request.get("drop_last", False),
        **kwargs,
    )


def video_backend(dataset):
    """The backend LeRobot decodes video with; None for a dataset without video."""
    if not getattr(dataset.meta, "video_keys", None):
        return None
    return getattr(dataset, "video_backend", None) or getattr(dataset, "_video_backend", None)


def camera_keys(dataset):
    return list(getattr(dataset.meta, "camera_keys", None) or [])


def run_load(request, dataset, installed):
    stream = Cycle(make_loader(dataset, request))
    measure_load(request, dataset, stream, installed)
    del stream


def samples_per_epoch(loader):
    """The samples of one epoch of `loader`: its sampler's (its batch sampler's, where it has
    one: accelerate's prepared loader), else its dataset's."""
    sampler = getattr(loader.batch_sampler, "sampler", None) or loader.sampler
    return len(sampler) if sampler is not None else len(loader.dataset)


def measure_load(request, dataset, stream, installed, built=None):
    """The load loop over `stream`, a loader's batches epoch after epoch (the request's own
    loader, or lerobot-train's: `built` says what was built, and is said with `ready`)."""
    loader = stream.loader
    if len(loader) == 0:
        raise Refused("knob", "the loader has no batch (too few samples for the batch size)")
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
        compute_s = step["compute_ms"] / 1e3

    def feed(batch):
        """The step on `batch`: the copy to its device, then its compute; seconds of the copy."""
        if step is None:
            return 0.0
        copied = time.perf_counter()
        to_device(batch, cameras, device)
        h2d_s = time.perf_counter() - copied
        time.sleep(compute_s)
        return h2d_s
    memory = PeakMemory()
    started = time.perf_counter()
    next_batch = stream.next
    first_batch_s = None

    for _ in range(warmup):
        batch = next_batch()
        if first_batch_s is None:
            first_batch_s = time.perf_counter() - started
        feed(batch)
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
            emit({"event": "step", "wait_ms": wait_ms[-1], "h2d_ms": h2d_ms[-1] if h2d_ms else 0.0,
                  "whole_ms": batch_ms[-1]})
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
        "first_batch_s": first_batch_s,
        "epoch_position": positions,
    })


def row_positions(dataset):
    """Absolute frame index -> the row `dataset[...]` takes, for an episode subset (LeRobot
    reads the subset's rows by position); None where the two are the same. A property from
    0.6 on; before, an attribute set when the rows are loaded."""
    if hasattr(type(dataset), "absolute_to_relative_idx"):
        return dataset.absolute_to_relative_idx
    load = getattr(dataset, "_ensure_hf_dataset_loaded", None)
    if load is not None:
        load()
    return getattr(dataset, "_absolute_to_relative_idx", None)


def sampler_yields_rows():
    """Whether this LeRobot's EpisodeAwareSampler yields row positions (it is given the
    absolute-to-row map, from 0.6 on) rather than absolute frame indices."""
    from lerobot.datasets.sampler import EpisodeAwareSampler

    return "absolute_to_relative_idx" in inspect.signature(EpisodeAwareSampler.__init__).parameters


def save_batch(batch, directory):
    """Every tensor of `batch` as `<key>.npy` in `directory`, strings in strings.json."""
    import numpy

    os.makedirs(directory, exist_ok=True)
    strings = {}
    for key, value in batch.items():
        if hasattr(value, "numpy"):
            numpy.save(os.path.join(directory, key + ".npy"), value.numpy())
        else:
            strings[key] = list(value)
    with open(os.path.join(directory, "strings.json"), "w") as f:
        json.dump(strings, f)


def run_lerobot_train(request, installed, runs):
    """lerobot-train's run for the request's arguments (built once per driver, in `runs`):
    `load` measures its DataLoader (kept for the next `load` with the same knobs: its workers
    stay up), `batches` saves the first `count` batches of a run built afresh (as lerobot-train
    yields them), `describe` says what it built, `model` steps its policy alone."""
    from feedbench_lerobot_train import Run, close_loader

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
        built["builds"] = Run.builds
        if request.get("step") is not None:
            return measure_training(request, run, stream, installed, built)
        return measure_load(request, run.dataset, stream, installed, built)
    run.close()
    loader, built = run.loader(request)
    built["builds"] = Run.builds
    try:
        if request["command"] == "model":
            return measure_policy_step(request, run, loader, installed, built)
        emit({"event": "ready", "lerobot_train": built, "video_backend": video_backend(run.dataset),
              **installed})
        emit({"event": "result", "lerobot_train": built})
    finally:
        close_loader(loader)


def save_run_batches(request, run, installed):
    """The first `count` batches of a run built afresh for this request, saved as .npy."""
    from feedbench_lerobot_train import close_loader

    loader, built = run.loader(request)
    built["builds"] = run.builds
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
        save_batch(next(stream), os.path.join(request["out"], f"batch-{number}"))
    close_loader(loader, stream)
    emit({"event": "result", "lerobot_train": built})


def measure_training(request, run, stream, installed, built):
    """lerobot-train's loop on its own DataLoader: each step the wait for the batch (accelerate's
    prepared loader, which puts it on the device), the hand-over (the uint8 conversion and the
    pre-processor) and the step, which is the policy's own `update_policy` or, with
    `step.compute_ms`, a fixed-length stand-in for it; `warmup` steps, then `batches` measured
    ones, reported as `load` reports them, with the step's parts."""
    training, dataset, loader = run.step(), run.dataset, stream.loader
    built["step"] = training.facts
    step, compute_s = request["step"], None
    if step.get("compute_ms") is not None:
        compute_s = step["compute_ms"] / 1e3
    emit({"event": "ready", "samples_per_epoch": samples_per_epoch(loader),
          "batches_per_epoch": len(loader), "video_backend": video_backend(dataset),
          "lerobot_train": built, **installed})
    timer = training.timer
    memory = PeakMemory()
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
            time.sleep(compute_s)
            step_parts = {"forward_ms": compute_s * 1e3, "backward_ms": 0.0,
                          "optimizer_ms": 0.0, "update_ms": compute_s * 1e3, "modules_ms": {}}
        else:
            step_parts = training.update(batch)
        return wait, handed, step_parts

    for _ in range(request.get("warmup", 1)):
        one_step(False)
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
            emit({"event": "step", "wait_ms": wait, "h2d_ms": handed, "whole_ms": batch_ms[-1]})
    wall_s = time.perf_counter() - start
    own1, workers1 = cpu_s()
    peak, kind = memory.stop()
    del next_batch
    emit({
        "event": "result", "batches": len(batch_ms), "samples": samples, "bytes": size_bytes,
        "wall_s": wall_s, "batch_ms": batch_ms, "wait_ms": wait_ms, "h2d_ms": h2d_ms,
        "main_cpu_s": own1 - own0, "workers_cpu_s": workers1 - workers0,
        "peak_memory_bytes": peak, "memory": kind, "observer_cpu_s": memory.cpu_s,
        "first_batch_s": first_batch_s, "epoch_position": positions, "parts": parts,
        "modules_ms": {name: ms for name, ms in modules.items() if ms},
        "peak_device_bytes": peak_device_bytes(training.device),
    })


def measure_policy_step(request, run, raw_loader, installed, built):
    """The run's step alone: one batch from its DataLoader, handed over and stepped by
    `update_policy` `warmup` times, then `steps` measured times (a copy each, since the hand-over
    changes the batch it is given)."""
    import torch

    from feedbench_lerobot_train import close_loader

    training = run.step()
    built["step"] = training.facts
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


def run_batches(request, dataset, installed):
    rows = row_positions(dataset)
    batches = request["index_batches"]
    if rows is not None:
        batches = [[rows[index] for index in batch] for batch in batches]
    loader = make_loader(dataset, request, batch_sampler=batches)
    emit({"event": "ready", "video_backend": video_backend(dataset), **installed})
    out = request["out"]
    for number, batch in enumerate(loader):
        alive()
        save_batch(batch, os.path.join(out, f"batch-{number}"))
    emit({"event": "result", "batches": len(request["index_batches"])})


def run_sampler(request, dataset, installed):
    sampler = episode_aware_sampler(dataset, request, shuffle=request.get("shuffle", False))
    emit({"event": "ready", **installed})
    rows = row_positions(dataset) if sampler_yields_rows() else None
    absolute = {row: index for index, row in rows.items()} if rows is not None else None
    indices = [int(i) for i in sampler]
    if absolute is not None:
        indices = [absolute[i] for i in indices]
    emit({"event": "result", "indices": indices})


def serve(request, runs):
    """Answers one request (its messages on stdout); False where it failed (said as an `error`)."""
    try:
        try:
            import lerobot  # noqa: F401
            import torch  # noqa: F401
        except ImportError as error:
            # The facts only: feedbench words the advice as the front end names its Python
            # (`--python`, a sweep's `loader.python`).
            raise Refused(
                "environment",
                f"{error.name or error} is not installed in {sys.executable} (Python "
                f"{sys.version.split()[0]})",
            ) from None
        installed = versions()  # refuses an unsupported LeRobot before any work
        if "lerobot_train" in request:
            run_lerobot_train(request, installed, runs)
        elif request["command"] == "model":
            run_model(request, installed)
        else:
            dataset = open_dataset(request)
            command = {"load": run_load, "batches": run_batches,
                       "sampler": run_sampler}[request["command"]]
            command(request, dataset, installed)
        return True
    except Refused as refused:
        emit({"event": "error", "kind": refused.kind, "message": str(refused)})
    except Exception as error:  # LeRobot's own errors, with its message, and where they arose
        traceback.print_exc(file=sys.stderr)
        emit({
            "event": "error",
            "kind": "lerobot",
            "message": f"{type(error).__name__}: {error}",
        })
    return False


def main():
    """One request from the file named on the command line, or, with `--session`, one request
    a line on stdin until it closes, the run a lerobot-train request builds kept between them:
    a failed request ends the session (exit status 1)."""
    end_with_feedbench()
    runs = {}
    for request in requests(sys.argv[1:]):
        if not serve(request, runs):
            sys.exit(1)
    for run in runs.values():
        run.close()  # the kept DataLoader's workers, before the interpreter goes


if __name__ == "__main__":
    main()
