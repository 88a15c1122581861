"""An ELECTRA encoder run by ONNX Runtime: the lean encoder's arithmetic (lean_encoder.py) as an
ONNX graph built from the weights, int8 matmuls, one sentence per run.

Why: at sentence length the networks' passes are bound by per-operation overhead, not by the
matmuls (one SIGHAN sentence, torch int8: each layer's int8 matmul is a third of its time, the
elementwise ops that quantize and rescale around it the rest), and ORT fuses what the lean
encoder cannot (quantize + int8 matmul + rescale into one kernel, residual + LayerNorm,
multi-head attention). Measured on the shipped model (2 cores, SIGHAN-15, README Benchmarks,
torch int8 in the same runs): p50 of one sentence 20.5 -> 13.9 ms, batch 32 1.3-1.4x the
sentences/s, the same F1 on dev and the six test sets (paired: +0.1 [-0.1, +0.3] pooled).

Why one sentence per run: ORT's dynamic quantization scales a whole input tensor with one
number (`DynamicQuantizeLinear`). Run alone, a sentence's result can never depend on the other
sentences of a batch (the service batches unrelated requests) — stronger than the torch int8
path, where padding moves a confidence by ~1e-3 — and no time goes to padding. At these lengths
a batched ORT pass saves nothing per sentence (measured: discriminator, 32 characters, 5.1 ms
alone vs 4.3 ms per sentence in a batch of 8, which pads).

The graph is built here with `onnx.helper` from an `ElectraModel`'s weights (transformers' or
electra.py's) — no exporter, ~0.1-0.2 s per network — and cached in the user cache directory
(resources/cache.py), keyed by a hash of the weights and of how the graph is built, so that a
process starting up loads it instead (`encoder_graph`). Weights: int8, one scale per output channel
(as `Int8Linear`) — stored as uint8 with zero point 128 on CPUs whose int8 kernel saturates
(`signed_weights_saturate`: no VNNI); activations: uint8 with one scale and zero point per
tensor, computed per run.
Only what `lean_encoder_supported` accepts and the "gelu" activation are built; anything else
keeps the torch path (`onnx_encoder_supported`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import math

import numpy as np
import torch
from torch import nn

from ..resources.cache import cached, key_digest
from .lean_encoder import InferenceEncoder, lean_encoder_supported

OPSET = 17  # LayerNormalization; Gelu and MultiHeadAttention come from ORT's com.microsoft domain
MS_DOMAIN = "com.microsoft"
# Part of the graph cache's key: raise it whenever build_encoder_graph builds a different graph
# from the same weights, so that no process loads a graph the code no longer builds.
GRAPH_VERSION = 1
GRAPH_CACHE = "onnx-encoder"
GRAPH_CACHE_KEEP = 8  # graphs kept (most recently used): a discriminator and a generator per model


def onnx_runtime_available() -> bool:
    """Whether onnxruntime and onnx (the graph builder) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def onnx_encoder_supported(encoder: nn.Module) -> bool:
    """Whether `encoder` (an ElectraModel, transformers' or electra.py's) can run as an ONNX graph here."""
    return lean_encoder_supported(encoder) and encoder.config.hidden_act == "gelu"


@functools.cache
def signed_weights_saturate() -> bool:
    """Whether ONNX Runtime's uint8 x int8 matmul saturates on this CPU.

    Without VNNI, ORT's x86 kernel for uint8 activations x int8 weights sums pairs of products in
    16 bits (VPMADDUBSW), which saturates when both are large: 2 x 255 x 127 > 32,767 (ORT's
    quantization docs). On an AVX2-only AMD EPYC that moved the shipped
    discriminator's hidden states by up to 6 % of their range (0.33 of 5.2 on one sentence) and
    broke a tiny test model outright. The probe multiplies such values once and compares with the
    exact sum; where they saturate, the graphs take uint8 weights with zero point 128 instead
    (exact, ~10-20 % slower there). The probe's graph is cached like the encoders' (its result
    is the CPU's, not cached): with both cached, start-up does not import onnx at all."""
    import onnxruntime

    depth = 64

    def build() -> tuple[bytes, bytes]:
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "saturation_probe",
            [helper.make_tensor_value_info("a", TensorProto.UINT8, [16, depth])],
            [helper.make_tensor_value_info("y", TensorProto.INT32, [16, 16])],
            initializer=[helper.make_tensor("b", TensorProto.INT8, [depth, 16], [127] * (depth * 16))],
        )
        serialized = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]).SerializeToString()
        return serialized, serialized

    model = cached("onnx-probe", key_digest(OPSET, depth, importlib.metadata.version("onnx")), build, bytes)
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    product = session.run(None, {"a": np.full((16, depth), 255, dtype=np.uint8)})[0]
    return bool((product != depth * 255 * 127).any())


def encoder_graph(encoder: nn.Module) -> bytes:
    """The serialized graph of `build_encoder_graph(encoder)`: from the cache when one was built
    from the same weights and config with the same builder (GRAPH_VERSION, onnx's version, the
    CPU's weight format), else built and cached. Measured on the shipped model, 2 cores: building
    both graphs (and importing onnx) ~0.25 s at every start, reading them ~0.03 s."""
    if not onnx_encoder_supported(encoder):
        raise ValueError(f"{type(encoder).__name__} is not an encoder-only gelu ELECTRA the ONNX encoder can run")
    unsigned = signed_weights_saturate()
    key = key_digest(GRAPH_VERSION, OPSET, importlib.metadata.version("onnx"), unsigned, *_encoder_identity(encoder))

    def build() -> tuple[bytes, bytes]:
        serialized = build_encoder_graph(encoder, unsigned).SerializeToString()
        return serialized, serialized

    return cached(GRAPH_CACHE, key, build, bytes, keep=GRAPH_CACHE_KEEP)


def _encoder_identity(encoder: nn.Module) -> list:
    """What the graph is built from: the config values it reads and every tensor (name, dtype,
    shape and bytes)."""
    config = encoder.config
    parts: list = [config.hidden_size, config.num_attention_heads, config.hidden_act, config.layer_norm_eps,
                   hasattr(encoder, "embeddings_project")]
    for name, tensor in encoder.state_dict().items():
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        parts += [name, str(tensor.dtype), tuple(tensor.shape), flat.view(torch.uint8).numpy().data]
    return parts


class _GraphBuilder:
    """Collects nodes and initializers; each method adds one operation and returns its output name."""

    def __init__(self, unsigned_weights: bool = False) -> None:
        import onnx  # noqa: F401  (checked by onnx_runtime_available)

        self.unsigned_weights = unsigned_weights  # uint8 weights, zero point 128 (signed_weights_saturate)
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def constant(self, prefix: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], outputs: int = 1, domain: str = "", **attributes) -> str | list[str]:
        from onnx import helper

        names = [self.name(op_type) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, domain=domain or None, **attributes))
        return names[0] if outputs == 1 else names

    def linear(self, x: str, weight: torch.Tensor, bias: torch.Tensor | None) -> str:
        """x @ W.T + b with int8 weights (one scale per output channel) and x quantized per run.
        Written the way ORT's quantizer writes it, so ORT fuses it into one DynamicQuantizeMatMul."""
        w = weight.detach().float().numpy()
        scale = np.maximum(np.abs(w).max(axis=1), 1e-8) / 127.0
        quantized = np.clip(np.round(w / scale[:, None]), -127, 127).astype(np.int8).T  # (in, out)
        x_q, x_scale, x_zero = self.op("DynamicQuantizeLinear", [x], outputs=3)
        scales = self.op("Mul", [x_scale, self.constant("w_scale", scale.astype(np.float32))])
        if self.unsigned_weights:  # the same integers, shifted by 128: exact where int8 would saturate
            shifted = (quantized.astype(np.int16) + 128).astype(np.uint8)
            product = self.op("MatMulInteger", [x_q, self.constant("w_uint8", shifted), x_zero,
                                                self.constant("w_zero", np.array(128, dtype=np.uint8))])
        else:
            product = self.op("MatMulInteger", [x_q, self.constant("w_int8", quantized), x_zero])
        out = self.op("Mul", [self.op("Cast", [product], to=1), scales])  # to=1: float32
        if bias is not None:
            out = self.op("Add", [out, self.constant("bias", bias.detach().float().numpy())])
        return out

    def layer_norm(self, x: str, norm: nn.LayerNorm) -> str:
        return self.op("LayerNormalization", [x, self.constant("ln_w", norm.weight.detach().float().numpy()),
                                              self.constant("ln_b", norm.bias.detach().float().numpy())],
                       axis=-1, epsilon=float(norm.eps))


def build_encoder_graph(encoder: nn.Module, unsigned_weights: bool | None = None):
    """The ONNX model of an ElectraModel at inference: input_ids (1, T) int64 -> hidden (1, T,
    hidden_size); no attention mask (one unpadded sentence per run). `unsigned_weights`: uint8
    weights (None: where `signed_weights_saturate`)."""
    from onnx import TensorProto, helper

    if not onnx_encoder_supported(encoder):
        raise ValueError(f"{type(encoder).__name__} is not an encoder-only gelu ELECTRA the ONNX encoder can run")
    if unsigned_weights is None:
        unsigned_weights = signed_weights_saturate()
    g = _GraphBuilder(unsigned_weights=unsigned_weights)
    embeddings = encoder.embeddings
    # In transformers' order: (word + token type 0) + position [:T], then LayerNorm.
    words = g.op("Gather", [g.constant("word_emb", embeddings.word_embeddings.weight.detach().float().numpy()),
                            "input_ids"])
    types = g.constant("type_emb", embeddings.token_type_embeddings.weight[0].detach().float().numpy())
    length = g.op("Shape", ["input_ids"], start=1, end=2)
    positions = g.op("Slice", [g.constant("pos_emb", embeddings.position_embeddings.weight.detach().float().numpy()),
                               g.constant("zero", np.array([0], np.int64)), length])
    x = g.layer_norm(g.op("Add", [g.op("Add", [words, types]), positions]), embeddings.LayerNorm)
    project = getattr(encoder, "embeddings_project", None)
    if project is not None:
        x = g.linear(x, project.weight, project.bias)
    hidden = encoder.config.hidden_size
    for layer in encoder.encoder.layer:
        attention = layer.attention.self
        qkv = (attention.query, attention.key, attention.value)
        fused = g.linear(x, torch.cat([p.weight for p in qkv]), torch.cat([p.bias for p in qkv]))
        q, k, v = g.op("Split", [fused, g.constant("split", np.array([hidden] * 3, np.int64))], outputs=3, axis=-1)
        attended = g.op("MultiHeadAttention", [q, k, v], domain=MS_DOMAIN,
                        num_heads=attention.num_attention_heads, scale=1.0 / math.sqrt(attention.attention_head_size))
        dense = layer.attention.output.dense
        x = g.layer_norm(g.op("Add", [g.linear(attended, dense.weight, dense.bias), x]), layer.attention.output.LayerNorm)
        inner = g.op("Gelu", [g.linear(x, layer.intermediate.dense.weight, layer.intermediate.dense.bias)],
                     domain=MS_DOMAIN)
        out = g.linear(inner, layer.output.dense.weight, layer.output.dense.bias)
        x = g.layer_norm(g.op("Add", [out, x]), layer.output.LayerNorm)
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        g.nodes, "electra_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "length"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, "length", hidden])],
        initializer=g.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)])


class OnnxElectraEncoder(InferenceEncoder):
    """The encoder in ONNX Runtime: each row computed alone from its unpadded tokens (padding
    positions of `last_hidden_state` are 0)."""

    description = "the ONNX encoder"

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        import onnxruntime

        self.config = encoder.config
        self.word_embeddings = encoder.embeddings.word_embeddings  # for get_input_embeddings
        options = onnxruntime.SessionOptions()
        # One thread per run: the corrector runs its batches on parallel workers (threads.py).
        # Two threads made a lone discriminator pass faster (4.1 -> 2.4 ms) but the corrector's
        # p50 slower (10.5 -> 31 ms): ORT's spinning threads fight torch's and the Python stages.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(encoder_graph(encoder), options, providers=["CPUExecutionProvider"])

    def __deepcopy__(self, memo) -> OnnxElectraEncoder:
        return self  # immutable once built; an ORT session may serve many threads at once

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
               token_type_ids: torch.Tensor | None) -> torch.Tensor:
        if token_type_ids is not None and bool(token_type_ids.any()):
            raise ValueError("the ONNX encoder reads token type 0 only")
        ids = input_ids.cpu().numpy().astype(np.int64, copy=False)
        batch, width = ids.shape
        # Rows are left-aligned: a row's tokens are its first attention_mask.sum() columns.
        if attention_mask is None:
            lengths = [width] * batch
        else:
            lengths = attention_mask.sum(1)
            if not bool((attention_mask.bool() == (torch.arange(width) < lengths[:, None])).all()):
                raise ValueError("the ONNX encoder takes right-padded rows (attention_mask 1...1 0...0)")
            lengths = lengths.tolist()
        hidden = np.zeros((batch, width, self.config.hidden_size), dtype=np.float32)
        for row, length in enumerate(lengths):
            if length:
                hidden[row, :length] = self.session.run(None, {"input_ids": ids[row:row + 1, :length]})[0][0]
        return torch.from_numpy(hidden)
