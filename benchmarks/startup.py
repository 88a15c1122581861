"""Start-up of the command line: how long `python -m corrector "一句话"` takes, and where it goes.

    python benchmarks/startup.py                     # shipped model, 5 runs
    python benchmarks/startup.py --runs 3 --json out.json

Each run is a fresh interpreter, as a user's shell gives: first the whole CLI call (wall time,
the median of --runs after one unmeasured warm-up run, so the OS's file cache and the user cache
are warm), then the phases in one more fresh interpreter: the pipeline's imports, building the
corrector (weights, ONNX Runtime sessions, jieba's dictionaries) and the first correction; and
whether torch and transformers got imported (a model directory in the shipped layout needs
neither where onnxruntime is installed: runtime/onnx_networks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "少先队员因该为老人让坐。"

PHASES = r"""
import json, sys, time
marks = [("start", time.perf_counter())]
from corrector.pipeline import Corrector
marks.append(("import corrector.pipeline", time.perf_counter()))
corrector = Corrector(sys.argv[1] or None)
marks.append(("build the corrector (model, ONNX Runtime, jieba)", time.perf_counter()))
corrector.correct(sys.argv[2])
marks.append(("first correction", time.perf_counter()))
print(json.dumps({"phases": [(name, round(t - marks[i][1], 3)) for i, (name, t) in enumerate(marks[1:])],
                  "torch_imported": "torch" in sys.modules, "transformers_imported": "transformers" in sys.modules}))
"""


def cli_call(model: str | None, env: dict[str, str]) -> float:
    args = [sys.executable, "-m", "corrector", *(["--model", model] if model else []), SENTENCE]
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"the CLI failed:\n{proc.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="model directory (default: the library default, data/model)")
    p.add_argument("--runs", type=int, default=5, help="measured CLI calls (default 5)")
    p.add_argument("--warmups", type=int, default=1,
                   help="unmeasured CLI calls first, to warm the file cache (default 1; 0 for a smoke test)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    for _ in range(args.warmups):  # file cache, jieba's cache file, .pyc files
        cli_call(args.model, env)
    times = [cli_call(args.model, env) for _ in range(args.runs)]
    phases_out = subprocess.run([sys.executable, "-c", PHASES, args.model or "", SENTENCE], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=600)
    if phases_out.returncode != 0:
        raise SystemExit(f"the phase run failed:\n{phases_out.stderr[-2000:]}")
    measured = json.loads(phases_out.stdout.strip().splitlines()[-1])
    phases = measured["phases"]
    figures = {"cpus": os.cpu_count(), "runs": args.runs, "cli_seconds": [round(t, 2) for t in times],
               "cli_median_s": round(statistics.median(times), 2), "phases_s": dict(phases),
               "torch_imported": measured["torch_imported"], "transformers_imported": measured["transformers_imported"]}
    print(f"python -m corrector '{SENTENCE}': median {figures['cli_median_s']} s over {args.runs} runs "
          f"({', '.join(f'{t:.2f}' for t in times)}), {os.cpu_count()} CPUs")
    for name, seconds in phases:
        print(f"  {name:<58} {seconds:6.2f} s")
    for name in ("torch", "transformers"):
        print(f"  {name} imported: {'yes' if measured[f'{name}_imported'] else 'no'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return figures


if __name__ == "__main__":
    main()
