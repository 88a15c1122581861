"""The int8 layers (corrector/runtime/int8.py, quantization.py): close to fp32, independent of batch company; and
the lean encoder that runs them (corrector/lean_encoder.py): the int8 transformers network's outputs.
The tiny discriminator has an embedding projection (embeddings 32, hidden 64), the generator none."""

import copy
import dataclasses

import pytest
import torch

from corrector.pipeline import Corrector
from corrector.runtime import int8
from corrector.runtime.lean_encoder import LeanElectraEncoder, lean_encoder_supported
from corrector.runtime.models import load_model, quantized
from corrector.runtime.onnx_encoder import onnx_runtime_available
from corrector.runtime.quantization import Int8Linear, int8_copy, is_int8


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
    assert Corrector(tiny_bundle, runtime="torch").runtime == "torch"
    assert default.runtime == ("onnxruntime" if onnx_runtime_available() else "torch")
    with pytest.raises(ValueError, match="runtime must be one of"):
        Corrector(tiny_bundle, runtime="tensorrt")
    with pytest.raises(ValueError, match="encoder must be one of"):
        int8_copy(tiny_bundle.discriminator, "fast")
    assert Corrector(default.bundle).bundle.discriminator is default.bundle.discriminator  # not quantized twice
    with pytest.raises(ValueError, match="already runs int8"):
        Corrector(default.bundle, quantize=False)
    with pytest.raises(ValueError, match="CPU"):
        int8_copy(torch.nn.Linear(4, 4, device="meta"))
    with pytest.raises(ValueError, match="CPU"):
        quantized(dataclasses.replace(tiny_bundle, device="cuda"))


@pytest.mark.parametrize("network", ["discriminator", "generator"])
def test_lean_encoder_matches_the_int8_transformers_network(tiny_bundle, network):
    original = getattr(tiny_bundle, network)
    lean, reference = int8_copy(original, "torch"), int8_copy(original, "transformers")
    assert isinstance(lean.electra, LeanElectraEncoder) and not isinstance(reference.electra, LeanElectraEncoder)
    # A padded batch (the mask path) and a single unpadded row (the no-mask path).
    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.inference_mode():
        for batch, batch_mask in ((ids, mask), (ids[:1], mask[:1])):
            expected = reference(input_ids=batch, attention_mask=batch_mask).logits
            got = lean(input_ids=batch, attention_mask=batch_mask).logits
            valid = batch_mask.bool()
            # Fused Q/K/V with per-channel scales is exactly the three matmuls; the rest is the same ops.
            assert torch.allclose(got[valid], expected[valid], atol=1e-5)
        types = torch.zeros_like(ids)
        assert torch.allclose(lean(input_ids=ids, attention_mask=mask, token_type_ids=types).logits[mask.bool()],
                              reference(input_ids=ids, attention_mask=mask).logits[mask.bool()], atol=1e-5)
        with pytest.raises(ValueError, match="input_ids"):
            lean.electra(input_ids=ids, position_ids=torch.arange(6)[None])


def test_lean_encoder_only_takes_encoders_it_can_run(tiny_bundle):
    assert lean_encoder_supported(tiny_bundle.discriminator.electra)
    assert not lean_encoder_supported(torch.nn.Linear(4, 4))
    decoder = copy.deepcopy(tiny_bundle.generator.electra)
    decoder.config = copy.deepcopy(decoder.config)
    decoder.config.is_decoder = True
    assert not lean_encoder_supported(decoder)
    with pytest.raises(ValueError, match="lean encoder"):
        LeanElectraEncoder(decoder)


@pytest.mark.parametrize("in_features", [64, 1024, 1100])  # 1100 > FLOAT32_EXACT_DEPTH: float64 sums
def test_int8_linear_float_kernel_gives_the_int_kernels_exact_result(monkeypatch, in_features):
    torch.manual_seed(2)
    layer = Int8Linear.from_linear(torch.nn.Linear(in_features, 40))
    # Worst case for the sums: every activation at +-127 after quantization, weights of one sign.
    layer.weight_t.copy_(torch.full_like(layer.weight_t, 127))
    x = torch.cat([torch.randn(6, in_features), torch.ones(2, in_features)])
    results = {}
    for kernel in ("int", "float"):
        monkeypatch.setattr(int8, "int8_kernel", lambda kernel=kernel: kernel)
        results[kernel] = layer(x)
    assert torch.equal(results["int"], results["float"])


def test_int8_kernel_choice_reads_the_environment(monkeypatch):
    int8.int8_kernel.cache_clear()
    try:
        monkeypatch.setenv("CSC_INT8_KERNEL", "float")
        assert int8.int8_kernel() == "float"
        int8.int8_kernel.cache_clear()
        monkeypatch.setenv("CSC_INT8_KERNEL", "fast")
        with pytest.raises(ValueError, match="CSC_INT8_KERNEL must be one of"):
            int8.int8_kernel()
        int8.int8_kernel.cache_clear()
        monkeypatch.delenv("CSC_INT8_KERNEL")
        assert int8.int8_kernel() in ("int", "float")  # timed on this machine
    finally:
        int8.int8_kernel.cache_clear()
