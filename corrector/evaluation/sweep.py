"""Threshold sweep: one run at threshold 0, then edits filtered by confidence per threshold.

Running the system once with threshold 0 keeps every edit it would make at any threshold, each
with its confidence; the prediction at threshold t applies only the edits with confidence >= t.
That equals running the system at t as long as the system's threshold is a plain per-edit
confidence cut-off — or, for a corrector whose scorer accepts idiom completions from a share of
the threshold (`idiom_factor`, `Scorer.idiom_threshold_factor`), as long as the filter applies the
same rule (`resources.idioms.passes_threshold`) — and costs one model pass instead of one per
threshold.

The F1-best threshold (by default on sentence-level correction F1, standard protocol) can be
saved as a small JSON file (`write_calibration`) that the corrector can load as its default
(`read_calibration`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..datasets import Example
from ..result import Result
from .metrics import metric_value
from .runs import System, run_system, score_results

DEFAULT_METRIC = "sentence.correction.f1"
CALIBRATION_VERSION = 1


def default_thresholds(steps: int = 101) -> list[float]:
    """0.00, 0.01, …, 1.00 for the default 101 steps."""
    if steps < 2:
        raise ValueError("a sweep needs at least 2 thresholds")
    return [round(i / (steps - 1), 6) for i in range(steps)]


@dataclass(frozen=True)
class SweepPoint:
    threshold: float
    metrics: dict  # the `Scores.to_dict()` layout at this threshold

    def value(self, path: str) -> float:
        return metric_value(self.metrics, path)

    def curve_entry(self, metric: str = DEFAULT_METRIC) -> dict:
        block = metric.rsplit(".", 1)[0]
        return {
            "threshold": self.threshold,
            "precision": self.value(f"{block}.precision"),
            "recall": self.value(f"{block}.recall"),
            "f1": self.value(f"{block}.f1"),
            "fpr": self.value("fpr"),
        }


def sweep(
    examples: Sequence[Example],
    results: Sequence[Result],
    thresholds: Sequence[float] | None = None,
    ignore_de: bool = False,
    idiom_factor: float | None = None,
) -> list[SweepPoint]:
    """Score the results of one threshold-0 run at every threshold."""
    thresholds = list(thresholds) if thresholds is not None else default_thresholds()
    points = []
    for threshold in sorted(thresholds):
        _, scores = score_results(list(examples), list(results), threshold=threshold, ignore_de=ignore_de,
                                  idiom_factor=idiom_factor)
        points.append(SweepPoint(threshold, scores.to_dict()))
    return points


def best_point(points: Sequence[SweepPoint], metric: str = DEFAULT_METRIC) -> SweepPoint:
    """The point with the highest `metric`.

    Ties are common (no edit has a confidence between two grid thresholds), so among the best
    points we take the longest run of consecutive thresholds and return its middle one: the
    threshold farthest from where the score drops.
    """
    if not points:
        raise ValueError("empty sweep")
    best = max(p.value(metric) for p in points)
    runs: list[list[SweepPoint]] = []
    previous_best = False
    for point in points:
        is_best = abs(point.value(metric) - best) <= 1e-12
        if is_best:
            if previous_best:
                runs[-1].append(point)
            else:
                runs.append([point])
        previous_best = is_best
    longest = max(runs, key=len)  # max keeps the first of equally long runs
    return longest[(len(longest) - 1) // 2]


def best_threshold(points: Sequence[SweepPoint], metric: str = DEFAULT_METRIC) -> float:
    """The F1-best (or `metric`-best) threshold of a sweep."""
    return best_point(points, metric).threshold


@dataclass
class SweepResult:
    system: str
    metric: str
    curves: dict[str, list[SweepPoint]]  # dataset name → points; "all" pools every data set
    model: str | None = None
    info: dict = field(default_factory=dict)

    @property
    def pooled(self) -> list[SweepPoint]:
        return self.curves["all"]

    @property
    def best(self) -> SweepPoint:
        return best_point(self.pooled, self.metric)

    def to_dict(self) -> dict:
        best = self.best
        return {
            "version": CALIBRATION_VERSION,
            "threshold": best.threshold,
            "metric": self.metric,
            "value": best.value(self.metric),
            "best": best.curve_entry(self.metric),
            "system": self.system,
            "model": self.model,
            "datasets": [name for name in self.curves if name != "all"],
            "per_dataset_best": {
                name: best_point(points, self.metric).curve_entry(self.metric)
                for name, points in self.curves.items()
                if name != "all"
            },
            "curve": [p.curve_entry(self.metric) for p in self.pooled],
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **self.info,
        }


def sweep_datasets(
    named_results: dict[str, tuple[Sequence[Example], Sequence[Result]]],
    system: str,
    thresholds: Sequence[float] | None = None,
    metric: str = DEFAULT_METRIC,
    ignore_de: bool = False,
    model: str | None = None,
    idiom_factor: float | None = None,
) -> SweepResult:
    """Sweep each data set's threshold-0 results and all of them pooled (the "all" curve)."""
    curves: dict[str, list[SweepPoint]] = {}
    pooled_examples: list[Example] = []
    pooled_results: list[Result] = []
    for name, (examples, results) in named_results.items():
        curves[name] = sweep(examples, results, thresholds, ignore_de, idiom_factor)
        pooled_examples.extend(examples)
        pooled_results.extend(results)
    curves["all"] = sweep(pooled_examples, pooled_results, thresholds, ignore_de, idiom_factor)
    return SweepResult(system, metric, curves, model=model, info={"ignore_de": ignore_de})


def calibrate(
    system: System,
    datasets: dict[str, Sequence[Example]],
    system_name: str = "corrector",
    batch_size: int = 32,
    thresholds: Sequence[float] | None = None,
    metric: str = DEFAULT_METRIC,
    ignore_de: bool = False,
    model: str | None = None,
    progress: bool = False,
) -> SweepResult:
    """Run `system` once per data set at threshold 0 (one pass: `single_pass`) and sweep, with the
    system's own idiom rule (`idiom_factor_of`); `.best.threshold` is the answer."""
    named_results = {}
    swept = single_pass(system)
    for name, examples in datasets.items():
        results, _ = run_system(
            swept,
            [e.source for e in examples],
            batch_size=batch_size,
            threshold=0.0,
            progress=progress,
            desc=f"{system_name} · {name} · sweep",
        )
        named_results[name] = (examples, results)
    return sweep_datasets(named_results, system_name, thresholds, metric, ignore_de, model, idiom_factor_of(system))


def idiom_factor_of(system) -> float | None:
    """The share of its edit threshold from which `system` (a Corrector) accepts idiom
    completions (`Scorer.idiom_threshold_factor`); None for any other system."""
    return getattr(getattr(system, "scorer", None), "idiom_threshold_factor", None)


def single_pass(system):
    """`system` as one pass runs it: a corrector with a second pass (`CorrectorConfig.passes`)
    is copied with one (`Corrector.with_passes`), since a sweep keeps the edits at or above each
    threshold from one run at threshold 0, which is what one pass does at that threshold, while a
    second pass would start from the first one's output at 0. The system given is not changed."""
    if getattr(getattr(system, "config", None), "passes", 1) == 1:
        return system
    return system.with_passes(1)


def write_calibration(path: str | Path, result: SweepResult) -> Path:
    """Save the sweep's best threshold (and its curve) as JSON; see `read_calibration`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


def read_calibration(path: str | Path) -> float:
    """The calibrated threshold stored by `write_calibration`."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    threshold = data.get("threshold") if isinstance(data, dict) else None
    if not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"{path}: no 'threshold' in [0, 1]")
    return float(threshold)
