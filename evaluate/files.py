"""Every file one `python -m evaluate` run writes, planned and checked before the run starts.

A run can take an hour; an output that would overwrite a data set (the same path, a symlink or
hard link to it, either half of an INPUT:TRUTH pair, a file found under $CSC_SHARED_DATA), that
two options would both write, or that cannot be written at all is refused before any system is
built, not discovered at the end (corrector/outputs.py does the checking).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from corrector.outputs import check_writable, output_clashes

from .plots import plot_format_problem, sweep_plot_path


def per_item_path(path: Path, tag: str, several: bool) -> Path:
    """`path` itself for a single output, else `stem-TAG.suffix` beside it."""
    return path.with_name(f"{path.stem}-{tag}{path.suffix}") if several else path


@dataclass
class OutputPlan:
    """The files a run writes; the per-item ones are keyed by system (and data set)."""

    json: Path | None = None
    report: Path | None = None
    predictions: Path | None = None
    sighan: dict[tuple[str, str], Path] = field(default_factory=dict)  # (system, data set) → file
    sweep_plot: dict[str, Path] = field(default_factory=dict)
    sweep_json: dict[str, Path] = field(default_factory=dict)

    def files(self) -> dict[str, Path]:
        """Every planned file by the option (and item) that writes it."""
        files = {option: path for option, path in (("--json", self.json), ("--report", self.report),
                                                   ("--predictions", self.predictions)) if path is not None}
        for option, items in (("--sweep-plot", self.sweep_plot), ("--sweep-json", self.sweep_json)):
            for system, path in items.items():
                files[f"{option} ({system})" if len(items) > 1 else option] = path
        for (system, dataset), path in self.sighan.items():
            label = f" ({dataset}, {system})" if len(self.sighan) > 1 else ""
            files[f"--sighan-predictions{label}"] = path
        return files


def plan_outputs(args: argparse.Namespace, systems: list[str], datasets: list[str]) -> OutputPlan:
    """What the options ask for, given the requested systems and the data sets that were read.

    Per-item names depend on what was asked, not on what later succeeds, so they are known now
    (and a system that fails does not change the name another system's file gets)."""
    plan = OutputPlan(json=args.json, report=args.report, predictions=args.predictions)
    if args.sighan_predictions:
        several = len(systems) * len(datasets) > 1
        for system in systems:
            for dataset in datasets:
                tag = f"{dataset.replace('/', '_')}-{system}"
                plan.sighan[(system, dataset)] = per_item_path(args.sighan_predictions, tag, several)
    if args.sweep:
        several = len(systems) > 1
        for system in systems:
            plan.sweep_plot[system] = sweep_plot_path(per_item_path(args.sweep_plot, system, several))
            if args.sweep_json:
                plan.sweep_json[system] = per_item_path(args.sweep_json, system, several)
    return plan


def check_outputs(plan: OutputPlan, inputs: list[Path]) -> list[str]:
    """Why the planned files cannot be written (one message each); empty when all can be.

    Missing folders are created first, as the writers always did, so that the writability check
    tests the folder the file will really land in."""
    files = plan.files()
    problems = output_clashes(dict(files), inputs)
    if problems:
        return problems  # nothing is created for a run that is refused anyway
    for option, path in files.items():
        if option.startswith("--sweep-plot") and (reason := plot_format_problem(path)):
            problems.append(f"{option} {path}: {reason}")
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            problems.append(f"{option} {path}: cannot create folder {path.parent}: {err.strerror or err}")
            continue
        if reason := check_writable(path):
            problems.append(f"{option} {path}: cannot be written: {reason}")
    return problems
