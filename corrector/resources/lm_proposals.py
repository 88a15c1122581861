"""Characters the n-gram LM itself would write at a position: candidates no confusion set holds.

Native writers' and OCR errors are often no confusable pair at all (冠[界] for 冠军, 明[度]了 for
明白了, 能[图] for 能量): the gold character is then neither in the confusion set nor in the
generator's top 5, and no scorer can pick it. The LM knows these words. Scoring all ~9,600 of
its characters at every flagged position costs ~30 ms a position, so the candidates are the
characters c that fit both neighbours as bigrams — (left, c) and (c, right) both counted —
ranked by count(left, c) · count(c, right) / count(c) ∝ P(c | left) · P(right | c); a side whose
neighbour is the text's edge or outside the LM's table constrains nothing, and only the other
side's bigrams rank. The proposer then scores the few best with the full trigram gain
(`NgramLM.site_gains`) like every other candidate, and the scorer decides: they are never
accepted on the LM's word alone.

The successors of a character are one run of the sorted bigram keys; its predecessors need the
keys sorted by their second character, built once on first use (2.5 M bigrams: ~0.2 s).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from .ngram import BOUNDARY, UNKNOWN, NgramLM


class LMProposals:
    """Per site (text, position), the LM ids of the characters that fit both neighbours best."""

    def __init__(self, lm: NgramLM) -> None:
        self.lm = lm
        self._lock = threading.Lock()
        self._reverse: tuple[np.ndarray, np.ndarray] | None = None

    def _reverse_bigrams(self) -> tuple[np.ndarray, np.ndarray]:
        """The bigram keys re-packed as (second, first), sorted, and their counts."""
        with self._lock:
            if self._reverse is None:
                bits = np.uint64(self.lm.bits)
                keys = self.lm.keys[1]
                mask = np.uint64((1 << self.lm.bits) - 1)
                swapped = ((keys & mask) << bits) | (keys >> bits)
                order = np.argsort(swapped, kind="stable")
                self._reverse = (swapped[order], self.lm.counts[1][order].astype(np.float64))
            return self._reverse

    def _run(self, keys: np.ndarray, counts: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray]:
        """The second ids and counts of the stored bigrams whose first id is `first`."""
        bits = self.lm.bits
        lo, hi = np.searchsorted(keys, np.array([first << bits, (first + 1) << bits], dtype=np.uint64))
        mask = np.uint64((1 << bits) - 1)
        return (keys[lo:hi] & mask).astype(np.int64), counts[lo:hi]

    def __call__(self, sites: Sequence[tuple[str, int]], per_site: int) -> list[np.ndarray]:
        """For each site, at most `per_site` LM ids (never the written character, the boundary or
        the unknown id), best first."""
        lm = self.lm
        forward = (lm.keys[1], lm.counts[1].astype(np.float64))
        reverse = self._reverse_bigrams()
        unigram = np.exp(lm._log_unigram)
        found: list[np.ndarray] = []
        for text, position in sites:
            left = int(lm.ids(text[position - 1])[0]) if position > 0 else BOUNDARY
            right = int(lm.ids(text[position + 1])[0]) if position + 1 < len(text) else BOUNDARY
            written = int(lm.ids(text[position])[0])
            ids, score = self._fitting(left, right, forward, reverse, unigram)
            keep = (ids != written) & (ids > UNKNOWN)
            ids, score = ids[keep], score[keep]
            if len(ids) > per_site:
                top = np.argpartition(-score, per_site - 1)[:per_site]
                ids, score = ids[top], score[top]
            found.append(ids[np.argsort(-score, kind="stable")].astype(np.uint64))
        return found

    def _fitting(self, left: int, right: int, forward, reverse, unigram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The characters seen after `left` and before `right`, and their ranking score."""
        has_left, has_right = left not in (UNKNOWN, BOUNDARY), right not in (UNKNOWN, BOUNDARY)
        if has_left:
            after, after_count = self._run(*forward, left)
        if has_right:
            before, before_count = self._run(*reverse, right)
        if has_left and has_right:
            ids, at_after, at_before = np.intersect1d(after, before, assume_unique=True, return_indices=True)
            return ids, after_count[at_after] * before_count[at_before] / unigram[ids]
        if has_left:
            return after, after_count
        if has_right:
            return before, before_count / unigram[before]
        return np.zeros(0, np.int64), np.zeros(0)
