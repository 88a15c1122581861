"""Batch evaluation of spelling correctors: `python -m evaluate DATASET…`, or from Python:

    from corrector.datasets import read_dataset
    from evaluate import evaluate_dataset, calibrate, best_threshold, IdentitySystem

    dataset = read_dataset("csc/sighan/test2015.tsv")
    run = evaluate_dataset(IdentitySystem(), dataset, system_name="identity")
    run.metrics()["sentence"]["correction"]["f1"]

    sweep = calibrate(corrector, {"test2015": dataset.examples})   # one run at threshold 0
    sweep.best.threshold                                            # the F1-best threshold

Metric definitions with worked examples: docs/evaluate.md.
"""

from .metrics import PRF, Judgement, Scores, drop_de_edits, judge, metric_value, score, score_judgements
from .runner import DatasetRun, Outcome, Timing, apply_edits, evaluate_dataset, run_system, score_results
from .sweep import (
    SweepPoint,
    SweepResult,
    best_point,
    best_threshold,
    calibrate,
    default_thresholds,
    plot_sweep,
    read_calibration,
    sweep,
    sweep_datasets,
    write_calibration,
)
from .systems import FunctionSystem, IdentitySystem, NamedSystem, System, build_systems

__all__ = [
    "PRF",
    "DatasetRun",
    "FunctionSystem",
    "IdentitySystem",
    "Judgement",
    "NamedSystem",
    "Outcome",
    "Scores",
    "SweepPoint",
    "SweepResult",
    "System",
    "Timing",
    "apply_edits",
    "best_point",
    "best_threshold",
    "build_systems",
    "calibrate",
    "default_thresholds",
    "drop_de_edits",
    "evaluate_dataset",
    "judge",
    "metric_value",
    "plot_sweep",
    "read_calibration",
    "run_system",
    "score",
    "score_judgements",
    "score_results",
    "sweep",
    "sweep_datasets",
    "write_calibration",
]
