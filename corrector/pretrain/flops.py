"""Model FLOPs of a training step and model FLOPs utilisation (MFU), for `pretrain bench` and the
tokens/s + MFU the trainers log.

The count is the usual one for transformer MFU (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022,
appendix B): a forward pass costs 2 FLOPs per weight a token meets plus the attention scores and
mixing, 2 x 2 x seq x hidden per token and layer, and the backward pass twice the forward, so

    step FLOPs = 6 x (weights a token meets) x tokens + 12 x layers x hidden x seq^2 x sequences

Embedding look-ups cost nothing; a vocabulary projection is counted where it is computed (in
ELECTRA's generator at the masked ~15 % only; in the fine-tune at the scored positions). Dropout,
softmax, LayerNorm and the optimizer are left out, as MFU leaves them out: it measures how much
of the card's dense bf16 matrix peak the model's own matrix work uses, not what else ran.
"""

from __future__ import annotations

import torch

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) by device-name fragment, for MFU. The
# H200 has the H100 SXM's tensor cores (989 TFLOP/s dense bf16 on the data sheet; the device
# notes here measured ~790 reachable in a matmul loop); MFU is quoted against the data sheet.
GPU_BF16_PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 NVL": 835.0, "H100 PCIe": 756.0, "H100": 989.0,
                        "A100": 312.0, "L40S": 362.0, "A10G": 125.0, "L4": 121.0, "RTX 4090": 165.0}


def encoder_flops_per_token(config, length: int) -> float:
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
    generator = tokens * encoder_flops_per_token(gen_config, length) + masked * 2 * (
        gen_config.hidden_size * gen_config.embedding_size + gen_config.embedding_size * gen_config.vocab_size)
    h = disc_config.hidden_size
    discriminator = tokens * (encoder_flops_per_token(disc_config, length) + 2 * (h * h + h))
    return 3.0 * (generator + discriminator)


def finetune_flops_per_token(disc_config, gen_config, length: int, scored_share: float = 1.0,
                             discriminator: bool = True) -> float:
    """Model FLOPs per token of one fine-tuning step: both encoders on every position, the
    generator's head and vocabulary projection at the scored share (all characters when the
    generator reads the source), the discriminator's head everywhere; x3 for the backward."""
    head = 2 * (gen_config.hidden_size * gen_config.embedding_size + gen_config.embedding_size * gen_config.vocab_size)
    flops = encoder_flops_per_token(gen_config, length) + scored_share * head
    if discriminator:
        h = disc_config.hidden_size
        flops += encoder_flops_per_token(disc_config, length) + 2 * (h * h + h)
    return 3.0 * flops


def bf16_peak_tflops(device: torch.device | str) -> float | None:
    """The device's dense bf16 peak, where known (GPUs in `GPU_BF16_PEAK_TFLOPS`); None on CPUs."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for fragment, peak in GPU_BF16_PEAK_TFLOPS.items() if fragment in name), None)


def mfu(flops_per_token: float, tokens_per_s: float, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved model FLOP/s over the peak (None without a peak)."""
    if not peak_tflops:
        return None
    return flops_per_token * tokens_per_s / (peak_tflops * 1e12)
