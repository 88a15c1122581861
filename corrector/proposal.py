"""Propose: the candidates of each flagged position — the generator read there (one pass per
batch, candidates.py), its top characters and the confusion set's, ranked and capped, each with
its n-gram gain; and, when the corrector proposes them, word candidates (resources/homophones.py)."""

from __future__ import annotations

import numpy as np

from .candidates import CandidateConfig, Candidates, GeneratorView, VocabConfusion, propose
from .detection import Sites
from .resources.confusion import ConfusionSet
from .resources.homophones import HomophoneWords, WordConfig, propose_words
from .resources.idioms import idiom_fixes
from .resources.lm_proposals import LMProposals
from .resources.ngram import UNKNOWN
from .runtime.models import ModelBundle
from .runtime.passes import Batch, generator_log_probs


class Proposer:
    """The propose stage of one corrector."""

    def __init__(self, bundle: ModelBundle, config: CandidateConfig, vocab_confusion: VocabConfusion,
                 cjk_bias: np.ndarray, vocab_to_lm: np.ndarray | None, generator_input: str,
                 homophones: HomophoneWords | None = None, confusion: ConfusionSet | None = None,
                 words: WordConfig | None = None, idioms: bool = False) -> None:
        self.bundle = bundle
        self.config = config
        self.vocab_confusion = vocab_confusion
        self.cjk_bias = cjk_bias
        self.vocab_to_lm = vocab_to_lm
        self.generator_input = generator_input
        self.homophones = homophones  # None: no word candidates
        self.confusion = confusion
        self.words = words or WordConfig()
        self.idioms = idioms  # keep the characters that complete an idiom under the cap (resources/idioms.py)
        self.lm_proposals = None  # the n-gram LM's own candidates (resources/lm_proposals.py)
        if bundle.ngram is not None and vocab_to_lm is not None and config.lm_proposals > 0:
            self.lm_proposals = LMProposals(bundle.ngram)
            self.lm_to_vocab = np.full(len(bundle.ngram.chars), -1, dtype=np.int64)
            cjk = np.flatnonzero(np.isfinite(cjk_bias))
            usable = cjk[vocab_to_lm[cjk] > UNKNOWN]
            self.lm_to_vocab[vocab_to_lm[usable].astype(np.int64)] = usable

    def __call__(self, batch: Batch, sites: Sites) -> Candidates:
        bundle = self.bundle
        if sites.generator_pass is not None:  # detection's generator flags already ran the pass
            log_probs = sites.generator_pass.log_probs(sites.rows_t, sites.index_t)
        else:
            log_probs = generator_log_probs(bundle, batch, sites.rows_t, sites.index_t,
                                            mask=self.generator_input == "masked")
        lm_gains = None
        if bundle.ngram is not None:
            pairs = sites.sites

            def lm_gains(position: np.ndarray, target_ids: np.ndarray) -> np.ndarray:
                """One vectorised n-gram pass for every candidate of the batch."""
                return bundle.ngram.site_gains(pairs, position, self.vocab_to_lm[target_ids])

        view = GeneratorView.of(log_probs, sites.source_ids, self.cjk_bias, self.config.top_k + 1)
        extra = self._lm_candidates(sites) if self.lm_proposals is not None else None
        cands = propose(view, sites.source_ids, sites.chars, self.vocab_confusion, self.config, lm_gains=lm_gains,
                        pinned=self._idiom_pins(sites) if self.idioms else None, extra=extra)
        if self.homophones is not None:
            cands = cands.extended(self._word_candidates(sites, view, lm_gains))
        return cands

    def _lm_candidates(self, sites: Sites) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`propose`'s `extra`: at each flagged position the `lm_proposals` characters of the
        LM's pool with the largest trigram gains (positions, vocabulary ids, those gains)."""
        pairs = sites.sites
        pools = self.lm_proposals(pairs, self.config.lm_proposal_pool)
        sizes = np.array([len(pool) for pool in pools], dtype=np.int64)
        if not sizes.sum():
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        site_of = np.repeat(np.arange(len(pairs)), sizes)
        ids = np.concatenate(pools)
        gains = self.bundle.ngram.site_gains(pairs, site_of, ids)
        order = np.lexsort((-gains, site_of))
        rank = np.arange(len(order)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        kept = order[rank < self.config.lm_proposals]
        vocab_ids = self.lm_to_vocab[ids[kept].astype(np.int64)]
        usable = vocab_ids >= 0
        return site_of[kept][usable], vocab_ids[usable], gains[kept][usable]

    def _idiom_pins(self, sites: Sites):
        """`propose`'s `pinned`: the candidates that complete an idiom the text breaks, or None
        where no flagged position has one."""
        by_row = {row: idiom_fixes(sites.texts[sites.group[row].text_index], sites.group[row].chunk.start,
                                   sites.group[row].chunk.end) for row in set(sites.rows)}  # per chunk, as the flags
        fixes = [by_row[row].get(offset) for row, offset in zip(sites.rows, sites.offsets, strict=True)]
        if not any(fixes):
            return None
        has_fix = np.array([bool(chars) for chars in fixes])
        token = self.bundle.tokenizer.token

        def pinned(position: np.ndarray, target_ids: np.ndarray) -> np.ndarray:
            mask = np.zeros(len(position), dtype=bool)
            for k in np.flatnonzero(has_fix[position]).tolist():  # the few entries at such positions
                mask[k] = token(int(target_ids[k])) in fixes[position[k]]
            return mask

        return pinned

    def _word_candidates(self, sites: Sites, view: GeneratorView, lm_gains) -> Candidates:
        """Word candidates (homophones.py) over the batch's flagged positions."""
        group, texts = sites.group, sites.texts
        flagged: list[dict[int, int]] = [{} for _ in group]
        for n, (row, offset) in enumerate(zip(sites.rows, sites.offsets, strict=True)):
            flagged[row][offset] = n
        tok, error_pairs = self.bundle.tokenizer, self.bundle.error_pairs
        return propose_words(
            self.homophones,
            [(texts[it.text_index], it.chunk.start, it.chunk.end) for it in group],
            flagged,
            view.allowed,
            view.source,
            view.top_ids[:, 0],
            tok.vocab.get,
            self.confusion.relation,
            (lambda old, new: error_pairs.targets(old).get(new, 0)) if error_pairs is not None else (lambda old, new: 0),
            self.bundle.ngram,
            lm_gains,
            self.words,
            sites.word_gains,
        )
