"""The corrector's ELECTRA networks read straight from a model directory (config.json +
model.safetensors), without transformers.

Why: importing transformers' ELECTRA costs ~3 s on a 2-core CPU (it pulls in torch._dynamo and
torch.distributed.tensor), about half of a one-sentence CLI call, and the corrector never runs
transformers' code at inference anyway: its int8 networks run their encoders in lean_encoder.py or
onnx_encoder.py and their heads as a few `Int8Linear`s (quantization.py). The modules here are
plain torch with transformers' parameter names, so the safetensors file loads by name and
`int8_copy` builds from them exactly what it builds from transformers' modules (tested: the same
logits on the shipped model).

Only what the shipped layout uses is read: `ElectraForPreTraining` / `ElectraForMaskedLM`, gelu,
absolute positions, one safetensors file. `read_network` returns None for anything else, and the
caller loads it with transformers instead (models.py).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .network_config import IGNORED_KEYS, WEIGHTS_FILE, read_config


def read_network(directory: str | Path) -> nn.Module | None:
    """The fp32 network of a directory (ElectraDiscriminator or ElectraGenerator), or None where
    this module cannot build it (the caller then uses transformers)."""
    from safetensors.torch import load_file

    config = read_config(directory)
    weights = Path(directory) / WEIGHTS_FILE
    if config is None or not weights.is_file():
        return None
    state = {name: _float32(tensor) for name, tensor in load_file(weights).items() if name not in IGNORED_KEYS}
    network_class = ElectraDiscriminator if config.architectures[0] == "ElectraForPreTraining" else ElectraGenerator
    network = network_class(config)  # uninitialised (_Linear, _Embedding): every parameter is the file's
    if isinstance(network, ElectraGenerator) and "generator_lm_head.weight" not in state and config.tie_word_embeddings:
        state["generator_lm_head.weight"] = state.get("electra.embeddings.word_embeddings.weight")
    if set(state) != set(network.state_dict()) or any(tensor is None for tensor in state.values()):
        return None  # a variant of the architecture this module does not know
    try:
        network.load_state_dict(state, strict=True, assign=True)
    except RuntimeError:  # shapes that do not match the config
        return None
    return network.eval()


def _float32(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor in fp32 (exact from fp16 and bf16). fp16 goes through numpy: torch converts
    tensors of 64K+ elements on its thread pool, which took 8 ms a tensor (0.2 s a network) on a
    2-core machine with one core busy, numpy 0.01 s a network."""
    if tensor.dtype == torch.float16:
        return torch.from_numpy(tensor.numpy().astype(np.float32))
    return tensor.float()


@dataclass
class NetworkOutput:
    logits: torch.Tensor


class _Linear(nn.Linear):
    """nn.Linear without random initialisation, which cost ~75 ms for both networks on 2 cores
    and is overwritten by the file's weights anyway. (Building on the "meta" device instead
    imported torch._dynamo: ~1.5 s.)"""

    def reset_parameters(self) -> None:
        pass


class _Embedding(nn.Embedding):
    """nn.Embedding without random initialisation (see _Linear)."""

    def reset_parameters(self) -> None:
        pass


def _norm(config: types.SimpleNamespace, size: int) -> nn.LayerNorm:
    return nn.LayerNorm(size, eps=config.layer_norm_eps)


class _Embeddings(nn.Module):
    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.word_embeddings = _Embedding(config.vocab_size, config.embedding_size)
        self.position_embeddings = _Embedding(config.max_position_embeddings, config.embedding_size)
        self.token_type_embeddings = _Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = _norm(config, config.embedding_size)


class _Module(nn.Module):
    """A named group of sub-modules (transformers' nesting, for the parameter names)."""

    def __init__(self, /, **children: nn.Module) -> None:  # positional-only: a child may be called `self`
        super().__init__()
        for name, child in children.items():
            self.add_module(name, child)


class _SelfAttention(nn.Module):
    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.query, self.key, self.value = (_Linear(config.hidden_size, config.hidden_size) for _ in range(3))


class _Intermediate(nn.Module):
    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.dense = _Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = F.gelu  # read_config admits "gelu" only: transformers' exact (erf) gelu


def _layer(config: types.SimpleNamespace) -> nn.Module:
    hidden = config.hidden_size
    attention_output = _Module(dense=_Linear(hidden, hidden), LayerNorm=_norm(config, hidden))
    output = _Module(dense=_Linear(config.intermediate_size, hidden), LayerNorm=_norm(config, hidden))
    return _Module(attention=_Module(self=_SelfAttention(config), output=attention_output),
                   intermediate=_Intermediate(config), output=output)


class ElectraEncoder(nn.Module):
    """The weights of transformers' `ElectraModel` under its names. No forward of its own: the
    corrector runs it as `LeanElectraEncoder` (quantization.int8_copy) or in ONNX Runtime (onnx_networks.py)."""

    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.config = config
        self.embeddings = _Embeddings(config)
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = _Linear(config.embedding_size, config.hidden_size)
        self.encoder = _Module(layer=nn.ModuleList(_layer(config) for _ in range(config.num_hidden_layers)))

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ElectraEncoder holds weights only: run the network through quantization.int8_copy")


class _Network(nn.Module):
    config: types.SimpleNamespace

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
               token_type_ids: torch.Tensor | None) -> torch.Tensor:
        return self.electra(input_ids=input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids).last_hidden_state


class ElectraDiscriminator(_Network):
    """`ElectraForPreTraining` at inference: P(replaced) logits, shape (batch, length)."""

    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.config = config
        self.electra = ElectraEncoder(config)
        self.discriminator_predictions = _Module(dense=_Linear(config.hidden_size, config.hidden_size),
                                                 dense_prediction=_Linear(config.hidden_size, 1))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> NetworkOutput:
        head = self.discriminator_predictions
        hidden = F.gelu(head.dense(self.encode(input_ids, attention_mask, token_type_ids)))
        return NetworkOutput(logits=head.dense_prediction(hidden).squeeze(-1))


class ElectraGenerator(_Network):
    """`ElectraForMaskedLM` at inference: vocabulary logits, shape (batch, length, vocab)."""

    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.config = config
        self.electra = ElectraEncoder(config)
        self.generator_predictions = _GeneratorPredictions(config)
        self.generator_lm_head = _Linear(config.embedding_size, config.vocab_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> NetworkOutput:
        states = self.generator_predictions(self.encode(input_ids, attention_mask, token_type_ids))
        return NetworkOutput(logits=self.generator_lm_head(states))


class _GeneratorPredictions(nn.Module):
    def __init__(self, config: types.SimpleNamespace) -> None:
        super().__init__()
        self.LayerNorm = _norm(config, config.embedding_size)
        self.dense = _Linear(config.hidden_size, config.embedding_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(hidden)))
