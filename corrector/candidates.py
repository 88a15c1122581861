"""Candidates: what could stand at each flagged position.

The generator sees every flagged position of the whole batch masked at once — one forward pass
per batch, not one per character — and its output head is applied only at those positions
(the vocabulary projection is the expensive part of a masked-LM head). The candidates for a
position are the generator's top-k CJK characters joined with the original character's confusion
set (same/similar pinyin, similar shape, user pairs, and the corrections of that character seen
in the model's training data) where the generator gives them at least
`min_confusion_prob`: a confusable character the context rules out is not worth scoring — unless
the model has an n-gram LM, which judges every confusable character cheaply. At
most `max_candidates` per position go on to scoring, ranked by an estimate of how well each
fits: the generator's log-probability plus, when the model has one, the n-gram LM's gain.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .confusion import LEARNED_PAIR, ConfusionSet
from .detection import Batch
from .models import ModelBundle


@dataclass(frozen=True)
class CandidateConfig:
    top_k: int = 5  # generator candidates per flagged position
    min_confusion_prob: float = 1e-4  # confusion-set candidates need at least this generator probability
    max_candidates: int = 12  # most candidates kept per position (best generator + n-gram LM estimate first)


@dataclass
class Candidate:
    row: int  # batch row
    index: int  # character index within the row's sequence
    target_id: int
    relation: int  # confusion bits between source and target (see confusion.py)
    gen_logprob: float
    orig_logprob: float
    top1: bool
    lm_gain: float = 0.0  # n-gram LM: log P(sentence with target) - log P(sentence), nats


class VocabConfusion:
    """Confusion sets as vocabulary ids: source id -> (candidate ids, relation bits).

    The model's learned error pairs (`bundle.error_pairs`) join the confusion set with the
    LEARNED_PAIR bit: a correction people really made is a candidate whatever its relation.
    """

    def __init__(self, confusion: ConfusionSet, bundle: ModelBundle) -> None:
        self.confusion = confusion
        self.error_pairs = bundle.error_pairs
        self.tokenizer = bundle.tokenizer
        self.cjk = set(self.tokenizer.cjk_ids)
        self._memo: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._lock = threading.Lock()

    def __call__(self, char: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Keyed by the character itself: a source outside the vocabulary ([UNK]) still has a set."""
        memo = self._memo.get(char)
        if memo is not None:
            return memo
        ids, bits = [], []
        relations = dict(self.confusion.relations(char))
        if self.error_pairs is not None:
            for target in self.error_pairs.targets(char):
                relations[target] = relations.get(target, 0) | LEARNED_PAIR
        for target, relation in relations.items():
            target_id = self.tokenizer.vocab.get(target)
            if target_id is not None and target_id in self.cjk:
                ids.append(target_id)
                bits.append(relation)
        result = (torch.tensor(ids, dtype=torch.long), torch.tensor(bits, dtype=torch.long))
        with self._lock:
            self._memo[char] = result
        return result


def cjk_bias(bundle: ModelBundle) -> torch.Tensor:
    """0 for CJK ids, -inf elsewhere: added to log-probs so only characters are proposed."""
    vocab_size = bundle.generator.config.vocab_size
    bias = torch.full((vocab_size,), float("-inf"))
    ids = torch.tensor([i for i in bundle.tokenizer.cjk_ids if i < vocab_size], dtype=torch.long)
    bias[ids] = 0.0
    return bias


@torch.inference_mode()
def masked_log_probs(bundle: ModelBundle, batch: Batch, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Generator log-probs (N, V) at (rows[n], index[n]), all N positions masked in one pass."""
    # Only the rows with a flagged position go through the generator, trimmed to their width.
    used, rows = torch.unique(rows, return_inverse=True)
    width = int(batch.attention_mask[used.to(batch.attention_mask.device)].sum(1).max())
    input_ids = batch.input_ids[used.to(batch.input_ids.device), :width].clone()
    attention_mask = batch.attention_mask[used.to(batch.attention_mask.device), :width]
    cols = (index + 1).to(input_ids.device)  # +1 for [CLS]
    input_ids[rows.to(input_ids.device), cols] = bundle.tokenizer.mask_token_id
    generator = bundle.generator
    if hasattr(generator, "electra") and hasattr(generator, "generator_predictions"):
        hidden = generator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        picked = hidden[rows.to(hidden.device), cols]
        logits = generator.generator_lm_head(generator.generator_predictions(picked))
    else:  # any other masked-LM class: full head, then pick
        logits = generator(input_ids=input_ids, attention_mask=attention_mask).logits
        logits = logits[rows.to(logits.device), cols]
    return logits.float().log_softmax(-1).cpu()


def propose(
    log_probs: torch.Tensor,
    rows: torch.Tensor,
    index: torch.Tensor,
    source_ids: torch.Tensor,
    source_chars: list[str],
    vocab_confusion: VocabConfusion,
    bias: torch.Tensor,
    config: CandidateConfig,
    lm_gains: Callable[[list[torch.Tensor]], list[np.ndarray]] | None = None,
) -> list[list[Candidate]]:
    """The candidates of each flagged position (same order as rows/index), most plausible first.

    Per position: the generator's top-k CJK characters and the source character's confusion set
    (with `lm_gains`, a function giving the n-gram gain of each position's candidate ids, every
    confusable character; without, those the generator gives `min_confusion_prob`). Then at most
    `max_candidates` are kept, ranked by generator log-probability plus n-gram gain. The work is
    done on id arrays; `Candidate` objects are made only for what is kept.
    """
    allowed = log_probs + bias
    top_lp, top_ids = allowed.topk(min(config.top_k + 1, allowed.shape[1]), dim=-1)
    orig_lp = log_probs.gather(1, source_ids.view(-1, 1)).squeeze(1)
    ids_per_position: list[torch.Tensor] = []
    bits_per_position: list[torch.Tensor] = []
    for n in range(len(rows)):
        source = int(source_ids[n])
        conf_ids, conf_bits = vocab_confusion(source_chars[n])
        if len(conf_ids):
            conf_lp = allowed[n, conf_ids]
            keep = conf_lp > float("-inf") if lm_gains is not None else conf_lp >= math.log(config.min_confusion_prob)
            conf_ids, conf_bits = conf_ids[keep], conf_bits[keep]
        generated = top_ids[n][(top_ids[n] != source) & (top_lp[n] > float("-inf"))][: config.top_k]
        generated = generated[~torch.isin(generated, conf_ids)]
        ids = torch.cat([conf_ids, generated])
        bits = torch.cat([conf_bits, torch.zeros(len(generated), dtype=torch.long)])
        keep = ids != source
        ids_per_position.append(ids[keep])
        bits_per_position.append(bits[keep])

    out: list[list[Candidate]] = [[] for _ in range(len(rows))]
    sizes = torch.tensor([len(ids) for ids in ids_per_position], dtype=torch.long)
    if int(sizes.sum()) == 0:
        return out
    flat_ids = torch.cat(ids_per_position)
    position = torch.repeat_interleave(torch.arange(len(rows)), sizes)
    gen_lp = allowed[position, flat_ids]
    lm = torch.zeros(len(flat_ids))
    if lm_gains is not None:
        lm = torch.from_numpy(np.concatenate(lm_gains(ids_per_position))).float()
    # Rank within each position by generator + n-gram, keep the first `max_candidates` of each.
    order = torch.from_numpy(np.lexsort((-(gen_lp + lm).numpy(), position.numpy())))
    rank = torch.arange(len(order)) - (torch.cumsum(sizes, 0) - sizes)[position[order]]
    kept = order[rank < config.max_candidates].tolist()
    columns = {
        "target_id": flat_ids.tolist(), "relation": torch.cat(bits_per_position).tolist(),
        "gen_logprob": gen_lp.tolist(), "lm_gain": lm.tolist(),
        "top1": (flat_ids == top_ids[position, 0]).tolist(),
    }
    position_of, rows_of, index_of, orig_of = position.tolist(), rows.tolist(), index.tolist(), orig_lp.tolist()
    for k in kept:
        n = position_of[k]
        out[n].append(Candidate(row=rows_of[n], index=index_of[n], orig_logprob=orig_of[n],
                                **{name: values[k] for name, values in columns.items()}))
    return out
