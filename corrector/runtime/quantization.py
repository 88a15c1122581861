"""Int8 inference on CPU: int8 weights (one scale per output channel), int8 activations (one
scale per token, computed on the fly), int32 accumulation.

Why this scheme and not torch's `quantize_dynamic`: that one scales the activations of a whole
batch with one number, so a sentence's result depended on its batch-mates (the service gathers
unrelated requests into one batch), and torch deprecates it (torch.ao). Here every token is
quantized on its own and integer sums are exact, so a sentence's result is the same in any batch
(tested). Why not torchao's `Int8DynamicActivationInt8WeightConfig`, the same scheme: on this
2-core CPU its tensor-subclass dispatch cost more than int8 saved (ELECTRA-small discriminator, one
33-character sentence: 31 ms vs 16 ms fp32; this module: 10 ms).

By default (`int8_copy(encoder="auto")`) the encoders run in ONNX Runtime instead, where it is
installed (onnx_encoder.py): the same int8 weights, activations scaled per sentence, one sentence
per run — so there too a sentence's result does not depend on its batch — at about 0.7x the time
per sentence alone. The heads stay here.
"""

from __future__ import annotations

import copy

from torch import nn

from . import RUNTIMES
from .int8 import Int8Linear, is_int8
from .lean_encoder import LeanElectraEncoder, lean_encoder_supported
from .onnx_encoder import OnnxElectraEncoder, onnx_encoder_supported, onnx_runtime_available

__all__ = ["ENCODERS", "Int8Linear", "int8_copy", "int8_runtime", "is_int8"]

# The runtimes of Corrector(runtime=) and `python -m corrector --runtime` (int8_runtime names the
# one a network got), plus "transformers", the reference the two are tested against.
ENCODERS = (*RUNTIMES, "transformers")


def int8_copy(model: nn.Module, encoder: str = "auto") -> nn.Module:
    """A copy of `model` with every `nn.Linear` replaced by an `Int8Linear` (the original is not
    touched: the service and evaluator may share it). CPU only.

    An ELECTRA encoder (`model.electra`, every network this project ships) is replaced as a
    whole: "onnxruntime" runs it in ONNX Runtime (onnx_encoder.py: one sentence per run, fused
    int8 kernels), "torch" in a plain torch forward with query/key/value fused (lean_encoder.py),
    "transformers" keeps transformers' encoder with int8 layers (the reference both are tested
    against); "auto" is "onnxruntime" when onnxruntime is installed and the network qualifies,
    else "torch" where it qualifies. The heads keep transformers' code with int8 layers."""
    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {encoder!r}")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("int8 quantization is for CPU inference")
    original = getattr(model, "electra", None)
    if encoder == "auto":
        if original is not None and onnx_runtime_available() and onnx_encoder_supported(original):
            encoder = "onnxruntime"
        else:
            encoder = "torch"
    if encoder == "onnxruntime" and not onnx_runtime_available():
        raise ValueError("the ONNX encoder needs onnxruntime and onnx (pip install onnxruntime onnx)")
    if encoder == "onnxruntime" and (original is None or not onnx_encoder_supported(original)):
        raise ValueError(f"{type(model).__name__} has no encoder-only gelu ELECTRA the ONNX encoder can run")
    # The ONNX path reads the original's weights into its graph: the encoder is not copied first
    # (the memo makes the copy refer to the original module, replaced right after).
    copied = copy.deepcopy(model, {id(original): original} if encoder == "onnxruntime" else None)
    if encoder == "onnxruntime":
        copied.electra = OnnxElectraEncoder(original)
    elif encoder == "torch" and original is not None and lean_encoder_supported(original):
        copied.electra = LeanElectraEncoder(copied.electra)
    _replace_linears(copied)
    return copied.eval()


def int8_runtime(model: nn.Module) -> str:
    """What runs an int8 network's encoder: "onnxruntime" or "torch"."""
    return "onnxruntime" if isinstance(getattr(model, "electra", None), OnnxElectraEncoder) else "torch"


def _replace_linears(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear.from_linear(child))
        else:
            _replace_linears(child)
