"""Pieces shared by pre-training and fine-tuning: optimizer + schedule, atomic checkpoints with
resume (also every --checkpoint-every-s seconds), a resumable batch order and its prefetcher, the
optimizer step and loop both trainers run (statistics summed on the device and read every
--log-every steps, logged with tokens/s and MFU), and a JSONL metrics log. The objectives stay in
`corrector/pretrain/train.py` and `corrector/finetune/train.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field, fields
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
    # torch.compile the model's forward (and with it AOTAutograd's backward); the optimizer is
    # the fused AdamW kernel outside the graph. Off by default: on two CPU cores compiling the
    # tiny test model takes longer than the tests' whole runs.
    compile: bool = False
    compile_mode: str = "auto"  # see COMPILE_MODES
    checkpoint_every_s: float | None = None  # also checkpoint when this many seconds passed since the last
    peak_tflops: float | None = None  # the device's dense bf16 peak for the logged MFU (default: known GPUs)


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
    "compile": "torch.compile the step's model (forward + backward graphs); shapes are made static for it",
    "compile_mode": "torch.compile mode: auto (reduce-overhead = CUDA graphs on a GPU, default on a CPU), "
                    "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
    "checkpoint_every_s": "also checkpoint every N seconds of wall time (a lease's call can end at any moment)",
    "peak_tflops": "the device's dense bf16 peak (TFLOP/s) for the logged MFU (default: known GPUs, e.g. H200 989)",
}
COMPILE_MODES = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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
            item = (typing.get_args(hint) or (str,))[0]
            parser.add_argument(flag, nargs="+", type=item, required=f.name in required, default=default, help=text)
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
    # fused: one kernel over all parameters, on CUDA and on the CPU alike: 2.5x faster than the
    # default step, and on the CPU 13x faster than foreach (ELECTRA-small, 13 M weights, 2 threads:
    # 41-59 ms against 548-1,126 ms a step), so the CPU keeps it too.
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

    _permutation: tuple[int, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def indices_at(self, position: int) -> np.ndarray:
        """The rows of batch `position` (a pure function of it: a prefetcher may ask ahead)."""
        epoch, index = divmod(position, self.batches_per_epoch)
        cached = self._permutation
        if cached is None or cached[0] != epoch:
            # One permutation per epoch, not per batch: drawing one over 208,824 rows takes 2.1 ms
            # of host time, 4 % of an H200 pre-training step (56 ms at 580 k tokens/s).
            cached = self._permutation = (epoch, np.random.default_rng(self.seed + epoch).permutation(self.num_rows))
        start = (index * self.world_size + self.rank) * self.batch_size
        return np.sort(cached[1][start : start + self.batch_size])  # sorted: friendlier memmap reads

    def next_indices(self) -> np.ndarray:
        indices = self.indices_at(self.position)
        self.position += 1
        return indices

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


def bare_model(accelerator, model: nn.Module) -> nn.Module:
    """The model without its DDP and torch.compile wrappers: checkpoints hold the same keys
    whether the run that wrote them compiled its step or not."""
    model = accelerator.unwrap_model(model)
    return getattr(model, "_orig_mod", model)


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
            "model": bare_model(accelerator, model).state_dict(),
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
    bare_model(accelerator, model).load_state_dict(state["model"])
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
        final = bare_model(accelerator, model)
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


def select_positions(mask: torch.Tensor, size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat indices of `mask`'s True entries in row-major order, which of them are real).

    size None: exactly as many as there are; the count is read on the host, which costs nothing
    on a CPU, and the values are those of boolean indexing. size N: always N indices, the real
    ones first, the rest pointing at position 0 and marked not real: a fixed shape and no host
    sync, which compiled graphs and CUDA graphs need (a GPU step waited for every such count)."""
    flat = mask.reshape(-1)
    if size is None:
        index = flat.nonzero().squeeze(1)
        return index, torch.ones_like(index, dtype=torch.bool)
    index = torch.nonzero_static(flat, size=size, fill_value=-1).squeeze(1)
    return index.clamp(min=0), index >= 0


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of `values` where `mask` (all of them for None), 0 where none is: no boolean indexing,
    so no host sync and a fixed shape."""
    if mask is None:
        return values.mean()
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1)


class StatsWindow:
    """A log interval's statistics, summed on the device: each step's dict of 0-d tensors is
    stacked and added in two kernels and read on the host once per interval. Reading them with
    `.item()` every step (eight reads) made the GPU wait for the host each step."""

    def __init__(self) -> None:
        self.keys: list[str] | None = None
        self.sums: torch.Tensor | None = None
        self.count = 0

    def add(self, stats: dict[str, torch.Tensor]) -> None:
        if self.keys is None:
            self.keys = list(stats)
        values = torch.stack([stats[k].detach().float() for k in self.keys])
        self.sums = values.double() if self.sums is None else self.sums.add_(values)
        self.count += 1

    def read(self) -> tuple[dict[str, float], float]:
        """(mean of each statistic but "tokens", total "tokens") since the last read; resets."""
        if self.sums is None:
            return {}, 0.0
        values = dict(zip(self.keys, self.sums.tolist(), strict=True))
        tokens = values.pop("tokens", 0.0)
        means = {k: v / max(1, self.count) for k, v in values.items()}
        self.sums, self.count = None, 0
        return means, tokens


class BatchPrefetcher:
    """`next_batch` for the loop: batches are built from `order` on a background thread, `ahead`
    of the step that uses them, in pinned memory on CUDA, and copied to the device without
    blocking. `order.position` counts the batches handed out, so a checkpoint still resumes
    with exactly the next one. `make(rows)` returns CPU tensors (or None)."""

    def __init__(self, make, order: BatchOrder, device: torch.device, ahead: int = 2) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.make, self.order, self.device, self.ahead = make, order, torch.device(device), ahead
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batches")
        self.pending: dict = {}
        self.pin = self.device.type == "cuda"

    def _build(self, position: int) -> tuple:
        batch = self.make(self.order.indices_at(position))
        return tuple(t.pin_memory() if self.pin and t is not None else t for t in batch)

    def __call__(self) -> tuple:
        position = self.order.position
        for stale in [p for p in self.pending if p < position]:
            self.pending.pop(stale).cancel()
        for ahead in range(position, position + self.ahead + 1):
            if ahead not in self.pending:
                self.pending[ahead] = self.pool.submit(self._build, ahead)
        batch = self.pending.pop(position).result()
        self.order.position += 1
        return tuple(t.to(self.device, non_blocking=True) if t is not None else None for t in batch)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def compile_model(model: nn.Module, cfg, device_type: str, static: bool) -> nn.Module:
    """`model` under torch.compile with cfg.compile, else as it is. Mode "auto": CUDA graphs
    ("reduce-overhead") on a GPU when every step has one of a few fixed shapes (full pre-training
    rows, bucketed fine-tuning widths): a fine-tuning step launched 766 kernels of ~7 µs each, 35 ms
    of host time against 14 ms of GPU work (docs/gpu.md, "Profiled"); a CUDA graph replays them
    in one launch. Else inductor's default mode, shapes left to dynamo."""
    if not cfg.compile:
        return model
    if cfg.compile_mode not in COMPILE_MODES:
        raise ValueError(f"--compile-mode must be one of {', '.join(COMPILE_MODES)}, not {cfg.compile_mode!r}")
    mode = cfg.compile_mode
    if mode == "auto":
        mode = "reduce-overhead" if device_type == "cuda" and static else "default"
    return torch.compile(model, mode=mode, dynamic=False if static else None)


def optimizer_step(model, optimizer, scheduler, next_batch, window: StatsWindow, grad_accum: int,
                   max_grad_norm: float, accelerator=None) -> torch.Tensor:
    """One optimizer step over `grad_accum` micro-batches: forward, backward, clipping, the fused
    AdamW step, the schedule. Nothing is read back to the host: the statistics go to `window`
    and the gradient norm is returned as a tensor. `accelerator` None: plain autograd (the bench)."""
    from contextlib import nullcontext

    for micro in range(grad_accum):
        # Only the last micro-step of an accumulation synchronises gradients across processes.
        last = micro == grad_accum - 1
        sync = nullcontext() if accelerator is None or last else accelerator.no_sync(model)
        with sync:
            loss, stats = model(*next_batch())
            scaled = loss / grad_accum if grad_accum > 1 else loss
            accelerator.backward(scaled) if accelerator is not None else scaled.backward()
        window.add(stats)
    clip = accelerator.clip_grad_norm_ if accelerator is not None else torch.nn.utils.clip_grad_norm_
    grad_norm = clip(model.parameters(), max_grad_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


class LoopClock:
    """The loop's wall-time decisions: --max-minutes and --checkpoint-every-s. Processes of one
    run must agree on them, or one would wait at a checkpoint's barrier for ever: with several,
    rank 0 decides at log steps only (one broadcast, where the loop reads its statistics anyway)."""

    def __init__(self, cfg, accelerator) -> None:
        self.cfg, self.accelerator = cfg, accelerator
        self.started = self.last_save = time.time()

    def check(self, logged: bool) -> tuple[bool, bool]:
        """(out of time, a time-based checkpoint is due)."""
        now, cfg = time.time(), self.cfg
        out = cfg.max_minutes is not None and (now - self.started) / 60 >= cfg.max_minutes
        save = cfg.checkpoint_every_s is not None and now - self.last_save >= cfg.checkpoint_every_s
        if self.accelerator.num_processes > 1:
            if not logged:
                return False, False
            from accelerate.utils import broadcast

            flags = broadcast(torch.tensor([out, save], dtype=torch.long, device=self.accelerator.device), from_process=0)
            out, save = bool(flags[0]), bool(flags[1])
        return out, save

    def saved(self) -> None:
        self.last_save = time.time()


def log_record(window: StatsWindow, step: int, scheduler, grad_norm: torch.Tensor, order: BatchOrder, since: float,
               num_processes: int, flops_per_token: float | None, peak_tflops: float | None) -> dict:
    """The metrics.jsonl record of a log interval: the statistics' means, tokens/s and, with the
    model's FLOPs a token, achieved TFLOP/s and MFU against `peak_tflops`."""
    means, tokens = window.read()  # waits for the interval's steps: the time below is theirs
    tokens_per_s = tokens * num_processes / max(time.time() - since, 1e-9)
    record = {**means, "step": step, "lr": scheduler.get_last_lr()[0], "grad_norm": float(grad_norm),
              "tokens_per_s": tokens_per_s, "epoch": order.epoch}
    if flops_per_token:
        record["tflops"] = flops_per_token * tokens_per_s / 1e12
        if peak_tflops:
            record["mfu"] = record["tflops"] / peak_tflops
    return record


def run_loop(cfg, accelerator, model, optimizer, scheduler, next_batch, order: BatchOrder, output: Path, step: int,
             desc: str, flops_per_token: float | None = None, peak_tflops: float | None = None) -> int:
    """The optimisation loop both trainers share; returns the last step reached.

    `model(*next_batch())` returns (loss, stats): 0-d tensors to average plus "tokens", summed on
    the device and read every `log_every` steps, the loop's only host sync. `cfg` supplies
    max_steps, grad_accum, max_grad_norm, log_every, save_every, checkpoint_every_s, max_minutes
    and stop_at_step (None = no limit). Checkpoints carry the batch order's position, so a
    resumed run continues with exactly the next batch.
    """
    from tqdm.auto import tqdm

    metrics = MetricsLog(Path(output) / "metrics.jsonl", enabled=accelerator.is_main_process)
    progress = tqdm(total=cfg.max_steps, initial=step, disable=not accelerator.is_local_main_process, desc=desc)
    window, clock = StatsWindow(), LoopClock(cfg, accelerator)
    window_start = time.time()
    model.train()
    profile = cfg.profile_steps > 0 and accelerator.is_main_process
    profiler = StepProfiler(output, step + 10, cfg.profile_steps) if profile else None
    while step < cfg.max_steps:
        if profiler:
            profiler.before_step(step)
        grad_norm = optimizer_step(model, optimizer, scheduler, next_batch, window, cfg.grad_accum,
                                   cfg.max_grad_norm, accelerator)
        step += 1
        progress.update(1)
        if profiler:
            profiler.after_step(step)
        logged = step % cfg.log_every == 0 or step == cfg.max_steps
        if logged:
            record = log_record(window, step, scheduler, grad_norm, order, window_start, accelerator.num_processes,
                                flops_per_token, peak_tflops)
            metrics.write(record)
            shown = {k: f"{record[k]:.3g}" for k in list(record)[:4]}
            rate = {"mfu": f"{record['mfu']:.1%}"} if "mfu" in record else {}
            progress.set_postfix(tok_s=f"{record['tokens_per_s']:.0f}", **rate, **shown)
            window_start = time.time()
        out_of_time, save_due = clock.check(logged)
        stop = out_of_time or step == cfg.stop_at_step
        if step % cfg.save_every == 0 or step == cfg.max_steps or stop or save_due:
            save_checkpoint(output, step, accelerator, model, optimizer, scheduler, {"position": order.position})
            clock.saved()
        if stop:
            accelerator.print(f"stopping at step {step} ({'time limit' if out_of_time else '--stop-at-step'}); "
                              "rerun with --resume to continue")
            break
    if profiler:
        profiler.finish(step)
    if hasattr(next_batch, "close"):
        next_batch.close()
    progress.close()
    return step


def write_weight_fingerprint(output: Path, accelerator, model: nn.Module) -> None:
    """Each process writes a hash of its weights, so a multi-process run can be checked for
    replicas that drifted apart (they must all be identical under DDP)."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(bare_model(accelerator, model).state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    folder = Path(output) / "ranks"
    folder.mkdir(exist_ok=True)
    (folder / f"rank-{accelerator.process_index}.json").write_text(json.dumps({"sha256": digest.hexdigest()}))
