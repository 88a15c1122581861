"""How sure a score is: bootstrap intervals over sentences for sentence-level correction F1.

A test set of ~1,000 sentences leaves a system's F1 uncertain by several points, and two
systems' F1 differ by noise of that size; choosing between models on a 1,050-pair dev split
needs to know which differences are real. Both questions are answered by resampling sentences
with replacement (Efron's bootstrap; Koehn 2004 for the paired form used in MT):

* `bootstrap_interval`: the central `level` share of F1 over resampled sets — the spread a
  system's score would have on other sets of this kind and size;
* `paired_difference`: two systems' predictions on the same sentences, resampled together, so
  what both get right or wrong cancels; `share_better` is the share of resamples in which the
  second system's F1 is higher (near 1 or 0: a real difference; near 0.5: noise).

Sentence correction F1 (standard protocol, metrics.py) is 2·TP / (2·TP + FP + FN) with FP =
changed − TP and FN = erroneous − TP, i.e. 2·TP / (changed + erroneous): a ratio of sums of
per-sentence numbers, so a resample's F1 is two weighted sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from corrector.evaluation.metrics import Judgement

DEFAULT_SAMPLES = 1000
DEFAULT_LEVEL = 0.95


def _terms(judgements: Sequence[Judgement]) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence: its true positive (0/1) and its share of the F1 denominator (changed + erroneous)."""
    tp = np.array([j.changed and j.correction_correct for j in judgements], dtype=np.float64)
    denominator = np.array([int(j.changed) + int(j.has_error) for j in judgements], dtype=np.float64)
    return tp, denominator


def _f1(counts: np.ndarray, tp: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """F1 of each resample; `counts[s, i]` = how often sentence i was drawn in resample s."""
    top, bottom = counts @ tp, counts @ denominator
    return np.divide(2 * top, bottom, out=np.zeros_like(top), where=bottom > 0)


def _point(tp: np.ndarray, denominator: np.ndarray) -> float:
    """F1 on the sentences as given."""
    bottom = denominator.sum()
    return float(2 * tp.sum() / bottom) if bottom > 0 else 0.0


# Resamples drawn at a time: the counts matrix is chunk x sentences, so memory stays bounded
# (~8 MB per 1,000 sentences) however many samples are asked for. Drawing in chunks from one
# generator gives the same resamples as one draw of them all.
RESAMPLE_CHUNK = 128


def _resampled_f1s(terms: Sequence[tuple[np.ndarray, np.ndarray]], samples: int, seed: int) -> list[np.ndarray]:
    """For each system's (tp, denominator) over the same n sentences: its F1 in each of
    `samples` resamples, the same resamples for every system (paired)."""
    n = len(terms[0][0])
    rng = np.random.default_rng(seed)
    out: list[list[np.ndarray]] = [[] for _ in terms]
    for start in range(0, samples, RESAMPLE_CHUNK):
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=min(RESAMPLE_CHUNK, samples - start)).astype(np.float64)
        for values, (tp, denominator) in zip(out, terms, strict=True):
            values.append(_f1(counts, tp, denominator))
    return [np.concatenate(values) for values in out]


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(low), float(high)


def _check(samples: int, level: float) -> None:
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")


@dataclass(frozen=True)
class Interval:
    f1: float  # on the sentences as given
    low: float
    high: float
    samples: int
    level: float

    def to_dict(self) -> dict:
        return {"f1": self.f1, "low": self.low, "high": self.high, "samples": self.samples, "level": self.level}


@dataclass(frozen=True)
class Difference:
    """F1(b) − F1(a) on the same sentences."""

    f1_a: float
    f1_b: float
    difference: float
    low: float
    high: float
    share_better: float  # resamples where b's F1 > a's
    samples: int
    level: float

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def bootstrap_interval(judgements: Sequence[Judgement], samples: int = DEFAULT_SAMPLES, level: float = DEFAULT_LEVEL,
                       seed: int = 0) -> Interval:
    """Sentence correction F1 and its bootstrap percentile interval."""
    _check(samples, level)
    tp, denominator = _terms(judgements)
    f1 = _point(tp, denominator)
    if not len(tp):
        return Interval(f1, 0.0, 0.0, samples, level)
    low, high = _interval(_resampled_f1s([(tp, denominator)], samples, seed)[0], level)
    return Interval(f1, low, high, samples, level)


def paired_difference(a: Sequence[Judgement], b: Sequence[Judgement], samples: int = DEFAULT_SAMPLES,
                      level: float = DEFAULT_LEVEL, seed: int = 0) -> Difference:
    """F1(b) − F1(a) with a paired bootstrap interval; a[i] and b[i] judge the same sentence."""
    _check(samples, level)
    if len(a) != len(b):
        raise ValueError(f"paired judgements needed: {len(a)} vs {len(b)} sentences")
    (tp_a, den_a), (tp_b, den_b) = _terms(a), _terms(b)
    f1_a, f1_b = _point(tp_a, den_a), _point(tp_b, den_b)
    if not len(a):
        return Difference(f1_a, f1_b, 0.0, 0.0, 0.0, 0.0, samples, level)
    resampled_a, resampled_b = _resampled_f1s([(tp_a, den_a), (tp_b, den_b)], samples, seed)
    delta = resampled_b - resampled_a
    low, high = _interval(delta, level)
    return Difference(f1_a, f1_b, f1_b - f1_a, low, high, float((delta > 0).mean()), samples, level)
