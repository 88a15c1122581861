"""Int8 linear layers for CPU inference: int8 weights (one scale per output channel), int8
activations (one scale per token, computed on the fly), int32 accumulation. Why this scheme:
quantization.py. The encoders (lean_encoder.py, onnx_encoder.py) build on these layers, and
quantization.py builds int8 networks from both, so the layers live apart from either: no cycle."""

from __future__ import annotations

import functools
import os
import time

import torch
from torch import nn

from .onnx_encoder import FLOAT32_EXACT_DEPTH  # the numpy heads' bound too: the same arithmetic

KERNELS = ("auto", "int", "float")


@functools.cache
def int8_kernel() -> str:
    """How `Int8Linear` multiplies: "int" (torch._int_mm, int32 sums) or "float" (the same int8
    values as floats, exact: see FLOAT32_EXACT_DEPTH). Both give identical results; only speed
    differs. torch's CPU int8 matmul is fast where the CPU has VNNI (the Intel machines it was
    first measured on) and a slow fallback where it has not — on an AVX2-only AMD EPYC 15-30x
    slower than fp32 (16 vs 1.1 ms for 16 x 128 @ 128 x 6,884, the generator's head), which made
    the int8 corrector slower than fp32. So "auto" (the default; `CSC_INT8_KERNEL` overrides) times
    both once per process on a head-sized product and keeps the faster."""
    kernel = os.environ.get("CSC_INT8_KERNEL", "auto")
    if kernel not in KERNELS:
        raise ValueError(f"CSC_INT8_KERNEL must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel != "auto":
        return kernel
    x = torch.randint(-127, 128, (64, 256), dtype=torch.int8)
    w = torch.randint(-127, 128, (256, 1024), dtype=torch.int8)
    x_float, w_float = x.float(), w.float()
    timings = {}
    for name, product in (("int", lambda: torch._int_mm(x, w)), ("float", lambda: x_float @ w_float)):
        product()  # warm-up: first-call dispatch and allocation
        start = time.perf_counter()
        for _ in range(3):
            product()
        timings[name] = time.perf_counter() - start
    return "int" if timings["int"] <= timings["float"] else "float"


class Int8Linear(nn.Module):
    """A drop-in `nn.Linear` replacement for inference: y = (q(x) @ q(W).T) * scales + b."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        weight = weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=1e-8) / 127.0
        quantized = (weight / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.register_buffer("weight_t", quantized.t().contiguous())  # (in, out), as _int_mm wants it
        # Folded: y = x_q @ w_q * (x_max / 127) * (w_max / 127), so one buffer per channel holds w_max / 127².
        self.register_buffer("weight_scale", scale / 127.0)
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        return cls(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # As few elementwise ops as possible: at sentence length each costs about as much as the
        # matmul they feed (~140 of these layers run per sentence).
        rows = x.reshape(-1, self.in_features).float()  # no copy when x is fp32 already
        row_max = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-8)
        # Symmetric per-token scale; |x| * 127 / row_max <= 127 (+ rounding error), so no clamp.
        quantized = (rows * (127.0 / row_max)).round_()
        if int8_kernel() == "int":
            # torch's int8 x int8 -> int32 matmul (VNNI on x86; what torchao calls for this scheme too).
            product = torch._int_mm(quantized.to(torch.int8), self.weight_t).float()
        else:  # the same integer sums in floating point (exact), where int8 matmul is slow
            weight = self._float_weight()
            product = (quantized.to(weight.dtype) @ weight).float()
        scales = row_max * self.weight_scale
        out = product.mul_(scales) if self.bias is None else torch.addcmul(self.bias, product, scales)
        return out.reshape(*x.shape[:-1], self.out_features)

    def dequantized_weight(self) -> torch.Tensor:
        """The (out, in) float weight these int8 values stand for: q * (w_max / 127) per output row."""
        return self.weight_t.t().float() * (self.weight_scale.float() * 127.0)[:, None]

    def _float_weight(self) -> torch.Tensor:
        """The int8 weights as floats (made on first use: only the "float" kernel needs them)."""
        weight = self.__dict__.get("_weight_float")
        if weight is None or weight.device != self.weight_t.device:
            dtype = torch.float32 if self.in_features <= FLOAT32_EXACT_DEPTH else torch.float64
            weight = self.weight_t.to(dtype)
            self.__dict__["_weight_float"] = weight  # not a buffer: not saved, rebuilt after .to()
        return weight

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def is_int8(model: nn.Module) -> bool:
    """Whether `model` already runs int8 layers (an `int8_copy`)."""
    return any(isinstance(m, Int8Linear) for m in model.modules())
