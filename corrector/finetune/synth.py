"""Synthetic spelling-error pairs from clean text, the way CSC corpora are made.

Wang et al. (2018) built 271K training pairs by substituting characters with OCR/ASR
confusions. We do the same with this project's own confusion sets (`corrector.confusion`):
per sentence 0-3 Chinese characters are replaced, the replacement drawn mostly from characters
with the same pinyin, then similar pinyin, similar shape, and a few random common characters.
A good share of sentences is left error-free so the model also learns to leave text alone.
Only CJK characters are ever replaced; everything else is copied unchanged. Deterministic for a
seed and input.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..confusion import SAME_PINYIN, SIMILAR_PINYIN, SIMILAR_SHAPE, ConfusionSet
from ..pretrain.corpus import CorpusStats, iter_lines, list_corpus_files, split_sentences
from ..tokenization import is_cjk

KINDS = ("same_pinyin", "similar_pinyin", "similar_shape", "random")


@dataclass
class SynthConfig:
    # P(number of errors in a sentence = 0, 1, 2, 3)
    error_counts: tuple[float, float, float, float] = (0.3, 0.45, 0.17, 0.08)
    # P(kind of a substitution); a kind with no candidate falls through to the next one
    kind_weights: tuple[float, float, float, float] = (0.6, 0.15, 0.2, 0.05)
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

    def __init__(self, confusion: ConfusionSet, allowed: list[str] | None = None, config: SynthConfig | None = None) -> None:
        """`allowed`: characters that may be written as errors, most frequent first (e.g. a
        vocabulary's CJK tokens); real typos are mostly common characters, so a substitute is
        drawn with weight 1/(rank + 50) rather than uniformly."""
        self.confusion = confusion
        self.config = config or SynthConfig()
        ranked = allowed if allowed is not None else sorted(confusion.common)
        self.weight = {char: 1.0 / (rank + 50) for rank, char in enumerate(ranked)}
        self.allowed = set(ranked)
        self.common = [c for c in ranked if c in confusion.common] or ranked
        self.rng = random.Random(self.config.seed)
        self.stats = SynthStats()
        self._by_kind: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS[:3]}

    def _candidates(self, char: str, kind: str) -> list[str]:
        cache = self._by_kind[kind]
        if char not in cache:
            bit = {"same_pinyin": SAME_PINYIN, "similar_pinyin": SIMILAR_PINYIN, "similar_shape": SIMILAR_SHAPE}[kind]
            cache[char] = sorted(c for c, rel in self.confusion.relations(char).items() if rel & bit and c in self.allowed)
        return cache[char]

    def _substitute(self, char: str) -> tuple[str, str] | None:
        weights = list(self.config.kind_weights)
        first = self.rng.choices(range(len(KINDS)), weights=weights)[0]
        for kind in KINDS[first:] + KINDS[:first]:  # fall through when a kind has no candidate
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

    def corrupt(self, sentence: str) -> str:
        """A copy of `sentence` with 0-3 substituted CJK characters."""
        count = self.rng.choices(range(len(self.config.error_counts)), weights=self.config.error_counts)[0]
        positions = [i for i, ch in enumerate(sentence) if is_cjk(ch)]
        self.rng.shuffle(positions)
        chars = list(sentence)
        made = 0
        for position in positions:
            if made == count:
                break
            replacement = self._substitute(chars[position])
            if replacement is None:
                continue
            chars[position], kind = replacement
            self.stats.substitutions[kind] += 1
            made += 1
        self.stats.sentences += 1
        self.stats.with_errors += made > 0
        return "".join(chars)


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
