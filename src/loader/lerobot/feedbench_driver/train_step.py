"""lerobot-train's training step, as its loop takes it (`train --lerobot-train`, a tune's step):
the Accelerator lerobot-train makes, the policy, pre-processor, optimizer and scheduler by
LeRobot's factories, each batch's hand-over and `update_policy`, timed in parts. The run it
steps is built by train_run.py."""

import inspect
import os
import sys
from typing import Any, Callable, Dict, Optional

from feedbench_driver.readings import StepTimes
from feedbench_driver.run_config import trained_config


def make_accelerator(cfg: Any) -> Any:
    """The Accelerator lerobot-train makes (0.6): on the CPU where the policy says so, mixed
    precision from the policy's dtype, else from `use_amp` by torch's autocast default."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    active = trained_config(cfg)
    precision = {"bfloat16": "bf16", "float16": "fp16", "float32": "no"}.get(
        str(getattr(active, "dtype", None)))
    if not hasattr(active, "dtype") and getattr(active, "use_amp", False):
        autocast = torch.get_autocast_dtype(torch.device(active.device).type)
        precision = {torch.bfloat16: "bf16", torch.float16: "fp16"}[autocast]
    return Accelerator(
        step_scheduler_with_optimizer=False,
        mixed_precision=precision,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        cpu=active.device == "cpu",
    )


def weights_here(cfg: Any) -> Optional[str]:
    """The pretrained backbone weights the policy names, where they are not on this machine:
    set to None (random weights, the same compute), and said. None where nothing was changed."""
    import torch

    name = getattr(trained_config(cfg), "pretrained_backbone_weights", None)
    if not name:
        return None
    try:
        import torchvision

        url = torchvision.models.get_weight(name).url
    except Exception:  # an unknown name: LeRobot says so itself when it builds the policy
        return None
    if os.path.exists(os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(url))):
        return None
    trained_config(cfg).pretrained_backbone_weights = None
    return f"{name} is not on this machine: the backbone starts from random weights (same compute)"


class Timer:
    """Wall ms between marks, the device synchronised first where it runs asynchronously."""

    def __init__(self, device: Any) -> None:
        import torch

        self.sync: Callable[[], None] = (
            torch.cuda.synchronize if device.type == "cuda" else (lambda: None))
        self.marks: Dict[str, float] = {}

    def mark(self, name: str) -> None:
        """The time now as `name`, the device synchronised first."""
        import time

        self.sync()
        self.marks[name] = time.perf_counter()

    def ms(self, start: str, end: str) -> float:
        """Ms from mark `start` to mark `end`; 0 where either is missing."""
        return (self.marks[end] - self.marks[start]) * 1e3 if start in self.marks and end in self.marks else 0.0


def top_modules(policy: Any) -> Dict[str, Any]:
    """The policy's own top-level modules (ACT's backbone, encoder, decoder; diffusion's RGB
    encoder and U-Net): the children of its one model where it wraps one."""
    children = dict(policy.named_children())
    while len(children) == 1:
        inner = dict(next(iter(children.values())).named_children())
        if not inner:
            break
        children = inner
    return children


class TrainingStep:
    """lerobot-train's step: the policy, pre-processor, optimizer and scheduler built by
    LeRobot's factories, prepared by accelerate as lerobot-train prepares them (its DataLoaders
    by `Run.prepare`, each measurement's own, with the accelerator given); each step hands the batch over as lerobot-train's
    loop does (the uint8 cameras to float32 / 255 on the device, the pre-processor) and runs
    `update_policy` (forward, backward through accelerate, grad clip, optimizer and scheduler),
    timed in parts by hooks."""

    def __init__(self, cfg: Any, dataset: Any, accelerator: Any = None) -> None:
        from lerobot.optim.factory import make_optimizer_and_scheduler
        from lerobot.policies.factory import make_policy, make_pre_post_processors

        self.cfg, self.dataset = cfg, dataset
        self.accelerator = accelerator or make_accelerator(cfg)
        note = weights_here(cfg)
        if note is not None:
            sys.stderr.write(f"feedbench: {note}\n")  # where LeRobot's own warnings go
        policy_kwargs = {"cfg": cfg.policy, "ds_meta": dataset.meta}
        if "rename_map" in inspect.signature(make_policy).parameters:
            policy_kwargs["rename_map"] = getattr(cfg, "rename_map", None)
        policy = make_policy(**policy_kwargs)
        active = trained_config(cfg)
        processor_kwargs = {}
        if not active.pretrained_path or not cfg.resume:
            processor_kwargs["dataset_stats"] = dataset.meta.stats
        self.preprocessor, _ = make_pre_post_processors(
            policy_cfg=cfg.policy, pretrained_path=active.pretrained_path, **processor_kwargs)
        optimizer, scheduler = make_optimizer_and_scheduler(cfg, policy)
        self.policy, self.optimizer, self.scheduler = self.accelerator.prepare(
            policy, optimizer, scheduler)
        self.device = self.accelerator.device
        self.cameras = list(dataset.meta.camera_keys)
        self.timer = Timer(self.device)
        self.modules = top_modules(self.accelerator.unwrap_model(self.policy))
        self.module_ms: Dict[str, float] = {name: 0.0 for name in self.modules}
        self.hook()
        self.tracker = self.metrics_tracker()
        self.policy.train()
        self.parameters: int = sum(p.numel() for p in self.policy.parameters())

    def hook(self) -> None:
        """Marks around the policy's forward (update_policy calls `policy.forward` itself, which
        no module hook sees), the optimizer's step, and each top-level module's forward."""
        forward = self.policy.forward

        def timed_forward(*args: Any, **kwargs: Any) -> Any:
            self.timer.mark("forward")
            out = forward(*args, **kwargs)
            self.timer.mark("backward")
            return out

        self.policy.forward = timed_forward
        optimizer = getattr(self.optimizer, "optimizer", self.optimizer)
        optimizer.register_step_pre_hook(lambda *_: self.timer.mark("optimizer"))
        import torch

        for name, module in self.modules.items():
            # A list of modules (diffusion's RGB encoder per camera) is never called itself.
            listed = isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict))
            for called in (module.children() if listed else [module]):
                called.register_forward_pre_hook(lambda *_, n=name: self.timer.mark("m:" + n))
                called.register_forward_hook(lambda *_, n=name: self.add_module_ms(n))

    def add_module_ms(self, name: str) -> None:
        self.timer.mark("m:" + name + ":end")
        self.module_ms[name] += self.timer.ms("m:" + name, "m:" + name + ":end")

    def metrics_tracker(self) -> Any:
        import torch
        from lerobot.utils.logging_utils import AverageMeter, MetricsTracker

        metrics = {
            "loss": AverageMeter("loss", ":.3f"),
            "grad_norm": AverageMeter("grdn", ":.3f"),
            "lr": AverageMeter("lr", ":0.1e"),
            "update_s": AverageMeter("updt_s", ":.3f"),
            "dataloading_s": AverageMeter("data_s", ":.3f"),
        }
        if torch.cuda.is_available():
            metrics["gpu_mem_gb"] = AverageMeter("mem_gb", ":.2f")
        return MetricsTracker(self.cfg.batch_size, self.dataset.num_frames,
                              self.dataset.num_episodes, metrics, accelerator=self.accelerator)

    def hand_over(self, batch: Dict[str, Any]) -> Any:
        """What lerobot-train's main process does to a batch before its step."""
        import torch

        for key in self.cameras:
            if key in batch and batch[key].dtype == torch.uint8:
                batch[key] = batch[key].to(dtype=torch.float32) / 255.0
        return self.preprocessor(batch)

    def update(self, batch: Any) -> StepTimes:
        """lerobot-train's own update_policy on `batch`: its parts in ms (forward, backward
        with the grad clip, optimizer) and each top-level module's forward."""
        from lerobot.scripts.lerobot_train import update_policy

        self.timer.marks.clear()
        self.module_ms = dict.fromkeys(self.module_ms, 0.0)
        self.timer.mark("start")
        self.tracker, _ = update_policy(
            self.tracker, self.policy, batch, self.optimizer,
            self.cfg.optimizer.grad_clip_norm, accelerator=self.accelerator,
            lr_scheduler=self.scheduler)
        self.timer.mark("end")
        t = self.timer
        return StepTimes(forward_ms=t.ms("forward", "backward"),
                         backward_ms=t.ms("backward", "optimizer"),
                         optimizer_ms=t.ms("optimizer", "end"), update_ms=t.ms("start", "end"),
                         modules_ms=dict(self.module_ms))
