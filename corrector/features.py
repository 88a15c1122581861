"""Featurize: the scorer's feature vector, one row per candidate — names, formulas and which
are binary, in this one module. To add a feature: name it in FEATURES (at the end: the order is
that of every scorer.json), describe it below, compute its column in `Featurizer.__call__` (and
add it to BINARY if it is a 0/1 bit). A scorer file without a weight for it reads it as 0.

For a flagged position with original character `o` and candidate `c` the features are

    bias            1
    gen_logprob     log P_gen(c | context) (clipped to [-20, 0])
    orig_logprob    log P_gen(o | context), the same distribution
    gen_top1        1 if c is the generator's most likely CJK character there
    detect_prob     discriminator P(replaced) of o in the source sentence
    recheck_prob    detect_prob again: the column of a removed re-check pass (the discriminator
                    run again with c written in), kept so that scorer files that name it read the same
    same_pinyin     c and o share a toneless syllable (heteronyms included)
    similar_pinyin  they share one only up to the fuzzy pairs zh/z n/l in/ing ...
    similar_shape   similar four-corner code / stroke order / components
    user_pair       the pair is in the user's confusion file
    cand_word       log10(1 + jieba frequency) of the most frequent 2-4 char word covering the
                    position once c is written there (0 if none); for a character of a word
                    candidate, at least that word's own frequency
    orig_word       the same with o
    proper_noun     the position is inside a jieba proper-noun token (nr/ns/nt/nz)
    lm_gain         log P_ngram(sentence with c) - log P_ngram(sentence with o), the model's
                    character n-gram LM (ngram.py), clipped to [-20, 20]; 0 without one
    lm_gain_unrelated  lm_gain again when c is in no confusion relation with o, else 0: a gain
                    for an unconfusable character (a generator guess) is weaker evidence of a
                    typo, so it gets its own slope
    lm_margin       lm_gain minus the best lm_gain of the other candidates at the position
                    (-20 when there is none): is c the clear local winner, or one of several
                    characters the n-gram LM likes about as well?
    pair_log_count  log(1 + times o was corrected to c in the model's training data)
    pair_log_rate   log((that count + 0.1) / (occurrences of o there + 1)); both 0 for a model
                    without an error-pair table (error_pairs.py)
    word_gain       for a character of a word candidate (homophones.py: a dictionary word that
                    sounds like the written span, >= 2 characters changed): the n-gram LM's gain
                    for writing the whole word, clipped to [-20, 20]; 0 for a single character
    word_size       how many characters that word changes; 0 for a single character
    ctx_log_count   log(1 + times o was corrected to c in training with the same left or right
                    neighbour as here (error_pairs.py, context counts))
    ctx_log_rate    log((that count + 0.1) / (occurrences of that written bigram there + 1)), as
                    pair_log_rate; both 0 for a model without context counts
    particle_gain   where o and c are both structural particles (的/地/得): log P(c) - log P(o) of
                    the model's particle classifier (particles.py), clipped to [-20, 20]; 0
                    elsewhere and for a model without one
    source_unigram  the n-gram LM's log P_1 of o: a rare character in common words (玥 in 条玥, 樏 in
                    日积月樏) is more often a slip than a common one; 0 without an LM
    target_unigram  the same for c
    prior           the logit of the scorer's prior network over the counted evidence
                    (`Scorer.prior`), filled in by the scorer; 0 here
    shape_corners   how alike o and c look, graded, for any pair (resources/glyphs.py): the share
    shape_strokes   of four-corner digits that agree, the stroke orders' difflib ratio, the
    shape_parts     components' Dice overlap, one a component of the other, the same radical;
    shape_contains  all 0 for confusion tables built without glyphs. similar_shape is a yes/no
    shape_radical   for a character's 20 nearest: these also grade the n-gram LM's own candidates
"""

from __future__ import annotations

import numpy as np

from .candidates import Candidates
from .detection import Sites
from .resources.confusion import SAME_PINYIN, SIMILAR_PINYIN, SIMILAR_SHAPE, USER_PAIR
from .resources.error_pairs import pair_features
from .resources.glyphs import GLYPH_MEASURES, GlyphSimilarity
from .runtime.models import ModelBundle
from .text.protection import WordFrequency, proper_noun_offsets

FEATURES: tuple[str, ...] = (
    "bias",
    "gen_logprob",
    "orig_logprob",
    "gen_top1",
    "detect_prob",
    "recheck_prob",
    "same_pinyin",
    "similar_pinyin",
    "similar_shape",
    "user_pair",
    "cand_word",
    "orig_word",
    "proper_noun",
    "lm_gain",
    "lm_gain_unrelated",
    "pair_log_count",
    "pair_log_rate",
    "lm_margin",
    "word_gain",
    "word_size",
    "ctx_log_count",
    "ctx_log_rate",
    "particle_gain",
    "source_unigram",
    "target_unigram",
    "prior",
    "shape_corners",
    "shape_strokes",
    "shape_parts",
    "shape_contains",
    "shape_radical",
)
FEATURE_INDEX = {name: i for i, name in enumerate(FEATURES)}
PRIOR_COLUMN = FEATURE_INDEX["prior"]
WORD_FEATURES = ("word_gain", "word_size")  # non-zero only for word candidates (homophones.py)
# Read from the discriminator and generator: the features a model's own training pairs flatter.
NETWORK_FEATURES = ("gen_logprob", "orig_logprob", "gen_top1", "detect_prob", "recheck_prob")
# What the prior network reads (Scorer.prior): the evidence counted from text and confusion sets.
PRIOR_INPUTS = tuple(f for f in FEATURES if f not in {"bias", "prior", *NETWORK_FEATURES, *WORD_FEATURES})
# Features stored as 0/1 (relation bits and flags).
BINARY = frozenset({"gen_top1", "same_pinyin", "similar_pinyin", "similar_shape", "user_pair", "proper_noun",
                    "shape_contains", "shape_radical"})
GLYPH_FEATURES = tuple(f"shape_{measure}" for measure in GLYPH_MEASURES)


def lm_margin(position: np.ndarray, gain: np.ndarray, floor: float = -20.0, target: np.ndarray | None = None,
              rival: np.ndarray | None = None) -> np.ndarray:
    """Per candidate: its n-gram gain minus the best gain among the other candidates at the same
    position (`floor` when it is alone there).

    Measured on dev (scorer network refitted on one half, scored on the other, mean of both
    ways): correction F1 0.365 -> 0.379 with this feature. A gain alone says "better than the
    original"; many true corrections have a modest gain but win their position clearly, while
    many false alarms are one of several characters the LM likes about as well.

    With `target` and `rival` (a mask), only the rivals count as "the other candidates", and a
    candidate is never compared with a rival writing its own target: a word candidate's
    character (homophones.py) gets the margin of the single candidate it repeats.
    """
    if len(position) == 0:
        return np.zeros(0)
    if rival is None:
        rival, target = np.ones(len(position), dtype=bool), np.arange(len(position))
    size = int(position.max()) + 1
    best = np.full(size, -np.inf)
    np.maximum.at(best, position[rival], gain[rival])
    # The leader of each position (its first rival with the best gain) and the runner-up.
    is_best = rival & (gain >= best[position])
    best_index = np.flatnonzero(is_best)
    _, first = np.unique(position[best_index], return_index=True)
    leader = np.full(size, -1)
    leader[position[best_index[first]]] = best_index[first]
    others = np.where(rival, gain.astype(np.float64), -np.inf)
    others[leader[leader >= 0]] = -np.inf
    second = np.full(size, -np.inf)
    np.maximum.at(second, position, others)
    lead = leader[position]
    same_as_leader = (lead >= 0) & (target[np.maximum(lead, 0)] == target)
    other_best = np.where(same_as_leader, second[position], best[position])
    return gain - np.maximum(other_best, floor)


class Featurizer:
    """The feature matrix of a batch's candidates, from the networks' outputs (`Sites`,
    `Candidates`) and the model directory's tables (n-gram LM, error pairs, particle classifier:
    their features are 0 for a model without one)."""

    def __init__(self, bundle: ModelBundle, words: WordFrequency, vocab_to_lm: np.ndarray | None,
                 proper_noun_hmm: bool = False, glyphs: GlyphSimilarity | None = None) -> None:
        self.bundle = bundle
        self.glyphs = glyphs  # graded shape measures (resources/glyphs.py); None: their features are 0
        self.words = words
        self.vocab_to_lm = vocab_to_lm  # vocabulary id -> n-gram LM id (None without an LM)
        self.proper_noun_hmm = proper_noun_hmm

    def in_proper_noun(self, sites: Sites) -> np.ndarray:
        """(N,) bool: whether each flagged position is inside a proper noun of its chunk (jieba)."""
        nouns: dict[int, set[int]] = {}
        for row in set(sites.rows):
            it = sites.group[row]
            chunk_text = sites.texts[it.text_index][it.chunk.start:it.chunk.end]
            nouns[row] = {it.chunk.start + o for o in proper_noun_offsets(chunk_text, hmm=self.proper_noun_hmm)}
        return np.array([o in nouns[r] for r, o in zip(sites.rows, sites.offsets, strict=True)])

    def __call__(self, sites: Sites, cands: Candidates, targets: list[str], in_noun: np.ndarray) -> np.ndarray:
        """The (len(cands), len(FEATURES)) float32 matrix; `targets`: each candidate's character."""
        n = cands.position
        lm_gain = np.clip(cands.lm_gain, -20.0, 20.0)
        relation = cands.relation
        none = np.zeros(len(cands))
        pair_log_count, pair_log_rate, ctx_log_count, ctx_log_rate = self._error_pair_columns(sites, cands, targets)
        orig_word, cand_word = self._word_columns(sites, cands, targets)
        source_unigram, target_unigram = self._unigram_columns(sites, cands)
        particle_gain = none
        if self.bundle.particles is not None:
            particle_gain = np.clip(self.bundle.particles.candidate_gains(sites.sites, n.tolist(), targets), -20.0, 20.0)
        columns = {
            "bias": np.ones(len(cands)),
            "gen_logprob": np.maximum(cands.gen_logprob, -20.0),
            "orig_logprob": np.maximum(cands.orig_logprob, -20.0),
            "gen_top1": cands.top1,
            "detect_prob": sites.detect_prob[n],
            "recheck_prob": sites.detect_prob[n],
            "same_pinyin": relation & SAME_PINYIN,
            "similar_pinyin": relation & SIMILAR_PINYIN,
            "similar_shape": relation & SIMILAR_SHAPE,
            "user_pair": relation & USER_PAIR,
            "cand_word": cand_word,
            "orig_word": orig_word[n],
            "proper_noun": in_noun[n],
            "lm_gain": lm_gain,
            "lm_gain_unrelated": np.where(relation != 0, 0.0, lm_gain),
            "pair_log_count": pair_log_count,
            "pair_log_rate": pair_log_rate,
            "lm_margin": lm_margin(n, lm_gain, target=cands.target_id, rival=cands.group < 0),
            "word_gain": np.where(cands.group >= 0, np.clip(cands.word_gain, -20.0, 20.0), 0.0),
            "word_size": cands.word_size,
            "ctx_log_count": ctx_log_count,
            "ctx_log_rate": ctx_log_rate,
            "particle_gain": particle_gain,
            "source_unigram": source_unigram,
            "target_unigram": target_unigram,
            "prior": none,  # the scorer fills it from the others (Scorer.with_prior)
            **self._glyph_columns(sites, cands, targets),
        }
        matrix = np.stack([(columns[name] != 0) if name in BINARY else columns[name] for name in FEATURES], axis=1)
        return matrix.astype(np.float32)

    def _word_columns(self, sites: Sites, cands: Candidates, targets: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """orig_word per position and cand_word per candidate (a word candidate's character makes
        that word: at least its frequency)."""
        contexts = [self.words.context(text, o) for text, o in sites.sites]
        orig_word = np.array([self.words.score(context, char) for context, char in zip(contexts, sites.chars, strict=True)])
        cand_word = np.array([self.words.score(contexts[n], target)
                              for n, target in zip(cands.position.tolist(), targets, strict=True)])
        return orig_word, np.maximum(cand_word, cands.word_freq)

    def _error_pair_columns(self, sites: Sites, cands: Candidates, targets: list[str]) -> tuple[np.ndarray, ...]:
        """pair_log_count, pair_log_rate, ctx_log_count, ctx_log_rate per candidate."""
        table = self.bundle.error_pairs
        zeros = np.zeros(len(cands))
        if table is None:
            return zeros, zeros, zeros, zeros
        source_counts = np.array([table.char_counts.get(char, 0) for char in sites.chars], dtype=np.float64)
        pair_log_count, pair_log_rate = pair_features(cands.pair_count, source_counts[cands.position])
        if not table.context_counts:
            return pair_log_count, pair_log_rate, zeros, zeros
        context = table.context_count_array(sites.sites, cands.position.tolist(), targets)
        return (pair_log_count, pair_log_rate, *pair_features(context[:, 0], context[:, 1]))

    def _glyph_columns(self, sites: Sites, cands: Candidates, targets: list[str]) -> dict[str, np.ndarray]:
        """The shape_* columns (resources/glyphs.py): 0 without glyph tables."""
        if self.glyphs is None:
            return dict.fromkeys(GLYPH_FEATURES, np.zeros(len(cands)))
        measures = self.glyphs.measures([sites.chars[p] for p in cands.position.tolist()], targets)
        return dict(zip(GLYPH_FEATURES, measures.T, strict=True))

    def _unigram_columns(self, sites: Sites, cands: Candidates) -> tuple[np.ndarray, np.ndarray]:
        """source_unigram and target_unigram per candidate."""
        ngram = self.bundle.ngram
        if ngram is None:
            return np.zeros(len(cands)), np.zeros(len(cands))
        source_lm = self.vocab_to_lm[sites.source_ids]
        return ngram.log_unigram(source_lm)[cands.position], ngram.log_unigram(self.vocab_to_lm[cands.target_id])
