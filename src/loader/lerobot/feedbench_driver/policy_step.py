"""The step's side of feedbench's LeRobot driver: a batch handed to the device as LeRobot's
training loop hands it, and the `model` command: LeRobot's DiffusionPolicy training step, as
its training script runs it (with the backend settings it makes: cuDNN autotuning, TF32
matmuls), on a resident random batch per (batch size, dtype): per step, ms
of the hand-over to the device (preprocessor included), forward, backward and optimizer
(clipping, step, zeroing); trainable parameters, last loss, peak memory on the CPU."""

import dataclasses
import sys
import time
from typing import Any, Dict, List

from feedbench_driver.protocol import (
    ErrorKind, ModelPolicyRequest, PolicyReads, Refused, RowsResult, StepMs, StepRow,
    Versions, alive, emit, ready)
from feedbench_driver.run_config import backend_like_lerobot_train


def to_device(batch: Dict[str, Any], cameras: List[str], device: Any) -> Dict[str, Any]:
    """A batch as LeRobot's training loop hands it to its policy's preprocessor: uint8 cameras
    as float32 in [0, 1] (LeRobot ≥ 0.6 does this on the host), every tensor on `device`
    (asynchronously from pinned memory on CUDA, as its device processor copies)."""
    import torch

    batch = dict(batch)
    for key in cameras:
        if key in batch and batch[key].dtype == torch.uint8:
            batch[key] = batch[key].to(dtype=torch.float32) / 255.0
    cuda = device.type == "cuda"
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            batch[key] = value.to(device, non_blocking=cuda)
    if cuda:
        torch.cuda.synchronize(device)
    return batch


def diffusion_config(request: PolicyReads, device: Any) -> Any:
    """LeRobot's DiffusionConfig with the request's fields (feedbench's preset, same names),
    its cameras, state and action, no pretrained weights (GroupNorm, as the preset)."""
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

    c = dict(request["config"])
    fields = {field.name for field in dataclasses.fields(DiffusionConfig)}
    kwargs = {key: c[key] for key in (
        "n_obs_steps", "horizon", "crop_is_random", "spatial_softmax_num_keypoints",
        "use_separate_rgb_encoder_per_camera", "kernel_size", "n_groups",
        "diffusion_step_embed_dim", "use_film_scale_modulation", "num_train_timesteps",
        "beta_schedule", "beta_start", "beta_end", "prediction_type", "do_mask_loss_for_padding",
        "optimizer_lr", "optimizer_eps", "optimizer_weight_decay")}
    kwargs.update(
        down_dims=tuple(c["down_dims"]),
        crop_shape=tuple(c["crop_shape"]) if c["crop_shape"] else None,
        optimizer_betas=tuple(c["optimizer_betas"]),
        n_action_steps=max(1, min(8, c["horizon"] - c["n_obs_steps"] + 1)),
        vision_backbone="resnet18",
        pretrained_backbone_weights=None,
        use_group_norm=True,
        device=str(device),
        input_features={
            **{camera["key"]: PolicyFeature(
                type=FeatureType.VISUAL,
                shape=(camera["channels"], camera["height"], camera["width"]))
               for camera in request["cameras"]},
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(request["state_dim"],)),
        },
        output_features={
            "action": PolicyFeature(type=FeatureType.ACTION, shape=(request["action_dim"],)),
        },
    )
    missing = sorted(set(kwargs) - fields)
    if missing:
        raise Refused(ErrorKind.VERSION, f"this LeRobot's DiffusionConfig has no {', '.join(missing)}")
    return DiffusionConfig(**kwargs)


def statistics(request: PolicyReads) -> Dict[str, Dict[str, Any]]:
    """Normalisation statistics of a plausible dataset (the step's cost does not depend on
    them): cameras around 0.5, state and action in [0, 1]."""
    import torch

    stats: Dict[str, Dict[str, Any]] = {}
    for camera in request["cameras"]:
        shape = (camera["channels"], 1, 1)
        stats[camera["key"]] = {"mean": torch.full(shape, 0.5), "std": torch.full(shape, 0.25),
                                "min": torch.zeros(shape), "max": torch.ones(shape)}
    for key, width in (("observation.state", request["state_dim"]), ("action", request["action_dim"])):
        stats[key] = {"mean": torch.full((width,), 0.5), "std": torch.full((width,), 0.25),
                      "min": torch.zeros(width), "max": torch.ones(width)}
    return stats


def random_batch(request: PolicyReads, config: Any, size: int, generator: Any,
                 pin: bool) -> Dict[str, Any]:
    """A batch as LeRobot's DataLoader delivers one: cameras (uint8 or float32 in [0, 1]),
    state, actions, no padding; pinned where the DataLoader would pin it (CUDA)."""
    import torch

    n_obs, horizon = config.n_obs_steps, config.horizon
    batch = {}
    for camera in request["cameras"]:
        shape = (size, n_obs, camera["channels"], camera["height"], camera["width"])
        if request["images"] == "u8":
            batch[camera["key"]] = torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8)
        else:
            batch[camera["key"]] = torch.rand(shape, generator=generator)
    batch["observation.state"] = torch.rand((size, n_obs, request["state_dim"]), generator=generator)
    batch["action"] = torch.rand((size, horizon, request["action_dim"]), generator=generator)
    batch["action_is_pad"] = torch.zeros((size, horizon), dtype=torch.bool)
    return {k: v.pin_memory() for k, v in batch.items()} if pin else batch


def measure_step(request: ModelPolicyRequest, device: Any, size: int, dtype: str) -> StepRow:
    """One row: the policy built afresh from the seed, warmed up, then `steps` measured steps."""
    import contextlib
    import resource

    import torch
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
    from lerobot.policies.factory import make_pre_post_processors

    torch.manual_seed(request["seed"])
    config = diffusion_config(request, device)
    policy = DiffusionPolicy(config).to(device)
    policy.train()
    preprocessor, _ = make_pre_post_processors(config, dataset_stats=statistics(request))
    c = request["config"]
    optimizer = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[c["optimizer"]](
        policy.parameters(), lr=c["optimizer_lr"], betas=tuple(c["optimizer_betas"]),
        eps=c["optimizer_eps"], weight_decay=c["optimizer_weight_decay"])
    generator = torch.Generator().manual_seed(request["seed"])
    host_batch = random_batch(request, config, size, generator, pin=device.type == "cuda")
    cameras = [camera["key"] for camera in request["cameras"]]

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def autocast() -> Any:
        if dtype == "bf16":
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    per_step: List[StepMs] = []
    loss: Any = None
    for number in range(request["warmup"] + request["steps"]):
        alive()
        started = time.perf_counter()
        batch = preprocessor(to_device(host_batch, cameras, device))
        synchronize()
        copied = time.perf_counter()
        with autocast():
            loss, _ = policy.forward(batch)
        synchronize()
        forward = time.perf_counter()
        loss.backward()
        synchronize()
        backward = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), c["grad_clip_norm"], error_if_nonfinite=False)
        optimizer.step()
        optimizer.zero_grad()
        synchronize()
        done = time.perf_counter()
        if number >= request["warmup"]:
            per_step.append(StepMs(
                h2d_ms=(copied - started) * 1e3, forward_ms=(forward - copied) * 1e3,
                backward_ms=(backward - forward) * 1e3, optimizer_ms=(done - backward) * 1e3,
                step_ms=(done - started) * 1e3))
    return StepRow(
        batch=size,
        dtype=dtype,
        threads=torch.get_num_threads(),
        parameters=sum(p.numel() for p in policy.parameters() if p.requires_grad),
        peak_memory_bytes=None if device.type == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        last_loss=float(loss.item()),
        per_step=per_step,
    )


def run_model(request: ModelPolicyRequest, installed: Versions) -> None:
    """`model`: LeRobot's DiffusionPolicy step, a row per batch size and dtype."""
    import torch

    threads = request["threads"]
    if threads:
        torch.set_num_threads(threads)
    backend_like_lerobot_train(None)  # the backend a default run of lerobot-train sets
    device = torch.device(request["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        raise Refused(ErrorKind.KNOB, f"the step is to run on {device}, but the torch of {sys.executable} sees no CUDA device")
    emit(ready(installed, None))
    rows = [measure_step(request, device, size, dtype)
            for size in request["batch_sizes"] for dtype in request["dtypes"]]
    emit(RowsResult(event="result", rows=rows))
