"""Tokens/s of this trainer's step against a naive ELECTRA-size MLM step, in one run.

naive: Hugging Face `ElectraForMaskedLM` with the discriminator's size, computing vocabulary
       logits at EVERY position and the loss on the masked 15% (what a straightforward MLM
       pre-training script does), eager attention.
ours:  the full ELECTRA step of `train.py` (generator 1/4 width with logits only at masked
       positions, one softmax for loss and sampling + discriminator + λ·BCE), the trainer's
       attention kernel for the device (`modeling.attention_implementation`), its default
       precision: bf16 autocast where the hardware multiplies in bf16 natively (also on CPUs with
       AVX512-BF16/AMX), else fp32, and its default pre-training dropout (0, see
       `PretrainConfig.dropout`). Our step in fp32 and with ELECTRA's dropout 0.1 are reported too.
Both: same discriminator size, vocabulary, sequence length and batch, AdamW step included, in
one process with the trainers' malloc setting (`corrector.allocator`), which speeds up both.
"""

from __future__ import annotations

import json
import platform
import time

import torch
from transformers import ElectraForMaskedLM

from ..runtime.allocator import retain_freed_memory
from ..training import make_optimizer, native_bf16
from .modeling import PRESETS, attention_implementation, build_pair, electra_configs, set_attention
from .train import PretrainConfig, ReplacedTokenDetection, set_dropout

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) by device-name fragment, for MFU.
GPU_BF16_PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 NVL": 835.0, "H100 PCIe": 756.0, "H100": 989.0,
                        "A100": 312.0, "L40S": 362.0, "A10G": 125.0, "L4": 121.0, "RTX 4090": 165.0}


def _encoder_flops_per_token(config, length: int) -> float:
    """Forward FLOPs per token of an ELECTRA encoder: embedding projection, per layer the four
    attention projections, the two FFN matmuls and the attention scores/mixing over `length`."""
    h, i = config.hidden_size, config.intermediate_size
    projection = 2 * config.embedding_size * h if config.embedding_size != h else 0
    per_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * length * h
    return projection + config.num_hidden_layers * per_layer


def electra_step_flops(disc_config, gen_config, batch_size: int, length: int, mask_prob: float) -> float:
    """Model FLOPs of one ELECTRA training step (forward + backward = 3x forward), as counted
    for MFU: generator encoder on every token, its head and vocabulary projection on the masked
    share only, discriminator encoder + head on every token."""
    tokens = batch_size * length
    masked = tokens * mask_prob
    generator = tokens * _encoder_flops_per_token(gen_config, length) + masked * 2 * (
        gen_config.hidden_size * gen_config.embedding_size + gen_config.embedding_size * gen_config.vocab_size)
    h = disc_config.hidden_size
    discriminator = tokens * (_encoder_flops_per_token(disc_config, length) + 2 * (h * h + h))
    return 3.0 * (generator + discriminator)


def bf16_peak_tflops(device: torch.device) -> float | None:
    """The device's dense bf16 peak, where known (GPUs in `GPU_BF16_PEAK_TFLOPS`)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for fragment, peak in GPU_BF16_PEAK_TFLOPS.items() if fragment in name), None)


def _time_steps(step, steps: int, device: torch.device) -> float:
    step()  # warm-up (allocator, kernels)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / steps


def run_bench(preset: str, batch_size: int, max_length: int, vocab_size: int, steps: int,
              json_path: str | None = None, device: str | None = None, peak_tflops: float | None = None) -> dict:
    """Time both steps on `device` (default: CUDA when available, else CPU); on a GPU also the
    model FLOPs utilisation of ours against `peak_tflops` (default: the known bf16 peak)."""
    retain_freed_memory()
    torch.manual_seed(0)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    size = PRESETS[preset]
    special = [2, 3, 0]  # [CLS], [SEP], [PAD] in our vocabularies
    input_ids = torch.randint(5, vocab_size, (batch_size, max_length))
    input_ids[:, 0], input_ids[:, -1] = 2, 3
    input_ids = input_ids.to(device)
    attention_mask = torch.ones_like(input_ids)
    tokens = batch_size * max_length

    disc_config, gen_config = electra_configs(size, vocab_size)
    disc_config._attn_implementation = "eager"
    naive = ElectraForMaskedLM(disc_config).to(device)
    naive_opt = torch.optim.AdamW(naive.parameters(), lr=1e-4)
    labels = input_ids.clone()
    labels[torch.rand(labels.shape, device=device) >= 0.15] = -100

    def naive_step() -> None:
        loss = naive(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        naive_opt.step()
        naive_opt.zero_grad(set_to_none=True)

    cfg = PretrainConfig()
    discriminator, generator = build_pair(size, vocab_size)
    ours = ReplacedTokenDetection(discriminator, generator, cfg, special, mask_token_id=4).to(device)
    ours_opt = make_optimizer(ours, lr=1e-4, weight_decay=0.01)  # the trainer's (fused) AdamW

    device_type = device.type
    default_bf16 = cfg.bf16 and native_bf16(on_cpu=device_type == "cpu")

    def our_step(bf16: bool = default_bf16) -> None:
        set_attention((discriminator, generator), device_type, bf16)  # what the trainer would pick
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            loss, _ = ours(input_ids, attention_mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ours.parameters(), 1.0)
        ours_opt.step()
        ours_opt.zero_grad(set_to_none=True)

    naive_seconds = _time_steps(naive_step, steps, device)
    our_seconds = _time_steps(our_step, steps, device)
    our_fp32_seconds = _time_steps(lambda: our_step(False), steps, device) if default_bf16 else our_seconds
    set_dropout(ours, 0.1)  # ELECTRA's own dropout, for comparison
    our_dropout_seconds = _time_steps(our_step, steps, device)
    step_flops = electra_step_flops(disc_config, gen_config, batch_size, max_length, cfg.mask_prob)
    peak_tflops = peak_tflops or bf16_peak_tflops(device)
    result = {
        "preset": preset,
        "batch_size": batch_size,
        "max_length": max_length,
        "vocab_size": vocab_size,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device_type == "cuda" else "cpu",
        "machine": platform.processor() or platform.machine(),
        "naive_tokens_per_s": tokens / naive_seconds,
        "ours_precision": "bf16 autocast" if default_bf16 else "fp32",
        "ours_attention": attention_implementation(device_type, default_bf16),
        "ours_tokens_per_s": tokens / our_seconds,
        "ours_fp32_tokens_per_s": tokens / our_fp32_seconds,
        "ours_dropout_tokens_per_s": tokens / our_dropout_seconds,
        "dropout": cfg.dropout,
        "speedup": naive_seconds / our_seconds,
        "speedup_fp32": naive_seconds / our_fp32_seconds,
        "ours_step_tflop": step_flops / 1e12,
        "ours_achieved_tflops": step_flops / our_seconds / 1e12,
        "peak_tflops": peak_tflops,
        "mfu": step_flops / our_seconds / 1e12 / peak_tflops if peak_tflops else None,
    }
    print(f"preset={preset} batch={batch_size}x{max_length} vocab={vocab_size} device={result['device']} "
          f"threads={result['threads']}")
    print(f"  naive MLM step (full-vocab logits everywhere): {result['naive_tokens_per_s']:8.0f} tok/s")
    print(f"  this trainer (ELECTRA step, gen logits at masked only), fp32: {result['ours_fp32_tokens_per_s']:8.0f} tok/s"
          f"  ({result['speedup_fp32']:.2f}x)")
    print(f"  this trainer, default precision ({result['ours_precision']}) and dropout 0.1: "
          f"{result['ours_dropout_tokens_per_s']:8.0f} tok/s")
    print(f"  this trainer, default precision ({result['ours_precision']}) and dropout {cfg.dropout}: "
          f"{result['ours_tokens_per_s']:8.0f} tok/s")
    print(f"  speed-up at default settings: {result['speedup']:.2f}x")
    mfu = f", MFU {result['mfu']:.1%} of {peak_tflops:.0f} TFLOP/s bf16" if result["mfu"] is not None else ""
    print(f"  model FLOPs: {result['ours_achieved_tflops']:.2f} TFLOP/s achieved{mfu}")
    if json_path:
        with open(json_path, "w") as handle:
            json.dump(result, handle, indent=1)
    return result
