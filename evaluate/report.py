"""Human-readable output: printed tables, the markdown report, and per-sentence prediction rows."""

from __future__ import annotations

from collections.abc import Sequence

from corrector.evaluation.metrics import CATEGORIES
from corrector.evaluation.runs import Outcome

from .runner import DatasetRun

# (label, dotted key of a precision/recall/F1 block) in the order the tables show them.
PRF_ROWS = (
    ("sentence detection, standard", "sentence.detection"),
    ("sentence correction, standard", "sentence.correction"),
    ("sentence detection, lenient", "lenient.detection"),
    ("sentence correction, lenient", "lenient.correction"),
    ("char detection", "char.detection"),
    ("char correction", "char.correction"),
)
# (label, key, format) of single-number rows; fractions are shown as percentages.
SCALAR_ROWS = (
    ("FPR (error-free sentences changed)", "fpr", "pct"),
    ("sentences/s", "sentences_per_second", "rate"),
    ("characters/s", "characters_per_second", "rate"),
    ("batch latency p50 (ms)", "batch_latency_ms_p50", "ms"),
    ("batch latency p95 (ms)", "batch_latency_ms_p95", "ms"),
    ("peak RSS (MB)", "peak_rss_mb", "num"),
)
# Columns of the summary: (header, key, format).
SUMMARY_COLUMNS = (
    ("sent det F1", "sentence.detection.f1", "pct"),
    ("sent cor P", "sentence.correction.precision", "pct"),
    ("sent cor R", "sentence.correction.recall", "pct"),
    ("sent cor F1", "sentence.correction.f1", "pct"),
    ("lenient cor F1", "lenient.correction.f1", "pct"),
    ("char cor F1", "char.correction.f1", "pct"),
    ("FPR", "fpr", "pct"),
    ("sent/s", "sentences_per_second", "rate"),
)


def _get(metrics: dict, path: str) -> float:
    value = metrics
    for key in path.split("."):
        value = value[key]
    return value


def _fmt(value: float, kind: str) -> str:
    if kind == "pct":
        return f"{100 * value:.1f}"
    if kind == "rate":
        return f"{value:,.1f}"
    return f"{value:.1f}"


def dataset_heading(run: DatasetRun) -> str:
    m = run.metrics()
    parts = [
        f"{m['sentences']} sentences scored ({m['error_sentences']} with errors, "
        f"{m['error_free_sentences']} error-free)"
    ]
    if m["excluded_length_mismatch"]:
        parts.append(f"{m['excluded_length_mismatch']} length-mismatched pairs not scored")
    return f"{run.dataset.name} [{run.dataset.format}] — " + "; ".join(parts)


def _table_rows(runs: Sequence[DatasetRun]) -> tuple[list[str], list[list[str]]]:
    """Header cells and body rows of one data set's table: one column group per system."""
    metrics = [run.metrics() for run in runs]
    header = ["metric (%)"] + [f"{run.system} P / R / F1" for run in runs]
    rows = []
    for label, key in PRF_ROWS:
        cells = [
            " / ".join(_fmt(_get(m, f"{key}.{part}"), "pct") for part in ("precision", "recall", "f1"))
            for m in metrics
        ]
        rows.append([label, *cells])
    for label, key, kind in SCALAR_ROWS:
        rows.append([label, *(_fmt(_get(m, key), kind) for m in metrics)])
    return header, rows


def plain_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def format_dataset_table(runs: Sequence[DatasetRun]) -> str:
    """The printed table of one data set, systems side by side."""
    header, rows = _table_rows(runs)
    return dataset_heading(runs[0]) + "\n" + plain_table(header, rows)


def _summary_rows(runs_by_dataset: dict[str, list[DatasetRun]]) -> tuple[list[str], list[list[str]]]:
    header = ["data set", "system", *(h for h, _, _ in SUMMARY_COLUMNS)]
    rows = []
    by_system: dict[str, list[dict]] = {}
    for name, runs in runs_by_dataset.items():
        for run in runs:
            m = run.metrics()
            by_system.setdefault(run.system, []).append(m)
            rows.append([name, run.system, *(_fmt(_get(m, key), kind) for _, key, kind in SUMMARY_COLUMNS)])
    if len(runs_by_dataset) > 1:
        for system, metrics in by_system.items():
            # Error-free data sets (clean text) have no F1 to average: they count in the FPR only.
            with_errors = [m for m in metrics if m.get("error_sentences", 1)] or metrics
            pools = [metrics if key in ("fpr", "sentences_per_second") else with_errors for _, key, _ in SUMMARY_COLUMNS]
            means = [sum(_get(m, key) for m in pool) / len(pool)
                     for pool, (_, key, _) in zip(pools, SUMMARY_COLUMNS, strict=True)]
            rows.append(
                [
                    "mean",
                    system,
                    *(_fmt(v, kind) for v, (_, _, kind) in zip(means, SUMMARY_COLUMNS, strict=True)),
                ]
            )
    return header, rows


def format_summary(runs_by_dataset: dict[str, list[DatasetRun]]) -> str:
    header, rows = _summary_rows(runs_by_dataset)
    return ("Summary (%; 'mean' is the unweighted mean over the data sets with errors — the macro average — "
            "and, for FPR, over all)\n" + plain_table(header, rows))


def markdown_report(
    runs_by_dataset: dict[str, list[DatasetRun]],
    settings: dict,
    errors: Sequence[str] = (),
    models: dict[str, dict | None] | None = None,
    sweeps: Sequence[dict] = (),
) -> str:
    """The `--report` file: settings, summary, one table per data set, problems, sweeps."""
    out = ["# Evaluation report", ""]
    out.append("Metric definitions: see docs/evaluate.md. Fractions are shown as percentages.")
    out.append("")
    out += [f"- **{key}**: `{value}`" for key, value in settings.items()]
    for system, model in (models or {}).items():
        if model:
            out.append(f"- **model of {system}**: `{model['path']}` ({model['size_mb']} MB on disk)")
    out.append("")
    if errors:
        out += ["## Errors", ""] + [f"- {e}" for e in errors] + [""]
    if runs_by_dataset:
        header, rows = _summary_rows(runs_by_dataset)
        out += ["## Summary", "", markdown_table(header, rows), ""]
    for name, runs in runs_by_dataset.items():
        header, rows = _table_rows(runs)
        out += [f"## {name}", "", dataset_heading(runs[0]), "", markdown_table(header, rows), ""]
        out += ["Sentences per category (definitions in docs/evaluate.md):", ""]
        category_rows = [[c, *(str(run.scores.categories[c]) for run in runs)] for c in CATEGORIES]
        out += [markdown_table(["category", *(run.system for run in runs)], category_rows), ""]
        problems = runs[0].dataset.describe_problems()
        if problems:
            out += ["Data problems: " + "; ".join(problems), ""]
    for sweep in sweeps:
        out += [f"## Threshold sweep: {sweep['system']}", ""]
        best = sweep["best"]
        out.append(
            f"Best {sweep['metric']} = {100 * sweep['value']:.1f}% at threshold {sweep['threshold']:.2f} "
            f"(P {100 * best['precision']:.1f}%, R {100 * best['recall']:.1f}%, FPR {100 * best['fpr']:.1f}%), "
            f"pooled over {', '.join(sweep['datasets'])}."
        )
        if sweep.get("plot"):
            out += ["", f"![precision-recall curve]({sweep['plot']})"]
        out.append("")
    return "\n".join(out)


def prediction_row(outcome: Outcome, dataset: str, system: str) -> dict:
    """One `--predictions` JSONL row."""
    example, judgement = outcome.example, outcome.judgement
    edits = []
    for edit in outcome.result.edits:
        entry = edit.to_dict()
        # False when the edit was filtered out (--ignore-de) or could not be applied.
        entry["applied"] = (
            0 <= edit.position < len(outcome.prediction) and outcome.prediction[edit.position] == edit.target
        )
        edits.append(entry)
    row = {
        "dataset": dataset,
        "system": system,
        "id": example.id,
        "line": example.line,
        "source": example.source,
        "target": example.target,
        "prediction": outcome.prediction,
        "category": judgement.category if judgement else None,
        "edits": edits,
    }
    if judgement:
        row["gold_positions"] = sorted(judgement.gold)
        row["predicted_positions"] = sorted(judgement.predicted)
    else:
        row["excluded"] = "length_mismatch" if not example.same_length else "invalid_prediction"
    if outcome.problems:
        row["problems"] = outcome.problems
    return row
