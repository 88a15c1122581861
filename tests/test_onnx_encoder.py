"""The ONNX Runtime encoder (corrector/runtime/onnx_encoder.py): the int8 network's outputs, each row
computed alone (so exactly the same in any batch), and the runtime choice of the Corrector."""

import copy

import pytest
import torch

from corrector.pipeline import Corrector
from corrector.runtime import onnx_encoder
from corrector.runtime.models import load_model
from corrector.runtime.onnx_encoder import OnnxElectraEncoder, onnx_encoder_supported, onnx_runtime_available
from corrector.runtime.quantization import int8_copy, is_int8

pytestmark = pytest.mark.skipif(not onnx_runtime_available(), reason="onnxruntime or onnx is not installed")

IDS = torch.tensor([[2, 10, 11, 12, 13, 14, 3], [2, 15, 16, 3, 0, 0, 0], [2, 17, 3, 0, 0, 0, 0]])
MASK = (IDS != 0).long()


@pytest.fixture(scope="module")
def tiny_bundle(tiny_model_dir):
    return load_model(str(tiny_model_dir))


@pytest.mark.parametrize("network", ["discriminator", "generator"])  # with and without the embedding projection
def test_onnx_encoder_is_close_to_the_fp32_and_torch_int8_encoders(tiny_bundle, network):
    original = getattr(tiny_bundle, network)
    onnx_net, torch_net = int8_copy(original, "onnxruntime"), int8_copy(original, "torch")
    assert isinstance(onnx_net.electra, OnnxElectraEncoder) and is_int8(onnx_net)
    valid = MASK.bool()
    with torch.inference_mode():
        fp32 = original.electra(input_ids=IDS, attention_mask=MASK).last_hidden_state
        got = onnx_net.electra(input_ids=IDS, attention_mask=MASK).last_hidden_state
        lean = torch_net.electra(input_ids=IDS, attention_mask=MASK).last_hidden_state
    assert got.shape == fp32.shape
    assert torch.all(got[~valid] == 0)  # padding positions are left empty
    # 8-bit weights and activations: a few % of the hidden state's size, like the torch int8 encoder.
    scale = fp32[valid].abs().max()
    assert (got - fp32)[valid].abs().max() < 0.05 * scale
    assert (got - lean)[valid].abs().max() < 0.05 * scale
    with torch.inference_mode():  # the full network (encoder + transformers head) runs too
        logits = onnx_net(input_ids=IDS, attention_mask=MASK).logits
    assert logits.shape[:2] == IDS.shape


def test_onnx_encoder_rows_do_not_depend_on_their_batch(tiny_bundle):
    encoder = int8_copy(tiny_bundle.discriminator, "onnxruntime").electra
    together = encoder(input_ids=IDS, attention_mask=MASK).last_hidden_state
    for row in range(len(IDS)):
        length = int(MASK[row].sum())
        alone = encoder(input_ids=IDS[row:row + 1, :length]).last_hidden_state
        assert torch.equal(alone[0], together[row, :length])  # bit-identical: each row runs alone


def test_onnx_encoder_refuses_what_it_cannot_run(tiny_bundle):
    encoder = int8_copy(tiny_bundle.discriminator, "onnxruntime").electra
    with pytest.raises(ValueError, match="right-padded"):
        encoder(input_ids=IDS, attention_mask=MASK.flip(1))
    with pytest.raises(ValueError, match="token type 0"):
        encoder(input_ids=IDS, token_type_ids=torch.ones_like(IDS))
    with pytest.raises(ValueError, match="input_ids"):
        encoder(input_ids=IDS, position_ids=torch.arange(IDS.shape[1])[None])
    assert copy.deepcopy(encoder) is encoder  # the session is shared, not copied

    relu = copy.deepcopy(tiny_bundle.discriminator)
    relu.config = copy.deepcopy(relu.config)
    relu.electra.config = relu.config
    relu.config.hidden_act = "relu"
    assert not onnx_encoder_supported(relu.electra)
    assert not isinstance(int8_copy(relu).electra, OnnxElectraEncoder)  # "auto": the torch encoder instead
    with pytest.raises(ValueError, match="ONNX encoder can run"):
        int8_copy(relu, "onnxruntime")


def test_corrector_runs_onnx_by_default_and_gives_the_same_results_in_any_batch(trained_model_dir):
    bundle = load_model(str(trained_model_dir))
    corrector = Corrector(bundle)
    assert corrector.runtime == "onnxruntime" and corrector.precision == "int8"
    texts = ["少先队员因该为老人让坐", "他因该去", "少先队员为老人让座", "老人因该让坐，少先队员因该为老人让坐。"]
    batched = corrector.correct_batch(texts, batch_size=4)
    assert batched == [corrector.correct(text) for text in texts]  # confidences included
    assert batched[0].target == "少先队员应该为老人让座"
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
    unsigned = int8_copy(original, "onnxruntime")
    valid = MASK.bool()
    with torch.inference_mode():
        fp32 = original.electra(input_ids=IDS, attention_mask=MASK).last_hidden_state
        got = unsigned.electra(input_ids=IDS, attention_mask=MASK).last_hidden_state
    assert (got - fp32)[valid].abs().max() < 0.05 * fp32[valid].abs().max()
