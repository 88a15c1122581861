"""Candidates: what could stand at each flagged position.

The generator sees every flagged position of the whole batch masked at once — one forward pass
per batch, not one per character — and its output head is applied only at those positions
(the vocabulary projection is the expensive part of a masked-LM head). The candidates for a
position are the generator's top-k CJK characters joined with the original character's confusion
set (same/similar pinyin, similar shape, user pairs) where the generator gives them at least
`min_confusion_prob`: a confusable character the context rules out is not worth scoring — unless
the model has an n-gram LM, which judges every confusable character cheaply. At
most `max_candidates` per position go on to scoring, ranked by an estimate of how well each
fits (`cap`): the generator's log-probability plus, when the model has one, the n-gram LM's gain.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import torch

from .confusion import ConfusionSet
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
    """Confusion sets as vocabulary ids: source id -> (candidate ids, relation bits)."""

    def __init__(self, confusion: ConfusionSet, bundle: ModelBundle) -> None:
        self.confusion = confusion
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
        for target, relation in self.confusion.relations(char).items():
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
    keep_all_confusable: bool = False,
) -> list[list[Candidate]]:
    """Every candidate for each flagged position (same order as rows/index), best generator
    log-probability first; `cap` trims them."""
    allowed = log_probs + bias
    top_lp, top_ids = allowed.topk(min(config.top_k + 1, allowed.shape[1]), dim=-1)
    orig_lp = log_probs.gather(1, source_ids.view(-1, 1)).squeeze(1)
    floor = float("-inf") if keep_all_confusable else math.log(config.min_confusion_prob)
    out: list[list[Candidate]] = []
    for n in range(len(rows)):
        source = int(source_ids[n])
        best = int(top_ids[n, 0])
        conf_ids, conf_bits = vocab_confusion(source_chars[n])
        relation = dict(zip(conf_ids.tolist(), conf_bits.tolist(), strict=True))
        scored: dict[int, float] = {}
        for lp, tid in zip(top_lp[n].tolist(), top_ids[n].tolist(), strict=True):
            if len(scored) == config.top_k:
                break
            if tid != source and lp > float("-inf"):
                scored[tid] = lp
        if len(conf_ids):
            conf_lp = allowed[n, conf_ids]
            keep = conf_lp > floor if keep_all_confusable else conf_lp >= floor
            for tid, lp in zip(conf_ids[keep].tolist(), conf_lp[keep].tolist(), strict=True):
                if tid != source:
                    scored[tid] = lp
        ranked = sorted(scored.items(), key=lambda item: -item[1])
        out.append([
            Candidate(
                row=int(rows[n]),
                index=int(index[n]),
                target_id=tid,
                relation=relation.get(tid, 0),
                gen_logprob=lp,
                orig_logprob=float(orig_lp[n]),
                top1=tid == best,
            )
            for tid, lp in ranked
        ])
    return out


def cap(per_position: list[list[Candidate]], max_candidates: int) -> list[list[Candidate]]:
    """The `max_candidates` most plausible candidates of each position: generator log-probability
    plus n-gram gain (both say how much better the candidate fits than the alternatives)."""
    return [sorted(cands, key=lambda c: -(c.gen_logprob + c.lm_gain))[:max_candidates] for cands in per_position]
