"""The data set reader on small hand-made fixtures (and on ../shared data when it is there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import shared_path

from corrector.datasets import (
    DatasetError,
    detect_format,
    find_sighan_truth,
    format_truth_line,
    parse_truth_line,
    read_dataset,
    read_sighan,
    read_sighan_truth,
    write_sighan_input,
    write_sighan_truth,
)
from corrector.splits import load_pairs

FIXTURES = Path(__file__).parent / "fixtures"
MINI_INPUT = FIXTURES / "sighan" / "Mini_TestInput.txt"
MINI_TRUTH = FIXTURES / "sighan" / "Mini_TestTruth.txt"


def lines_of(dataset, kind):
    return [p.line for p in dataset.problems if p.kind == kind]


def test_tsv_with_and_without_labels():
    ds = read_dataset(FIXTURES / "pairs.tsv")
    assert ds.format == "tsv" and ds.name == "pairs"
    assert [e.line for e in ds.examples] == [1, 2, 3, 7, 8, 9]
    first = ds.examples[0]
    assert (first.source, first.target, first.label) == (
        "少先队员因该为老人让坐。",
        "少先队员应该为老人让座。",
        1,
    )
    assert first.error_positions() == [4, 10]
    assert ds.examples[-1].label is None  # the 2-column line
    # malformed: no tab (4), non-integer label (6), four columns (10); the blank line 5 is skipped.
    assert lines_of(ds, "malformed") == [4, 6, 10]
    assert lines_of(ds, "length_mismatch") == [7]
    assert lines_of(ds, "label_mismatch") == [8]
    assert [e.line for e in ds.length_mismatches] == [7]
    assert len(ds.same_length_examples) == 5
    summary = ds.problem_summary()
    assert summary["malformed"] == {"count": 3, "lines": [4, 6, 10]}
    assert any("3 malformed (line 4, 6, 10)" in line for line in ds.describe_problems())


def test_length_mismatch_is_kept_not_mangled():
    mismatch = read_dataset(FIXTURES / "pairs.tsv").length_mismatches[0]
    assert (mismatch.source, mismatch.target) == ("北京是中国的首都。", "北京是中国首都。")
    with pytest.raises(ValueError):
        mismatch.error_positions()


def test_two_column_tsv_and_load_pairs():
    ds = read_dataset(FIXTURES / "pairs2.tsv")
    assert len(ds) == 2 and not ds.problems
    assert load_pairs(FIXTURES / "pairs.tsv")[-1] == ("他说应该没问题。", "他说应该没问题。")
    assert len(load_pairs(FIXTURES / "pairs.tsv")) == 5
    assert len(load_pairs(FIXTURES / "pairs.tsv", same_length_only=False)) == 6


def test_json_list_pycorrector_fields():
    ds = read_dataset(FIXTURES / "pycorrector.json")
    assert ds.format == "json"
    assert [e.id for e in ds.examples] == ["p1", "p2", "p3"]
    assert ds.examples[0].target == "少先队员应该为老人让座。"
    assert lines_of(ds, "malformed") == [4, 5]  # record numbers in the list
    assert lines_of(ds, "length_mismatch") == [3]


def test_jsonl_mixed_fields_and_bad_lines():
    ds = read_dataset(FIXTURES / "pairs.jsonl")
    assert [e.line for e in ds.examples] == [1, 2, 6]
    assert ds.examples[2].target == "张三和李四在上海工作。"  # text/correction fields
    assert lines_of(ds, "malformed") == [3, 4]  # broken JSON, empty source


def test_sighan_pair_explicit_and_discovered():
    assert find_sighan_truth(MINI_INPUT) == MINI_TRUTH
    for spec in (f"{MINI_INPUT}:{MINI_TRUTH}", str(MINI_INPUT)):
        ds = read_dataset(spec)
        assert ds.format == "sighan" and ds.name == "Mini_TestInput" and not ds.problems
        assert [e.id for e in ds.examples] == ["T1-0001-1", "T1-0002-1", "T1-0003-1"]
        assert ds.examples[0].target == "少先队员应该为老人让座。"
        assert ds.examples[1].target == ds.examples[1].source
        assert ds.examples[2].target == "我们一起去公园散步。"


def test_sighan_malformed_and_missing():
    ds = read_dataset(FIXTURES / "sighan" / "Broken_TestInput.txt")
    assert [e.id for e in ds.examples] == ["T2-0002-1"]
    by_kind = {(p.kind, p.file, p.line) for p in ds.problems}
    assert ("malformed", "Broken_TestTruth.txt", 1) in by_kind  # odd number of fields
    assert ("malformed", "Broken_TestInput.txt", 3) in by_kind  # no (pid=…)
    assert ("malformed", "Broken_TestInput.txt", 4) in by_kind  # position beyond the sentence
    assert ("missing_truth", "Broken_TestInput.txt", 1) in by_kind
    assert ("missing_truth", "Broken_TestInput.txt", 5) in by_kind
    assert ("missing_input", "Broken_TestTruth.txt", 4) in by_kind
    assert "Broken_TestTruth.txt line 4" in str(next(p for p in ds.problems if p.kind == "missing_input"))


def test_truth_line_parsing():
    assert parse_truth_line("A1, 0") == ("A1", ())
    assert parse_truth_line("A1, 3, 字, 10, 词") == ("A1", ((3, "字"), (10, "词")))
    for bad in ("A1", "A1, 3", "A1, x, 字", "A1, 0, 字", "A1, 3, 字字", ", 0"):
        with pytest.raises(ValueError):
            parse_truth_line(bad)


def test_sighan_truth_round_trip(tmp_path):
    """Read truth -> write the gold targets as predictions in truth format -> read back."""
    ds = read_sighan(MINI_INPUT, MINI_TRUTH)
    out = tmp_path / "pred.txt"
    write_sighan_truth(out, [(e.id, e.source, e.target) for e in ds.examples])
    assert out.read_text(encoding="utf-8").splitlines() == MINI_TRUTH.read_text(encoding="utf-8").splitlines()
    original, _ = read_sighan_truth(MINI_TRUTH)
    written, problems = read_sighan_truth(out)
    assert not problems
    assert {k: v.corrections for k, v in written.items()} == {k: v.corrections for k, v in original.items()}
    # And a full pair written by us reads back to the same examples.
    write_sighan_input(tmp_path / "Copy_TestInput.txt", [(e.id, e.source) for e in ds.examples])
    write_sighan_truth(tmp_path / "Copy_TestTruth.txt", [(e.id, e.source, e.target) for e in ds.examples])
    again = read_dataset(tmp_path / "Copy_TestInput.txt")
    assert [(e.id, e.source, e.target) for e in again.examples] == [
        (e.id, e.source, e.target) for e in ds.examples
    ]


def test_format_truth_line():
    assert format_truth_line("X", "因该让坐", "因该让坐") == "X, 0"
    assert format_truth_line("X", "因该让坐", "应该让座") == "X, 1, 应, 4, 座"
    with pytest.raises(ValueError):
        format_truth_line("X", "因该", "应该了")


def test_limit_and_format_override(tmp_path):
    assert len(read_dataset(FIXTURES / "pairs.tsv", limit=2)) == 2
    assert len(read_dataset(MINI_INPUT, limit=1)) == 1
    assert len(read_dataset(FIXTURES / "pairs.tsv", limit=0)) == 0
    jsonl_as_txt = tmp_path / "records.txt"
    jsonl_as_txt.write_text('{"source": "因该", "target": "应该"}\n', encoding="utf-8")
    assert detect_format(jsonl_as_txt) == "json"
    assert read_dataset(jsonl_as_txt).examples[0].target == "应该"
    assert read_dataset(FIXTURES / "pairs2.tsv", format="tsv").format == "tsv"


def test_unreadable_data_sets(tmp_path):
    with pytest.raises(DatasetError, match="no_such_file.tsv"):
        read_dataset(tmp_path / "no_such_file.tsv")
    latin1 = tmp_path / "latin1.tsv"
    latin1.write_bytes("caf\xe9\tcaf\xe9\n".encode("latin-1"))
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_dataset(latin1)
    lonely = tmp_path / "Lonely_TestInput.txt"
    lonely.write_text("(pid=1)\t今天\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="INPUT:TRUTH"):
        read_dataset(lonely)
    broken_list = tmp_path / "broken.json"
    broken_list.write_text('[{"source": "a", ', encoding="utf-8")
    with pytest.raises(DatasetError, match="invalid JSON"):
        read_dataset(broken_list)
    with pytest.raises(DatasetError, match="unknown format"):
        read_dataset(FIXTURES / "pairs.tsv", format="xml")


def test_relative_paths_resolve_under_the_data_root(monkeypatch):
    monkeypatch.setenv("CSC_SHARED_DATA", str(FIXTURES))
    assert len(read_dataset("pairs2.tsv")) == 2
    assert len(read_dataset("sighan/Mini_TestInput.txt:sighan/Mini_TestTruth.txt")) == 3


def test_bom_and_crlf(tmp_path):
    path = tmp_path / "crlf.tsv"
    path.write_bytes("\ufeff1\t因该\t应该\r\n0\t今天\t今天\r\n".encode())
    ds = read_dataset(path)
    assert [(e.label, e.source, e.target) for e in ds.examples] == [(1, "因该", "应该"), (0, "今天", "今天")]


# ---- shared data (skipped when ../shared is absent) -----------------------------------------


def test_shared_sighan15_original_pair():
    input_path = shared_path("csc", "sighan", "original", "SIGHAN15_CSC_TestInput.txt")
    ds = read_dataset(input_path)
    assert len(ds) == 1100 and not ds.problems
    assert all(e.same_length for e in ds.examples)
    assert sum(e.has_error for e in ds.examples) == 550


def test_shared_sighan15_tsv():
    ds = read_dataset(shared_path("csc", "sighan", "test2015.tsv"))
    assert len(ds) == 1100 and not ds.problems
    assert sum(e.has_error for e in ds.examples) == 542
