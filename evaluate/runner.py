"""Run a system over a data set, time it, and score what it returns.

The system sees every example (length-mismatched gold pairs included, so their predictions are
still written out); only same-length pairs are scored, because every metric compares positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from corrector.datasets import Dataset
from corrector.evaluation.metrics import Scores
from corrector.evaluation.runs import Outcome, Timing, run_system, score_results

from .systems import System


@dataclass
class DatasetRun:
    """One system on one data set."""

    system: str
    dataset: Dataset
    outcomes: list[Outcome]
    scores: Scores
    timing: Timing

    @property
    def invalid_predictions(self) -> int:
        return sum(1 for o in self.outcomes if o.problems)

    def metrics(self) -> dict:
        """The METRICS object of the JSON output (see docs/evaluate.md)."""
        excluded = self.dataset.length_mismatches
        return {
            "path": self.dataset.path,
            "format": self.dataset.format,
            "sentences_read": len(self.dataset),
            **self.scores.to_dict(),
            **self.timing.to_dict(),
            "excluded_length_mismatch": len(excluded),
            "invalid_predictions": self.invalid_predictions,
            "problems": self.dataset.problem_summary(),
        }


def evaluate_dataset(
    system: System,
    dataset: Dataset,
    system_name: str = "system",
    batch_size: int = 32,
    threshold: float | None = None,
    ignore_de: bool = False,
    progress: bool = False,
) -> DatasetRun:
    """Run `system` on every example of `dataset` (threshold passed to the system) and score it."""
    texts = [e.source for e in dataset.examples]
    results, timing = run_system(
        system,
        texts,
        batch_size=batch_size,
        threshold=threshold,
        progress=progress,
        desc=f"{system_name} · {dataset.name}",
    )
    outcomes, scores = score_results(dataset.examples, results, ignore_de=ignore_de)
    return DatasetRun(system_name, dataset, outcomes, scores, timing)
