"""Spelling-correction metrics on (source, target, prediction) triples of equal length.

Notation for one sentence: S = source, T = gold target, P = prediction,
G = {i : S[i] != T[i]} (gold error positions), D = {i : S[i] != P[i]} (positions the system changed).

* Sentence level, standard protocol (SpellGCN / ReaLiSe / SCOPE): every changed sentence (D != ∅)
  is a predicted positive. Detection is right iff D == G, correction iff additionally P == T.
  TP = right changed sentences, FP = changed sentences that are not right (on error-free *or*
  erroneous sentences), FN = erroneous sentences (G != ∅) that are not right.
* Sentence level, lenient protocol (pycorrector's `eval_sighan2015_by_model`): FP only counts
  error-free sentences (G = ∅) that were changed; an erroneous sentence that is handled wrongly is
  only an FN. TP and FN are as in the standard protocol, so the two protocols share their recall.
* Character level: detection TP = |D ∩ G|, FP = |D \\ G|, FN = |G \\ D|; correction TP = positions
  in D ∩ G with P[i] == T[i], FP = |D| - TP, FN = |G| - TP.
* FPR: the share of error-free sentences the system changed.

Precision, recall and F1 are 0.0 when their denominator is 0 (e.g. precision of a system that
changes nothing), so every number is a fraction in [0, 1].
docs/evaluate.md works through an example of each.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

# SIGHAN-13's gold leaves most 的/地/得 misuse unannotated, so papers drop such predicted edits.
DE_CHARS = frozenset("的地得")

Category = Literal["correct", "over-corrected", "missed", "right-position-wrong-char", "wrong-candidate"]
CATEGORIES: tuple[Category, ...] = (
    "correct",
    "over-corrected",
    "missed",
    "right-position-wrong-char",
    "wrong-candidate",
)


def ratio(numerator: int, denominator: int) -> float:
    """numerator / denominator, 0 for an empty denominator (a share of nothing)."""
    return numerator / denominator if denominator else 0.0


@dataclass(frozen=True)
class PRF:
    """Counts of one precision/recall/F1 block."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> dict:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
        }


NOTHING_CHANGED: frozenset[int] = frozenset()


def changed_positions(source: str, text: str) -> frozenset[int]:
    """0-based positions where `text` differs from `source` (same length required)."""
    if len(source) != len(text):
        raise ValueError(f"length mismatch: {len(source)} vs {len(text)} characters")
    if source == text:  # most sentences at most thresholds of a sweep: a C comparison, no loop
        return NOTHING_CHANGED
    return frozenset(i for i, (a, b) in enumerate(zip(source, text, strict=True)) if a != b)


# A sweep judges each pair once per threshold: its gold positions are computed once (strings
# cache their hashes, so a lookup costs less than the scan).
_gold_positions = functools.lru_cache(maxsize=1 << 16)(changed_positions)


def drop_de_edits(source: str, prediction: str) -> str:
    """Undo every predicted change whose original or new character is 的, 地 or 得 (`--ignore-de`)."""
    if len(source) != len(prediction):
        raise ValueError(f"length mismatch: {len(source)} vs {len(prediction)} characters")
    return "".join(
        s if s != p and (s in DE_CHARS or p in DE_CHARS) else p
        for s, p in zip(source, prediction, strict=True)
    )


@dataclass(frozen=True)
class Judgement:
    """How one prediction compares with the gold pair."""

    gold: frozenset[int]  # G
    predicted: frozenset[int]  # D
    right_chars: frozenset[int]  # positions of D ∩ G where P[i] == T[i]
    category: Category

    @property
    def has_error(self) -> bool:
        return bool(self.gold)

    @property
    def changed(self) -> bool:
        return bool(self.predicted)

    @property
    def detection_correct(self) -> bool:
        """D == G (also true for an error-free sentence left alone)."""
        return self.predicted == self.gold

    @property
    def correction_correct(self) -> bool:
        """P == T, i.e. D == G and every changed character is the gold one."""
        return self.detection_correct and self.right_chars == self.gold


def judge(source: str, target: str, prediction: str) -> Judgement:
    """Compare one prediction with its gold pair; all three strings must have the same length.

    Categories, decided in this order (the first that applies):
      correct                    P == T (includes an error-free sentence left unchanged);
      over-corrected             D \\ G != ∅: changed a character that was right;
      missed                     D ⊊ G and every change is right: only omissions (includes D = ∅);
      right-position-wrong-char  D == G but some changed character is not the gold one;
      wrong-candidate            D ⊊ G and some change is not the gold character: errors were
                                 missed *and* a wrong replacement was chosen at an error position.
    """
    if not len(source) == len(target) == len(prediction):
        raise ValueError(
            f"judge needs equal lengths: source {len(source)}, target {len(target)}, prediction {len(prediction)}"
        )
    gold = _gold_positions(source, target)
    predicted = changed_positions(source, prediction)
    right_chars = frozenset(i for i in predicted & gold if prediction[i] == target[i])
    wrong_chars = bool((predicted & gold) - right_chars)
    if prediction == target:
        category: Category = "correct"
    elif predicted - gold:
        category = "over-corrected"
    elif predicted == gold:
        category = "right-position-wrong-char"
    elif wrong_chars:
        category = "wrong-candidate"
    else:
        category = "missed"
    return Judgement(gold, predicted, right_chars, category)


@dataclass
class Scores:
    """Every metric of one system on one set of sentences; `to_dict` gives the JSON layout."""

    sentences: int = 0
    error_sentences: int = 0
    error_free_sentences: int = 0
    characters: int = 0
    sentence_detection: PRF = field(default_factory=lambda: PRF(0, 0, 0))
    sentence_correction: PRF = field(default_factory=lambda: PRF(0, 0, 0))
    lenient_detection: PRF = field(default_factory=lambda: PRF(0, 0, 0))
    lenient_correction: PRF = field(default_factory=lambda: PRF(0, 0, 0))
    char_detection: PRF = field(default_factory=lambda: PRF(0, 0, 0))
    char_correction: PRF = field(default_factory=lambda: PRF(0, 0, 0))
    detection_accuracy: float = 0.0  # share of sentences with D == G
    correction_accuracy: float = 0.0  # share of sentences with P == T
    false_positives: int = 0  # error-free sentences that were changed
    categories: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))

    @property
    def fpr(self) -> float:
        return ratio(self.false_positives, self.error_free_sentences)

    def to_dict(self) -> dict:
        return {
            "sentences": self.sentences,
            "error_sentences": self.error_sentences,
            "error_free_sentences": self.error_free_sentences,
            "characters": self.characters,
            "sentence": {
                "detection": {**self.sentence_detection.to_dict(), "accuracy": self.detection_accuracy},
                "correction": {**self.sentence_correction.to_dict(), "accuracy": self.correction_accuracy},
            },
            "lenient": {
                "detection": {**self.lenient_detection.to_dict(), "accuracy": self.detection_accuracy},
                "correction": {**self.lenient_correction.to_dict(), "accuracy": self.correction_accuracy},
            },
            "char": {
                "detection": self.char_detection.to_dict(),
                "correction": self.char_correction.to_dict(),
            },
            "fpr": self.fpr,
            "false_positives": self.false_positives,
            "categories": dict(self.categories),
        }


def score_judgements(judgements: Iterable[Judgement], characters: int = 0) -> Scores:
    """Aggregate per-sentence judgements into `Scores` (see the module docstring)."""
    n = errors = changed = false_pos = 0
    det_right = cor_right = det_tp = cor_tp = 0
    char_pred = char_gold = char_det_tp = char_cor_tp = 0
    categories: Counter[str] = Counter(dict.fromkeys(CATEGORIES, 0))
    for j in judgements:
        n += 1
        errors += j.has_error
        changed += j.changed
        false_pos += j.changed and not j.has_error
        det_right += j.detection_correct
        cor_right += j.correction_correct
        # A true positive needs a change, so an untouched error-free sentence never counts.
        det_tp += j.changed and j.detection_correct
        cor_tp += j.changed and j.correction_correct
        char_pred += len(j.predicted)
        char_gold += len(j.gold)
        char_det_tp += len(j.predicted & j.gold)
        char_cor_tp += len(j.right_chars)
        categories[j.category] += 1
    return Scores(
        sentences=n,
        error_sentences=errors,
        error_free_sentences=n - errors,
        characters=characters,
        sentence_detection=PRF(det_tp, changed - det_tp, errors - det_tp),
        sentence_correction=PRF(cor_tp, changed - cor_tp, errors - cor_tp),
        lenient_detection=PRF(det_tp, false_pos, errors - det_tp),
        lenient_correction=PRF(cor_tp, false_pos, errors - cor_tp),
        char_detection=PRF(char_det_tp, char_pred - char_det_tp, char_gold - char_det_tp),
        char_correction=PRF(char_cor_tp, char_pred - char_cor_tp, char_gold - char_cor_tp),
        detection_accuracy=ratio(det_right, n),
        correction_accuracy=ratio(cor_right, n),
        false_positives=false_pos,
        categories=dict(categories),
    )


def score(triples: Iterable[tuple[str, str, str]], ignore_de: bool = False) -> Scores:
    """All metrics for (source, target, prediction) triples of equal length.

    With `ignore_de`, predicted 的/地/得 edits are undone first (`drop_de_edits`); the gold is unchanged.
    """
    judgements = []
    characters = 0
    for source, target, prediction in triples:
        if ignore_de:
            prediction = drop_de_edits(source, prediction)
        judgements.append(judge(source, target, prediction))
        characters += len(source)
    return score_judgements(judgements, characters)


def metric_value(metrics: dict, path: str) -> float:
    """Look up a dotted key such as 'sentence.correction.f1' in a `Scores.to_dict()` layout."""
    value: object = metrics
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(f"no metric {path!r} (missing {key!r})")
        value = value[key]
    if not isinstance(value, int | float):
        raise KeyError(f"{path!r} is not a number")
    return float(value)
