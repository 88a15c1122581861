"""An inference-only ELECTRA encoder: the weights of an `ElectraModel` (transformers' or
electra.py's), run by one plain forward function with int8 matmuls (quantization.py) and query/key/value fused.

Why: at sentence length the corrector's passes are overhead-bound, not matmul-bound. transformers'
encoder calls ~11 modules per layer, each through hooks, output capturing and kwargs plumbing
(`apply_chunking_to_forward` alone inspects a signature per layer per call). This forward runs
the same arithmetic in a dozen tensor ops per layer, and one int8 matmul for Q, K and V (their
activations quantized once instead of three times; per-channel weight scales make the fused
matmul exactly the three separate ones). Measured on the shipped model, one SIGHAN-length
sentence, int8 either way: discriminator 10.2 -> 7.0 ms, generator 8.0 -> 5.3 ms; a batch of 16
on one thread 7-9% faster; the outputs are the int8 transformers network's (0.0 difference
measured on dev batches; tests/test_quantization.py checks to 1e-5, with and without padding and
the embedding projection).

Only what the corrector's networks use is supported — an encoder-only ELECTRA with absolute
positions; `lean_encoder_supported` says whether a network qualifies, and anything else keeps
transformers' forward (`quantization.int8_copy`).
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .electra import ElectraEncoder
from .int8 import Int8Linear


class EncoderOutput(NamedTuple):
    """What an encoder returns to the heads: transformers' heads read item 0 and the
    hidden_states / attentions attributes (None: not kept), the corrector `last_hidden_state`."""

    last_hidden_state: torch.Tensor
    hidden_states = None
    attentions = None


def is_electra_encoder(module: nn.Module) -> bool:
    """Whether `module` is an ELECTRA encoder: electra.py's, or transformers' `ElectraModel`
    (checked without importing transformers: an instance exists only once it is imported)."""
    if isinstance(module, ElectraEncoder):
        return True
    modeling = sys.modules.get("transformers.models.electra.modeling_electra")
    return modeling is not None and isinstance(module, modeling.ElectraModel)


def lean_encoder_supported(encoder: nn.Module) -> bool:
    """Whether `encoder` is an ELECTRA encoder (`is_electra_encoder`) this module can run: not a
    decoder, no cross-attention, absolute position embeddings, plain linear layers."""
    if not is_electra_encoder(encoder):
        return False
    config = encoder.config
    if config.is_decoder or getattr(config, "add_cross_attention", False):
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False
    layers = encoder.encoder.layer
    return len(layers) > 0 and all(
        isinstance(module, nn.Linear)
        for layer in layers
        for module in (layer.attention.self.query, layer.attention.self.key, layer.attention.self.value,
                       layer.attention.output.dense, layer.intermediate.dense, layer.output.dense)
    )


def onnx_encoder_supported(encoder: nn.Module) -> bool:
    """Whether `encoder` can run as an ONNX Runtime graph (onnx_encoder.py): what this module runs,
    with the "gelu" activation."""
    return lean_encoder_supported(encoder) and encoder.config.hidden_act == "gelu"


class LeanLayer(nn.Module):
    """One transformer layer: self-attention and feed-forward, each with residual + LayerNorm."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        attention = layer.attention.self
        self.heads, self.head_size = attention.num_attention_heads, attention.attention_head_size
        projections = (attention.query, attention.key, attention.value)
        self.qkv = Int8Linear(torch.cat([p.weight for p in projections]), torch.cat([p.bias for p in projections]))
        self.attention_out = Int8Linear.from_linear(layer.attention.output.dense)
        self.attention_norm = layer.attention.output.LayerNorm
        self.ffn_in = Int8Linear.from_linear(layer.intermediate.dense)
        self.activation = layer.intermediate.intermediate_act_fn
        self.ffn_out = Int8Linear.from_linear(layer.output.dense)
        self.output_norm = layer.output.LayerNorm

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, hidden = x.shape
        # (3, B, heads, T, head_size): views of one matmul's output, as scaled_dot_product_attention takes them.
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, self.head_size).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(batch, length, hidden)
        x = _layer_norm(self.attention_out(attended) + x, self.attention_norm)
        return _layer_norm(self.ffn_out(self.activation(self.ffn_in(x))) + x, self.output_norm)


class InferenceEncoder(nn.Module):
    """Drop-in for `model.electra` of ElectraForPreTraining / ElectraForMaskedLM /
    ElectraForTokenClassification at inference: called the same way, returns
    `last_hidden_state` (also as item 0). Subclasses set `word_embeddings` and `encode`."""

    description = "this encoder"
    word_embeddings: nn.Embedding

    def get_input_embeddings(self) -> nn.Embedding:
        return self.word_embeddings

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **unused,  # return_dict, output_* flags of the transformers heads: one output here either way
    ) -> EncoderOutput:
        if input_ids is None or position_ids is not None or inputs_embeds is not None:
            raise ValueError(f"{self.description} takes input_ids (and attention_mask, token_type_ids) only")
        return EncoderOutput(self.encode(input_ids, attention_mask, token_type_ids))

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
               token_type_ids: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError


class LeanElectraEncoder(InferenceEncoder):
    """The encoder as one plain torch forward with int8 matmuls. Holds its own copies of the weights."""

    description = "the lean encoder"

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        if not lean_encoder_supported(encoder):
            raise ValueError(f"{type(encoder).__name__} is not an encoder-only ELECTRA the lean encoder can run")
        self.config = encoder.config
        embeddings = encoder.embeddings
        self.word_embeddings = embeddings.word_embeddings
        self.position_embeddings = embeddings.position_embeddings
        self.token_type_embeddings = embeddings.token_type_embeddings
        self.embedding_norm = embeddings.LayerNorm
        project = getattr(encoder, "embeddings_project", None)  # embedding_size != hidden_size
        self.embeddings_project = Int8Linear.from_linear(project) if project is not None else None
        self.layers = nn.ModuleList(LeanLayer(layer) for layer in encoder.encoder.layer)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
               token_type_ids: torch.Tensor | None) -> torch.Tensor:
        length = input_ids.shape[1]
        # In transformers' order: (word + token type) + position, then LayerNorm.
        if token_type_ids is None:
            types = self.token_type_embeddings.weight[0]
        else:
            types = self.token_type_embeddings(token_type_ids)
        x = self.word_embeddings(input_ids) + types
        x = _layer_norm(x + self.position_embeddings.weight[:length], self.embedding_norm)
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)
        mask = None  # no padding: no mask, sdpa's fastest path
        if attention_mask is not None and not bool(attention_mask.all()):
            mask = attention_mask[:, None, None, :].bool()  # (B, 1, 1, T): keys a query may attend to
        for layer in self.layers:
            x = layer(x, mask)
        return x


def _layer_norm(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
