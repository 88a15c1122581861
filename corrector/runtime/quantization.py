"""Int8 inference on CPU: int8 weights (one scale per output channel), int8 activations (one
scale per token, computed on the fly), int32 accumulation.

Why this scheme and not torch's `quantize_dynamic`: that one scales the activations of a whole
batch with one number, so a sentence's result depended on its batch-mates (the service gathers
unrelated requests into one batch), and torch deprecates it (torch.ao). Here every token is
quantized on its own and integer sums are exact, so a sentence's result is the same in any batch
(tested). Why not torchao's `Int8DynamicActivationInt8WeightConfig`, the same scheme: on this
2-core CPU its tensor-subclass dispatch cost more than int8 saved (ELECTRA-small discriminator, one
33-character sentence: 31 ms vs 16 ms fp32; this module: 10 ms).

The corrector's CPU default is not these torch networks but ONNX Runtime ones where it is
installed (onnx_networks.py, `quantized(bundle)` in models.py): the same int8 weights,
activations scaled per sentence in the encoders, one sentence per run — so there too a sentence's
result does not depend on its batch — at about 0.7x the time per sentence alone.
"""

from __future__ import annotations

import copy

from torch import nn

from .int8 import Int8Linear, is_int8
from .lean_encoder import LeanElectraEncoder, lean_encoder_supported

__all__ = ["ENCODERS", "Int8Linear", "int8_copy", "is_int8"]

# "torch": the lean encoder; "transformers": transformers' encoder with int8 layers, the
# reference the lean and ONNX encoders are tested against; "auto": "torch" where it qualifies.
ENCODERS = ("auto", "torch", "transformers")


def int8_copy(model: nn.Module, encoder: str = "auto") -> nn.Module:
    """A copy of `model` with every `nn.Linear` replaced by an `Int8Linear` (the original is not
    touched: the service and evaluator may share it). CPU only.

    An ELECTRA encoder (`model.electra`, every network this project ships) is replaced as a
    whole: "torch" (and "auto") runs it in a plain torch forward with query/key/value fused
    (lean_encoder.py) where it qualifies; "transformers" keeps transformers' encoder with int8
    layers (the reference). The heads keep transformers' code with int8 layers."""
    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {encoder!r}")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("int8 quantization is for CPU inference")
    copied = copy.deepcopy(model)
    original = getattr(model, "electra", None)
    if encoder != "transformers" and original is not None and lean_encoder_supported(original):
        copied.electra = LeanElectraEncoder(copied.electra)
    _replace_linears(copied)
    return copied.eval()


def _replace_linears(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear.from_linear(child))
        else:
            _replace_linears(child)
