"""The int8 layers (corrector/quantization.py): close to fp32, independent of batch company."""

import pytest
import torch

from corrector.models import load_model
from corrector.pipeline import Corrector
from corrector.quantization import Int8Linear, int8_copy, is_int8


@pytest.fixture(scope="module")
def tiny_bundle(tiny_model_dir):
    return load_model(str(tiny_model_dir))


def test_int8_linear_is_close_to_the_fp32_layer():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    x = torch.randn(3, 7, 64)
    expected, got = linear(x), Int8Linear.from_linear(linear)(x)
    assert got.shape == expected.shape == (3, 7, 48)
    # Per-token and per-channel 8-bit scales: ~1% relative error on random data.
    assert ((got - expected).norm() / expected.norm()).item() < 0.02
    no_bias = torch.nn.Linear(64, 48, bias=False)
    assert torch.allclose(Int8Linear.from_linear(no_bias)(x), no_bias(x), atol=0.05)


def test_int8_linear_rows_do_not_depend_on_their_batch():
    torch.manual_seed(1)
    layer = Int8Linear.from_linear(torch.nn.Linear(32, 16))
    batch = torch.randn(5, 9, 32) * torch.tensor([0.01, 1.0, 100.0, 3.0, 0.5]).view(5, 1, 1)
    together = layer(batch)
    for row in range(5):  # each token has its own scale and integer sums are exact: bit-identical
        assert torch.equal(layer(batch[row:row + 1]), together[row:row + 1])


def test_int8_copy_leaves_the_original_alone(tiny_bundle):
    original = tiny_bundle.discriminator
    copied = int8_copy(original)
    assert is_int8(copied) and not is_int8(original)
    assert not any(isinstance(m, torch.nn.Linear) for m in copied.modules())
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    with torch.inference_mode():
        fp32 = torch.sigmoid(original(input_ids=ids).logits)
        int8 = torch.sigmoid(copied(input_ids=ids).logits)
    assert (fp32 - int8).abs().max().item() < 0.05


def test_corrector_precision_choices(tiny_bundle):
    default = Corrector(tiny_bundle)
    assert default.precision == "int8" and not is_int8(tiny_bundle.discriminator)
    assert Corrector(tiny_bundle, quantize=False).precision == "fp32"
    assert Corrector(tiny_bundle, bf16=True).precision == "bf16"
    assert Corrector(default.bundle).bundle.discriminator is default.bundle.discriminator  # not quantized twice
    with pytest.raises(ValueError, match="already runs int8"):
        Corrector(default.bundle, quantize=False)
    with pytest.raises(ValueError, match="CPU"):
        int8_copy(torch.nn.Linear(4, 4, device="meta"))
