"""Tokens/s and MFU of this trainer's step, against a naive ELECTRA-size MLM step, in one run.

naive: Hugging Face `ElectraForMaskedLM` with the discriminator's size, computing vocabulary
       logits at EVERY position and the loss on the masked 15% (what a straightforward MLM
       pre-training script does), eager attention.
ours:  the trainer's own optimizer step (`training.optimizer_step`: the full ELECTRA objective of
       `train.py`, generator logits only at masked positions, one softmax for loss and sampling,
       discriminator + λ·BCE, clipping, fused AdamW, statistics kept on the device) on full rows
       (no padding, no attention mask), the trainer's attention kernel for the device
       (`modeling.attention_implementation`), its default precision: bf16 autocast where the
       hardware multiplies in bf16 natively (also on CPUs with AVX512-BF16/AMX), else fp32, and
       its default pre-training dropout (0, see `PretrainConfig.dropout`); on a GPU (or with
       --compile) with the fixed shapes the trainer uses there, with --compile under
       torch.compile as `train --compile` runs it. Our step in fp32 and with ELECTRA's dropout
       0.1 are reported too (not with --ours-only).
Both: same discriminator size, vocabulary, sequence length and batch, AdamW step included, in
one process with the trainers' malloc setting (`corrector.allocator`), which speeds up both.
MFU: the step's model FLOPs (`flops.electra_step_flops`) a second over the device's dense bf16
peak (`flops.GPU_BF16_PEAK_TFLOPS`, or --peak-tflops); on a CPU without --peak-tflops only the
achieved TFLOP/s.
"""

from __future__ import annotations

import json
import platform
import time
from types import SimpleNamespace

import torch
from torch import nn
from transformers import ElectraForMaskedLM

from ..runtime.allocator import retain_freed_memory
from ..training import StatsWindow, compile_model, make_optimizer, native_bf16, optimizer_step
from .flops import GPU_BF16_PEAK_TFLOPS, bf16_peak_tflops, electra_step_flops  # noqa: F401 (the bench's API)
from .modeling import (
    DEFAULT_VOCAB_SIZE,
    PRESET_VOCAB_SIZE,
    PRESETS,
    attention_implementation,
    build_pair,
    electra_configs,
    set_attention,
)
from .train import PretrainConfig, ReplacedTokenDetection, set_dropout


class Autocast(nn.Module):
    """`inner` run under bf16 autocast when `enabled`: what Accelerate's prepare does for the trainer."""

    def __init__(self, inner: nn.Module, device_type: str, enabled: bool) -> None:
        super().__init__()
        self.inner, self.device_type, self.enabled = inner, device_type, enabled

    def forward(self, *args):
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.enabled):
            return self.inner(*args)


def _time_steps(step, steps: int, device: torch.device, warmup: int = 1) -> float:
    for _ in range(warmup):  # allocator, kernels; a compiled step: compilation and CUDA graph capture
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / steps


def _naive_seconds(disc_config, input_ids: torch.Tensor, steps: int, device: torch.device) -> float:
    disc_config._attn_implementation = "eager"
    naive = ElectraForMaskedLM(disc_config).to(device)
    naive_opt = torch.optim.AdamW(naive.parameters(), lr=1e-4)
    labels = input_ids.clone()
    labels[torch.rand(labels.shape, device=device) >= 0.15] = -100
    attention_mask = torch.ones_like(input_ids)

    def naive_step() -> None:
        loss = naive(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        naive_opt.step()
        naive_opt.zero_grad(set_to_none=True)

    return _time_steps(naive_step, steps, device)


def _our_seconds(size, vocab_size: int, input_ids: torch.Tensor, steps: int, device: torch.device,
                 options: SimpleNamespace) -> dict[str, float]:
    """Seconds a step of ours takes: at the default settings, and (unless options.ours_only) in
    fp32 and with dropout 0.1."""
    cfg = PretrainConfig(compile=options.compile, compile_mode=options.compile_mode)
    discriminator, generator = build_pair(size, vocab_size)
    static = device.type == "cuda" or cfg.compile  # as `train` sets it
    ours = ReplacedTokenDetection(discriminator, generator, cfg, [2, 3, 0], mask_token_id=4, static_shapes=static).to(device)
    optimizer = make_optimizer(ours, lr=1e-4, weight_decay=0.01)  # the trainer's (fused) AdamW
    default_bf16 = cfg.bf16 and native_bf16(on_cpu=device.type == "cpu")
    model = Autocast(compile_model(ours, cfg, device.type, static=True), device.type, default_bf16)
    window = StatsWindow()
    warmup = 3 if cfg.compile else 1

    def our_step() -> None:
        set_attention((discriminator, generator), device.type, model.enabled)  # what the trainer would pick
        optimizer_step(model, optimizer, None, lambda: (input_ids, None), window, 1, 1.0)

    seconds = {"default": _time_steps(our_step, steps, device, warmup)}
    window.read()  # statistics of the timed steps, read once as the trainer reads them
    if options.ours_only:
        return seconds
    if default_bf16:
        model.enabled = False
        seconds["fp32"] = _time_steps(our_step, steps, device, warmup)
        model.enabled = True
    else:
        seconds["fp32"] = seconds["default"]
    set_dropout(ours, 0.1)  # ELECTRA's own dropout, for comparison
    seconds["dropout"] = _time_steps(our_step, steps, device, warmup)
    return seconds


def run_bench(preset: str, batch_size: int, max_length: int, vocab_size: int | None, steps: int,
              json_path: str | None = None, device: str | None = None, peak_tflops: float | None = None,
              ours_only: bool = False, compile: bool = False, compile_mode: str = "auto") -> dict:
    """Time both steps on `device` (default: CUDA when available, else CPU), and the model FLOPs
    utilisation of ours against `peak_tflops` (default: the known bf16 peak of a GPU)."""
    retain_freed_memory()
    torch.manual_seed(0)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    size = PRESETS[preset]
    vocab_size = vocab_size or PRESET_VOCAB_SIZE.get(preset, DEFAULT_VOCAB_SIZE)
    input_ids = torch.randint(5, vocab_size, (batch_size, max_length))
    input_ids[:, 0], input_ids[:, -1] = 2, 3  # [CLS], [SEP] in our vocabularies; [PAD] is 0
    input_ids = input_ids.to(device)
    tokens = batch_size * max_length
    disc_config, gen_config = electra_configs(size, vocab_size)
    options = SimpleNamespace(ours_only=ours_only, compile=compile, compile_mode=compile_mode)
    naive_seconds = None if ours_only else _naive_seconds(disc_config, input_ids, steps, device)
    ours = _our_seconds(size, vocab_size, input_ids, steps, device, options)
    default_bf16 = PretrainConfig().bf16 and native_bf16(on_cpu=device.type == "cpu")
    step_flops = electra_step_flops(disc_config, gen_config, batch_size, max_length, PretrainConfig().mask_prob)
    peak_tflops = peak_tflops or bf16_peak_tflops(device)
    result = {
        "preset": preset, "batch_size": batch_size, "max_length": max_length, "vocab_size": vocab_size,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "machine": platform.processor() or platform.machine(),
        "compile": compile, "compile_mode": compile_mode if compile else None,
        "static_shapes": device.type == "cuda" or compile,
        "naive_tokens_per_s": tokens / naive_seconds if naive_seconds else None,
        "ours_precision": "bf16 autocast" if default_bf16 else "fp32",
        "ours_attention": attention_implementation(device.type, default_bf16),
        "ours_tokens_per_s": tokens / ours["default"],
        "ours_fp32_tokens_per_s": tokens / ours["fp32"] if "fp32" in ours else None,
        "ours_dropout_tokens_per_s": tokens / ours["dropout"] if "dropout" in ours else None,
        "dropout": PretrainConfig().dropout,
        "speedup": naive_seconds / ours["default"] if naive_seconds else None,
        "speedup_fp32": naive_seconds / ours["fp32"] if naive_seconds else None,
        "ours_step_tflop": step_flops / 1e12,
        "ours_flops_per_token": step_flops / tokens,
        "ours_achieved_tflops": step_flops / ours["default"] / 1e12,
        "peak_tflops": peak_tflops,
        "mfu": step_flops / ours["default"] / 1e12 / peak_tflops if peak_tflops else None,
    }
    _report(result)
    if json_path:
        with open(json_path, "w") as handle:
            json.dump(result, handle, indent=1)
    return result


def _report(result: dict) -> None:
    print(f"preset={result['preset']} batch={result['batch_size']}x{result['max_length']} vocab={result['vocab_size']} "
          f"device={result['device']} threads={result['threads']}"
          + (f" compile={result['compile_mode']}" if result["compile"] else ""))
    precision, dropout = result["ours_precision"], result["dropout"]
    if result["naive_tokens_per_s"]:
        print(f"  naive MLM step (full-vocab logits everywhere): {result['naive_tokens_per_s']:8.0f} tok/s")
        print(f"  this trainer (ELECTRA step, gen logits at masked only), fp32: "
              f"{result['ours_fp32_tokens_per_s']:8.0f} tok/s  ({result['speedup_fp32']:.2f}x)")
        print(f"  this trainer, default precision ({precision}) and dropout 0.1: "
              f"{result['ours_dropout_tokens_per_s']:8.0f} tok/s")
    print(f"  this trainer, default precision ({precision}) and dropout {dropout}: {result['ours_tokens_per_s']:8.0f} tok/s")
    if result["speedup"]:
        print(f"  speed-up at default settings: {result['speedup']:.2f}x")
    mfu = (f", MFU {result['mfu']:.1%} of {result['peak_tflops']:.0f} TFLOP/s bf16" if result["mfu"] is not None
           else " (no MFU: no peak known for this device; --peak-tflops gives one)")
    print(f"  model FLOPs: {result['ours_flops_per_token'] / 1e6:.1f} MFLOP a token, "
          f"{result['ours_achieved_tflops']:.2f} TFLOP/s achieved{mfu}")
