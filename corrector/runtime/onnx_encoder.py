"""An ELECTRA encoder run by ONNX Runtime: the lean encoder's arithmetic (lean_encoder.py) as an
ONNX graph built from the weights, int8 matmuls, one sentence per run. No torch here: the
corrector's default networks (onnx_networks.py) run without it.

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

The graph is built here with `onnx.helper` from an encoder's weights as numpy arrays under
transformers' `ElectraModel` names (read from the safetensors file, or from a torch module) — no exporter, ~0.1-0.2 s per network — and cached in the user cache directory
(resources/cache.py), keyed by a hash of the weights and of how the graph is built, so that a
process starting up loads it instead (`encoder_graph`). Weights: int8, one scale per output channel
(as `Int8Linear`) — stored as uint8 with zero point 128 on CPUs whose int8 kernel saturates
(`signed_weights_saturate`: no VNNI); activations: uint8 with one scale and zero point per
tensor, computed per run.
Only an encoder-only ELECTRA with absolute positions and the "gelu" activation is built
(`lean_encoder.onnx_encoder_supported` for a torch module); anything else keeps the torch path.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import math
from collections.abc import Mapping

import numpy as np

from ..resources.cache import cached, key_digest

OPSET = 17  # LayerNormalization; Gelu and MultiHeadAttention come from ORT's com.microsoft domain
MS_DOMAIN = "com.microsoft"
# Part of the graph cache's key: raise it whenever build_encoder_graph builds a different graph
# from the same weights, so that no process loads a graph the code no longer builds.
GRAPH_VERSION = 2
GRAPH_CACHE = "onnx-encoder"
GRAPH_CACHE_KEEP = 8  # graphs kept (most recently used): a discriminator and a generator per model


def onnx_runtime_available() -> bool:
    """Whether onnxruntime and onnx (the graph builder) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


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


def one_thread_session(model: bytes):
    """An ONNX Runtime session of `model` on one thread per run: the corrector runs its batches on
    parallel workers (threads.py). Two threads made a lone discriminator pass faster (4.1 -> 2.4
    ms) but the corrector's p50 slower (10.5 -> 31 ms): ORT's spinning threads fight the other
    worker and the Python stages."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


# An fp32 matmul of integer-valued arrays is exact while every partial sum stays below 2**24:
# |sum| <= depth * 127 * 127, so up to 1,040 input features (every layer of ELECTRA-small/base's
# attention and of small's FFN). Deeper layers take float64, exact to 2**53. For the int8 layers
# of both the numpy heads (onnx_networks.py) and torch (int8.py).
FLOAT32_EXACT_DEPTH = 2**24 // (127 * 127)


def quantize_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float (out, in) weight as int8 values (as float32) and one scale per output channel,
    w_max / 127: `Int8Linear`'s scheme (int8.py), shared by the graphs here and the numpy heads
    (onnx_networks.py)."""
    w = np.asarray(weight, dtype=np.float32)
    scale = np.maximum(np.abs(w).max(axis=1), np.float32(1e-8)) / np.float32(127.0)
    return np.clip(np.round(w / scale[:, None]), -127, 127), scale


INT8_MATMUL_CACHE = "onnx-int8-matmul"
INT8_MATMUL_CACHE_KEEP = 8  # the heads' layers of a discriminator and a generator, and a spare model's


def int8_matmul_session(values: np.ndarray):
    """A one-thread session computing x @ values.T exactly in int32, for x given as uint8 with zero
    point 128 (integers -127..127 shifted by 128) and `values` a float (out, in) array of integers
    -127..127 (`quantize_weight`'s). The numpy heads' matmuls (onnx_networks.Int8Dense) run here:
    the same integers as a float32 matmul, from a quarter of the weight bytes on int8 kernels
    (one core, cold cache: the generator's output layer at 40 rows 665 -> 344 us). Weights go in
    as uint8 with zero point 128 where the int8 kernel saturates (`signed_weights_saturate`)."""
    unsigned = signed_weights_saturate()
    weight = np.ascontiguousarray(np.asarray(values, dtype=np.float32).T)  # (in, out)

    def build() -> tuple[bytes, bytes]:
        from onnx import TensorProto, helper, numpy_helper

        if unsigned:
            inputs = ["x", "w", "x_zero", "w_zero"]
            initializers = [numpy_helper.from_array((weight + 128).astype(np.uint8), "w"),
                            numpy_helper.from_array(np.array(128, dtype=np.uint8), "w_zero")]
        else:
            inputs, initializers = ["x", "w", "x_zero"], [numpy_helper.from_array(weight.astype(np.int8), "w")]
        initializers.append(numpy_helper.from_array(np.array(128, dtype=np.uint8), "x_zero"))
        graph = helper.make_graph([helper.make_node("MatMulInteger", inputs, ["y"])], "int8_matmul",
                                  [helper.make_tensor_value_info("x", TensorProto.UINT8, ["rows", weight.shape[0]])],
                                  [helper.make_tensor_value_info("y", TensorProto.INT32, ["rows", weight.shape[1]])],
                                  initializer=initializers)
        serialized = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]).SerializeToString()
        return serialized, serialized

    key = key_digest(OPSET, importlib.metadata.version("onnx"), unsigned, weight.shape, weight.tobytes())
    return one_thread_session(cached(INT8_MATMUL_CACHE, key, build, bytes, keep=INT8_MATMUL_CACHE_KEEP))


def encoder_graph(weights: Mapping[str, np.ndarray], config) -> bytes:
    """The serialized graph of `build_encoder_graph(weights, config)`: from the cache when one
    was built from the same weights and config with the same builder (GRAPH_VERSION, onnx's
    version, the CPU's weight format), else built and cached. Measured on the shipped model, 2
    cores: building both graphs (and importing onnx) ~0.25 s at every start, reading them ~0.03 s."""
    unsigned = signed_weights_saturate()
    key = key_digest(GRAPH_VERSION, OPSET, importlib.metadata.version("onnx"), unsigned,
                     *_encoder_identity(weights, config))

    def build() -> tuple[bytes, bytes]:
        serialized = build_encoder_graph(weights, config, unsigned).SerializeToString()
        return serialized, serialized

    return cached(GRAPH_CACHE, key, build, bytes, keep=GRAPH_CACHE_KEEP)


def _encoder_identity(weights: Mapping[str, np.ndarray], config) -> list:
    """What the graph is built from: the config values it reads and every array (name, dtype,
    shape and bytes)."""
    parts: list = [config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.hidden_act,
                   config.layer_norm_eps]
    for name in sorted(weights):
        array = np.ascontiguousarray(weights[name])
        parts += [name, str(array.dtype), array.shape, array.reshape(-1).view(np.uint8).data]
    return parts


class _GraphBuilder:
    """Collects nodes and initializers; each method adds one operation and returns its output name."""

    def __init__(self, weights: Mapping[str, np.ndarray], eps: float, unsigned_weights: bool = False) -> None:
        import onnx  # noqa: F401  (checked by onnx_runtime_available)

        self.weights = weights
        self.eps = eps
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

    def dense(self, x: str, prefix: str) -> str:
        """The linear layer `prefix` (its .weight and .bias)."""
        return self.linear(x, self.weights[f"{prefix}.weight"], self.weights.get(f"{prefix}.bias"))

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray | None) -> str:
        """x @ W.T + b with int8 weights (one scale per output channel) and x quantized per run.
        Written the way ORT's quantizer writes it, so ORT fuses it into one DynamicQuantizeMatMul."""
        values, scale = quantize_weight(weight)
        quantized = values.astype(np.int8).T  # (in, out)
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
            out = self.op("Add", [out, self.constant("bias", np.asarray(bias, dtype=np.float32))])
        return out

    def layer_norm(self, x: str, prefix: str) -> str:
        return self.op("LayerNormalization", [x, self.constant("ln_w", self.weights[f"{prefix}.weight"]),
                                              self.constant("ln_b", self.weights[f"{prefix}.bias"])],
                       axis=-1, epsilon=float(self.eps))


def build_encoder_graph(weights: Mapping[str, np.ndarray], config, unsigned_weights: bool | None = None):
    """The ONNX model of an ElectraModel (`weights` under its state_dict names, `config` its
    config) at inference: input_ids (1, T) int64 -> hidden (1, T, hidden_size); no attention
    mask (one unpadded sentence per run). `unsigned_weights`: uint8 weights (None: where
    `signed_weights_saturate`)."""
    from onnx import TensorProto, helper

    if config.hidden_act != "gelu":
        raise ValueError(f"the ONNX encoder runs gelu networks, not {config.hidden_act!r}")
    if unsigned_weights is None:
        unsigned_weights = signed_weights_saturate()
    g = _GraphBuilder(weights, config.layer_norm_eps, unsigned_weights=unsigned_weights)
    # In transformers' order: (word + token type 0) + position [:T], then LayerNorm.
    words = g.op("Gather", [g.constant("word_emb", weights["embeddings.word_embeddings.weight"]), "input_ids"])
    types = g.constant("type_emb", weights["embeddings.token_type_embeddings.weight"][0])
    length = g.op("Shape", ["input_ids"], start=1, end=2)
    positions = g.op("Slice", [g.constant("pos_emb", weights["embeddings.position_embeddings.weight"]),
                               g.constant("zero", np.array([0], np.int64)), length])
    x = g.layer_norm(g.op("Add", [g.op("Add", [words, types]), positions]), "embeddings.LayerNorm")
    if "embeddings_project.weight" in weights:
        x = g.dense(x, "embeddings_project")
    hidden, heads = config.hidden_size, config.num_attention_heads
    for i in range(config.num_hidden_layers):
        layer = f"encoder.layer.{i}"
        qkv = [f"{layer}.attention.self.{name}" for name in ("query", "key", "value")]
        fused = g.linear(x, np.concatenate([weights[f"{p}.weight"] for p in qkv]),
                         np.concatenate([weights[f"{p}.bias"] for p in qkv]))
        q, k, v = g.op("Split", [fused, g.constant("split", np.array([hidden] * 3, np.int64))], outputs=3, axis=-1)
        attended = g.op("MultiHeadAttention", [q, k, v], domain=MS_DOMAIN,
                        num_heads=heads, scale=1.0 / math.sqrt(hidden // heads))
        x = g.layer_norm(g.op("Add", [g.dense(attended, f"{layer}.attention.output.dense"), x]),
                         f"{layer}.attention.output.LayerNorm")
        inner = g.op("Gelu", [g.dense(x, f"{layer}.intermediate.dense")], domain=MS_DOMAIN)
        x = g.layer_norm(g.op("Add", [g.dense(inner, f"{layer}.output.dense"), x]), f"{layer}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        g.nodes, "electra_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "length"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, "length", hidden])],
        initializer=g.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)])


class EncoderSession:
    """The encoder in ONNX Runtime: each row computed alone from its unpadded tokens (padding
    positions of the output are 0)."""

    def __init__(self, weights: Mapping[str, np.ndarray], config) -> None:
        self.hidden_size = config.hidden_size
        self.session = one_thread_session(encoder_graph(weights, config))

    def __deepcopy__(self, memo) -> EncoderSession:
        return self  # immutable once built; an ORT session may serve many threads at once

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        """(B, T, hidden) float32 for right-padded rows of ids (attention_mask 1...1 0...0)."""
        ids = np.asarray(input_ids, dtype=np.int64)
        batch, width = ids.shape
        if attention_mask is None:
            lengths = [width] * batch
        else:
            mask = np.asarray(attention_mask)
            lengths = mask.sum(1)
            if not bool(((mask != 0) == (np.arange(width) < lengths[:, None])).all()):
                raise ValueError("the ONNX encoder takes right-padded rows (attention_mask 1...1 0...0)")
            lengths = lengths.tolist()
        hidden = np.zeros((batch, width, self.hidden_size), dtype=np.float32)
        for row, length in enumerate(lengths):
            if length:
                hidden[row, :length] = self.session.run(None, {"input_ids": ids[row:row + 1, :length]})[0][0]
        return hidden
