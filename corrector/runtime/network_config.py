"""What a network directory of the shipped layout holds (config.json + model.safetensors), read
without torch: the config, and the weights as numpy arrays. electra.py builds torch modules from
them, onnx_networks.py the ONNX Runtime networks the corrector runs by default."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np

ARCHITECTURES = ("ElectraForPreTraining", "ElectraForMaskedLM")
WEIGHTS_FILE = "model.safetensors"
# config.json keys the networks are built from; a file without one of them is left to
# transformers, whose defaults this module does not repeat.
REQUIRED_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_act")
# Buffers older transformers versions saved with the weights; not parameters.
IGNORED_KEYS = ("electra.embeddings.position_ids", "electra.embeddings.token_type_ids")


def read_config(directory: str | Path) -> types.SimpleNamespace | None:
    """config.json as attributes (what `ModelBundle` and the encoders read), or None when this
    module cannot build the network it describes."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        return None
    values = json.loads(path.read_text(encoding="utf-8"))
    architectures = values.get("architectures") or []
    if (values.get("model_type") != "electra" or len(architectures) != 1 or architectures[0] not in ARCHITECTURES
            or any(key not in values for key in REQUIRED_KEYS) or values["hidden_act"] != "gelu"
            or values.get("is_decoder") or values.get("add_cross_attention")
            or values.get("position_embedding_type", "absolute") != "absolute"
            or values["hidden_size"] % values["num_attention_heads"]):
        return None
    return types.SimpleNamespace(**{"is_decoder": False, "add_cross_attention": False,
                                    "position_embedding_type": "absolute", "tie_word_embeddings": True, **values})


def read_weights(directory: str | Path) -> dict[str, np.ndarray] | None:
    """The directory's model.safetensors as fp32 numpy arrays (exact from fp16 and bf16), the
    buffers of IGNORED_KEYS left out; None where there is no such file."""
    from safetensors.numpy import load_file

    path = Path(directory) / WEIGHTS_FILE
    if not path.is_file():
        return None
    return {name: array.astype(np.float32, copy=False) if array.dtype.kind == "f" else array
            for name, array in load_file(path).items() if name not in IGNORED_KEYS}
