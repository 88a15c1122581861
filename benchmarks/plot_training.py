"""Plot training curves from the trainers' metrics.jsonl files (one panel per metric).

    python benchmarks/plot_training.py runs/pretrain-stage1 runs/pretrain --output docs/pretraining.png \
        --metrics mlm_loss disc_loss gen_acc
    python benchmarks/plot_training.py runs/finetune --output docs/finetuning.png \
        --metrics gen_loss disc_loss det_precision det_recall
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(run: Path, last_step: int | None) -> list[dict]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in records if last_step is None or r["step"] <= last_step]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories (with metrics.jsonl), plotted one after another")
    parser.add_argument("--metrics", nargs="+", default=["mlm_loss", "disc_loss", "gen_acc"])
    parser.add_argument("--last-steps", nargs="*", type=int, default=[],
                        help="per run: ignore records after this step (e.g. where a run was stopped)")
    parser.add_argument("--output", required=True, help="PNG file")
    args = parser.parse_args(argv)

    figure, axes = plt.subplots(1, len(args.metrics), figsize=(4 * len(args.metrics), 3.2))
    axes = [axes] if len(args.metrics) == 1 else list(axes)
    offset = 0
    for index, run in enumerate(map(Path, args.runs)):
        last = args.last_steps[index] if index < len(args.last_steps) else None
        records = read_metrics(run, last)
        steps = [offset + r["step"] for r in records]
        for axis, metric in zip(axes, args.metrics, strict=True):
            axis.plot(steps, [r.get(metric, float("nan")) for r in records], label=run.name)
        offset = steps[-1] if steps else offset
    for axis, metric in zip(axes, args.metrics, strict=True):
        axis.set_title(metric)
        axis.set_xlabel("optimizer step (batch 32 × 128)" if "mlm_loss" in args.metrics else "optimizer step")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.output, dpi=80)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
