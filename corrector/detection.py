"""Detection: pad a batch of id sequences and ask the discriminator which characters look wrong."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .runtime.models import ModelBundle


@dataclass
class Batch:
    """Padded model input for id sequences; position j of sequence b is column j + 1 ([CLS] first)."""

    input_ids: torch.Tensor  # (B, T) with [CLS] ... [SEP] [PAD]...
    attention_mask: torch.Tensor  # (B, T)
    lengths: torch.Tensor  # (B,) characters per sequence, without the special tokens


def make_batch(sequences: list[list[int]], bundle: ModelBundle) -> Batch:
    tok = bundle.tokenizer
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    width = int(lengths.max()) + 2 if len(sequences) else 2
    input_ids = torch.full((len(sequences), width), tok.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, ids in enumerate(sequences):
        n = len(ids)
        input_ids[row, : n + 2] = torch.tensor(tok.with_special_tokens(ids), dtype=torch.long)
        attention_mask[row, : n + 2] = 1
    return Batch(input_ids.to(bundle.device), attention_mask.to(bundle.device), lengths)


@torch.inference_mode()
def detect(bundle: ModelBundle, batch: Batch) -> torch.Tensor:
    """P(replaced) per character, (B, T - 2) on the CPU; padding columns are 0."""
    probs = bundle.replaced_probability(batch.input_ids, batch.attention_mask)[:, 1:-1]
    probs = probs * batch.attention_mask[:, 2:].to(probs.dtype)  # zero [SEP] and padding
    return probs.float().cpu()
