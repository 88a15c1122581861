"""Synthetic spelling-error pairs from clean text, the way CSC corpora are made.

Wang et al. (2018) built 271K training pairs by substituting characters with OCR/ASR
confusions. We do the same with this project's own confusion sets (`corrector.confusion`):
per sentence 0-3 Chinese characters are replaced, the replacement drawn mostly from characters
with the same pinyin, then similar pinyin, similar shape, and a few random common characters.

The broad recipe (`--error-model` with the real training pairs, `--kind-weights` over all seven
kinds, `--fuzzy-pinyin`) makes errors that look like native writers':
- real_pair: a character real writers wrote for this one, drawn by how often (`ErrorModel`), and
  the number of errors a sentence has (0-4) as in the real pairs;
- homophone_word: a whole word replaced by a dictionary word typed with the same or a near pinyin
  (期间 -> 其间, 权力 -> 全力), weighted by frequency, the way a pinyin input method errs — 17 %
  of the wrong characters of SIGHAN's dev split (189 of 1,090), which character substitution
  seldom makes;
- particle: one 的/地/得 written for another, the commonest native error;
- similar_shape: visually similar characters, what OCR gets wrong.
`describe_pairs` counts the same statistics for generated and real pairs side by side.
The defaults (no error model, the first four kinds) make the first release's training pairs.
A good share of sentences is left error-free so the model also learns to leave text alone.
Only CJK characters are ever replaced; everything else is copied unchanged. Deterministic for a
seed and input.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..pretrain.corpus import CorpusStats, iter_lines, list_corpus_files, split_sentences
from ..resources.confusion import SAME_PINYIN, SIMILAR_PINYIN, SIMILAR_SHAPE, ConfusionSet
from ..text.protection import ensure_jieba
from ..text.tokenization import is_cjk

KINDS = ("same_pinyin", "similar_pinyin", "similar_shape", "random", "homophone_word", "real_pair", "particle")
CHAR_KINDS = KINDS[:4]
PARTICLE_SWAPS = {"的": "地得", "地": "的", "得": "的"}  # each particle's confusable others
# Real 的/地/得 errors in the 37,467 training pairs of the broad dev (`finetune broad`): the particle
# the sentence needs -> {particle written: count}, and how often each occurs in their correct sides.
# A needed 地 is written wrong 14.5 % of the time, 得 7.8 %, 的 0.65 %, mostly as 的. The particle
# kind draws its site by those rates and the written particle by those counts; a uniform site
# (as before) wrote 地/得 for 的 in ~85 % of its errors, the rare direction, and the networks learnt
# to distrust correct 地/得 (迫不及待地发言 -> 的).
PARTICLE_ERRORS = {"地": {"的": 272, "得": 58}, "得": {"的": 174, "地": 11}, "的": {"得": 160, "地": 29}}
PARTICLE_OCCURRENCES = {"的": 28930, "地": 2278, "得": 2364}
PARTICLE_ERROR_RATE = {c: sum(row.values()) / PARTICLE_OCCURRENCES[c] for c, row in PARTICLE_ERRORS.items()}
# Fuzzy pinyin an input method forgives (and people mistype): initials zh/z, ch/c, sh/s, l/n;
# finals ang/an, eng/en, ing/in. Words typed with a near pinyin are offered beside exact homophones.
FUZZY_INITIALS = (("zh", "z"), ("ch", "c"), ("sh", "s"), ("n", "l"))
FUZZY_FINALS = (("ang", "an"), ("eng", "en"), ("ing", "in"))


def fuzzy_pinyin(syllable: str) -> str:
    """A toneless syllable with the fuzzy distinctions removed (shang -> san, ning -> lin)."""
    for long, short in FUZZY_INITIALS:
        if syllable.startswith(long):
            syllable = short + syllable[len(long):]
            break
    for long, short in FUZZY_FINALS:
        if syllable.endswith(long):
            return syllable[: -len(long)] + short
    return syllable


def usable_sentence(sentence: str, min_length: int = 8, max_length: int = 120, min_cjk_share: float = 0.6) -> bool:
    """Long enough to have context, short enough for one window, and mostly Chinese (no lists or code)."""
    if not min_length <= len(sentence) <= max_length:
        return False
    return sum(is_cjk(ch) for ch in sentence) >= min_cjk_share * len(sentence)


@dataclass
class ErrorModel:
    """What real writers got wrong, counted from error pairs: which character was written for
    which (correct -> wrong -> count) and how many wrong characters a sentence with errors has."""

    substitutions: dict[str, dict[str, int]] = field(default_factory=dict)
    errors_per_sentence: dict[int, int] = field(default_factory=dict)  # 1..4 (4: four or more)

    @classmethod
    def count(cls, pairs: Iterable[tuple[str, str]]) -> ErrorModel:
        model = cls()
        for source, target in pairs:
            if len(source) != len(target) or source == target:
                continue
            wrong = [(t, s) for s, t in zip(source, target, strict=True) if s != t and is_cjk(s) and is_cjk(t)]
            for correct, written in wrong:
                row = model.substitutions.setdefault(correct, {})
                row[written] = row.get(written, 0) + 1
            if wrong:
                key = min(len(wrong), 4)
                model.errors_per_sentence[key] = model.errors_per_sentence.get(key, 0) + 1
        return model

    def error_counts(self, error_free: float) -> tuple[float, ...]:
        """P(0..4 errors): `error_free`, then the real sentences' shares of 1..4 errors."""
        total = sum(self.errors_per_sentence.values()) or 1
        return (error_free,) + tuple((1 - error_free) * self.errors_per_sentence.get(k, 0) / total for k in range(1, 5))


@dataclass
class SynthConfig:
    # P(number of errors in a sentence = 0, 1, 2, 3[, 4])
    error_counts: tuple[float, ...] = (0.3, 0.45, 0.17, 0.08)
    # P(kind of a substitution); a kind with no candidate falls through to the next one. A
    # homophone word changes the characters of the word holding the drawn position where they
    # differ (one or more, within the sentence's error count); without one there, a same-pinyin
    # character. Candidate for the next run: (0.45, 0.12, 0.13, 0.05, 0.25): ~11 % of the wrong
    # characters from homophone words; adjacent errors whose written pair is a dictionary word,
    # per 1,000 wrong characters, 22.3 (the default: 1.5; the dev split: 38.5).
    # real_pair: a character real writers wrote for this one (ErrorModel); particle: 的/地/得.
    kind_weights: tuple[float, ...] = (0.6, 0.15, 0.2, 0.05, 0.0, 0.0, 0.0)
    fuzzy_pinyin: bool = False  # homophone words also by near pinyin (fuzzy_pinyin)
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
                 lexicon: dict[str, int] | None = None, error_model: ErrorModel | None = None) -> None:
        """`allowed`: characters that may be written as errors, most frequent first (e.g. a
        vocabulary's CJK tokens); real typos are mostly common characters, so a substitute is
        drawn with weight 1/(rank + 50) rather than uniformly. `lexicon`: word -> count, the
        words a homophone substitution may write (default: jieba's dictionary)."""
        self.confusion = confusion
        self.config = config or SynthConfig()
        weights = tuple(self.config.kind_weights)
        if len(weights) > len(KINDS):
            raise ValueError(f"kind_weights takes at most {len(KINDS)} weights ({', '.join(KINDS)})")
        # Kinds added later weigh 0 when not given: older weight tuples make the same pairs.
        self.config.kind_weights = weights + (0.0,) * (len(KINDS) - len(weights))
        if self.config.kind_weights[KINDS.index("real_pair")] > 0 and error_model is None:
            raise ValueError("the real_pair kind needs an error model (--error-model FILE…)")
        self.error_model = error_model
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
        return usable_sentence(sentence, cfg.min_length, cfg.max_length, cfg.min_cjk_share)

    def _real_substitute(self, char: str) -> str | None:
        """A character real writers wrote for `char`, drawn by how often they did."""
        row = self.error_model.substitutions.get(char, {}) if self.error_model else {}
        options = [(c, n) for c, n in row.items() if c in self.allowed and c != char]
        if not options:
            return None
        return self.rng.choices([c for c, _ in options], weights=[n for _, n in options])[0]

    def _particle_site(self, chars: list[str], changed: set[int]) -> int | None:
        """An unchanged 的/地/得 of the sentence drawn by its real error rate (PARTICLE_ERROR_RATE),
        or None — always without one, and as often as those rates fall short of a needed 地's:
        a sentence holding only 的 gets a particle error 4.5 % as often as one holding a 地."""
        sites = [i for i, ch in enumerate(chars) if ch in PARTICLE_ERRORS and i not in changed]
        rates = [PARTICLE_ERROR_RATE[chars[i]] for i in sites]
        if not sites or self.rng.random() >= sum(rates) / max(PARTICLE_ERROR_RATE.values()):
            return None
        return self.rng.choices(sites, weights=rates)[0]

    def _pinyin_key(self, syllables: list[str]) -> tuple[str, ...]:
        return tuple(map(fuzzy_pinyin, syllables)) if self.config.fuzzy_pinyin else tuple(syllables)

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
                    index[self._pinyin_key(lazy_pinyin(word))].append((word, count))
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
        options = [(other, count) for other, count in self._homophone_index().get(self._pinyin_key(lazy_pinyin(word)), ())
                   if other != word and sum(a != b for a, b in zip(other, word, strict=True)) <= budget]
        if not options:
            return []
        other = self.rng.choices([w for w, _ in options], weights=[c ** 0.5 for _, c in options])[0]
        written = [offset for offset, char in enumerate(other, start=start) if chars[offset] != char]
        chars[start:end] = other
        return written

    def _write_kind(self, kind: str, chars: list[str], words: list[tuple[int, int]] | None, position: int,
                    changed: set[int], budget: int) -> list[int]:
        """Write an error of a word-, pair- or particle-kind at (or, for a particle, near)
        `position`; the offsets written, none when the kind has nothing to offer there."""
        if kind == "homophone_word":
            return self._write_homophone(chars, words or [], position, changed, budget)
        if kind == "particle":
            site = self._particle_site(chars, changed)
            if site is None:
                return []
            row = PARTICLE_ERRORS[chars[site]]
            chars[site] = self.rng.choices(list(row), weights=list(row.values()))[0]
            return [site]
        written = self._real_substitute(chars[position])
        if written is None:
            return []
        chars[position] = written
        return [position]

    def corrupt(self, sentence: str) -> str:
        """A copy of `sentence` with 0-4 substituted CJK characters (SynthConfig.error_counts)."""
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
            if first >= len(CHAR_KINDS):
                if KINDS[first] == "homophone_word" and words is None:
                    words = _word_spans(sentence)
                written = self._write_kind(KINDS[first], chars, words, position, changed, count - len(changed))
                if written:
                    changed.update(written)
                    self.stats.substitutions[KINDS[first]] += len(written)
                    continue
                first = 0  # none of that kind here: a character of the same pinyin instead
            replacement = self._substitute(chars[position], first)
            if replacement is None:
                continue
            chars[position], kind = replacement
            self.stats.substitutions[kind] += 1
            changed.add(position)
        self.stats.sentences += 1
        self.stats.with_errors += bool(changed)
        return "".join(chars)


def describe_pairs(pairs: Iterable[tuple[str, str]], confusion: ConfusionSet) -> dict[str, float]:
    """Shares that say what errors a set of pairs holds: error-free sentences, errors per sentence
    with errors (1..4+), and each wrong character's kind (particle, same/similar pinyin, similar
    shape, other) and whether it sits next to another wrong one (a word-level error)."""
    sentences = error_free = wrong = adjacent = 0
    per_sentence = dict.fromkeys(range(1, 5), 0)
    kinds = dict.fromkeys(("particle", "same_pinyin", "similar_pinyin", "similar_shape", "other"), 0)
    for source, target in pairs:
        if len(source) != len(target):
            continue
        sentences += 1
        offsets = [i for i, (a, b) in enumerate(zip(source, target, strict=True)) if a != b]
        if not offsets:
            error_free += 1
            continue
        per_sentence[min(len(offsets), 4)] += 1
        for i in offsets:
            wrong += 1
            adjacent += (i - 1 in offsets) or (i + 1 in offsets)
            written, correct = source[i], target[i]
            relation = confusion.relations(correct).get(written, 0)
            kind = ("particle" if written in PARTICLE_SWAPS and correct in PARTICLE_SWAPS
                    else "same_pinyin" if relation & SAME_PINYIN else "similar_pinyin" if relation & SIMILAR_PINYIN
                    else "similar_shape" if relation & SIMILAR_SHAPE else "other")
            kinds[kind] += 1
    with_errors = max(1, sentences - error_free)
    row = {"sentences": sentences, "error_free": error_free / max(1, sentences)}
    row.update({f"errors_{k}{'+' if k == 4 else ''}": n / with_errors for k, n in per_sentence.items()})
    row.update({f"kind_{k}": n / max(1, wrong) for k, n in kinds.items()})
    row["word_level"] = adjacent / max(1, wrong)
    return row


def _word_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of each word of jieba's segmentation (dictionary only, no HMM guesses)."""
    return [(start, end) for _, start, end in ensure_jieba().tokenize(sentence, HMM=False)]


def iter_sentences(corpus: Iterable[str | Path], usable: Callable[[str], bool] = usable_sentence) -> Iterator[str]:
    """The stripped sentences of the corpus files that `usable` accepts, in order."""
    stats = CorpusStats()
    for line in iter_lines(list_corpus_files(corpus), stats):
        for sentence in split_sentences(line):
            sentence = sentence.strip()
            if usable(sentence):
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
