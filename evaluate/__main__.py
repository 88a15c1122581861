"""python -m evaluate DATASET [DATASET…] — score spelling correctors on CSC data sets.

Examples:
  python -m evaluate csc/sighan/test2015.tsv --system identity,corrector --json out.json
  python -m evaluate csc/sighan/original/SIGHAN15_CSC_TestInput.txt --sighan-predictions pred.txt
  python -m evaluate csc/sighan/test2015.tsv --sweep --sweep-plot pr.png --sweep-json calibration.json
  python -m evaluate csc/sighan/test2015.tsv --system classic,corrector --bootstrap 1000
  python -m evaluate.compare a.jsonl b.jsonl        # two --predictions files: is b better than a?

Relative data set paths that do not exist here are looked up under $CSC_SHARED_DATA (default
../shared/data). Metric definitions: docs/evaluate.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from corrector.datasets import (
    FORMATS,
    Dataset,
    DatasetError,
    dataset_files,
    displayable,
    read_dataset,
    write_sighan_truth,
)
from corrector.evaluation.metrics import score_judgements
from corrector.evaluation.sweep import DEFAULT_METRIC, SweepPoint, SweepResult, calibrate, default_thresholds
from corrector.outputs import atomic_output
from corrector.runtime import RUNTIMES

from .ceiling import TITLE as CEILING_TITLE
from .ceiling import Reports, ceiling_document, ceiling_markdown, ceiling_rows, run_ceilings
from .files import OutputPlan, check_outputs, plan_outputs
from .files import per_item_path as per_item_path  # where it lived before: imported from here too
from .plots import plot_sweep
from .report import format_dataset_table, format_summary, markdown_report, plain_table, prediction_row
from .runner import DatasetRun, evaluate_dataset
from .significance import DEFAULT_LEVEL, bootstrap_interval, paired_difference
from .systems import DEFAULT_SYSTEM, NamedSystem, build_systems, parse_system_names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "datasets",
        nargs="+",
        metavar="DATASET",
        help="data set file (TSV, JSON/JSONL, SIGHAN input) or INPUT:TRUTH for a SIGHAN pair",
    )
    parser.add_argument(
        "--format", choices=FORMATS, help="force the format of every data set (default: detect)"
    )
    parser.add_argument(
        "--system",
        default=DEFAULT_SYSTEM,
        help="system(s) to run, comma-separated: identity, classic, corrector, generator (default: corrector)",
    )
    parser.add_argument("--model", help="model directory or hub id (default: $CORRECTOR_MODEL or data/model)")
    parser.add_argument(
        "--device", default="cpu", help="torch device for model-backed systems (default: cpu)"
    )
    parser.add_argument(
        "--quantize", action=argparse.BooleanOptionalAction, default=None,
        help="the corrector's int8 networks (default: on for CPU); --no-quantize for fp32",
    )
    parser.add_argument(
        "--passes", type=int, choices=(1, 2, 3), default=None,
        help="the corrector's correction passes (default 3: the sentences with edits are corrected again, twice at most)",
    )
    parser.add_argument(
        "--runtime", choices=RUNTIMES, default="auto",
        help="what runs the corrector's int8 encoders (default auto: onnxruntime where installed)",
    )
    parser.add_argument(
        "--threshold", type=float, help="minimum edit confidence, passed to the system (default: its own)"
    )
    parser.add_argument(
        "--ignore-de", action="store_true", help="drop predicted 的/地/得 edits before scoring"
    )
    parser.add_argument("--limit", type=int, help="evaluate only the first N pairs of each data set")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="sentences per correct_batch call (default: 32)"
    )
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write every number as JSON")
    parser.add_argument("--report", type=Path, metavar="OUT.md", help="write a markdown report")
    parser.add_argument(
        "--predictions", type=Path, metavar="OUT.jsonl", help="write one JSON line per sentence"
    )
    parser.add_argument(
        "--sighan-predictions",
        type=Path,
        metavar="OUT.txt",
        help="write predictions in the SIGHAN truth format ('ID, pos, char, …' / 'ID, 0') for the official tool",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also run each system once at threshold 0 and sweep the threshold over its edit confidences",
    )
    parser.add_argument(
        "--sweep-plot",
        type=Path,
        default=Path("sweep.png"),
        metavar="OUT.png",
        help="precision-recall curve of the sweep (default: sweep.png)",
    )
    parser.add_argument(
        "--sweep-json",
        type=Path,
        metavar="OUT.json",
        help="write the sweep's best threshold as a calibration file the corrector can load",
    )
    parser.add_argument(
        "--sweep-steps", type=int, default=101, help="thresholds 0..1 in the sweep (default: 101)"
    )
    parser.add_argument(
        "--sweep-metric", default=DEFAULT_METRIC, help=f"what the sweep maximises (default: {DEFAULT_METRIC})"
    )
    parser.add_argument(
        "--bootstrap", type=int, default=0, metavar="N",
        help="N resamples of sentences: 95%% interval of each sentence correction F1, and each system's "
             "paired difference from the first system (default: off)",
    )
    parser.add_argument(
        "--ceiling", action="store_true",
        help="also measure, per data set, the share of gold edited positions the corrector flags, the share whose "
             "gold character it proposes (coverage) and ranks first (ceiling), beside its recall (docs/evaluate.md)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def bootstrap_section(by_dataset: dict[str, list[DatasetRun]], samples: int) -> tuple[str, dict]:
    """Printed table and JSON of the bootstrap intervals (significance.py)."""
    lines = [f"Bootstrap ({samples} resamples of sentences, {DEFAULT_LEVEL:.0%} intervals): sentence correction F1 (%)"]
    header = ["data set", "system", "cor F1", "interval", "paired vs first system", "share better"]
    rows, document = [], {"samples": samples, "level": DEFAULT_LEVEL, "intervals": {}, "differences": {}}
    for name, runs in by_dataset.items():
        judged = [[o.judgement for o in run.outcomes if o.judgement is not None] for run in runs]
        for k, (run, judgements) in enumerate(zip(runs, judged, strict=True)):
            interval = bootstrap_interval(judgements, samples)
            document["intervals"].setdefault(run.system, {})[name] = interval.to_dict()
            paired, better = "", ""
            if k:
                diff = paired_difference(judged[0], judgements, samples)
                document["differences"].setdefault(f"{run.system} - {runs[0].system}", {})[name] = diff.to_dict()
                paired = f"{100 * diff.difference:+.1f} [{100 * diff.low:+.1f}, {100 * diff.high:+.1f}]"
                better = f"{diff.share_better:.3f}"
            rows.append([name, run.system, f"{100 * interval.f1:.1f}",
                         f"[{100 * interval.low:.1f}, {100 * interval.high:.1f}]", paired, better])
    return "\n".join(lines) + "\n" + plain_table(header, rows), document


def unique_names(datasets: list[Dataset]) -> None:
    """Give data sets with the same file stem distinct names ('fixed/test2015' next to 'test2015')."""
    seen: set[str] = set()
    for dataset in datasets:
        if dataset.name in seen:
            parent = displayable(Path(dataset.path.split(":")[0]).parent.name)
            candidate = f"{parent}/{dataset.name}" if parent else dataset.name
            number = 2
            while candidate in seen:
                candidate, number = f"{dataset.name}#{number}", number + 1
            dataset.name = candidate
        seen.add(dataset.name)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_all(specs: list[str], format: str | None, limit: int | None, errors: list[str]) -> list[Dataset]:
    datasets = []
    for spec in specs:
        try:
            dataset = read_dataset(spec, format=format, limit=limit)
        except DatasetError as err:
            errors.append(f"data set {err}")
            say(f"error: cannot read data set {err}")
            continue
        for line in dataset.describe_problems():
            say(f"warning: {dataset.name}: {line}")
        if not dataset.examples:
            errors.append(f"data set {spec}: no usable pairs")
            say(f"error: data set {spec} has no usable pairs")
            continue
        datasets.append(dataset)
    unique_names(datasets)
    return datasets


def system_output(system: NamedSystem, runs: dict[str, DatasetRun]) -> dict:
    return {
        "system": system.name,
        "model": system.describe_model(),
        "datasets": {name: run.metrics() for name, run in runs.items()},
    }


def run_all(systems: list[NamedSystem], datasets: list[Dataset], args: argparse.Namespace,
            errors: list[str]) -> dict[str, dict[str, DatasetRun]]:
    """runs[system][dataset]; a system that fails on a data set is reported in `errors` and the
    rest still run."""
    runs: dict[str, dict[str, DatasetRun]] = {s.name: {} for s in systems}
    for system in systems:
        for dataset in datasets:
            try:
                runs[system.name][dataset.name] = evaluate_dataset(
                    system.system,
                    dataset,
                    system_name=system.name,
                    batch_size=args.batch_size,
                    threshold=args.threshold,
                    ignore_de=args.ignore_de,
                    progress=not args.no_progress,
                )
            except Exception as err:  # noqa: BLE001 - report it, keep evaluating the rest
                errors.append(f"system {system.name} on {dataset.name}: {type(err).__name__}: {err}")
                say(f"error: {system.name} failed on {dataset.name}: {type(err).__name__}: {err}")
    return runs


def write_sweep_json(path: Path, result: SweepResult) -> None:
    """write_calibration's file (read_calibration reads it), written through atomic_output so
    that a failed write leaves an earlier calibration intact."""
    with atomic_output(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")


def run_sweeps(systems: list[NamedSystem], datasets: list[Dataset], args: argparse.Namespace,
               plan: OutputPlan, errors: list[str]) -> dict[str, dict]:
    """--sweep: each system once at threshold 0, swept; {system: the sweep's summary}."""
    sweeps: dict[str, dict] = {}
    thresholds = default_thresholds(args.sweep_steps)
    for system in systems:
        try:
            result = calibrate(
                system.system,
                {d.name: d.examples for d in datasets},
                system_name=system.name,
                batch_size=args.batch_size,
                thresholds=thresholds,
                metric=args.sweep_metric,
                ignore_de=args.ignore_de,
                model=system.model_path,
                progress=not args.no_progress,
            )
            summary = result.to_dict()
            plot = plot_sweep(result, plan.sweep_plot[system.name])
            summary["plot"] = str(plot.resolve())
            if system.name in plan.sweep_json:
                write_sweep_json(plan.sweep_json[system.name], result)
            sweeps[system.name] = summary
        except Exception as err:  # noqa: BLE001
            errors.append(f"sweep of {system.name}: {type(err).__name__}: {err}")
            say(f"error: sweep of {system.name} failed: {type(err).__name__}: {err}")
    return sweeps


def print_tables(systems: list[NamedSystem], datasets: list[Dataset], runs: dict[str, dict[str, DatasetRun]],
                 sweeps: dict[str, dict], bootstrap_samples: int) -> tuple[dict[str, list[DatasetRun]], dict | None]:
    """One table per data set with the systems side by side, then the summary, the bootstrap
    section and the sweeps; returns (the runs by data set, the bootstrap figures or None)."""
    by_dataset: dict[str, list[DatasetRun]] = {}
    for dataset in datasets:
        dataset_runs = [runs[s.name][dataset.name] for s in systems if dataset.name in runs[s.name]]
        if dataset_runs:
            by_dataset[dataset.name] = dataset_runs
            print(format_dataset_table(dataset_runs), end="\n\n")
    if by_dataset:
        print(format_summary(by_dataset))
    bootstrap = None
    if by_dataset and bootstrap_samples:
        table, bootstrap = bootstrap_section(by_dataset, bootstrap_samples)
        print("\n" + table)
    for name, sweep in sweeps.items():
        print(
            f"\nsweep {name}: best {sweep['metric']} = {100 * sweep['value']:.1f}% at threshold "
            f"{sweep['threshold']:.2f} (curve: {sweep['plot']})"
        )
    return by_dataset, bootstrap


# The writers write through atomic_output (a failed write keeps the old file) with
# errors="backslashreplace": a data set path that is not UTF-8 (surrogate escapes) reaches a JSON
# file as a "\\udcff" escape, which is still valid JSON, instead of failing the write.
TEXT = {"encoding": "utf-8", "errors": "backslashreplace"}


def write_json(path: Path, systems: list[NamedSystem], names: list[str], runs: dict[str, dict[str, DatasetRun]],
               settings: dict, errors: list[str], sweeps: dict[str, dict], bootstrap: dict | None,
               ceiling: dict | None = None) -> None:
    outputs = {s.name: system_output(s, runs[s.name]) for s in systems}
    first = next(iter(outputs.values()), {"system": names[0], "model": None, "datasets": {}})
    document = {**first, "systems": outputs, "settings": settings, "errors": errors}
    if sweeps:
        document["sweeps"] = sweeps
    if bootstrap:
        document["bootstrap"] = bootstrap
    if ceiling is not None:
        document["ceiling"] = ceiling
    with atomic_output(path, "w", **TEXT) as handle:
        handle.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def write_report(path: Path, systems: list[NamedSystem], by_dataset: dict[str, list[DatasetRun]], settings: dict,
                 errors: list[str], sweeps: dict[str, dict], ceiling: list[str] = ()) -> None:
    models = {s.name: s.describe_model() for s in systems}
    # Link the curve images relative to the report, so the report folder can be moved.
    linked = [{**sweep, "plot": os.path.relpath(sweep["plot"], path.parent.resolve())} for sweep in sweeps.values()]
    text = "\n".join([markdown_report(by_dataset, settings, errors, models, linked), *ceiling]).rstrip("\n")
    with atomic_output(path, "w", **TEXT) as handle:
        handle.write(text + "\n")


def write_predictions(path: Path, systems: list[NamedSystem], runs: dict[str, dict[str, DatasetRun]]) -> None:
    with atomic_output(path, "w", **TEXT) as handle:
        for system in systems:
            for name, run in runs[system.name].items():
                for outcome in run.outcomes:
                    row = prediction_row(outcome, name, system.name)
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_sighan_predictions(plan: OutputPlan, runs: dict[str, dict[str, DatasetRun]]) -> None:
    for (system_name, name), target in plan.sighan.items():
        run = runs.get(system_name, {}).get(name)
        if run is None:
            continue  # the system could not be built or failed on the data set: already reported
        rows = [
            (o.example.id, o.example.source, o.prediction)
            for o in run.outcomes
            if len(o.prediction) == len(o.example.source)
        ]
        write_sighan_truth(target, rows)
        say(f"wrote {len(rows)} SIGHAN-format predictions to {target}")


def write_outputs(plan: OutputPlan, systems: list[NamedSystem], names: list[str],
                  runs: dict[str, dict[str, DatasetRun]], by_dataset: dict[str, list[DatasetRun]],
                  settings: dict, errors: list[str], sweeps: dict[str, dict], bootstrap: dict | None,
                  ceilings: tuple[Reports, dict[str, str]] | None = None) -> None:
    """Write every planned file; one that fails (a full disk) is reported in `errors` and the
    others are still written. `ceilings`: --ceiling's reports and skipped systems."""
    ceiling = None if ceilings is None else ceiling_document(*ceilings)
    section = [] if ceilings is None else ceiling_markdown(*ceilings)
    writers = []
    if plan.json:
        writers.append(("--json", lambda: write_json(plan.json, systems, names, runs, settings, errors, sweeps,
                                                     bootstrap, ceiling)))
    if plan.report:
        writers.append(("--report", lambda: write_report(plan.report, systems, by_dataset, settings, errors, sweeps,
                                                         section)))
    if plan.predictions:
        writers.append(("--predictions", lambda: write_predictions(plan.predictions, systems, runs)))
    if plan.sighan:
        writers.append(("--sighan-predictions", lambda: write_sighan_predictions(plan, runs)))
    for option, write in writers:
        try:
            write()
        except (OSError, ValueError) as err:
            errors.append(f"{option}: cannot write: {type(err).__name__}: {err}")
            say(f"error: {option}: cannot write: {type(err).__name__}: {err}")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The requested system names; a usage error (exit 2) for values that would only fail later."""
    try:
        names = parse_system_names(args.system)
    except ValueError as err:
        parser.error(str(err))
    if args.batch_size < 1 or (args.limit is not None and args.limit < 0) or args.bootstrap < 0:
        parser.error("--batch-size must be >= 1, --limit and --bootstrap >= 0")
    if args.sweep_steps < 2:
        parser.error("--sweep-steps must be >= 2 (a sweep needs at least the thresholds 0 and 1)")
    try:
        # Looked up in the sweep's score layout now, as the sweep does at its end: the value and
        # the precision/recall/F1 block it belongs to (the curve plots that block).
        point = SweepPoint(0.0, score_judgements([]).to_dict())
        point.value(args.sweep_metric)
        point.curve_entry(args.sweep_metric)
    except KeyError as err:
        parser.error(f"--sweep-metric {args.sweep_metric}: {err.args[0]}; the sweep maximises a precision, "
                     f"recall or F1 such as {DEFAULT_METRIC}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = check_arguments(parser, args)
    errors: list[str] = []

    datasets = read_all(args.datasets, args.format, args.limit, errors)
    # Checked before any system is built or run: refusing costs seconds, a lost data set or an
    # unwritable report found after an hour's run costs the run.
    plan = plan_outputs(args, names, [d.name for d in datasets])
    inputs = [path for spec in args.datasets for path in dataset_files(spec, args.format)]
    refused = check_outputs(plan, inputs)
    if refused:
        for problem in refused:
            say(f"error: {problem}")
        say("nothing was run (exit status 2)")
        return 2
    systems, system_errors = build_systems(names, model=args.model, device=args.device, quantize=args.quantize,
                                           runtime=args.runtime, passes=args.passes)
    for name, message in system_errors.items():
        errors.append(f"system {name}: {message}")
        say(f"error: cannot build system {name}: {message}")

    runs = run_all(systems, datasets, args, errors)
    sweeps = run_sweeps(systems, datasets, args, plan, errors) if args.sweep else {}
    by_dataset, bootstrap = print_tables(systems, datasets, runs, sweeps, args.bootstrap)
    ceilings = run_ceilings(systems, datasets, runs, args.batch_size, errors, say) if args.ceiling else None
    if ceilings is not None and any(ceilings[0].values()):
        print(f"\n{CEILING_TITLE}\n" + plain_table(*ceiling_rows(ceilings[0])))
    settings = {
        "systems": ",".join(names),
        "threshold": args.threshold,
        "ignore_de": args.ignore_de,
        "limit": args.limit,
        "batch_size": args.batch_size,
        "device": args.device,
        "format": args.format,
        "ceiling": args.ceiling,
    }
    write_outputs(plan, systems, names, runs, by_dataset, settings, errors, sweeps, bootstrap, ceilings)

    if errors:
        say(f"{len(errors)} error(s):\n  " + "\n  ".join(errors))
        return 1
    if not by_dataset:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
