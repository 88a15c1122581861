"""Word candidates: dictionary words that sound like what is written.

Learners and pinyin input methods misspell whole words by sound — 程经 for 曾经, 建缸 for 健康,
不自到 for 不知道 (17 % of the dev split's wrong characters sit next to another wrong one). The
per-character candidates cannot fix such a word: each of its characters changed alone still
makes no word, so neither the n-gram LM nor the word-frequency feature sees a gain, while the
word changed as a whole gains a lot. On dev, the dictionary words read like the written span
(below) hold the gold spelling for 148 of those 189 errors.

`HomophoneWords` indexes the jieba dictionary's words of 2-4 CJK characters (frequency >=
`min_freq`) by the fuzzy toneless pinyin of each character (pypinyin's phrase-aware reading,
folded by `confusion.fuzzy_syllable`: zh/z, n/l, in/ing ...). `matches` looks every span of a
text up under every reading of its characters and returns the words that differ from it in at
least two characters (one-character fixes are the per-character candidates' job).

`propose_words` turns the matches whose changed characters were all flagged by the detector
into candidates: one group per word, one member per changed character, each member carrying
the per-character evidence of its own character plus the word's (`word_gain`: the n-gram LM's
gain for writing the whole word, `word_size`, and its dictionary frequency). The pipeline
scores the members like any candidate and accepts a word only as a whole (acceptance.winners).

The pipeline proposes words only for a scorer fitted on their features (`finetune calibrate
--word-candidates`, as the release is); the word flags (detection.py) examine the characters of
words no other rule flags, and the word scorer (word_scoring.py) scores a word as a whole. With
the members' weakest score alone, words moved the broad dev by noise (held out 0.5081 against
0.5093); with the word flags and the word scorer 0.5316 (docs/history.md).

The index is cached as JSON beside the confusion tables (`confusion.cache_dir()`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..candidates import Candidates
from ..text.protection import ensure_jieba
from ..text.tokenization import is_cjk
from .confusion import ConfusionSet, cached_json, fuzzy_syllable
from .ngram import NgramLM

BUILD_VERSION = 1  # bump when the index's build logic changes: old caches are then ignored
MAX_READINGS = 16  # spans whose characters have more reading combinations are looked up under the first 16
MAX_MEMO_SPANS = 50_000  # spans remembered by `HomophoneWords._span` (~20 MB at most), then forgotten at once


@dataclass(frozen=True)
class WordConfig:
    min_freq: int = 10  # dictionary words rarer than this are never proposed (jieba's counts)
    # A word is proposed only where writing it raises the n-gram LM's log-probability by more than
    # this (nats): on dev, 90 % of the gold words gain > 0.19, 93 % of the other matches do not gain.
    min_gain: float = 0.0
    max_per_span: int = 2  # most words kept per written span, by that gain
    # Only the most frequent words that read like a span are scored by the n-gram LM: on dev the
    # gold word is among the 6 most frequent for 80 of 81 misspelt words (a span has 6 on average).
    most_frequent: int = 6


@dataclass(frozen=True)
class WordMatch:
    start: int  # offset of the span in the text
    word: str
    freq: int  # jieba dictionary frequency of the word


class HomophoneWords:
    """Dictionary words by the fuzzy pinyin of their characters (see the module docstring)."""

    def __init__(self, index: dict[str, list[list]], confusion: ConfusionSet) -> None:
        self.index = index
        self.max_len = max((len(key.split()) for key in index), default=0)
        # Every proper prefix of two or more syllables of a key: where a growing span may still lead.
        self.prefixes = {" ".join(key.split()[:n]) for key in index for n in range(2, len(key.split()))}
        self.confusion = confusion
        self._keys: dict[str, list[str]] = {}  # char -> its fuzzy syllables (memo; a benign race)
        self._spans: dict[str, tuple | None] = {}  # span -> `_span`'s answer (memo; a benign race)

    @classmethod
    def build(cls, confusion: ConfusionSet, min_freq: int = WordConfig.min_freq, use_cache: bool = True) -> HomophoneWords:
        return cls(load_index(min_freq, use_cache), confusion)

    def _syllables(self, char: str) -> list[str]:
        keys = self._keys.get(char)
        if keys is None:
            keys = sorted({fuzzy_syllable(s) for s in self.confusion.pinyin(char)})
            self._keys[char] = keys
        return keys

    def matches(self, text: str, allowed: Callable[[int], bool], start: int = 0, end: int | None = None,
                most_frequent: int | None = None) -> list[WordMatch]:
        """Words that read like a span of text[start:end] and differ from it in >= 2 characters,
        each of them at an offset where `allowed(offset)`; per span the `most_frequent` ones.

        A span grows one character at a time, its readings kept only while they begin some
        word's key (`prefixes`): most spans stop after two characters."""
        end = len(text) if end is None else min(end, len(text))
        segment = text[start:end]
        ok = [allowed(offset) for offset in range(start, end)]
        found = []
        for i in range(len(segment) - 1):
            for length in range(2, min(self.max_len, len(segment) - i) + 1):
                entry = self._span(segment[i:i + length])
                if entry is None:
                    break
                inside = ok[i:i + length]
                if all(inside):  # the usual case: every word of the span may be written
                    found.extend(WordMatch(start + i, word, freq) for word, freq, _ in entry[1][:most_frequent])
                    continue
                if sum(inside) < 2:
                    continue
                ranked = [(word, freq) for word, freq, changed in entry[1] if all(inside[j] for j in changed)]
                found.extend(WordMatch(start + i, word, freq) for word, freq in ranked[:most_frequent])
        return found

    def _span(self, span: str) -> tuple[list[str], list[tuple[str, int, tuple[int, ...]]]] | None:
        """(the span's readings that begin some word's key, the words read like it that change
        >= 2 of its characters as (word, frequency, changed offsets), most frequent first); None
        where the span cannot be read (a character without a reading, or a prefix no key begins).
        Memoised per span: a text's spans recur across texts and passes (~2x faster matches on
        SIGHAN sentences)."""
        entry = self._spans.get(span, False)
        if entry is not False:
            return entry
        if len(span) == 2:
            partial = self._syllables(span[0]) if is_cjk(span[0]) else []
        else:
            parent = self._span(span[:-1])
            partial = parent[0] if parent is not None else []
        last = self._syllables(span[-1]) if is_cjk(span[-1]) else []
        if not partial or not last:
            entry = None
        else:
            keys = [f"{p} {k}" for p in partial for k in last][:MAX_READINGS]
            words: dict[str, tuple[int, tuple[int, ...]]] = {}
            for key in keys:
                for word, freq in self.index.get(key, ()):
                    changed = tuple(j for j in range(len(span)) if word[j] != span[j])
                    if len(changed) >= 2:
                        words[word] = (freq, changed)
            ranked = sorted(words.items(), key=lambda item: (-item[1][0], item[0]))
            entry = ([key for key in keys if key in self.prefixes], [(w, f, c) for w, (f, c) in ranked])
        if len(self._spans) >= MAX_MEMO_SPANS:
            self._spans.clear()
        self._spans[span] = entry
        return entry


@functools.lru_cache(maxsize=4)
def load_index(min_freq: int = WordConfig.min_freq, use_cache: bool = True) -> dict[str, list[list]]:
    """The index ({key: [[word, frequency], ...]}), built or read from the JSON cache once per
    process (every Corrector shares it; read-only after loading). Kept as JSON gives it: turning
    its 94 k pairs into tuples was 0.23 s of every CLI start."""
    versions = [importlib.metadata.version(p) for p in ("pypinyin", "jieba")]
    return cached_json("homophone-words", [BUILD_VERSION, versions, min_freq],
                       lambda: _build_index(min_freq), use_cache=use_cache)


def _build_index(min_freq: int) -> dict[str, list[list]]:
    from pypinyin import lazy_pinyin

    index: dict[str, list[list]] = {}
    for word, freq in ensure_jieba().dt.FREQ.items():
        if not 2 <= len(word) <= 4 or freq < min_freq or not all(is_cjk(ch) for ch in word):
            continue
        syllables = lazy_pinyin(word, errors="ignore")
        if len(syllables) != len(word) or not all(s.isalpha() for s in syllables):
            continue
        index.setdefault(" ".join(fuzzy_syllable(s) for s in syllables), []).append([word, freq])
    for words in index.values():
        words.sort(key=lambda item: (-item[1], item[0]))
    return index


def propose_words(
    homophones: HomophoneWords,
    chunks: Sequence[tuple[str, int, int]],
    flagged: Sequence[dict[int, int]],
    allowed_log_probs: np.ndarray,
    source_log_probs: np.ndarray,
    top1_ids: np.ndarray,
    token_id: Callable[[str], int | None],
    relation: Callable[[str, str], int],
    pair_count: Callable[[str, str], int],
    ngram: NgramLM,
    lm_gains: Callable[[np.ndarray, np.ndarray], np.ndarray],
    config: WordConfig,
    known_gains: Mapping[tuple[int, int, str], float] | None = None,
) -> Candidates:
    """Word candidates for a batch, as members of groups (`Candidates.group`, numbered from 0).

    `chunks[r]` is row r's (text, start, end) and `flagged[r]` maps its flagged offsets to flagged-position
    numbers n (the rows of `allowed_log_probs`, (N, V) generator log-probs with non-CJK ids at
    -inf; `source_log_probs[n]` = log P_gen(written character), `top1_ids[n]` the generator's
    most likely CJK character). `token_id(char)` is the
    character's vocabulary id (None outside it), `relation` / `pair_count` the confusion bits
    and training corrections of a (source, target) pair; `lm_gains(n, target ids)` the
    one-character n-gram gains, as for the single candidates, whose features the members share
    where they coincide. `known_gains` ((id(text), start, word) -> n-gram gain, what the word
    flags computed) spares scoring those words again.
    """
    sites, words, members = [], [], []
    for r, (text, start, end) in enumerate(chunks):
        if len(flagged[r]) < 2:
            continue
        for match in homophones.matches(text, flagged[r].__contains__, start, end, config.most_frequent):
            span = text[match.start:match.start + len(match.word)]
            changed = [(flagged[r][match.start + j], token_id(new), old, new)
                       for j, (old, new) in enumerate(zip(span, match.word, strict=True)) if old != new]
            if any(target is None or not np.isfinite(allowed_log_probs[n, target]) for n, target, _, _ in changed):
                continue
            sites.append((text, match.start))
            words.append(match)
            members.append(changed)
    if not words:
        return Candidates.empty()
    gains = _span_gains(ngram, sites, [m.word for m in words], known_gains or {})
    kept = _best_per_span(sites, [len(m.word) for m in words], gains, config)
    groups = [(words[k], members[k], float(gains[k])) for k in kept]
    position = np.array([n for _, changed, _ in groups for n, _, _, _ in changed], dtype=np.int64)
    target = np.array([t for _, changed, _ in groups for _, t, _, _ in changed], dtype=np.int64)
    pairs = [(old, new) for _, changed, _ in groups for _, _, old, new in changed]
    sizes = np.array([len(changed) for _, changed, _ in groups], dtype=np.int64)
    return Candidates(
        position=position,
        target_id=target,
        relation=np.array([relation(old, new) for old, new in pairs], dtype=np.int64),
        gen_logprob=allowed_log_probs[position, target].astype(np.float64),
        orig_logprob=source_log_probs[position].astype(np.float64),
        top1=target == top1_ids[position],
        lm_gain=np.asarray(lm_gains(position, target), dtype=np.float64),
        pair_count=np.array([pair_count(old, new) for old, new in pairs], dtype=np.float64),
        group=np.repeat(np.arange(len(groups)), sizes),
        word_gain=np.repeat([gain for _, _, gain in groups], sizes).astype(np.float64),
        word_size=np.repeat(sizes, sizes).astype(np.float64),
        word_freq=np.repeat([math.log10(1 + match.freq) for match, _, _ in groups], sizes).astype(np.float64),
    )


def _span_gains(ngram: NgramLM, sites: list[tuple[str, int]], words: list[str],
                known: Mapping[tuple[int, int, str], float]) -> np.ndarray:
    """`ngram.span_gains(sites, words)`, read from `known` where it holds them."""
    gains = np.array([known.get((id(text), start, word), np.nan) for (text, start), word in zip(sites, words, strict=True)])
    missing = np.flatnonzero(np.isnan(gains))
    if len(missing):
        gains[missing] = ngram.span_gains([sites[k] for k in missing], [words[k] for k in missing])
    return gains


def _best_per_span(sites: list[tuple[str, int]], lengths: list[int], gains: np.ndarray, config: WordConfig) -> list[int]:
    """Indices of the matches kept: gain above `min_gain`, the best `max_per_span` per span."""
    by_span: dict[tuple[int, int, int], list[int]] = {}
    for k, ((text, start), length) in enumerate(zip(sites, lengths, strict=True)):
        if gains[k] > config.min_gain:
            by_span.setdefault((id(text), start, length), []).append(k)
    kept = []
    for ks in by_span.values():
        kept.extend(sorted(ks, key=lambda k: -gains[k])[: config.max_per_span])
    return sorted(kept)


def whole_words(cands: Candidates) -> Candidates:
    """`cands` without the members of any word that lost a member (say, to the proper-noun veto)."""
    members = cands.group[cands.group >= 0]
    if len(members) == 0:
        return cands
    size = np.bincount(members)
    intact = (cands.group < 0) | (size[np.maximum(cands.group, 0)] == cands.word_size)
    return cands if intact.all() else cands.select(intact)
