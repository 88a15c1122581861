"""Batch evaluation of spelling correctors: `python -m evaluate DATASET…`, or from Python:
(metrics, runs and sweeps live in `corrector.evaluation`, which calibration shares; re-exported here)

    from corrector.datasets import read_dataset
    from evaluate import evaluate_dataset, calibrate, best_threshold, IdentitySystem

    dataset = read_dataset("csc/sighan/test2015.tsv")
    run = evaluate_dataset(IdentitySystem(), dataset, system_name="identity")
    run.metrics()["sentence"]["correction"]["f1"]

    sweep = calibrate(corrector, {"test2015": dataset.examples})   # one run at threshold 0
    sweep.best.threshold                                            # the F1-best threshold

Metric definitions with worked examples: docs/evaluate.md.
"""

from corrector.evaluation.metrics import (
    PRF,
    Judgement,
    Scores,
    drop_de_edits,
    judge,
    metric_value,
    score,
    score_judgements,
)
from corrector.evaluation.runs import Outcome, System, Timing, apply_edits, run_system, score_results
from corrector.evaluation.sweep import (
    SweepPoint,
    SweepResult,
    best_point,
    best_threshold,
    calibrate,
    default_thresholds,
    read_calibration,
    sweep,
    sweep_datasets,
    write_calibration,
)

from .plots import plot_sweep
from .runner import DatasetRun, evaluate_dataset
from .systems import FunctionSystem, IdentitySystem, NamedSystem, build_systems

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
