"""The network passes the pipeline makes over a batch: a padded batch of id sequences, the
generator's pass (read at flagged positions, or its confusion margins at the others), and the
generator's output layer. The discriminator's pass is detection's (detection.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .int8 import Int8Linear
from .models import ModelBundle


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
def generator_log_probs(bundle: ModelBundle, batch: Batch, rows: torch.Tensor, index: torch.Tensor,
                        mask: bool = True) -> torch.Tensor:
    """Generator log-probs (N, V) at the flagged positions (rows[n], index[n]).

    `mask=False` ("source" input): one pass over the sentences as written — a generator
    fine-tuned to map a sentence with errors to the corrected one reads every neighbour and the
    suspect character itself. `mask=True` ("masked" input, a generator that was only
    pre-trained): the flagged positions are [MASK]ed, all in one pass.
    """
    return _generator_pass(bundle, batch, rows, index, mask=mask)


def _generator_pass(bundle: ModelBundle, batch: Batch, rows: torch.Tensor, index: torch.Tensor,
                    mask: bool) -> torch.Tensor:
    """One generator pass (the (rows[n], index[n]) positions masked if `mask`): their log-probs (N, V)."""
    # Only the rows with a flagged position go through the generator, trimmed to their width.
    used, rows = torch.unique(rows, return_inverse=True)
    width = int(batch.attention_mask[used.to(batch.attention_mask.device)].sum(1).max())
    input_ids = batch.input_ids[used.to(batch.input_ids.device), :width].clone()
    attention_mask = batch.attention_mask[used.to(batch.attention_mask.device), :width]
    cols = (index + 1).to(input_ids.device)  # +1 for [CLS]
    if mask:
        input_ids[rows.to(input_ids.device), cols] = bundle.tokenizer.mask_token_id
    generator = bundle.generator
    if reads_positions(generator):
        return GeneratorPass(bundle, input_ids, attention_mask).log_probs(rows, index)
    with bundle.autocast():  # any other masked-LM class: full head, then pick
        logits = generator(input_ids=input_ids, attention_mask=attention_mask).logits
    return logits[rows.to(logits.device), cols].float().log_softmax(-1).cpu()


def reads_positions(generator: torch.nn.Module) -> bool:
    """Whether the generator is an ELECTRA masked LM whose head can be applied at chosen positions."""
    return hasattr(generator, "electra") and hasattr(generator, "generator_predictions")


class GeneratorPass:
    """One generator encoder pass over sentences (as given), read at any positions afterwards:
    the flagged positions' distributions (`log_probs`) and, at the others, how much the generator
    prefers a confusable character to the written one (`confusion_margins`)."""

    @torch.inference_mode()
    def __init__(self, bundle: ModelBundle, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.bundle = bundle
        with bundle.autocast():
            self.hidden = bundle.generator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    @torch.inference_mode()
    def states(self, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The head's input at characters (rows[n], index[n]): (N, embedding size)."""
        picked = self.hidden[rows.to(self.hidden.device), (index + 1).to(self.hidden.device)]  # +1 for [CLS]
        with self.bundle.autocast():
            return self.bundle.generator.generator_predictions(picked)

    @torch.inference_mode()
    def log_probs(self, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        with self.bundle.autocast():
            logits = self.bundle.generator.generator_lm_head(self.states(rows, index))
        return logits.float().log_softmax(-1).cpu()

    @torch.inference_mode()
    def confusion_margins(self, rows: torch.Tensor, index: torch.Tensor, written_ids: torch.Tensor,
                          candidate_ids: list[np.ndarray], output_layer: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Per character n: the largest logit among `candidate_ids[n]` (its confusion set) minus
        the written character's, -inf where the set is empty. Only the output layer's rows of the
        batch's distinct written and confusable characters are read, not the whole vocabulary.

        Why one product with those rows: the sets of a batch's characters overlap (a batch of 32
        SIGHAN sentences reads ~35,000 set entries), so every character's logit against every
        distinct row costs fewer bytes moved than gathering one weight row and one state per entry
        (batch 32: 11-14 vs 30-37 ms, batch 8: 2.3 vs 3.8 ms; one thread)."""
        weight, bias = output_layer
        states = self.states(rows, index).float().cpu()
        sites = len(candidate_ids)
        sizes = [len(ids) for ids in candidate_ids]
        if not sum(sizes):
            return torch.full((sites,), float("-inf"))
        site = np.repeat(np.arange(sites), sizes)
        distinct, column = np.unique(np.concatenate([written_ids.numpy(), *candidate_ids]), return_inverse=True)
        ids = torch.from_numpy(distinct)
        logits = torch.addmm(bias.index_select(0, ids), states, weight.index_select(0, ids).t()).view(-1)
        written = logits[torch.from_numpy(np.arange(sites) * len(distinct) + column[:sites])]
        confusable = logits[torch.from_numpy(site * len(distinct) + column[sites:])]
        best = torch.full((sites,), float("-inf")).scatter_reduce(0, torch.from_numpy(site), confusable, "amax")
        return best - written


def output_layer(generator: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """The generator's vocabulary projection as float (V, E) weight and (V,) bias on the CPU
    (an int8 head's weights dequantized)."""
    head = generator.generator_lm_head
    weight = head.dequantized_weight() if isinstance(head, Int8Linear) else head.weight.detach().float()
    bias = head.bias.detach().float() if head.bias is not None else torch.zeros(weight.shape[0])
    return weight.cpu(), bias.cpu()
