"""Smoke test of the throughput benchmark on the tiny model: the figures README quotes come from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIRS = Path(__file__).parent / "fixtures" / "pairs.tsv"


def test_throughput_benchmark_runs_every_variant(tmp_path, tiny_model_dir):
    output = tmp_path / "throughput.json"
    command = [
        sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--model", str(tiny_model_dir),
        "--data", str(PAIRS.parent), "--file", PAIRS.name, "--limit", "6", "--classic-limit", "2",
        "--batch-sizes", "4", "--threads", "2", "--fp32", "--one-worker", "--repeat", "2",
        "--output", str(output),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(output.read_text(encoding="utf-8"))
    assert report["torch_threads"] == 2
    for system in ("corrector", "corrector-fp32", "corrector-1worker"):
        assert report[system]["batch_1"]["sentences"] == 6
        batched = report[system]["batch_4"]
        assert batched["sentences"] == 6 and len(batched["runs_sentences_per_s"]) == 2
        assert round(batched["sentences_per_s"], 1) in batched["runs_sentences_per_s"]  # the median run's figures
    assert report["classic"]["batch_1"]["sentences"] == 2
    assert set(report["speedup_vs_classic"]) == {"corrector", "corrector-fp32", "corrector-1worker"}
    assert report["precision"] == {"corrector": "int8", "classic": "int8", "corrector-fp32": "fp32",
                                   "corrector-1worker": "int8"}
    assert "speed-up of corrector" in done.stdout


def test_load_benchmark_mixes_real_sentences_and_measures_beside_a_big_request(tmp_path, tiny_model_dir):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import load_service

    sentences, source = load_service.real_sentences()
    assert len(set(sentences)) > 1 and source
    output = tmp_path / "load.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "load_service.py"), "--model", str(tiny_model_dir),
               "--modes", "on", "--clients", "2", "--beside-big", "--big-clients", "2", "--duration", "1",
               "--warmup", "0.2", "--json", str(output)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["mode"]: r for r in json.loads(output.read_text(encoding="utf-8"))}
    assert results["batching"]["requests"] > 0 and results["batching"]["errors"] == 0
    beside = results["beside-big"]
    assert beside["requests"] > 0 and beside["errors"] == 0 and beside["big_requests"] is not None


def test_startup_benchmark_reports_the_cli_call_and_its_phases(tmp_path, tiny_model_dir):
    output = tmp_path / "startup.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "startup.py"), "--model", str(tiny_model_dir),
               "--runs", "1", "--warmups", "0", "--json", str(output)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(output.read_text(encoding="utf-8"))
    assert figures["cli_median_s"] > 0 and len(figures["cli_seconds"]) == 1
    assert "import corrector.pipeline" in figures["phases_s"] and "first correction" in figures["phases_s"]
    assert figures["torch_imported"] is False and figures["transformers_imported"] is False
