"""The corrector's default networks on CPU, without torch: each encoder an ONNX Runtime graph
(onnx_encoder.py), the heads a few int8 layers in numpy with `Int8Linear`'s arithmetic
(int8.py: int8 weights per output channel, each row's activations scaled on their own).

Why without torch: `import torch` is 1.7 s of a 2.6 s one-sentence CLI call on 2 cores
(benchmarks/startup.py), and at inference torch only ran the heads, a handful of matmuls per
batch. The pipeline's stages exchange numpy arrays; the torch networks (training, GPUs, bf16,
`runtime="torch"`) are read through the same calls (torch_networks.py).

Built from a model directory's files (`read_onnx_network`, no torch imported) or from a torch
module's weights (`onnx_copy`): the same arrays give the same networks.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..resources.cache import cached, key_digest
from .network_config import read_config, read_weights
from .onnx_encoder import (
    FLOAT32_EXACT_DEPTH,
    MS_DOMAIN,
    OPSET,
    EncoderSession,
    int8_matmul_session,
    one_thread_session,
    onnx_runtime_available,
    quantize_weight,
)

ENCODER_PREFIX = "electra."


# From this many outputs a layer's integer matmul runs in ONNX Runtime (`int8_matmul_session`);
# narrower ones stay in numpy, where a run's fixed cost is more than the matmul (the
# discriminator's 1-output layer: 17 us in numpy, 56 in ORT).
INT8_SESSION_MIN_OUTPUTS = 64


class Int8Dense:
    """`Int8Linear` in numpy: y = (q(x) @ q(W).T) * scales + b, the same integers and scales."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None) -> None:
        quantized, scale = quantize_weight(weight)
        self.out_features, self.in_features = quantized.shape
        dtype = np.float32 if self.in_features <= FLOAT32_EXACT_DEPTH else np.float64
        self.weight_t = np.ascontiguousarray(quantized.T, dtype=dtype)  # (in, out)
        self.weight_scale = (scale / np.float32(127.0)).astype(np.float32)  # w_max / 127², as Int8Linear
        self.bias = None if bias is None else np.asarray(bias, dtype=np.float32)
        self.session = int8_matmul_session(quantized) if self.out_features >= INT8_SESSION_MIN_OUTPUTS else None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        rows = np.asarray(x, dtype=np.float32).reshape(-1, self.in_features)
        row_max = np.maximum(np.abs(rows).max(axis=1, keepdims=True), np.float32(1e-8))
        quantized = np.round(rows * (np.float32(127.0) / row_max))
        if self.session is not None and len(rows):
            # Exact int32 sums, converted as the float matmul rounds its exact sums (FLOAT32_EXACT_DEPTH).
            shifted = (quantized + np.float32(128.0)).astype(np.uint8)
            product = self.session.run(None, {"x": shifted})[0].astype(self.weight_t.dtype).astype(np.float32, copy=False)
        else:
            product = (quantized.astype(self.weight_t.dtype, copy=False) @ self.weight_t).astype(np.float32, copy=False)
        out = product * (row_max * self.weight_scale)
        if self.bias is not None:
            out += self.bias
        return out.reshape(*np.shape(x)[:-1], self.out_features)

    def dequantized_weight(self) -> np.ndarray:
        """The (out, in) float weight these int8 values stand for."""
        return (self.weight_t.T * (self.weight_scale * np.float32(127.0))[:, None]).astype(np.float32)


def gelu(x: np.ndarray) -> np.ndarray:
    """transformers' "gelu", x * Φ(x) with the exact erf, float32: ONNX Runtime's Gelu kernel
    (numpy has no erf; a float64 polynomial for it cost 12 ms per 256 K values against 0.2 ms
    for torch's, 5 % of a batch's time)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return _gelu_session().run(None, {"x": x})[0] if x.size else x


@functools.cache
def _gelu_session():
    """A one-node graph (com.microsoft Gelu, erf-exact), cached like the encoders' graphs."""
    def build() -> tuple[bytes, bytes]:
        from onnx import TensorProto, helper

        graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], domain=MS_DOMAIN)], "gelu",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        serialized = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                             helper.make_opsetid(MS_DOMAIN, 1)]).SerializeToString()
        return serialized, serialized

    return one_thread_session(cached("onnx-gelu", key_digest(OPSET, importlib.metadata.version("onnx")), build, bytes))


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(-1, keepdims=True)
    return (centred / np.sqrt(variance + np.float32(eps)) * weight + bias).astype(np.float32, copy=False)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    out = logits - logits.max(-1, keepdims=True)
    out -= np.log(np.exp(out).sum(-1, keepdims=True))
    return out


class OnnxNetwork:
    """What both networks share: the config and the encoder session."""

    precision = "int8"
    runtime = "onnxruntime"

    def __init__(self, config, weights: Mapping[str, np.ndarray]) -> None:
        self.config = config
        encoder = {name[len(ENCODER_PREFIX):]: array for name, array in weights.items()
                   if name.startswith(ENCODER_PREFIX)}
        self.encoder = EncoderSession(encoder, config)

    def __deepcopy__(self, memo) -> OnnxNetwork:
        return self  # immutable once built; shared by correctors and threads

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        """(B, T, hidden) float32; padding positions 0."""
        return self.encoder(input_ids, attention_mask)


class OnnxDiscriminator(OnnxNetwork):
    """`ElectraForPreTraining` at inference: P(replaced) per token."""

    def __init__(self, config, weights: Mapping[str, np.ndarray]) -> None:
        super().__init__(config, weights)
        self.dense = _dense(weights, "discriminator_predictions.dense")
        self.prediction = _dense(weights, "discriminator_predictions.dense_prediction")

    def replaced_probability(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        """(B, T) float32; the head runs at the tokens only (padding positions 0)."""
        hidden = self.encode(input_ids, attention_mask)
        probs = np.zeros(hidden.shape[:2], dtype=np.float32)
        valid = np.ones(probs.shape, dtype=bool) if attention_mask is None else np.asarray(attention_mask) != 0
        logits = self.prediction(gelu(self.dense(hidden[valid])))[:, 0]
        probs[valid] = 1.0 / (1.0 + np.exp(-logits))
        return probs


class OnnxGenerator(OnnxNetwork):
    """`ElectraForMaskedLM` at inference, its head read at chosen positions."""

    def __init__(self, config, weights: Mapping[str, np.ndarray]) -> None:
        super().__init__(config, weights)
        self.dense = _dense(weights, "generator_predictions.dense")
        self.norm_weight = weights["generator_predictions.LayerNorm.weight"]
        self.norm_bias = weights["generator_predictions.LayerNorm.bias"]
        lm_weight = weights.get("generator_lm_head.weight")
        if lm_weight is None:  # tied to the word embeddings
            lm_weight = weights[f"{ENCODER_PREFIX}embeddings.word_embeddings.weight"]
        self.lm_head = Int8Dense(lm_weight, weights.get("generator_lm_head.bias"))

    def states(self, hidden: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The head's input at (rows[n], columns[n]) of `hidden`: (N, embedding size) float32."""
        picked = hidden[rows, columns]
        return layer_norm(gelu(self.dense(picked)), self.norm_weight, self.norm_bias, self.config.layer_norm_eps)

    def logits(self, states: np.ndarray) -> np.ndarray:
        return self.lm_head(states)

    def output_layer(self) -> OutputLayer:
        """The vocabulary projection: its int8 values, each row's scale and the (V,) bias."""
        head = self.lm_head
        bias = head.bias if head.bias is not None else np.zeros(head.out_features, np.float32)
        values = np.ascontiguousarray(head.weight_t.T).astype(np.int8)  # (V, E), integers -127..127
        return OutputLayer(values, head.weight_scale * np.float32(127.0), bias)


@dataclass(frozen=True)
class OutputLayer:
    """A vocabulary projection as the generator's confusion margins read it (runtime/passes.py):
    the float rows of chosen ids, and the bias. An int8 head keeps its int8 values and one scale
    per row (`scale`), and a row is dequantized when read: the same float32 numbers as
    `Int8Dense.dequantized_weight`, from a quarter of the bytes (a batch reads ~1,400 of the 6,884
    rows; gathering float32 ones was 45 % of the margins' time)."""

    values: np.ndarray  # (V, E): int8 with `scale`, else float32
    scale: np.ndarray | None  # (V,) float32: row v stands for values[v] * scale[v]
    bias: np.ndarray  # (V,) float32

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """(len(ids), E) float32: the weight rows of `ids`."""
        if self.scale is None:
            return self.values[ids]
        return np.multiply(self.values[ids], self.scale[ids, None], dtype=np.float32)

    @property
    def weight(self) -> np.ndarray:
        """The whole (V, E) float32 weight."""
        return self.rows(np.arange(len(self.values)))


def _dense(weights: Mapping[str, np.ndarray], prefix: str) -> Int8Dense:
    return Int8Dense(weights[f"{prefix}.weight"], weights.get(f"{prefix}.bias"))


def _network(config, weights: Mapping[str, np.ndarray]) -> OnnxNetwork | None:
    architecture = (getattr(config, "architectures", None) or [""])[0]
    try:
        if architecture == "ElectraForPreTraining":
            return OnnxDiscriminator(config, weights)
        if architecture == "ElectraForMaskedLM":
            return OnnxGenerator(config, weights)
    except KeyError:  # a variant of the architecture with other weights: torch reads it
        return None
    return None


def read_onnx_network(directory: str | Path) -> OnnxNetwork | None:
    """The ONNX Runtime network of a network directory of the shipped layout, or None where
    onnxruntime is missing or the directory holds something else (torch then reads it)."""
    if not onnx_runtime_available():
        return None
    config = read_config(directory)
    weights = read_weights(directory) if config is not None else None
    return None if weights is None else _network(config, weights)


def onnx_copy(model) -> OnnxNetwork | None:
    """The ONNX Runtime network of a torch ELECTRA discriminator or generator (transformers' or
    electra.py's), from its weights; None where it cannot run as one."""
    from .lean_encoder import onnx_encoder_supported

    encoder = getattr(model, "electra", None)
    if not onnx_runtime_available() or encoder is None or not onnx_encoder_supported(encoder):
        return None
    if not (hasattr(model, "discriminator_predictions") or hasattr(model, "generator_lm_head")):
        return None
    weights = {name: tensor.detach().float().cpu().numpy() for name, tensor in model.state_dict().items()
               if tensor.is_floating_point()}
    config = model.config
    architecture = "ElectraForPreTraining" if hasattr(model, "discriminator_predictions") else "ElectraForMaskedLM"
    if (getattr(config, "architectures", None) or [""])[0] != architecture:
        config = _with_architecture(config, architecture)
    return _network(config, weights)


def _with_architecture(config, architecture: str):
    import copy

    config = copy.copy(config)
    config.architectures = [architecture]
    return config
