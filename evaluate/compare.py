"""python -m evaluate.compare A.jsonl B.jsonl — is system B better than system A on the same sentences?

Reads two `python -m evaluate --predictions` files (e.g. the shipped model and a candidate, each
run on the same data sets), pairs their sentences by data set and id, and reports per data set
(and pooled over all of them) both sentence correction F1s, the difference B − A with its paired
bootstrap interval and the share of resamples in which B is better (significance.py).

  python -m evaluate dev.tsv --model data/model --predictions a.jsonl
  python -m evaluate dev.tsv --model runs/candidate --predictions b.jsonl
  python -m evaluate.compare a.jsonl b.jsonl --bootstrap 2000

A file holding several systems needs `--system-a` / `--system-b`. A line that is not a JSON
object is reported with its line number and skipped; sentences found in only one file, or whose
source or target differ between the files, are counted and left out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from corrector.evaluation.metrics import Judgement, judge

from .report import plain_table
from .significance import DEFAULT_LEVEL, DEFAULT_SAMPLES, paired_difference

POOLED = "pooled"


def read_predictions(path: Path, system: str | None, problems: list[str]) -> tuple[str, dict[tuple, dict]]:
    """{(data set, id): row} of one system's scored rows; which system was read."""
    by_system: dict[str, dict[tuple, dict]] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
                key = (str(row["dataset"]), str(row.get("id") or row["line"]))
                name = str(row["system"])
                fields = (row["source"], row["target"], row["prediction"])
                if not all(isinstance(f, str) for f in fields):
                    raise ValueError("source, target and prediction must be strings")
            except (ValueError, KeyError) as err:
                problems.append(f"{path}:{number}: skipped: {type(err).__name__}: {err}")
                continue
            if row.get("category") is not None:  # None: excluded from scoring by the evaluator
                by_system.setdefault(name, {})[key] = row
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.bootstrap < 1:
        build_parser().error("--bootstrap must be >= 1")
    problems: list[str] = []
    try:
        name_a, rows_a = read_predictions(args.a, args.system_a, problems)
        name_b, rows_b = read_predictions(args.b, args.system_b, problems)
    except (OSError, ValueError) as err:
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
    label_a, label_b = f"A ({args.a.name}: {name_a})", f"B ({args.b.name}: {name_b})"
    header = ["data set", "sentences", "A cor F1", "B cor F1", "B - A", f"{DEFAULT_LEVEL:.0%} interval", "share B better"]
    rows = [[name, str(len(pairs[name][0])), f"{100 * d.f1_a:.1f}", f"{100 * d.f1_b:.1f}", f"{100 * d.difference:+.1f}",
             f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]", f"{d.share_better:.3f}"] for name, d in results.items()]
    print(f"{label_a} vs {label_b}; sentence correction F1 (%), paired bootstrap of {args.bootstrap} resamples")
    print(plain_table(header, rows))
    if args.json:
        document = {"a": {"file": str(args.a), "system": name_a}, "b": {"file": str(args.b), "system": name_b},
                    "datasets": {name: d.to_dict() for name, d in results.items()}, "problems": problems}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
