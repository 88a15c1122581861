"""`python -m evaluate` and `python -m evaluate.compare` on hostile input (issue #69): outputs that
would overwrite a data set or each other, unwritable outputs, data sets that break the JSON parser
or cannot be encoded, bad sweep options. All with the `identity` system: no model is loaded."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

import evaluate.__main__ as cli
from corrector.datasets import DatasetError, dataset_files, read_dataset
from evaluate.compare import main as compare_main

FIXTURES = Path(__file__).parent / "fixtures"
GOOD_LINE = '{"source": "少先队员因该为老人让坐。", "target": "少先队员应该为老人让座。"}\n'
DEEP = "[" * 100_000
HUGE_NUMBER = "1" * 5000


def evaluate(*args: str | Path) -> int:
    return cli.main([*map(str, args), "--system", "identity", "--no-progress"])


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of the fixtures (pairs.tsv, sighan/…) that the tests may try to overwrite."""
    target = tmp_path / "data"
    shutil.copytree(FIXTURES, target)
    return target


@pytest.fixture
def fifo_watchdog():
    """Opening a FIFO blocks until a writer comes: a reader that tries (the bug) would hang the
    suite, so it is interrupted instead. Passing tests never open the FIFO and take milliseconds."""
    class Blocked(Exception):
        """Not a TimeoutError: that is an OSError, which the readers catch and carry on."""

    def interrupt(signum, frame):
        raise Blocked("the FIFO was opened for reading: the reader blocked")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def no_run(monkeypatch):
    """Fails the test if a system is built: a refused run must stop before that."""
    def refuse(*args, **kwargs):
        raise AssertionError("systems were built: the run was not refused up front")

    monkeypatch.setattr(cli, "build_systems", refuse)


# --------------------------------------------------------------------------------------------
# 1. outputs never overwrite an input or each other; writes are atomic


@pytest.mark.parametrize("option", ["--report", "--predictions", "--json", "--sighan-predictions"])
def test_output_that_is_the_dataset_is_refused(data, option, no_run, capsys):
    dataset = data / "pairs.tsv"
    before = dataset.read_bytes()
    assert evaluate(dataset, option, dataset) == 2
    assert f"{option} {dataset} is the input" in capsys.readouterr().err
    assert dataset.read_bytes() == before


def test_output_that_is_a_symlink_to_the_dataset_is_refused(data, no_run, capsys):
    dataset, link = data / "pairs.tsv", data / "link.jsonl"
    link.symlink_to(dataset)
    before = dataset.read_bytes()
    assert evaluate(dataset, "--predictions", link) == 2
    assert "is the input" in capsys.readouterr().err
    assert dataset.read_bytes() == before and link.is_symlink()


@pytest.mark.parametrize("half", ["Mini_TestInput.txt", "Mini_TestTruth.txt"])
def test_output_that_is_either_half_of_a_sighan_pair_is_refused(data, half, no_run, capsys):
    sighan = data / "sighan"
    before = (sighan / half).read_bytes()
    assert evaluate(f"{sighan / 'Mini_TestInput.txt'}:{sighan / 'Mini_TestTruth.txt'}", "--json", sighan / half) == 2
    assert "is the input" in capsys.readouterr().err
    assert (sighan / half).read_bytes() == before


def test_truth_file_found_beside_a_sighan_input_is_protected(data, no_run, capsys):
    truth = data / "sighan" / "Mini_TestTruth.txt"
    before = truth.read_bytes()
    assert evaluate(data / "sighan" / "Mini_TestInput.txt", "--sighan-predictions", truth) == 2
    assert "is the input" in capsys.readouterr().err
    assert truth.read_bytes() == before


def test_output_that_is_a_dataset_under_the_shared_data_root_is_refused(data, tmp_path, monkeypatch, no_run):
    monkeypatch.setenv("CSC_SHARED_DATA", str(data))
    monkeypatch.chdir(tmp_path)  # "pairs.tsv" is not here: it is found under the data root
    before = (data / "pairs.tsv").read_bytes()
    assert evaluate("pairs.tsv", "--report", data / "pairs.tsv") == 2
    assert (data / "pairs.tsv").read_bytes() == before


@pytest.mark.parametrize("option", ["--sweep-json", "--sweep-plot"])
def test_sweep_output_that_is_the_dataset_is_refused(data, option, no_run):
    dataset = data / "pairs.tsv"
    before = dataset.read_bytes()
    assert evaluate(dataset, "--sweep", option, dataset) == 2
    assert dataset.read_bytes() == before


def test_two_outputs_on_one_file_are_refused(tmp_path, no_run, capsys):
    out = tmp_path / "out.json"
    assert evaluate(FIXTURES / "pairs.tsv", "--json", out, "--report", out) == 2
    assert "--report and --json are the same file" in capsys.readouterr().err
    assert not out.exists()


def test_dataset_files_names_every_file_a_spec_reads(data, monkeypatch):
    sighan = data / "sighan"
    pair = f"{sighan / 'Mini_TestInput.txt'}:{sighan / 'Mini_TestTruth.txt'}"
    assert dataset_files(pair) == [sighan / "Mini_TestInput.txt", sighan / "Mini_TestTruth.txt"]
    assert dataset_files(sighan / "Mini_TestInput.txt") == [sighan / "Mini_TestInput.txt", sighan / "Mini_TestTruth.txt"]
    assert dataset_files(data / "pairs.tsv") == [data / "pairs.tsv"]
    monkeypatch.setenv("CSC_SHARED_DATA", str(data))
    monkeypatch.chdir(data.parent)
    assert dataset_files("sighan/Mini_TestInput.txt:sighan/Mini_TestTruth.txt") == [
        sighan / "Mini_TestInput.txt", sighan / "Mini_TestTruth.txt"]


def test_a_failed_write_keeps_the_old_output_and_the_others_are_written(tmp_path, monkeypatch, capsys):
    predictions, report = tmp_path / "p.jsonl", tmp_path / "r.md"
    predictions.write_text("the previous run's predictions\n", encoding="utf-8")
    written = []

    def row_then_full_disk(outcome, dataset, system):
        if written:
            raise OSError(28, "No space left on device")
        written.append(1)
        return {"id": outcome.example.id}

    monkeypatch.setattr(cli, "prediction_row", row_then_full_disk)
    assert evaluate(FIXTURES / "pairs.tsv", "--predictions", predictions, "--report", report) == 1
    assert "--predictions: cannot write" in capsys.readouterr().err
    assert predictions.read_text(encoding="utf-8") == "the previous run's predictions\n"
    assert "## pairs" in report.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "r.md"]  # no temporary file left


# --------------------------------------------------------------------------------------------
# 2. unwritable outputs are found before the run; missing folders are still created


def test_output_that_is_a_directory_is_refused_before_the_run(tmp_path, no_run, capsys):
    assert evaluate(FIXTURES / "pairs.tsv", "--json", tmp_path) == 2
    assert f"--json {tmp_path}: cannot be written" in capsys.readouterr().err


def test_output_whose_folder_is_a_file_is_refused_before_the_run(tmp_path, no_run, capsys):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert evaluate(FIXTURES / "pairs.tsv", "--report", tmp_path / "file" / "r.md") == 2
    assert "cannot create folder" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_output_in_a_read_only_folder_is_refused_before_the_run(tmp_path, no_run):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert evaluate(FIXTURES / "pairs.tsv", "--predictions", locked / "p.jsonl") == 2


def test_unsupported_sweep_plot_format_is_refused_before_the_run(tmp_path, no_run, capsys):
    assert evaluate(FIXTURES / "pairs.tsv", "--sweep", "--sweep-plot", tmp_path / "curve.xyz") == 2
    assert "cannot write .xyz images" in capsys.readouterr().err


def test_missing_output_folders_are_still_created(tmp_path):
    out = tmp_path / "a" / "b" / "out.json"
    assert evaluate(FIXTURES / "pairs2.tsv", "--json", out) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["errors"] == []


# --------------------------------------------------------------------------------------------
# 3. data sets that break the parser or the encoder: a per-file error, the rest still scored


@pytest.mark.parametrize("content", [DEEP, f'[{{"source": "ab", "target": "ab", "n": {HUGE_NUMBER}}}]'],
                         ids=["deeply-nested", "huge-number"])
def test_json_list_that_breaks_the_parser_is_a_per_file_error(tmp_path, content, capsys):
    hostile = tmp_path / "hostile.json"
    hostile.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match="hostile.json: invalid JSON"):
        read_dataset(hostile)
    out = tmp_path / "out.json"
    assert evaluate(hostile, FIXTURES / "pairs2.tsv", "--json", out) == 1
    assert "hostile.json: invalid JSON" in capsys.readouterr().err
    assert list(json.loads(out.read_text(encoding="utf-8"))["datasets"]) == ["pairs2"]


@pytest.mark.parametrize(("line", "reason"), [(DEEP, "nested too deeply"),
                                              (f'{{"source": "ab", "target": "ab", "n": {HUGE_NUMBER}}}',
                                               "too many digits")])
def test_jsonl_line_that_breaks_the_parser_is_a_malformed_line(tmp_path, line, reason):
    path = tmp_path / "lines.jsonl"
    path.write_text(GOOD_LINE + line + "\n" + GOOD_LINE, encoding="utf-8")
    dataset = read_dataset(path)
    assert [e.line for e in dataset.examples] == [1, 3]
    (problem,) = dataset.problems
    assert (problem.kind, problem.line) == ("malformed", 2) and reason in problem.message


def test_lone_surrogates_are_rejected_with_a_warning_and_predictions_are_written(tmp_path, capsys):
    path = tmp_path / "surrogates.jsonl"
    path.write_text(GOOD_LINE + '{"source": "a\\ud800b", "target": "a\\ud800b"}\n'
                    + '{"source": "ab", "target": "ab", "id": "\\udfff"}\n', encoding="utf-8")
    predictions = tmp_path / "p.jsonl"
    assert evaluate(path, "--predictions", predictions) == 0
    assert "surrogates: 2 malformed (line 2, 3)" in capsys.readouterr().err
    rows = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines()]
    assert [row["line"] for row in rows] == [1]


def test_file_name_that_is_not_utf8_is_scored_and_written(tmp_path):
    path = tmp_path / os.fsdecode(b"bad\xffname.tsv")
    shutil.copy(FIXTURES / "pairs2.tsv", path)
    out, report, predictions = tmp_path / "out.json", tmp_path / "r.md", tmp_path / "p.jsonl"
    assert evaluate(path, "--json", out, "--report", report, "--predictions", predictions) == 0
    (name,) = json.loads(out.read_text(encoding="utf-8"))["datasets"]
    assert name == "bad\ufffdname"
    assert "## bad\ufffdname" in report.read_text(encoding="utf-8")
    assert all(json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines())


def hostile_file(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.tsv"
    if kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "latin1":
        path.write_bytes("caf\xe9\tcaf\xe9\n".encode("latin-1"))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # reading one blocked the evaluator forever
    return path


@pytest.mark.parametrize(("kind", "message"), [
    ("binary", "not UTF-8"), ("latin1", "not UTF-8"), ("empty", "no usable pairs"),
    ("directory", "is a directory"), ("fifo", "not a regular file"),
])
def test_hostile_dataset_file_is_a_per_file_error(tmp_path, kind, message, fifo_watchdog, capsys):
    path = hostile_file(tmp_path, kind)
    out = tmp_path / "out.json"
    assert evaluate(path, FIXTURES / "pairs2.tsv", "--json", out) == 1
    err = capsys.readouterr().err
    assert f"{path}" in err and message in err
    assert list(json.loads(out.read_text(encoding="utf-8"))["datasets"]) == ["pairs2"]


def test_device_is_not_read_as_a_dataset():
    # /dev/zero was read until memory ran out; /dev/null is refused the same way, without that risk.
    with pytest.raises(DatasetError, match="/dev/null: not a regular file"):
        read_dataset("/dev/null", format="tsv")


# --------------------------------------------------------------------------------------------
# 4. sweep options that would only fail at the end of the run


@pytest.mark.parametrize("steps", ["0", "1"])
def test_sweep_steps_below_two_is_a_usage_error(steps, no_run, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate(FIXTURES / "pairs.tsv", "--sweep", "--sweep-steps", steps)
    assert exit_info.value.code == 2
    assert "--sweep-steps must be >= 2" in capsys.readouterr().err


@pytest.mark.parametrize("metric", ["nonsense", "fpr"])
def test_sweep_metric_that_is_not_a_precision_recall_or_f1_is_a_usage_error(metric, no_run):
    with pytest.raises(SystemExit) as exit_info:
        evaluate(FIXTURES / "pairs.tsv", "--sweep", "--sweep-metric", metric)
    assert exit_info.value.code == 2


# --------------------------------------------------------------------------------------------
# 5. python -m evaluate.compare


@pytest.fixture
def predictions(tmp_path) -> Path:
    path = tmp_path / "a.jsonl"
    assert evaluate(FIXTURES / "pairs.tsv", "--predictions", path) == 0
    return path


@pytest.mark.parametrize("content", [DEEP.encode(), HUGE_NUMBER.encode(), b"", bytes(range(256)) * 4],
                         ids=["deeply-nested", "huge-number", "empty", "binary"])
def test_compare_file_without_a_usable_row_exits_2(tmp_path, predictions, content, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    assert compare_main([str(predictions), str(bad), "--bootstrap", "10"]) == 2
    assert f"error: {bad}: no prediction row" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo"])
def test_compare_file_that_cannot_be_read_exits_2(tmp_path, predictions, kind, fifo_watchdog, capsys):
    bad = tmp_path / "bad"
    if kind == "directory":
        bad.mkdir()
    elif kind == "fifo":
        os.mkfifo(bad)
    assert compare_main([str(predictions), str(bad)]) == 2
    assert f"error: {bad}:" in capsys.readouterr().err


def test_compare_skips_hostile_lines_and_compares_the_rest(tmp_path, predictions, capsys):
    scored = '{"dataset": "pairs", "system": "identity", "id": "x", "category": "missed", '
    hostile = [
        DEEP.encode(),
        HUGE_NUMBER.encode(),
        (scored + '"source": "ab", "target": "ac", "prediction": "a\\ud800"}').encode(),
        (scored + '"source": "ab", "target": "ac", "prediction": "abc"}').encode(),  # judge() raised
        b"\xff\xfe",
    ]
    b = tmp_path / "b.jsonl"
    b.write_bytes(predictions.read_bytes() + b"\n".join(hostile) + b"\n")
    first = len(predictions.read_text(encoding="utf-8").splitlines()) + 1
    assert compare_main([str(predictions), str(b), "--bootstrap", "10"]) == 0
    err = capsys.readouterr().err
    skipped = {line.split(": skipped: ")[0]: line for line in err.splitlines() if ": skipped: " in line}
    reasons = ["nested too deeply", "too many digits", "surrogate", "differ in length", "not UTF-8"]
    assert sorted(skipped) == sorted(f"{b}:{n}" for n in range(first, first + len(reasons)))
    for number, reason in enumerate(reasons, start=first):
        assert reason in skipped[f"{b}:{number}"]
    # The evaluator's own unscored row (a length-mismatched gold pair) is not a bad line.
    assert f"{predictions}:" not in err


def test_compare_json_output_that_is_an_input_is_refused(tmp_path, predictions, capsys):
    before = predictions.read_bytes()
    assert compare_main([str(predictions), str(predictions), "--json", str(predictions)]) == 2
    assert "is the input" in capsys.readouterr().err
    assert predictions.read_bytes() == before


def test_compare_unwritable_json_is_refused_before_reading(tmp_path, predictions, capsys):
    assert compare_main([str(predictions), str(tmp_path / "missing.jsonl"), "--json", str(tmp_path)]) == 2
    assert "cannot be written" in capsys.readouterr().err  # the output, before the missing input
