"""`python -m evaluate` end to end on fixtures, the evaluation API with fake systems, and shared SIGHAN-15."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import shared_path

from corrector.datasets import read_dataset, read_sighan_truth
from evaluate import FunctionSystem, IdentitySystem, evaluate_dataset, read_calibration
from evaluate.__main__ import main, per_item_path, unique_names

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
PAIRS = FIXTURES / "pairs.tsv"
MINI = FIXTURES / "sighan" / "Mini_TestInput.txt"

PRF_BLOCKS = [(p, t) for p in ("sentence", "lenient", "char") for t in ("detection", "correction")]


def check_metrics(metrics: dict) -> None:
    for protocol, task in PRF_BLOCKS:
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= metrics[protocol][task][key] <= 1.0, (protocol, task, key)
    assert 0.0 <= metrics["fpr"] <= 1.0
    for key in (
        "sentences",
        "sentences_per_second",
        "characters_per_second",
        "batch_latency_ms_p50",
        "batch_latency_ms_p95",
        "peak_rss_mb",
        "categories",
        "problems",
    ):
        assert key in metrics, key


def test_cli_identity_json(tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluate",
            str(PAIRS),
            "--system",
            "identity",
            "--json",
            str(out),
            "--no-progress",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sentence correction, standard" in proc.stdout and "Summary" in proc.stdout
    assert "1 length mismatch (line 7)" in proc.stderr  # data problems are reported, not hidden
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["system"] == "identity" and data["model"] is None and data["errors"] == []
    metrics = data["datasets"]["pairs"]
    check_metrics(metrics)
    assert metrics["sentences"] == 5 and metrics["sentences_read"] == 6
    assert metrics["excluded_length_mismatch"] == 1
    assert metrics["sentence"]["correction"]["recall"] == 0.0 and metrics["fpr"] == 0.0
    assert metrics["problems"]["malformed"] == {"count": 3, "lines": [4, 6, 10]}
    assert data["systems"]["identity"]["datasets"] == data["datasets"]


def test_missing_dataset_is_reported_and_others_still_run(tmp_path, capsys):
    out = tmp_path / "out.json"
    code = main(
        [
            str(tmp_path / "missing.tsv"),
            str(PAIRS),
            "--system",
            "identity",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 1
    assert "missing.tsv" in capsys.readouterr().err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data["datasets"]) == ["pairs"]
    assert any("missing.tsv" in e for e in data["errors"])


def test_unknown_system_is_a_usage_error():
    with pytest.raises(SystemExit) as exit_info:
        main([str(PAIRS), "--system", "identity,nonsense"])
    assert exit_info.value.code == 2


def test_unavailable_model_is_reported(tmp_path, capsys):
    code = main(
        [
            str(PAIRS),
            "--system",
            "identity,corrector",
            "--model",
            str(tmp_path / "no-model"),
            "--json",
            str(tmp_path / "o.json"),
            "--no-progress",
        ]
    )
    assert code == 1
    assert "cannot build system corrector" in capsys.readouterr().err
    data = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    assert list(data["systems"]) == ["identity"]


def test_outputs_predictions_report_and_sighan(tmp_path):
    preds, report, sighan = tmp_path / "p.jsonl", tmp_path / "r.md", tmp_path / "pred.txt"
    code = main(
        [
            f"{MINI}:{MINI.with_name('Mini_TestTruth.txt')}",
            "--system",
            "identity",
            "--predictions",
            str(preds),
            "--report",
            str(report),
            "--sighan-predictions",
            str(sighan),
            "--no-progress",
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in preds.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["T1-0001-1", "T1-0002-1", "T1-0003-1"]
    assert [r["category"] for r in rows] == ["missed", "correct", "missed"]
    assert rows[0]["gold_positions"] == [4, 10] and rows[0]["predicted_positions"] == []
    assert {"source", "target", "prediction", "edits", "category"} <= rows[0].keys()
    text = report.read_text(encoding="utf-8")
    assert "## Mini_TestInput" in text and "sentence correction, lenient" in text
    written, problems = read_sighan_truth(sighan)
    assert not problems and all(entry.corrections == () for entry in written.values())
    assert sighan.read_text(encoding="utf-8").splitlines()[0] == "T1-0001-1, 0"


def test_sweep_writes_plot_and_calibration(tmp_path):
    plot, calibration = tmp_path / "curve.png", tmp_path / "calibration.json"
    code = main(
        [
            str(PAIRS),
            "--system",
            "identity",
            "--sweep",
            "--sweep-plot",
            str(plot),
            "--sweep-json",
            str(calibration),
            "--sweep-steps",
            "11",
            "--no-progress",
            "--json",
            str(tmp_path / "o.json"),
        ]
    )
    assert code == 0
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert 0.0 <= read_calibration(calibration) <= 1.0
    data = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    assert len(data["sweeps"]["identity"]["curve"]) == 11


def test_evaluate_dataset_with_a_fake_system():
    fixes = {"少先队员因该为老人让坐。": "少先队员应该为老人让坐。", "今天天气很好。": "今天天汽很好。"}
    system = FunctionSystem(lambda text: fixes.get(text, text))
    run = evaluate_dataset(system, read_dataset(PAIRS), system_name="fake")
    metrics = run.metrics()
    check_metrics(metrics)
    assert metrics["categories"]["missed"] == 3  # partial fix + two untouched errors
    assert metrics["categories"]["over-corrected"] == 1
    assert metrics["fpr"] == pytest.approx(1 / 2)
    assert metrics["char"]["detection"]["tp"] == 1 and metrics["char"]["detection"]["fp"] == 1
    excluded = [o for o in run.outcomes if o.judgement is None]
    assert [o.example.line for o in excluded] == [7]  # the length-mismatched pair is not scored


def test_ignore_de_through_the_evaluator(tmp_path):
    path = tmp_path / "de.tsv"
    path.write_text("他跑的很快。\t他跑得很快。\n", encoding="utf-8")
    system = FunctionSystem(lambda text: text.replace("的", "得"))
    plain = evaluate_dataset(system, read_dataset(path)).metrics()
    ignored = evaluate_dataset(system, read_dataset(path), ignore_de=True).metrics()
    assert plain["sentence"]["correction"]["recall"] == 1.0
    assert ignored["sentence"]["correction"]["recall"] == 0.0


def test_helpers():
    assert per_item_path(Path("out/p.txt"), "a-b", True) == Path("out/p-a-b.txt")
    assert per_item_path(Path("out/p.txt"), "a-b", False) == Path("out/p.txt")
    datasets = [read_dataset(PAIRS), read_dataset(PAIRS), read_dataset(FIXTURES / "pairs2.tsv")]
    unique_names(datasets)
    assert [d.name for d in datasets] == ["pairs", "fixtures/pairs", "pairs2"]


@pytest.mark.parametrize(
    "spec",
    [
        ("csc", "sighan", "test2015.tsv"),
        ("csc", "sighan", "original", "SIGHAN15_CSC_TestInput.txt"),
    ],
    ids=["test2015.tsv", "original"],
)
def test_identity_scores_zero_on_shared_sighan15(spec):
    dataset = read_dataset(shared_path(*spec))
    metrics = evaluate_dataset(IdentitySystem(), dataset, system_name="identity").metrics()
    assert metrics["sentences"] == 1100
    for protocol, task in PRF_BLOCKS:
        assert metrics[protocol][task]["recall"] == 0.0
    assert metrics["fpr"] == 0.0
    assert metrics["categories"]["missed"] == metrics["error_sentences"]


def test_model_systems_smoke(tiny_model_dir):
    """corrector, classic and generator on the tiny random model: the evaluator runs them and scores sanely."""
    pytest.importorskip("corrector.pipeline")
    pytest.importorskip("corrector.baselines.classic")
    from evaluate.systems import build_systems

    systems, errors = build_systems(["classic", "corrector", "generator"], model=str(tiny_model_dir))
    assert not errors, errors
    dataset = read_dataset(MINI)
    for system in systems:
        run = evaluate_dataset(system.system, dataset, system_name=system.name)
        check_metrics(run.metrics())
        assert all(len(o.prediction) == len(o.example.source) for o in run.outcomes)
        assert system.model_size_bytes and system.model_size_bytes > 0


def test_sweep_filtering_equals_running_at_the_threshold(tiny_model_dir):
    """The sweep's premise: edits of one threshold-0 run filtered at t == a run at t. It holds for
    one correction pass, which is what the sweep runs (test_metrics: a two-pass corrector)."""
    pytest.importorskip("corrector.pipeline")
    from corrector.evaluation.runs import prediction_of, run_system
    from evaluate.systems import build_systems

    (system,), errors = build_systems(["corrector"], model=str(tiny_model_dir), passes=1)
    assert not errors, errors
    texts = [e.source for e in read_dataset(PAIRS).examples] + [e.source for e in read_dataset(MINI).examples]
    at_zero, _ = run_system(system.system, texts, threshold=0.0, warmup=False)
    confidences = sorted({e.confidence for r in at_zero for e in r.edits})
    # Thresholds between the confidences that occur, so every step of the curve is tried (not at
    # them: edit confidences are rounded to 4 decimals, the pipeline compares unrounded ones).
    thresholds = sorted({0.0, 1.0, *((a + b) / 2 for a, b in pairwise(confidences))})
    for threshold in thresholds[:: max(1, len(thresholds) // 12)]:
        direct, _ = run_system(system.system, texts, threshold=threshold, warmup=False)
        filtered = [prediction_of(t, r, threshold)[0] for t, r in zip(texts, at_zero, strict=True)]
        assert [r.target for r in direct] == filtered, threshold
