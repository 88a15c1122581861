"""Pieces shared by pre-training and fine-tuning: optimizer + schedule, atomic checkpoints with
resume, a resumable batch order, and a JSONL metrics log. The loops themselves stay explicit in
`corrector/pretrain/train.py` and `corrector/finetune/train.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch import nn

CHECKPOINT_DIR = "checkpoints"


@dataclass
class LoopConfig:
    """The fields `setup_run` and `run_loop` read; both trainers' configs extend it (and may
    override the defaults)."""

    output: str = "runs/train"
    batch_size: int = 32  # per process, per micro-step
    grad_accum: int = 1
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup_steps: int = 1000
    max_steps: int = 10000
    max_grad_norm: float = 1.0
    seed: int = 42
    save_every: int = 500
    log_every: int = 20
    resume: bool = False
    cpu: bool = False
    bf16: bool = True  # bf16 autocast on GPUs and on CPUs with native bf16 (AVX512-BF16/AMX)
    max_minutes: float | None = None  # stop (with a checkpoint) after this wall time
    stop_at_step: int | None = None  # stop (with a checkpoint) here; the schedule still spans max_steps
    profile_steps: int = 0  # profile this many steps (after 10 warm ones) into OUTPUT/profile.txt


LOOP_HELP = {
    "batch_size": "sequences per process per micro-step",
    "grad_accum": "micro-steps per optimizer step",
    "lr": "peak learning rate (AdamW)",
    "weight_decay": "AdamW weight decay (not on biases/LayerNorm)",
    "warmup_steps": "linear warmup steps, then linear decay to 0 at --max-steps",
    "max_steps": "optimizer steps in total (the schedule ends here)",
    "max_grad_norm": "gradient clipping norm",
    "seed": "random seed (data order, masking, init)",
    "save_every": "checkpoint every N steps (atomic; the latest one is kept)",
    "log_every": "write metrics.jsonl / progress every N steps",
    "resume": "continue from OUTPUT/checkpoints/latest at the same step and data position",
    "cpu": "force the CPU even where a GPU is present",
    "bf16": "bf16 autocast on a GPU, and on a CPU with native bf16 matmuls (AVX512-BF16/AMX: ~1.7x faster); --no-bf16 for fp32",
    "max_minutes": "stop after this many minutes with a checkpoint (resume later with --resume)",
    "stop_at_step": "stop at this step with a checkpoint and the final model; the schedule still spans --max-steps",
    "profile_steps": "profile this many steps with torch.profiler after 10 warm ones: OUTPUT/profile.txt (ops by time)",
}


def subcommand_parser(prog: str, description: str | None, add_commands) -> argparse.ArgumentParser:
    """The parser of a `python -m corrector.pretrain|finetune COMMAND` CLI: each of `add_commands`
    adds one command's sub-parser."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for add in add_commands:
        add(commands)
    return parser


def add_config_arguments(parser, config_cls, help: dict[str, str], required: tuple[str, ...] = ()) -> None:
    """One flag per field of a trainer config dataclass (`--max-steps` for `max_steps`); list
    fields take several values, booleans get --x/--no-x, optional numbers their own type."""
    import typing

    defaults = config_cls()
    hints = typing.get_type_hints(config_cls)
    for f in fields(config_cls):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        text = help.get(f.name) or LOOP_HELP[f.name]
        hint = hints[f.name]
        if typing.get_origin(hint) is list:
            parser.add_argument(flag, nargs="+", required=f.name in required, default=default, help=text)
        elif hint is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=text)
        else:
            kind = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
            parser.add_argument(flag, type=kind, default=default, help=f"{text} (default: {default})")


def config_from_args(config_cls, args):
    return config_cls(**{f.name: getattr(args, f.name) for f in fields(config_cls)})
LATEST_FILE = "latest"


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW without weight decay on biases and LayerNorm weights (as BERT/ELECTRA), fused."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel over all parameters (CPU and CUDA), 2.5x faster than the default step.
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6, fused=True)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup to the peak learning rate, then linear decay to zero at `total_steps`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass
class BatchOrder:
    """A seeded shuffled order over `num_rows`, sharded across processes; `position` counts
    global batches consumed so a resumed run continues with exactly the next batch."""

    num_rows: int
    batch_size: int  # per process
    world_size: int = 1
    rank: int = 0
    seed: int = 0
    position: int = 0

    @property
    def batches_per_epoch(self) -> int:
        return max(1, self.num_rows // (self.batch_size * self.world_size))

    def next_indices(self) -> np.ndarray:
        epoch, index = divmod(self.position, self.batches_per_epoch)
        order = np.random.default_rng(self.seed + epoch).permutation(self.num_rows)
        start = (index * self.world_size + self.rank) * self.batch_size
        self.position += 1
        return np.sort(order[start : start + self.batch_size])  # sorted: friendlier memmap reads

    @property
    def epoch(self) -> float:
        return self.position / self.batches_per_epoch


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(output_dir: str | Path, step: int, accelerator, model: nn.Module, optimizer, scheduler, extra: dict, keep: int = 1) -> Path:
    """Write `checkpoints/step-N` atomically: everything goes into a temp dir, which is renamed
    only when complete, then the `latest` pointer is replaced (os.replace is atomic). A run killed
    at any moment leaves the previous checkpoint intact and `latest` pointing at it."""
    root = Path(output_dir) / CHECKPOINT_DIR
    final = root / f"step-{step:08d}"
    tmp = root / f"step-{step:08d}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    # Each process keeps its own RNG stream (dropout, masking, sampling).
    torch.save(rng_state(), tmp / f"rng-{accelerator.process_index}.pt")
    if accelerator.is_main_process:
        state = {
            "model": accelerator.unwrap_model(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "step": step,
            "extra": extra,
        }
        torch.save(state, tmp / "state.pt")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer = root / f"{LATEST_FILE}.tmp"
        pointer.write_text(final.name)
        os.replace(pointer, root / LATEST_FILE)
        for old in sorted(p for p in root.glob("step-*") if p.is_dir() and p.name != final.name)[:-keep or None]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    pointer = Path(output_dir) / CHECKPOINT_DIR / LATEST_FILE
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if (path / "state.pt").exists() else None


def load_checkpoint(path: Path, accelerator, model: nn.Module, optimizer, scheduler) -> tuple[int, dict]:
    """Restore a checkpoint written by `save_checkpoint`; returns (step, extra)."""
    state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
    accelerator.unwrap_model(model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    rng_file = path / f"rng-{accelerator.process_index}.pt"
    if rng_file.exists():
        set_rng_state(torch.load(rng_file, weights_only=False))
    return state["step"], state["extra"]


class MetricsLog:
    """Appends one JSON object per logged step to `OUT/metrics.jsonl` (main process only)."""

    def __init__(self, path: str | Path, enabled: bool = True) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self.start = time.time()

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        record = {"time": round(time.time() - self.start, 2), **record}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def native_bf16(on_cpu: bool) -> bool:
    """Does this device multiply in bf16 natively? On CPUs without AVX512-BF16/AMX, bf16 autocast
    is emulated and slower than fp32, so it is only used where oneDNN reports support."""
    if not on_cpu:
        return torch.cuda.is_bf16_supported()
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def setup_run(cfg) -> tuple:
    """(accelerator, output dir) for a trainer config with cpu, bf16, seed and output fields:
    bf16 autocast where the hardware runs it natively, a different seed per process (masking,
    dropout)."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    from .runtime.allocator import retain_freed_memory

    retain_freed_memory()
    use_bf16 = cfg.bf16 and native_bf16(on_cpu=cfg.cpu or not torch.cuda.is_available())
    accelerator = Accelerator(mixed_precision="bf16" if use_bf16 else "no", cpu=cfg.cpu)
    if accelerator.device.type == "cuda":
        # cuDNN's SDPA kernels plan each new shape on the host; the fine-tune pads every batch to its
        # longest sentence, so nearly every step planned anew: 8.7 + 11.6 ms per attention call
        # forward + backward, 72 % of a step's host time (--profile-steps, H200). SDPA's
        # memory-efficient and flash kernels need no plan.
        torch.backends.cuda.enable_cudnn_sdp(False)
    output = Path(cfg.output)
    output.mkdir(parents=True, exist_ok=True)
    set_seed(cfg.seed + accelerator.process_index)
    return accelerator, output


def resume_step(cfg, accelerator, model: nn.Module, optimizer, scheduler, order: BatchOrder, output: Path) -> int:
    """With `cfg.resume`, restore the latest checkpoint (weights, optimizer, schedule, RNG, data
    position) and return its step; else 0."""
    if not cfg.resume or (checkpoint := latest_checkpoint(output)) is None:
        return 0
    step, extra = load_checkpoint(checkpoint, accelerator, model, optimizer, scheduler)
    order.position = extra["position"]
    if accelerator.is_main_process:
        # A run killed while writing a checkpoint leaves its temp dir; one past the step this
        # run stops at would never be overwritten by a save.
        for stale in checkpoint.parent.glob("step-*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)
    accelerator.print(f"resumed from {checkpoint} at step {step}")
    return step


def save_final(accelerator, model: nn.Module, output: Path, tokenizer_dir: str) -> None:
    """The trained pair as `OUT/discriminator/`, `OUT/generator/` + tokenizer files."""
    from .runtime.models import save_pair

    write_weight_fingerprint(output, accelerator, model)
    if accelerator.is_main_process:
        final = accelerator.unwrap_model(model)
        final = getattr(final, "_orig_mod", final)  # torch.compile wrapper
        save_pair(final.discriminator, final.generator, str(output), tokenizer_dir)
        accelerator.print(f"saved discriminator/ and generator/ to {output}")
    accelerator.wait_for_everyone()


class StepProfiler:
    """torch.profiler over `steps` optimizer steps from `start`, written to OUTPUT/profile.txt:
    where a step's time goes, on the host and on the GPU. It found SDPA's cuDNN planning in the
    fine-tune (setup_run); what is left there is launch-bound (docs/gpu.md, "Profiled")."""

    def __init__(self, output: Path, start: int, steps: int) -> None:
        self.path, self.start, self.end = Path(output) / "profile.txt", start, start + steps
        self.profile: torch.profiler.profile | None = None
        self.began = 0.0

    def before_step(self, step: int) -> None:
        if step == self.start and self.profile is None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profile = torch.profiler.profile(activities=activities)
            self.profile.start()
            self.began = time.time()

    def after_step(self, step: int) -> None:
        if self.profile is not None and step >= self.end:
            self.finish(step)

    def finish(self, step: int) -> None:
        """Write the report of the steps profiled so far (the run may end before `end`)."""
        if self.profile is None:
            return
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        steps = max(1, step - self.start)
        wall = (time.time() - self.began) / steps
        self.profile.stop()
        averages = self.profile.key_averages()
        keys = ["self_cpu_time_total"] + (["self_cuda_time_total"] if torch.cuda.is_available() else [])
        tables = [f"{steps} steps, {wall * 1000:.1f} ms a step (wall, profiler on)"]
        tables += [f"\n## by {key}\n" + averages.table(sort_by=key, row_limit=40) for key in keys]
        self.path.write_text("\n".join(tables))
        self.profile = None


def run_loop(cfg, accelerator, model, optimizer, scheduler, next_batch, order: BatchOrder, output: Path, step: int, desc: str) -> int:
    """The optimisation loop both trainers share; returns the last step reached.

    `model(*next_batch())` returns (loss, stats) where stats holds floats to average plus an
    int "tokens". `cfg` supplies max_steps, grad_accum, max_grad_norm, log_every, save_every and
    max_minutes and stop_at_step (None = no limit). Checkpoints carry the batch order's position, so a resumed
    run continues with exactly the next batch.
    """
    from contextlib import nullcontext

    from tqdm.auto import tqdm

    metrics = MetricsLog(Path(output) / "metrics.jsonl", enabled=accelerator.is_main_process)
    progress = tqdm(total=cfg.max_steps, initial=step, disable=not accelerator.is_local_main_process, desc=desc)
    window: list[dict] = []
    started = window_start = time.time()
    window_tokens = 0
    model.train()
    profile = cfg.profile_steps > 0 and accelerator.is_main_process
    profiler = StepProfiler(output, step + 10, cfg.profile_steps) if profile else None
    while step < cfg.max_steps:
        if profiler:
            profiler.before_step(step)
        for micro in range(cfg.grad_accum):
            # Only the last micro-step of an accumulation synchronises gradients across processes.
            sync = accelerator.no_sync(model) if micro < cfg.grad_accum - 1 else nullcontext()
            with sync:
                loss, stats = model(*next_batch())
                accelerator.backward(loss / cfg.grad_accum)
            window.append(stats)
            window_tokens += stats["tokens"] * accelerator.num_processes
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        progress.update(1)
        if profiler:
            profiler.after_step(step)

        if step % cfg.log_every == 0 or step == cfg.max_steps:
            elapsed = time.time() - window_start
            record = {k: float(np.mean([w[k] for w in window])) for k in window[0] if k != "tokens"}
            record.update(step=step, lr=scheduler.get_last_lr()[0], grad_norm=float(grad_norm),
                          tokens_per_s=window_tokens / max(elapsed, 1e-9), epoch=order.epoch)
            metrics.write(record)
            shown = {k: f"{record[k]:.3g}" for k in list(record)[:4]}
            progress.set_postfix(tok_s=f"{record['tokens_per_s']:.0f}", **shown)
            window, window_start, window_tokens = [], time.time(), 0
        out_of_time = cfg.max_minutes is not None and (time.time() - started) / 60 >= cfg.max_minutes
        stop = out_of_time or step == cfg.stop_at_step
        if step % cfg.save_every == 0 or step == cfg.max_steps or stop:
            save_checkpoint(output, step, accelerator, model, optimizer, scheduler, {"position": order.position})
        if stop:
            accelerator.print(f"stopping at step {step} ({'time limit' if out_of_time else '--stop-at-step'}); "
                              "rerun with --resume to continue")
            break
    if profiler:
        profiler.finish(step)
    progress.close()
    return step


def write_weight_fingerprint(output: Path, accelerator, model: nn.Module) -> None:
    """Each process writes a hash of its weights, so a multi-process run can be checked for
    replicas that drifted apart (they must all be identical under DDP)."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(accelerator.unwrap_model(model).state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    folder = Path(output) / "ranks"
    folder.mkdir(exist_ok=True)
    (folder / f"rank-{accelerator.process_index}.json").write_text(json.dumps({"sha256": digest.hexdigest()}))
