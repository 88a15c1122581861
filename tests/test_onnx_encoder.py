"""The ONNX Runtime networks (corrector/runtime/onnx_encoder.py, onnx_networks.py): the int8
network's outputs, each row computed alone (so exactly the same in any batch), the numpy heads'
arithmetic against torch's `Int8Linear`, and the runtime choice of the Corrector."""

import copy

import numpy as np
import pytest
import torch

from corrector.pipeline import Corrector
from corrector.runtime import onnx_encoder
from corrector.runtime.int8 import Int8Linear
from corrector.runtime.lean_encoder import onnx_encoder_supported
from corrector.runtime.models import load_model, quantized
from corrector.runtime.onnx_encoder import onnx_runtime_available
from corrector.runtime.onnx_networks import Int8Dense, OnnxGenerator, gelu, layer_norm, onnx_copy
from corrector.runtime.quantization import int8_copy

pytestmark = pytest.mark.skipif(not onnx_runtime_available(), reason="onnxruntime or onnx is not installed")

IDS = np.array([[2, 10, 11, 12, 13, 14, 3], [2, 15, 16, 3, 0, 0, 0], [2, 17, 3, 0, 0, 0, 0]])
MASK = (IDS != 0).astype(np.int64)
VALID = MASK.astype(bool)


@pytest.fixture(scope="module")
def tiny_bundle(tiny_model_dir):
    return load_model(str(tiny_model_dir))


def _torch_hidden(module) -> torch.Tensor:
    with torch.inference_mode():
        return module.electra(input_ids=torch.from_numpy(IDS), attention_mask=torch.from_numpy(MASK)).last_hidden_state


@pytest.mark.parametrize("network", ["discriminator", "generator"])  # with and without the embedding projection
def test_onnx_encoder_is_close_to_the_fp32_and_torch_int8_encoders(tiny_bundle, network):
    original = getattr(tiny_bundle, network)
    onnx_net = onnx_copy(original)
    assert onnx_net is not None and onnx_net.runtime == "onnxruntime"
    fp32, lean = _torch_hidden(original).numpy(), _torch_hidden(int8_copy(original, "torch")).numpy()
    got = onnx_net.encode(IDS, MASK)
    assert got.shape == fp32.shape
    assert np.all(got[~VALID] == 0)  # padding positions are left empty
    # 8-bit weights and activations: a few % of the hidden state's size, like the torch int8 encoder.
    scale = np.abs(fp32[VALID]).max()
    assert np.abs(got - fp32)[VALID].max() < 0.05 * scale
    assert np.abs(got - lean)[VALID].max() < 0.05 * scale


def test_the_numpy_heads_compute_what_torch_computes(tiny_bundle):
    """The heads' int8 layers, gelu and LayerNorm in numpy against Int8Linear and torch's ops."""
    generator = tiny_bundle.generator
    x = torch.randn(5, generator.config.hidden_size) * 3
    linear = generator.generator_predictions.dense
    dense = Int8Dense(linear.weight.detach().numpy(), linear.bias.detach().numpy())
    with torch.inference_mode():
        want = Int8Linear.from_linear(linear)(x).numpy()
        assert np.abs(dense(x.numpy()) - want).max() < 1e-5
        assert np.abs(gelu(x.numpy()) - torch.nn.functional.gelu(x).numpy()).max() < 1e-5
        norm = generator.generator_predictions.LayerNorm
        y = torch.randn(5, norm.normalized_shape[0])
        assert np.abs(layer_norm(y.numpy(), norm.weight.detach().numpy(), norm.bias.detach().numpy(), norm.eps)
                      - norm(y).numpy()).max() < 1e-5
    assert np.allclose(dense.dequantized_weight(), Int8Linear.from_linear(linear).dequantized_weight().numpy())
    assert gelu(np.zeros((0, 4))).shape == (0, 4) and dense(np.zeros((0, dense.in_features))).shape == (0, dense.out_features)

    # The whole head: ONNX network against the torch int8 network at the same positions.
    onnx_net, torch_net = onnx_copy(generator), int8_copy(generator, "torch")
    assert isinstance(onnx_net, OnnxGenerator)
    rows, columns = np.nonzero(MASK)
    with torch.inference_mode():
        hidden = torch_net.electra(input_ids=torch.from_numpy(IDS), attention_mask=torch.from_numpy(MASK)).last_hidden_state
        want = torch_net.generator_lm_head(torch_net.generator_predictions(hidden[rows, columns])).numpy()
    got = onnx_net.logits(onnx_net.states(hidden.numpy(), rows, columns))
    assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()


@pytest.mark.parametrize("unsigned", [False, True])
def test_int8_layers_in_onnx_runtime_give_the_float_matmuls_numbers(monkeypatch, unsigned):
    """A wide layer's integer matmul runs in ONNX Runtime: bit for bit what the float32 (and,
    past FLOAT32_EXACT_DEPTH, float64) matmul of the same integers gives, with int8 weights or
    uint8 ones (CPUs whose int8 kernel saturates)."""
    monkeypatch.setattr(onnx_encoder, "signed_weights_saturate", lambda: unsigned)
    rng = np.random.default_rng(0)
    for depth in (128, onnx_encoder.FLOAT32_EXACT_DEPTH + 60):
        dense = Int8Dense(rng.normal(size=(300, depth)).astype(np.float32), rng.normal(size=300).astype(np.float32))
        assert dense.session is not None
        x = (rng.normal(size=(7, depth)) * 4).astype(np.float32)
        x[0] = 0.0
        got = dense(x)
        dense.session = None  # the numpy matmul
        assert np.array_equal(got, dense(x))


def test_the_int8_output_layers_rows_are_its_dequantized_weight(tiny_bundle):
    """Read row by row from int8 values and scales: bit for bit the dequantized float weight."""
    generator = onnx_copy(tiny_bundle.generator)
    layer = generator.output_layer()
    assert layer.values.dtype == np.int8 and layer.values.shape == (generator.lm_head.out_features,
                                                                       generator.lm_head.in_features)
    ids = np.array([5, 0, 5, len(layer.values) - 1])
    assert np.array_equal(layer.rows(ids), generator.lm_head.dequantized_weight()[ids])
    assert np.array_equal(layer.weight, generator.lm_head.dequantized_weight())


def test_onnx_encoder_rows_do_not_depend_on_their_batch(tiny_bundle):
    network = onnx_copy(tiny_bundle.discriminator)
    together = network.replaced_probability(IDS, MASK)
    for row in range(len(IDS)):
        length = int(MASK[row].sum())
        alone = network.replaced_probability(IDS[row:row + 1, :length])
        assert np.array_equal(alone[0], together[row, :length])  # bit-identical: each row runs alone
        assert np.all(together[row, length:] == 0)


def test_onnx_networks_refuse_what_they_cannot_run(tiny_bundle):
    network = onnx_copy(tiny_bundle.discriminator)
    with pytest.raises(ValueError, match="right-padded"):
        network.encode(IDS, MASK[:, ::-1])
    assert copy.deepcopy(network) is network  # the session is shared, not copied

    relu = copy.deepcopy(tiny_bundle.discriminator)
    relu.config = copy.deepcopy(relu.config)
    relu.electra.config = relu.config
    relu.config.hidden_act = "relu"
    assert not onnx_encoder_supported(relu.electra) and onnx_copy(relu) is None
    bundle = copy.copy(tiny_bundle)
    bundle.discriminator = relu
    assert quantized(bundle).runtime == "torch"  # "auto": the torch int8 networks instead
    with pytest.raises(ValueError, match="ONNX encoder can run"):
        quantized(bundle, "onnxruntime")


def test_corrector_runs_onnx_by_default_and_gives_the_same_results_in_any_batch(trained_model_dir):
    bundle = load_model(str(trained_model_dir))
    corrector = Corrector(bundle)
    assert corrector.runtime == "onnxruntime" and corrector.precision == "int8"
    texts = ["少先队员因该为老人让坐", "他因该去", "少先队员为老人让座", "老人因该让坐，少先队员因该为老人让坐。"]
    batched = corrector.correct_batch(texts, batch_size=4)
    assert batched == [corrector.correct(text) for text in texts]  # confidences included
    assert batched[0].target == "少先队员应该为老人让座"
    # Read from the directory (no torch module), the same results.
    assert Corrector(str(trained_model_dir)).correct_batch(texts, batch_size=4) == batched
    # The torch int8 encoder finds the same correction.
    assert Corrector(bundle, runtime="torch").correct(texts[0]).target == batched[0].target
    with pytest.raises(ValueError, match="already runs onnxruntime"):
        Corrector(corrector.bundle, runtime="torch")
    with pytest.raises(ValueError, match="runs int8 networks"):
        Corrector(bundle, quantize=False, runtime="onnxruntime")


@pytest.mark.parametrize("network", ["discriminator", "generator"])
def test_unsigned_weights_are_exact_where_signed_ones_would_saturate(tiny_bundle, network, monkeypatch):
    """uint8 weights with zero point 128 (what CPUs without VNNI get): the same integers, so as
    close to fp32 as int8 is anywhere; the probe answers for this CPU either way."""
    assert isinstance(onnx_encoder.signed_weights_saturate(), bool)
    monkeypatch.setattr(onnx_encoder, "signed_weights_saturate", lambda: True)
    original = getattr(tiny_bundle, network)
    fp32 = _torch_hidden(original).numpy()
    got = onnx_copy(original).encode(IDS, MASK)
    assert np.abs(got - fp32)[VALID].max() < 0.05 * np.abs(fp32[VALID]).max()
