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
keys sorted by their second character, built once on first use (2.5 M bigrams: ~0.05 s).
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
        self._unigram = np.exp(lm._log_unigram)  # P_1 of every LM id

    def _reverse_bigrams(self) -> tuple[np.ndarray, np.ndarray]:
        """The bigram keys re-packed as (second, first), sorted, and their counts."""
        with self._lock:
            if self._reverse is None:
                bits = np.uint64(self.lm.bits)
                keys = self.lm.keys[1]
                mask = np.uint64((1 << self.lm.bits) - 1)
                # The keys are sorted by (first, second), so a stable sort by the second id alone
                # gives the (second, first) order: a radix sort on 16 bits, ~50 ms for 2.5 M bigrams
                # against ~110 ms for sorting the swapped 64-bit keys (the same arrays).
                second = (keys & mask).astype(np.uint16 if self.lm.bits <= 16 else np.uint32)
                order = np.argsort(second, kind="stable")
                ordered = keys[order]
                self._reverse = (((ordered & mask) << bits) | (ordered >> bits), self.lm.counts[1][order])
            return self._reverse

    def __call__(self, sites: Sequence[tuple[str, int]], per_site: int) -> list[np.ndarray]:
        """For each site, at most `per_site` LM ids (never the written character, the boundary or
        the unknown id), best first."""
        lm = self.lm
        index = lm._index
        rows = np.array([(index.get(text[position - 1], UNKNOWN) if position > 0 else BOUNDARY,
                          index.get(text[position + 1], UNKNOWN) if position + 1 < len(text) else BOUNDARY,
                          index.get(text[position], UNKNOWN)) for text, position in sites], dtype=np.int64).reshape(-1, 3)
        forward = (lm.keys[1], lm.counts[1])
        reverse = self._reverse_bigrams()
        # Every site's two runs found by one search per direction (a search per site was a third of this).
        left_runs, right_runs = self._runs(forward[0], rows[:, 0]), self._runs(reverse[0], rows[:, 1])
        unigram = self._unigram
        mask = np.uint64((1 << lm.bits) - 1)
        found: list[np.ndarray] = []
        for s, (left, right, written) in enumerate(rows.tolist()):
            has_left, has_right = left not in (UNKNOWN, BOUNDARY), right not in (UNKNOWN, BOUNDARY)
            if has_left:
                lo, hi = left_runs[s]
                after, after_count = (forward[0][lo:hi] & mask).astype(np.int64), forward[1][lo:hi]
            if has_right:
                lo, hi = right_runs[s]
                before, before_count = (reverse[0][lo:hi] & mask).astype(np.int64), reverse[1][lo:hi]
            if has_left and has_right:  # both runs are sorted by the other character's id
                small, big, small_count, big_count = ((after, before, after_count, before_count) if len(after) <= len(before)
                                                      else (before, after, before_count, after_count))
                at = np.minimum(np.searchsorted(big, small), max(len(big) - 1, 0))
                common = (big[at] == small) if len(big) else np.zeros(len(small), bool)
                ids = small[common]
                score = small_count[common].astype(np.float64) * big_count[at[common]] / unigram[ids]
            elif has_left:
                ids, score = after, after_count.astype(np.float64)
            elif has_right:
                ids, score = before, before_count / unigram[before]
            else:
                ids, score = np.zeros(0, np.int64), np.zeros(0)
            keep = (ids != written) & (ids > UNKNOWN)
            ids, score = ids[keep], score[keep]
            if len(ids) > per_site:
                top = np.argpartition(-score, per_site - 1)[:per_site]
                ids, score = ids[top], score[top]
            found.append(ids[np.argsort(-score, kind="stable")].astype(np.uint64))
        return found

    def _runs(self, keys: np.ndarray, firsts: np.ndarray) -> list[tuple[int, int]]:
        """Per first id, the [lo, hi) run of the sorted bigram `keys` that start with it."""
        bits = np.uint64(self.lm.bits)
        starts = firsts.astype(np.uint64) << bits
        bounds = np.searchsorted(keys, np.concatenate([starts, starts + (np.uint64(1) << bits)]))
        return list(zip(bounds[:len(firsts)].tolist(), bounds[len(firsts):].tolist(), strict=True))
