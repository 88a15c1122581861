"""Candidates: what could stand at each flagged position.

One generator pass per batch, not one per character: the generator sees either every flagged
position of the whole batch masked at once (a pre-trained generator, "masked" input) or the
sentences as written (a generator fine-tuned the BERT-CSC way, "source" input), and its output
head is applied only at the flagged positions (the vocabulary projection is the expensive part
of a masked-LM head). The candidates for a
position are the generator's top-k CJK characters joined with the original character's confusion
set (same/similar pinyin, similar shape, user pairs, and the corrections of that character seen
in the model's training data) where the generator gives them at least
`min_confusion_prob`: a confusable character the context rules out is not worth scoring — unless
the model has an n-gram LM, which judges every confusable character cheaply. At
most `max_candidates` per position go on to scoring, ranked by an estimate of how well each
fits: the generator's log-probability plus, when the model has one, the n-gram LM's gain.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .resources.confusion import LEARNED_PAIR, ConfusionSet
from .runtime.models import ModelBundle


@dataclass(frozen=True)
class CandidateConfig:
    top_k: int = 5  # generator candidates per flagged position
    min_confusion_prob: float = 1e-4  # confusion-set candidates need at least this generator probability
    # Most candidates kept per position, best first by the estimate below. Measured on dev
    # (sentence correction F1 of the fitted scorer on held-out halves): 8 -> 0.360, 12 -> 0.359,
    # 16 -> 0.351, 20 -> 0.348, although 12/16/20 hold the gold character more often: the
    # extra candidates are mostly noise for the scorer, and each costs time.
    max_candidates: int = 8
    # The estimate that ranks candidates before the cap, a rough log-odds: the generator (its
    # log-probabilities are overconfident, hence halved), the n-gram LM's gain, and how often
    # the pair was a real error in training. On dev it keeps the gold character in the top 8
    # for 828 of the 851 errors whose gold is in the top 12 by generator + LM alone (vs 752).
    rank_gen_weight: float = 0.5
    rank_pair_weight: float = 2.0
    # Characters the n-gram LM would write there (resources/lm_proposals.py): the best
    # `lm_proposals` by trigram gain of the `lm_proposal_pool` that fit both neighbours best.
    # 0: none. See `Proposer` for what they add on the broad dev.
    lm_proposals: int = 3
    lm_proposal_pool: int = 16


@dataclass
class Candidates:
    """The kept candidates of a batch as columns, one entry per candidate, grouped by position
    (`position[k]` = n indexes the flagged positions `rows[n]`, `index[n]`), best first."""

    position: np.ndarray
    target_id: np.ndarray
    relation: np.ndarray  # confusion bits between source and target (see confusion.py)
    gen_logprob: np.ndarray  # log P_gen(target | context)
    orig_logprob: np.ndarray  # log P_gen(source | context), per candidate
    top1: np.ndarray  # target is the generator's most likely CJK character there
    lm_gain: np.ndarray  # n-gram LM: log P(sentence with target) - log P(sentence), nats
    pair_count: np.ndarray  # times source -> target was a real correction in training
    # Word candidates (homophones.py): the group of characters written together (-1: a single
    # character), the n-gram gain of writing the whole word, how many characters it changes and
    # log10(1 + its dictionary frequency); 0 for single characters.
    group: np.ndarray
    word_gain: np.ndarray
    word_size: np.ndarray
    word_freq: np.ndarray

    def __len__(self) -> int:
        return len(self.position)

    def select(self, keep: np.ndarray) -> Candidates:
        return Candidates(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})

    @classmethod
    def empty(cls) -> Candidates:
        kinds = {"position": np.int64, "target_id": np.int64, "relation": np.int64, "group": np.int64, "top1": bool}
        return cls(**{name: np.zeros(0, dtype=kinds.get(name, np.float64)) for name in cls.__dataclass_fields__})

    def extended(self, words: Candidates) -> Candidates:
        """These candidates, then the word members `words` (their groups renumbered after any here)."""
        if len(words) == 0:
            return self
        first_group = int(self.group.max()) + 1 if len(self) and self.group.max() >= 0 else 0
        words = dataclasses.replace(words, group=words.group + first_group)
        return Candidates(**{name: np.concatenate([getattr(self, name), getattr(words, name)]).astype(getattr(self, name).dtype)
                             for name in self.__dataclass_fields__})


class VocabConfusion:
    """Confusion sets as vocabulary ids: source char -> (candidate ids, relation bits, pair counts).

    The model's learned error pairs (`bundle.error_pairs`) join the confusion set with the
    LEARNED_PAIR bit: a correction people really made is a candidate whatever its relation.
    """

    def __init__(self, confusion: ConfusionSet, bundle: ModelBundle) -> None:
        self.confusion = confusion
        self.error_pairs = bundle.error_pairs
        self.tokenizer = bundle.tokenizer
        self.cjk = set(self.tokenizer.cjk_ids)
        self._memo: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def __call__(self, char: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keyed by the character itself: a source outside the vocabulary ([UNK]) still has a set."""
        memo = self._memo.get(char)
        if memo is not None:
            return memo
        relations = dict(self.confusion.relations(char))
        learned = self.error_pairs.targets(char) if self.error_pairs is not None else {}
        for target in learned:
            relations[target] = relations.get(target, 0) | LEARNED_PAIR
        ids, bits, counts = [], [], []
        for target, relation in relations.items():
            target_id = self.tokenizer.vocab.get(target)
            if target_id is not None and target_id in self.cjk:
                ids.append(target_id)
                bits.append(relation)
                counts.append(learned.get(target, 0))
        result = (np.array(ids, dtype=np.int64), np.array(bits, dtype=np.int64), np.array(counts, dtype=np.float32))
        with self._lock:
            self._memo[char] = result
        return result


def cjk_bias(bundle: ModelBundle) -> np.ndarray:
    """0 for CJK ids, -inf elsewhere (float32): added to log-probs so only characters are proposed."""
    vocab_size = bundle.generator.config.vocab_size
    bias = np.full(vocab_size, -np.inf, dtype=np.float32)
    bias[np.array([i for i in bundle.tokenizer.cjk_ids if i < vocab_size], dtype=np.int64)] = 0.0
    return bias


@dataclass
class GeneratorView:
    """What the candidate stages read of the generator at the flagged positions n, computed once
    per batch (the single candidates here and the word candidates, homophones.py, share it)."""

    allowed: np.ndarray  # (N, V) log-probs with non-CJK ids at -inf
    source: np.ndarray  # (N,) log-prob of the written character
    top_ids: np.ndarray  # (N, k) the most likely allowed ids, best first

    @classmethod
    def of(cls, log_probs: np.ndarray, source_ids: np.ndarray, bias: np.ndarray, top: int) -> GeneratorView:
        allowed = log_probs + bias
        return cls(
            allowed=allowed,
            source=log_probs[np.arange(len(log_probs)), source_ids],
            top_ids=top_columns(allowed, min(top, allowed.shape[1])),
        )


TOP_SAMPLE_STRIDE = 8


def top_columns(values: np.ndarray, top: int) -> np.ndarray:
    """(N, top): the columns of each row's `top` largest values, largest first (equal values in
    column order).

    The top-th largest of every 8th column is at most the row's top-th largest, so only the
    values at or above it (~8 x top of the 6,884) are sorted: an eighth of a partition of the
    whole row, then a compare (the corrector's batches of 4 SIGHAN sentences, ~7 rows a call:
    0.78 -> 0.24-0.35 ms a call against a partition of the whole rows)."""
    rows = values.shape[0]
    sample = values[:, ::TOP_SAMPLE_STRIDE]
    if rows == 0 or sample.shape[1] < top:  # a tiny vocabulary: sort it whole
        return np.argsort(-values, axis=1, kind="stable")[:, :top]
    bound = np.partition(sample, sample.shape[1] - top, axis=1)[:, sample.shape[1] - top]
    row, column = np.nonzero(values >= bound[:, None])
    order = np.lexsort((column, -values[row, column], row))  # by row, then value down, then column
    row, column = row[order], column[order]
    counts = np.bincount(row, minlength=rows)
    rank = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
    return column[rank < top].reshape(rows, top)


def propose(
    view: GeneratorView,
    source_ids: np.ndarray,
    source_chars: list[str],
    vocab_confusion: VocabConfusion,
    config: CandidateConfig,
    lm_gains: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    pinned: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    extra: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Candidates:
    """The candidates of each flagged position n (rows of `log_probs`), most plausible first.

    Per position: the generator's top-k CJK characters and the source character's confusion set
    (with `lm_gains`, every confusable character; without, those the generator gives at least
    `min_confusion_prob`). `lm_gains(position, target_ids)` gives the n-gram gain of each
    (position, candidate) pair. Then at most `max_candidates` per position are kept, ranked by
    the estimate of `CandidateConfig`, except that the entries `pinned(position, target_ids)`
    marks are always kept (ranked first). `extra` (positions, vocabulary ids, their n-gram gains)
    adds candidates of no relation (the LM's, lm_proposals.py, which ranked them by those gains)
    unless the confusion set holds them too. All on flat
    arrays: one entry per (position, candidate).
    """
    allowed, top_ids = view.allowed, view.top_ids  # top_ids: config.top_k + 1 (the source may be one)
    n_positions, vocab = allowed.shape
    sources = np.asarray(source_ids, dtype=np.int64)
    # Confusion-set candidates of every position, concatenated.
    sets = [vocab_confusion(char) for char in source_chars]
    sizes = np.array([len(s[0]) for s in sets], dtype=np.int64)
    conf_position = np.repeat(np.arange(n_positions), sizes)
    conf_ids = np.concatenate([s[0] for s in sets]) if n_positions else np.zeros(0, np.int64)
    conf_bits = np.concatenate([s[1] for s in sets]) if n_positions else np.zeros(0, np.int64)
    conf_pairs = np.concatenate([s[2] for s in sets]) if n_positions else np.zeros(0, np.float32)
    conf_lp = allowed[conf_position, conf_ids]
    keep = conf_lp > -np.inf if lm_gains is not None else conf_lp >= math.log(config.min_confusion_prob)
    # The generator's top-k of each position (the source itself and non-CJK ids excluded).
    top_ok = (top_ids != sources[:, None]) & np.isfinite(np.take_along_axis(allowed, top_ids, 1))
    top_ok &= np.cumsum(top_ok, axis=1) <= config.top_k
    gen_position, gen_ids = np.nonzero(top_ok)[0], top_ids[top_ok]
    extra_position, extra_ids, extra_gains = extra if extra is not None else (np.zeros(0, np.int64),) * 2 + (np.zeros(0),)
    position = np.concatenate([conf_position[keep], gen_position, extra_position])
    target = np.concatenate([conf_ids[keep], gen_ids, extra_ids])
    relation = np.concatenate([conf_bits[keep], np.zeros(len(gen_position) + len(extra_position), np.int64)])
    pair_count = np.concatenate([conf_pairs[keep], np.zeros(len(gen_position) + len(extra_position), np.float32)])
    n_others = len(position) - len(extra_position)
    is_extra = np.arange(len(position)) >= n_others
    # One entry per (position, target): np.unique keeps the first, i.e. the confusion-set entry.
    _, first = np.unique(position * vocab + target, return_index=True)
    first = first[target[first] != sources[position[first]]]
    position, target, relation, pair_count = position[first], target[first], relation[first], pair_count[first]
    is_extra = is_extra[first]
    gen_lp = allowed[position, target]
    lm = np.zeros(len(position))
    lm[is_extra] = extra_gains[first[is_extra] - n_others]  # scored once, by the proposer's ranking
    if lm_gains is not None and (~is_extra).any():
        lm[~is_extra] = lm_gains(position[~is_extra], target[~is_extra])
    estimate = config.rank_gen_weight * gen_lp + lm + config.rank_pair_weight * np.log1p(pair_count)
    if pinned is not None and len(position):
        estimate = np.where(pinned(position, target), np.inf, estimate)
    # The cap ranks the confusion set's and the generator's candidates; `extra` ones come on top
    # of it (they are few a position), so they never push out a confusable character.
    order = np.lexsort((-estimate, position))
    capped = ~is_extra[order]
    counts = np.bincount(position[capped], minlength=n_positions)
    rank = np.cumsum(capped) - 1 - (np.cumsum(counts) - counts)[position[order]]
    kept = order[~capped | (rank < config.max_candidates)]
    orig_lp = view.source
    none = np.zeros(len(kept))
    return Candidates(
        position=position[kept],
        target_id=target[kept],
        relation=relation[kept],
        gen_logprob=gen_lp[kept].astype(np.float64),
        orig_logprob=orig_lp[position[kept]].astype(np.float64),
        top1=target[kept] == top_ids[position[kept], 0],
        lm_gain=np.asarray(lm, dtype=np.float64)[kept],
        pair_count=pair_count[kept].astype(np.float64),
        group=np.full(len(kept), -1, dtype=np.int64),
        word_gain=none,
        word_size=none,
        word_freq=none,
    )
