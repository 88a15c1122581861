"""The network passes the pipeline makes over a batch: a padded batch of id sequences, the
generator's pass (read at flagged positions, or its confusion margins at the others), and the
generator's output layer. The discriminator's pass is detection's (detection.py). numpy in and
out, whatever runs the networks (`ModelBundle.generator_network`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .models import ModelBundle
from .onnx_networks import OutputLayer, log_softmax


@dataclass
class Batch:
    """Padded model input for id sequences; position j of sequence b is column j + 1 ([CLS] first)."""

    input_ids: np.ndarray  # (B, T) int64 with [CLS] ... [SEP] [PAD]...
    attention_mask: np.ndarray  # (B, T) int64


def make_batch(sequences: list[list[int]], bundle: ModelBundle) -> Batch:
    tok = bundle.tokenizer
    width = max(map(len, sequences), default=0) + 2
    input_ids = np.full((len(sequences), width), tok.pad_token_id, dtype=np.int64)
    attention_mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, ids in enumerate(sequences):
        n = len(ids)
        input_ids[row, : n + 2] = tok.with_special_tokens(ids)
        attention_mask[row, : n + 2] = 1
    return Batch(input_ids, attention_mask)


def generator_log_probs(bundle: ModelBundle, batch: Batch, rows: np.ndarray, index: np.ndarray,
                        mask: bool = True) -> np.ndarray:
    """Generator log-probs (N, V) at the flagged positions (rows[n], index[n]).

    `mask=False` ("source" input): one pass over the sentences as written — a generator
    fine-tuned to map a sentence with errors to the corrected one reads every neighbour and the
    suspect character itself. `mask=True` ("masked" input, a generator that was only
    pre-trained): the flagged positions are [MASK]ed, all in one pass.
    """
    # Only the rows with a flagged position go through the generator, trimmed to their width.
    used, rows = np.unique(np.asarray(rows), return_inverse=True)
    width = int(batch.attention_mask[used].sum(1).max())
    input_ids = batch.input_ids[used, :width].copy()
    attention_mask = batch.attention_mask[used, :width]
    index = np.asarray(index)
    if mask:
        input_ids[rows, index + 1] = bundle.tokenizer.mask_token_id  # +1 for [CLS]
    network = bundle.generator_network()
    if reads_positions(network):
        return GeneratorPass(bundle, input_ids, attention_mask).log_probs(rows, index)
    return network.full_log_probs(input_ids, attention_mask, rows, index + 1)


def reads_positions(network) -> bool:
    """Whether the generator (as `ModelBundle.generator_network` gives it) is an ELECTRA masked LM
    whose head can be applied at chosen positions."""
    return getattr(network, "reads_positions", True)


class GeneratorPass:
    """One generator encoder pass over sentences (as given), read at any positions afterwards:
    the flagged positions' distributions (`log_probs`) and, at the others, how much the generator
    prefers a confusable character to the written one (`confusion_margins`)."""

    def __init__(self, bundle: ModelBundle, input_ids: np.ndarray, attention_mask: np.ndarray) -> None:
        self.network = bundle.generator_network()
        self.hidden = self.network.encode(input_ids, attention_mask)

    def states(self, rows: np.ndarray, index: np.ndarray) -> np.ndarray:
        """The head's input at characters (rows[n], index[n]): (N, embedding size) float32."""
        return self.network.states(self.hidden, np.asarray(rows), np.asarray(index) + 1)  # +1 for [CLS]

    def log_probs(self, rows: np.ndarray, index: np.ndarray) -> np.ndarray:
        return log_softmax(self.network.logits(self.states(rows, index)))

    def confusion_margins(self, rows: np.ndarray, index: np.ndarray, written_ids: np.ndarray,
                          candidate_ids: list[np.ndarray], output_layer: OutputLayer) -> np.ndarray:
        """Per character n: the largest logit among `candidate_ids[n]` (its confusion set) minus
        the written character's, -inf where the set is empty. Only the output layer's rows of the
        batch's distinct written and confusable characters are read, not the whole vocabulary.

        Why one product with those rows: the sets of a batch's characters overlap (a batch of 32
        SIGHAN sentences reads ~35,000 set entries), so every character's logit against every
        distinct row costs fewer bytes moved than gathering one weight row and one state per entry
        (batch 32: 11-14 vs 30-37 ms, batch 8: 2.3 vs 3.8 ms; one thread). The distinct ids are
        marked in a vocabulary-sized table rather than sorted (np.unique was a sixth of the time)."""
        sites = len(candidate_ids)
        sizes = np.array([len(ids) for ids in candidate_ids], dtype=np.int64)
        best = np.full(sites, -np.inf, dtype=np.float32)
        if not sizes.sum():
            return best
        states = self.states(rows, index)
        every = np.concatenate([np.asarray(written_ids), *candidate_ids])
        present = np.zeros(len(output_layer.bias), dtype=bool)
        present[every] = True
        distinct = np.flatnonzero(present)  # sorted, as np.unique gives them
        column = (np.cumsum(present) - 1)[every]  # each id's place among them
        logits = (states @ output_layer.rows(distinct).T + output_layer.bias[distinct]).reshape(-1)
        written = logits[np.arange(sites) * len(distinct) + column[:sites]]
        site = np.repeat(np.arange(sites), sizes)
        confusable = logits[site * len(distinct) + column[sites:]]
        filled = np.flatnonzero(sizes)
        best[filled] = np.maximum.reduceat(confusable, (np.cumsum(sizes) - sizes)[filled])
        return best - written


def output_layer(bundle: ModelBundle) -> OutputLayer:
    """The generator's vocabulary projection (an int8 head's rows dequantized as they are read)."""
    return bundle.generator_network().output_layer()
