"""Bootstrap intervals and paired comparisons (evaluate/significance.py, evaluate/compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrector.datasets import read_dataset
from corrector.evaluation.metrics import judge, score
from evaluate import FunctionSystem, IdentitySystem, evaluate_dataset, significance
from evaluate.__main__ import bootstrap_section
from evaluate.compare import main as compare_main
from evaluate.significance import bootstrap_interval, paired_difference

# 40 sentences: 20 with one error, 20 error-free.
WRONG, RIGHT, CLEAN = "少先队员因该为老人让座。", "少先队员应该为老人让座。", "今天天气很好。"
PAIRS = [(WRONG, RIGHT)] * 20 + [(CLEAN, CLEAN)] * 20


def judged(predictions: list[str]):
    return [judge(source, target, prediction) for (source, target), prediction in zip(PAIRS, predictions, strict=True)]


def test_interval_holds_the_f1_that_metrics_computes():
    predictions = [RIGHT] * 12 + [WRONG] * 8 + [CLEAN] * 18 + ["今天天汽很好。"] * 2
    judgements = judged(predictions)
    expected = score([(s, t, p) for (s, t), p in zip(PAIRS, predictions, strict=True)]).sentence_correction.f1
    interval = bootstrap_interval(judgements, samples=500)
    assert interval.f1 == pytest.approx(expected)  # 2·12 / (14 changed + 20 erroneous)
    assert interval.low < interval.f1 < interval.high
    assert 0 <= interval.low and interval.high <= 1
    assert bootstrap_interval(judgements, samples=500) == interval  # seeded
    # More sentences of the same kind: a narrower interval.
    wide = interval.high - interval.low
    narrow = bootstrap_interval(judgements * 10, samples=500)
    assert narrow.f1 == pytest.approx(expected) and narrow.high - narrow.low < wide / 2


def test_identical_systems_differ_by_nothing():
    judgements = judged([RIGHT] * 10 + [WRONG] * 10 + [CLEAN] * 20)
    diff = paired_difference(judgements, judgements, samples=200)
    assert (diff.difference, diff.low, diff.high, diff.share_better) == (0.0, 0.0, 0.0, 0.0)


def test_a_system_that_fixes_more_without_new_false_alarms_is_better_in_every_resample():
    a = judged([RIGHT] * 8 + [WRONG] * 12 + [CLEAN] * 20)
    b = judged([RIGHT] * 14 + [WRONG] * 6 + [CLEAN] * 20)
    diff = paired_difference(a, b, samples=300)
    assert diff.f1_a == pytest.approx(2 * 8 / 28) and diff.f1_b == pytest.approx(2 * 14 / 34)
    assert 0 < diff.low <= diff.difference <= diff.high
    assert diff.share_better > 0.95  # a resample may draw none of the sentences where they differ
    # Swapped: the same difference, negative.
    back = paired_difference(b, a, samples=300)
    assert back.difference == pytest.approx(-diff.difference) and back.share_better < 0.05


def test_resamples_drawn_in_chunks_are_the_resamples_of_one_draw(monkeypatch):
    a = judged([RIGHT] * 8 + [WRONG] * 12 + [CLEAN] * 19 + ["今天天汽很好。"])
    b = judged([RIGHT] * 11 + [WRONG] * 9 + [CLEAN] * 18 + ["今天天汽很好。"] * 2)
    chunked = paired_difference(a, b, samples=300), bootstrap_interval(a, samples=300)
    monkeypatch.setattr(significance, "RESAMPLE_CHUNK", 10_000)  # all 300 at once
    assert (paired_difference(a, b, samples=300), bootstrap_interval(a, samples=300)) == chunked


def test_bad_arguments_are_refused():
    judgements = judged([WRONG] * 20 + [CLEAN] * 20)
    with pytest.raises(ValueError, match="paired"):
        paired_difference(judgements, judgements[:-1])
    with pytest.raises(ValueError, match="samples"):
        bootstrap_interval(judgements, samples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval(judgements, level=1.5)
    assert bootstrap_interval([], samples=10).f1 == 0.0


def write_pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{int(s != t)}\t{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    return path


def test_evaluate_bootstrap_section_pairs_each_system_with_the_first(tmp_path):
    dataset = read_dataset(write_pairs(tmp_path))
    fixer = FunctionSystem(lambda text: RIGHT if text == WRONG else text)
    runs = [evaluate_dataset(IdentitySystem(), dataset, system_name="identity"),
            evaluate_dataset(fixer, dataset, system_name="fixer")]
    table, document = bootstrap_section({"pairs": runs}, samples=100)
    assert "fixer" in table and "+100.0 [+100.0, +100.0]" in table
    assert document["intervals"]["fixer"]["pairs"]["f1"] == 1.0
    assert document["differences"]["fixer - identity"]["pairs"]["share_better"] == 1.0


def write_predictions(path: Path, system: str, predictions: list[str], extra: str = "") -> Path:
    rows = [{"dataset": "pairs", "system": system, "id": f"s{i}", "line": i + 1, "source": s, "target": t,
             "prediction": p, "category": "x"} for i, ((s, t), p) in enumerate(zip(PAIRS, predictions, strict=True))]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + extra, encoding="utf-8")
    return path


def test_compare_cli_reads_two_prediction_files(tmp_path, capsys):
    a = write_predictions(tmp_path / "a.jsonl", "corrector", [RIGHT] * 8 + [WRONG] * 12 + [CLEAN] * 20)
    b = write_predictions(tmp_path / "b.jsonl", "corrector", [RIGHT] * 14 + [WRONG] * 6 + [CLEAN] * 20,
                          extra="{broken json\n")
    out = tmp_path / "cmp.json"
    assert compare_main([str(a), str(b), "--bootstrap", "200", "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"{b}:41: skipped" in captured.err  # the bad line, by number; the rest compared
    assert "pairs" in captured.out and "40" in captured.out
    result = json.loads(out.read_text(encoding="utf-8"))["datasets"]["pairs"]
    assert result["share_better"] > 0.95 and result["difference"] > 0


def test_compare_cli_needs_a_system_choice_and_shared_sentences(tmp_path, capsys):
    a = write_predictions(tmp_path / "a.jsonl", "identity", [s for s, _ in PAIRS])
    both = tmp_path / "both.jsonl"
    both.write_text(a.read_text(encoding="utf-8") + write_predictions(
        tmp_path / "c.jsonl", "fixer", [t for _, t in PAIRS]).read_text(encoding="utf-8"), encoding="utf-8")
    assert compare_main([str(a), str(both)]) == 1
    assert "several systems" in capsys.readouterr().err
    assert compare_main([str(a), str(both), "--system-b", "fixer", "--bootstrap", "50"]) == 0
    assert "+100.0" in capsys.readouterr().out
    other = tmp_path / "other.jsonl"
    other.write_text(a.read_text(encoding="utf-8").replace('"pairs"', '"other"'), encoding="utf-8")
    assert compare_main([str(a), str(other)]) == 1
    assert "no sentence is scored in both files" in capsys.readouterr().err
