"""`--ceiling`: per data set, where the corrector loses its errors before the threshold — flagged
share, coverage and ceiling over the gold edited positions (`corrector.evaluation.ceiling`), next
to the recall at its operating point. Only a system that exposes its scored candidates
(`score_candidates`: the corrector) has them; the others are skipped with a note."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from corrector.datasets import Dataset
from corrector.evaluation.ceiling import CeilingReport, candidate_ceiling, mean_shares

from .report import markdown_table
from .runner import DatasetRun
from .systems import NamedSystem

SKIP_NOTE = "no candidate ceiling: the system does not expose its scored candidates (only `corrector` does)"
TITLE = ("Candidate ceiling (%, character level, over the gold edited positions; first pass's candidates; "
         "'mean' unweighted over the data sets with errors)")
# (header, CeilingReport property) of the share columns, in the order a position is lost.
COLUMNS = (("flagged", "flagged_share"), ("coverage", "coverage"), ("ceiling", "ceiling"),
           ("char cor R", "recall"))

Reports = dict[str, dict[str, CeilingReport]]  # system -> data set -> report


def run_ceilings(systems: Sequence[NamedSystem], datasets: Sequence[Dataset], runs: dict[str, dict[str, DatasetRun]],
                 batch_size: int, errors: list[str], say: Callable[[str], None]) -> tuple[Reports, dict[str, str]]:
    """The reports of every system that has candidates, on every data set it ran (its run's
    predictions give the recall), and {system: why not} for the others. A failure is reported in
    `errors` and the rest still run."""
    reports: Reports = {}
    skipped: dict[str, str] = {}
    for system in systems:
        if not callable(getattr(system.system, "score_candidates", None)):
            skipped[system.name] = SKIP_NOTE
            say(f"note: {system.name}: {SKIP_NOTE}")
            continue
        reports[system.name] = {}
        for dataset in datasets:
            run = runs.get(system.name, {}).get(dataset.name)
            if run is None:
                continue  # the run failed: already reported
            try:
                reports[system.name][dataset.name] = candidate_ceiling(
                    system.system, [(e.source, e.target) for e in dataset.examples], batch_size=batch_size,
                    predictions=[o.prediction for o in run.outcomes])
            except Exception as err:  # noqa: BLE001 - report it, keep measuring the rest
                errors.append(f"ceiling of {system.name} on {dataset.name}: {type(err).__name__}: {err}")
                say(f"error: ceiling of {system.name} on {dataset.name} failed: {type(err).__name__}: {err}")
    return reports, skipped


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def ceiling_rows(reports: Reports) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one per (data set, system), then each system's mean when there are several
    data sets."""
    header = ["data set", "system", "errors", *(h for h, _ in COLUMNS), "corrected later"]
    rows = []
    for system, by_dataset in reports.items():
        for name, report in by_dataset.items():
            rows.append([name, system, str(report.errors), *(_pct(getattr(report, key)) for _, key in COLUMNS),
                         "–" if report.corrected_later is None else str(report.corrected_later)])
        if len(by_dataset) > 1:
            means = mean_shares(list(by_dataset.values()))
            rows.append(["mean", system, "", *(_pct(means[key]) for _, key in COLUMNS), ""])
    return header, rows


def ceiling_document(reports: Reports, skipped: dict[str, str]) -> dict:
    """The `ceiling` object of the --json output."""
    return {
        "systems": {system: {"datasets": {name: r.to_dict() for name, r in by_dataset.items()},
                             "mean": mean_shares(list(by_dataset.values()))}
                    for system, by_dataset in reports.items()},
        "skipped": skipped,
    }


def ceiling_markdown(reports: Reports, skipped: dict[str, str]) -> list[str]:
    """The lines of the --report section."""
    out = ["## Candidate ceiling", "", TITLE + "; definitions in docs/evaluate.md.", ""]
    if any(reports.values()):
        out += [markdown_table(*ceiling_rows(reports)), ""]
    out += [f"- {system}: {note}" for system, note in skipped.items()]
    return out + ([""] if skipped else [])
