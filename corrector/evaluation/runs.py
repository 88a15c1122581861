"""Run a system over texts, time it, and score what it returns against gold pairs.

Only same-length pairs are scored, because every metric compares positions; the system sees
every text (length-mismatched gold pairs included, so their predictions are still written out)."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from tqdm import tqdm

from ..datasets import Example
from ..resources.idioms import passes_threshold
from ..result import Edit, Result
from .metrics import Judgement, Scores, drop_de_edits, judge, score_judgements


@runtime_checkable
class System(Protocol):
    """What the evaluator needs from a corrector."""

    def correct_batch(
        self, texts: list[str], batch_size: int = 32, threshold: float | None = None
    ) -> list[Result]: ...


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (it only grows over a run)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


@dataclass
class Timing:
    seconds: float = 0.0  # time inside timed correct_batch calls (the warm-up call excluded)
    batch_seconds: list[float] = field(default_factory=list)
    warmup_seconds: float = 0.0
    sentences: int = 0
    characters: int = 0
    peak_rss_mb: float = 0.0

    def to_dict(self) -> dict:
        batches = np.asarray(self.batch_seconds or [0.0]) * 1000
        return {
            "seconds": self.seconds,
            "sentences_per_second": self.sentences / self.seconds if self.seconds else 0.0,
            "characters_per_second": self.characters / self.seconds if self.seconds else 0.0,
            "batches": len(self.batch_seconds),
            "batch_latency_ms_p50": float(np.percentile(batches, 50)),
            "batch_latency_ms_p95": float(np.percentile(batches, 95)),
            "warmup_seconds": self.warmup_seconds,
            "peak_rss_mb": self.peak_rss_mb,
        }


def run_system(
    system: System,
    texts: list[str],
    batch_size: int = 32,
    threshold: float | None = None,
    progress: bool = False,
    desc: str | None = None,
    warmup: bool = True,
) -> tuple[list[Result], Timing]:
    """Call `system.correct_batch` on consecutive batches, timing each one.

    With `warmup`, one untimed call on the first text comes first, so that lazy one-off set-up
    (tables loaded on first use, kernel selection) does not count as the first batch's latency.
    """
    results: list[Result] = []
    timing = Timing(sentences=len(texts), characters=sum(len(t) for t in texts))
    if warmup and texts:
        began = time.perf_counter()
        system.correct_batch(texts[:1], batch_size=batch_size, threshold=threshold)
        timing.warmup_seconds = time.perf_counter() - began
    bar = tqdm(total=len(texts), desc=desc, unit="sent", disable=not progress, file=sys.stderr, leave=False)
    with bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            began = time.perf_counter()
            batch_results = system.correct_batch(batch, batch_size=batch_size, threshold=threshold)
            timing.batch_seconds.append(time.perf_counter() - began)
            if len(batch_results) != len(batch):
                raise RuntimeError(f"system returned {len(batch_results)} results for {len(batch)} texts")
            results.extend(batch_results)
            bar.update(len(batch))
    timing.seconds = sum(timing.batch_seconds)
    timing.peak_rss_mb = peak_rss_mb()
    return results, timing


def apply_edits(source: str, edits: list[Edit], threshold: float | None = None,
                idiom_factor: float | None = None) -> tuple[str, list[str]]:
    """`source` with the edits whose confidence is >= `threshold` applied (all edits when None);
    with `idiom_factor` (`Scorer.idiom_threshold_factor`) also those that complete an idiom from
    `idiom_factor` x `threshold` on, as the corrector accepts them (resources/idioms.py).

    Returns the text and a message for every edit that could not be applied (outside the text,
    not matching the source character, or not a single character).
    """
    chars = list(source)
    problems = []
    for edit in edits:
        if threshold is not None and not passes_threshold(
                source, edit, threshold, None if idiom_factor is None else threshold * idiom_factor):
            continue
        if (
            not 0 <= edit.position < len(chars)
            or source[edit.position] != edit.source
            or len(edit.target) != 1
        ):
            problems.append(f"invalid edit {edit.position}:{edit.source}->{edit.target}")
            continue
        chars[edit.position] = edit.target
    return "".join(chars), problems


def prediction_of(source: str, result: Result, threshold: float | None = None,
                  idiom_factor: float | None = None) -> tuple[str, list[str]]:
    """The prediction to score: the system's own target, or its edits re-filtered at `threshold`
    (`apply_edits`).

    Without a threshold the system's `target` is taken as is (what a user gets), unless its length
    differs from the source, in which case the edits are applied instead and that is reported.
    """
    if threshold is None:
        if len(result.target) == len(source):
            return result.target, []
        prediction, problems = apply_edits(source, result.edits)
        return prediction, [
            f"target length {len(result.target)} != source length {len(source)}; used edits"
        ] + problems
    return apply_edits(source, result.edits, threshold, idiom_factor)


@dataclass
class Outcome:
    """One example as scored: its prediction and judgement (None when the pair is not scored)."""

    example: Example
    result: Result
    prediction: str
    judgement: Judgement | None
    problems: list[str] = field(default_factory=list)


def score_results(
    examples: list[Example],
    results: list[Result],
    threshold: float | None = None,
    ignore_de: bool = False,
    idiom_factor: float | None = None,
) -> tuple[list[Outcome], Scores]:
    """Judge every same-length example's prediction (`prediction_of`) and aggregate the scores."""
    if len(examples) != len(results):
        raise ValueError(f"{len(examples)} examples but {len(results)} results")
    outcomes = []
    for example, result in zip(examples, results, strict=True):
        prediction, problems = prediction_of(example.source, result, threshold, idiom_factor)
        if ignore_de and len(prediction) == len(example.source):
            prediction = drop_de_edits(example.source, prediction)
        judgement = None
        if example.same_length and len(prediction) == len(example.source):
            judgement = judge(example.source, example.target, prediction)
        outcomes.append(Outcome(example, result, prediction, judgement, problems))
    scored = [o for o in outcomes if o.judgement is not None]
    scores = score_judgements((o.judgement for o in scored), sum(len(o.example.source) for o in scored))
    return outcomes, scores
