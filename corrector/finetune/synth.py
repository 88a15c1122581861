"""Synthetic spelling-error pairs from clean text, the way CSC corpora are made.

Wang et al. (2018) built 271K training pairs by substituting characters with OCR/ASR
confusions. We do the same with this project's own confusion sets (`corrector.confusion`):
per sentence 0-3 Chinese characters are replaced, the replacement drawn mostly from characters
with the same pinyin, then similar pinyin, similar shape, and a few random common characters.
Opt-in (`--kind-weights`, last weight > 0): a share of the errors replaces a whole word by a
dictionary word typed with the same pinyin (宅舞 for 债务, 惜贯 for 习惯), what a pinyin input
method or an ASR system gets wrong, and the source of errors on adjacent characters.
Character-by-character substitution seldom makes those, yet they are 17 % of the wrong
characters of the calibration dev split (189 of 1,090, in 92 sentences), and the shipped
corrector misses 183 of them. Off by default until a fine-tuning run shows it helps (it needs
a GPU; docs/gpu.md), so the default still makes the shipped model's training pairs.
A good share of sentences is left error-free so the model also learns to leave text alone.
Only CJK characters are ever replaced; everything else is copied unchanged. Deterministic for a
seed and input.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..pretrain.corpus import CorpusStats, iter_lines, list_corpus_files, split_sentences
from ..resources.confusion import SAME_PINYIN, SIMILAR_PINYIN, SIMILAR_SHAPE, ConfusionSet
from ..text.protection import ensure_jieba
from ..text.tokenization import is_cjk

KINDS = ("same_pinyin", "similar_pinyin", "similar_shape", "random", "homophone_word")
CHAR_KINDS = KINDS[:4]


@dataclass
class SynthConfig:
    # P(number of errors in a sentence = 0, 1, 2, 3)
    error_counts: tuple[float, float, float, float] = (0.3, 0.45, 0.17, 0.08)
    # P(kind of a substitution); a kind with no candidate falls through to the next one. A
    # homophone word changes the characters of the word holding the drawn position where they
    # differ (one or more, within the sentence's error count); without one there, a same-pinyin
    # character. Candidate for the next run: (0.45, 0.12, 0.13, 0.05, 0.25): ~11 % of the wrong
    # characters from homophone words; adjacent errors whose written pair is a dictionary word,
    # per 1,000 wrong characters, 22.3 (the default: 1.5; the dev split: 38.5).
    kind_weights: tuple[float, ...] = (0.6, 0.15, 0.2, 0.05, 0.0)
    min_word_frequency: int = 3  # jieba count of a word written in place of a homophone
    min_length: int = 8  # characters in a usable sentence
    max_length: int = 120
    min_cjk_share: float = 0.6  # skip lists, code and tables
    seed: int = 0


@dataclass
class SynthStats:
    sentences: int = 0
    with_errors: int = 0
    substitutions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))


class ErrorSynthesizer:
    """Replace characters of a sentence with confusable ones."""

    def __init__(self, confusion: ConfusionSet, allowed: list[str] | None = None, config: SynthConfig | None = None,
                 lexicon: dict[str, int] | None = None) -> None:
        """`allowed`: characters that may be written as errors, most frequent first (e.g. a
        vocabulary's CJK tokens); real typos are mostly common characters, so a substitute is
        drawn with weight 1/(rank + 50) rather than uniformly. `lexicon`: word -> count, the
        words a homophone substitution may write (default: jieba's dictionary)."""
        self.confusion = confusion
        self.config = config or SynthConfig()
        if len(self.config.kind_weights) != len(KINDS):
            raise ValueError(f"kind_weights needs {len(KINDS)} weights ({', '.join(KINDS)})")
        self.lexicon = lexicon
        ranked = allowed if allowed is not None else sorted(confusion.common)
        self.weight = {char: 1.0 / (rank + 50) for rank, char in enumerate(ranked)}
        self.allowed = set(ranked)
        self.common = [c for c in ranked if c in confusion.common] or ranked
        self.rng = random.Random(self.config.seed)
        self.stats = SynthStats()
        self._by_kind: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS[:3]}
        self._homophones: dict[tuple[str, ...], list[tuple[str, int]]] | None = None

    def _candidates(self, char: str, kind: str) -> list[str]:
        cache = self._by_kind[kind]
        if char not in cache:
            bit = {"same_pinyin": SAME_PINYIN, "similar_pinyin": SIMILAR_PINYIN, "similar_shape": SIMILAR_SHAPE}[kind]
            cache[char] = sorted(c for c, rel in self.confusion.relations(char).items() if rel & bit and c in self.allowed)
        return cache[char]

    def _substitute(self, char: str, first: int) -> tuple[str, str] | None:
        """A confusable character for `char`, of kind CHAR_KINDS[first] or the next one that has any."""
        for kind in CHAR_KINDS[first:] + CHAR_KINDS[:first]:  # fall through when a kind has no candidate
            options = self.common if kind == "random" else self._candidates(char, kind)
            if not options:
                continue
            choice = self.rng.choices(options, weights=[self.weight[c] for c in options])[0]
            if choice != char:
                return choice, kind
        return None

    def usable(self, sentence: str) -> bool:
        cfg = self.config
        if not cfg.min_length <= len(sentence) <= cfg.max_length:
            return False
        return sum(is_cjk(ch) for ch in sentence) >= cfg.min_cjk_share * len(sentence)

    def _homophone_index(self) -> dict[tuple[str, ...], list[tuple[str, int]]]:
        """Toneless pinyin of a 2-4 character word -> the lexicon's words read so, with counts.
        Built on first use (~10 s for jieba's dictionary)."""
        if self._homophones is None:
            from pypinyin import lazy_pinyin

            lexicon = self.lexicon if self.lexicon is not None else ensure_jieba().dt.FREQ
            index: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
            for word, count in sorted(lexicon.items()):
                if (count >= self.config.min_word_frequency and 2 <= len(word) <= 4
                        and all(ch in self.allowed for ch in word)):
                    index[tuple(lazy_pinyin(word))].append((word, count))
            self._homophones = dict(index)
        return self._homophones

    def _write_homophone(self, chars: list[str], words: list[tuple[int, int]], position: int,
                         changed: set[int], budget: int) -> list[int]:
        """Replace the word holding `position` (2-4 CJK characters, none changed yet) by a lexicon
        word read the same that differs from it in 1..`budget` characters, drawn with weight
        sqrt(count) (an input method offers frequent words first). The offsets written; none
        when there is no such word."""
        from pypinyin import lazy_pinyin

        start, end = next(((a, b) for a, b in words if a <= position < b), (position, position + 1))
        word = "".join(chars[start:end])
        if not 2 <= len(word) <= 4 or changed & set(range(start, end)) or not all(is_cjk(ch) for ch in word):
            return []
        options = [(other, count) for other, count in self._homophone_index().get(tuple(lazy_pinyin(word)), ())
                   if other != word and sum(a != b for a, b in zip(other, word, strict=True)) <= budget]
        if not options:
            return []
        other = self.rng.choices([w for w, _ in options], weights=[c ** 0.5 for _, c in options])[0]
        written = [offset for offset, char in enumerate(other, start=start) if chars[offset] != char]
        chars[start:end] = other
        return written

    def corrupt(self, sentence: str) -> str:
        """A copy of `sentence` with 0-3 substituted CJK characters."""
        count = self.rng.choices(range(len(self.config.error_counts)), weights=self.config.error_counts)[0]
        positions = [i for i, ch in enumerate(sentence) if is_cjk(ch)]
        self.rng.shuffle(positions)
        chars = list(sentence)
        changed: set[int] = set()
        words: list[tuple[int, int]] | None = None  # jieba's segmentation, once a word kind is drawn
        for position in positions:
            if len(changed) >= count:
                break
            if position in changed:
                continue
            first = self.rng.choices(range(len(KINDS)), weights=self.config.kind_weights)[0]
            if KINDS[first] == "homophone_word":
                words = _word_spans(sentence) if words is None else words
                written = self._write_homophone(chars, words, position, changed, count - len(changed))
                if written:
                    changed.update(written)
                    self.stats.substitutions["homophone_word"] += len(written)
                    continue
                first = 0  # no homophone word here: a character of the same pinyin instead
            replacement = self._substitute(chars[position], first)
            if replacement is None:
                continue
            chars[position], kind = replacement
            self.stats.substitutions[kind] += 1
            changed.add(position)
        self.stats.sentences += 1
        self.stats.with_errors += bool(changed)
        return "".join(chars)


def _word_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of each word of jieba's segmentation (dictionary only, no HMM guesses)."""
    return [(start, end) for _, start, end in ensure_jieba().tokenize(sentence, HMM=False)]


def iter_sentences(corpus: Iterable[str | Path], synthesizer: ErrorSynthesizer) -> Iterator[str]:
    stats = CorpusStats()
    for line in iter_lines(list_corpus_files(corpus), stats):
        for sentence in split_sentences(line):
            sentence = sentence.strip()
            if synthesizer.usable(sentence):
                yield sentence


def reservoir_sample(items: Iterable[str], size: int, rng: random.Random) -> list[str]:
    """A uniform sample of `size` items from a stream of unknown length, in stream order."""
    sample: list[tuple[int, str]] = []
    for index, item in enumerate(items):
        if len(sample) < size:
            sample.append((index, item))
        else:
            slot = rng.randint(0, index)
            if slot < size:
                sample[slot] = (index, item)
    return [item for _, item in sorted(sample)]


def write_pairs(path: str | Path, pairs: Iterable[tuple[str, str]]) -> int:
    """TSV `label<TAB>source<TAB>target` (the evaluator's format); returns the count."""
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for source, target in pairs:
            handle.write(f"{int(source != target)}\t{source}\t{target}\n")
            count += 1
    return count
