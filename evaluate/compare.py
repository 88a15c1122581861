"""python -m evaluate.compare A.jsonl B.jsonl — is system B better than system A on the same sentences?

Reads two `python -m evaluate --predictions` files (e.g. the shipped model and a candidate, each
run on the same data sets), pairs their sentences by data set and id, and reports per data set
(and pooled over all of them) both sentence correction F1s, the difference B − A with its paired
bootstrap interval and the share of resamples in which B is better (significance.py).

  python -m evaluate dev.tsv --model data/model --predictions a.jsonl
  python -m evaluate dev.tsv --model runs/candidate --predictions b.jsonl
  python -m evaluate.compare a.jsonl b.jsonl --bootstrap 2000

A file holding several systems needs `--system-a` / `--system-b`. A line that is not a JSON
object with the row's fields (not UTF-8, invalid or too deeply nested JSON, source, target and
prediction of different lengths) is reported with its line number and skipped; sentences found
in only one file, or whose source or target differ between the files, are counted and left out of
the comparison.

Exit status: 0 compared; 1 nothing to compare (no shared sentence, no rows of the chosen system,
several systems and none chosen); 2 a usage error, a file that cannot be read or holds no
prediction row at all, or a --json output that is an input or cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from corrector.datasets import describe_json_error, displayable, has_lone_surrogate, regular_file_problem
from corrector.evaluation.metrics import Judgement, judge
from corrector.outputs import atomic_output, check_writable, output_clashes

from .report import plain_table
from .significance import DEFAULT_LEVEL, DEFAULT_SAMPLES, paired_difference

POOLED = "pooled"


class PredictionsFileError(Exception):
    """A predictions file that cannot be used at all (missing, unreadable, no row in it)."""


def _check_file(path: Path) -> None:
    """Raise PredictionsFileError unless `path` is a readable regular file (a FIFO or device
    would block or never end)."""
    if problem := regular_file_problem(path):
        raise PredictionsFileError(problem.replace("a data file", "a predictions file"))


def parse_row(raw: bytes) -> tuple[tuple[str, str], str, dict]:
    """((data set, id), system, row) of one predictions line; ValueError says why it is unusable."""
    try:
        text = raw.decode("utf-8")  # strict: a damaged sentence is not compared, nor repaired
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"invalid JSON: {describe_json_error(err)}") from None
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    try:
        key = (str(row["dataset"]), str(row.get("id") or row["line"]))
        name = str(row["system"])
        fields = (row["source"], row["target"], row["prediction"])
    except KeyError as err:
        raise ValueError(f"no field {err}") from None
    if not all(isinstance(f, str) for f in fields):
        raise ValueError("source, target and prediction must be strings")
    if any(has_lone_surrogate(text) for text in (*key, name, *fields)):
        raise ValueError("a lone surrogate escape (such as \\ud800) in a field")
    if row.get("category") is not None and not len(fields[0]) == len(fields[1]) == len(fields[2]):
        # The evaluator scores only same-length rows (category None otherwise): a scored row of
        # different lengths is not its output, and could not be judged.
        raise ValueError("a scored row whose source, target and prediction differ in length")
    return key, name, row


def read_predictions(path: Path, system: str | None, problems: list[str]) -> tuple[str, dict[tuple, dict]]:
    """{(data set, id): row} of one system's scored rows; which system was read.

    Raises PredictionsFileError for a file that cannot be used at all, ValueError when the
    system to read is ambiguous or absent."""
    _check_file(path)
    by_system: dict[str, dict[tuple, dict]] = {}
    rows = skipped = 0
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    key, name, row = parse_row(raw)
                except ValueError as err:
                    skipped += 1
                    problems.append(f"{path}:{number}: skipped: {err}")
                    continue
                rows += 1
                if row.get("category") is not None:  # None: excluded from scoring by the evaluator
                    by_system.setdefault(name, {})[key] = row
    except OSError as err:
        raise PredictionsFileError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not rows:
        raise PredictionsFileError(f"{path}: no prediction row ({skipped} line(s) skipped); "
                                   "expected a `python -m evaluate --predictions` file")
    if system is None:
        if len(by_system) > 1:
            raise ValueError(f"{path} holds several systems ({', '.join(sorted(by_system))}); choose one")
        system = next(iter(by_system), "")
    if system not in by_system:
        raise ValueError(f"{path} has no scored rows of system {system!r}")
    return system, by_system[system]


def paired_judgements(a: dict[tuple, dict], b: dict[tuple, dict], problems: list[str]
                      ) -> dict[str, tuple[list[Judgement], list[Judgement]]]:
    """Per data set, the judgements of the sentences both files scored, in the same order."""
    pairs: dict[str, tuple[list[Judgement], list[Judgement]]] = {}
    only = len(set(a) ^ set(b))
    differ = 0
    for key in sorted(set(a) & set(b)):
        row_a, row_b = a[key], b[key]
        if (row_a["source"], row_a["target"]) != (row_b["source"], row_b["target"]):
            differ += 1
            continue
        judged_a, judged_b = pairs.setdefault(key[0], ([], []))
        judged_a.append(judge(row_a["source"], row_a["target"], row_a["prediction"]))
        judged_b.append(judge(row_b["source"], row_b["target"], row_b["prediction"]))
    if only:
        problems.append(f"{only} sentence(s) in only one of the files: left out")
    if differ:
        problems.append(f"{differ} sentence(s) whose source or target differ between the files: left out")
    return pairs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluate.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path, help="predictions of system A (the baseline)")
    parser.add_argument("b", type=Path, help="predictions of system B (the candidate)")
    parser.add_argument("--system-a", help="system of A's file to read (needed when it holds several)")
    parser.add_argument("--system-b", help="system of B's file to read (needed when it holds several)")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_SAMPLES, metavar="N",
                        help=f"resamples (default {DEFAULT_SAMPLES})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write the comparison as JSON")
    return parser


def check_json_output(path: Path, inputs: list[Path]) -> str | None:
    """Why --json cannot be written (it is one of the inputs, its folder cannot be made, it is
    not writable), or None; asked before the files are read. Its folder is created, as before."""
    clashes = output_clashes({"--json": path}, inputs)
    if clashes:
        return clashes[0]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"--json {path}: cannot create folder {path.parent}: {err.strerror or err}"
    reason = check_writable(path)
    return f"--json {path}: cannot be written: {reason}" if reason else None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.bootstrap < 1:
        build_parser().error("--bootstrap must be >= 1")
    if args.json and (refused := check_json_output(args.json, [args.a, args.b])):
        print(f"error: {refused}", file=sys.stderr)
        return 2
    problems: list[str] = []
    try:
        name_a, rows_a = read_predictions(args.a, args.system_a, problems)
        name_b, rows_b = read_predictions(args.b, args.system_b, problems)
    except PredictionsFileError as err:
        # A binary file skips every "line": a few of them say why, the count says the rest.
        more = [f"… {len(problems) - 5} more skipped line(s)"] if len(problems) > 5 else []
        print("\n".join([*problems[:5], *more, f"error: {err}"]), file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    pairs = paired_judgements(rows_a, rows_b, problems)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not pairs:
        print("error: no sentence is scored in both files", file=sys.stderr)
        return 1
    if len(pairs) > 1:
        pairs[POOLED] = ([j for a, _ in pairs.values() for j in a], [j for _, b in pairs.values() for j in b])
    results = {name: paired_difference(a, b, args.bootstrap, seed=args.seed) for name, (a, b) in pairs.items()}
    # displayable: a file name that is not UTF-8 would fail to print.
    label_a, label_b = f"A ({displayable(args.a.name)}: {name_a})", f"B ({displayable(args.b.name)}: {name_b})"
    header = ["data set", "sentences", "A cor F1", "B cor F1", "B - A", f"{DEFAULT_LEVEL:.0%} interval", "share B better"]
    rows = [[name, str(len(pairs[name][0])), f"{100 * d.f1_a:.1f}", f"{100 * d.f1_b:.1f}", f"{100 * d.difference:+.1f}",
             f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]", f"{d.share_better:.3f}"] for name, d in results.items()]
    print(f"{label_a} vs {label_b}; sentence correction F1 (%), paired bootstrap of {args.bootstrap} resamples")
    print(plain_table(header, rows))
    if args.json:
        document = {"a": {"file": str(args.a), "system": name_a}, "b": {"file": str(args.b), "system": name_b},
                    "datasets": {name: d.to_dict() for name, d in results.items()}, "problems": problems}
        try:
            with atomic_output(args.json, "w", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
        except (OSError, ValueError) as err:
            print(f"error: --json {args.json}: cannot write: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
