"""Plots of the evaluator's results (matplotlib, imported when a plot is asked for)."""

from __future__ import annotations

from pathlib import Path

from corrector.evaluation.sweep import SweepResult
from corrector.outputs import atomic_output

DEFAULT_PLOT_FORMAT = "png"


def sweep_plot_path(path: str | Path) -> Path:
    """Where `plot_sweep` writes: `path`, with '.png' appended when it has no extension (what
    matplotlib's savefig does with such a name)."""
    path = Path(path)
    return path if path.suffix else path.with_name(f"{path.name.rstrip('.')}.{DEFAULT_PLOT_FORMAT}")


def plot_format_problem(path: str | Path) -> str | None:
    """Why matplotlib cannot write an image named `path` (an unknown extension), or None; asked
    before a sweep, whose plot is only drawn at its end."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = sweep_plot_path(path).suffix.lstrip(".").lower()
    supported = FigureCanvasBase.get_supported_filetypes()
    if suffix in supported:
        return None
    return f"matplotlib cannot write .{suffix} images (use one of {', '.join(sorted(supported))})"


def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """Precision–recall curves (one per data set and pooled) with the best point marked."""
    import matplotlib

    matplotlib.use("Agg")  # no display; also safe in tests and CI
    import matplotlib.pyplot as plt

    block = result.metric.rsplit(".", 1)[0]
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    for name, points in result.curves.items():
        # Thresholds at which nothing is predicted have no precision (reported as 0): leave them
        # out rather than drawing a drop to the origin.
        points = [p for p in points if p.value(f"{block}.tp") + p.value(f"{block}.fp") > 0]
        recall = [p.value(f"{block}.recall") for p in points]
        precision = [p.value(f"{block}.precision") for p in points]
        style = {"linewidth": 2.4, "color": "black"} if name == "all" else {"linewidth": 1.2, "alpha": 0.8}
        ax.plot(recall, precision, marker=".", markersize=3, label=name, **style)
    best = result.best
    ax.scatter(
        [best.value(f"{block}.recall")],
        [best.value(f"{block}.precision")],
        s=90,
        marker="*",
        color="red",
        zorder=5,
        label=f"best {result.metric} = {best.value(result.metric):.3f} at t = {best.threshold:.2f}",
    )
    ax.set_xlabel(f"{block} recall")
    ax.set_ylabel(f"{block} precision")
    ax.set_xlim(0, 1.0)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"{result.system}: threshold sweep ({block})")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path = sweep_plot_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # Drawn into a temporary file renamed at the end: a failed save keeps an older plot.
        with atomic_output(path, "wb") as handle:
            fig.savefig(handle, dpi=120, format=path.suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return path
