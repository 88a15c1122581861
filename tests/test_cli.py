"""`python -m corrector`: text arguments, --json, files with bad lines, empty input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_pipeline import RIGHT, WRONG

from corrector.__main__ import main


@pytest.fixture(scope="module")
def model(trained_model_dir) -> str:
    return str(trained_model_dir)


def test_text_argument_prints_target_then_edits(model, capsys):
    assert main(["--model", model, "--no-progress", WRONG]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == RIGHT
    assert lines[1].split("\t")[:3] == ["  4", "因 -> 应", "pinyin"]
    assert lines[2].split("\t")[:3] == ["  10", "坐 -> 座", "pinyin"]
    assert len(lines) == 3


def test_json_output(model, capsys):
    assert main(["--model", model, "--json", WRONG, "今天天气很好"]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["target"] for o in objects] == [RIGHT, "今天天气很好"]
    assert objects[0]["source"] == WRONG
    assert [(e["position"], e["source"], e["target"], e["kind"]) for e in objects[0]["edits"]] == [
        (4, "因", "应", "pinyin"), (10, "坐", "座", "pinyin")]
    assert 0 <= objects[0]["edits"][0]["confidence"] <= 1
    assert objects[1]["edits"] == []


def test_empty_string_needs_no_model(capsys):
    # No model is loaded for text without Chinese characters, so a missing one does not matter.
    assert main(["--model", "/nonexistent/model", ""]) == 0
    assert capsys.readouterr().out == "\n"


def test_file_with_a_bad_line(model, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(
        WRONG.encode() + b"\n" + b"bad \xff\xfe line\n" + "今天天气很好\r\n".encode() + b"\n" + "最后".encode()
    )
    output = tmp_path / "out.txt"
    status = main(["--model", model, "--input", str(source), "--output", str(output)])
    err = capsys.readouterr().err
    assert status != 0
    assert f"{source}:2:" in err and "UTF-8" in err
    # Every line keeps its own ending: CRLF stays CRLF, a last line without one gets none; the bad
    # line is passed through as it was.
    assert output.read_bytes() == f"{RIGHT}\n".encode() + b"bad \xff\xfe line\n" + "今天天气很好\r\n\n最后".encode()


def test_file_is_streamed_a_block_at_a_time(monkeypatch):
    # A file of any size needs the memory of one block: lines are read only as blocks are corrected.
    import argparse
    import io

    import corrector.__main__ as cli
    from corrector.result import Result

    monkeypatch.setattr(cli, "BLOCK_LINES", 2)
    read = []

    class Lines:
        """A binary stream that records which of its lines were read."""

        texts = iter(enumerate(["一", "二", "三", "四", "五"], 1))

        def readline(self, limit: int = -1) -> bytes:
            for number, text in self.texts:
                read.append(number)
                return (text + "\r\n").encode()
            return b""

    class Recorder:
        calls: list[tuple[list[str], int]] = []

        def correct_batch(self, texts):
            self.calls.append((texts, len(read)))
            return [Result.unchanged(t) for t in texts]

    out = io.StringIO(newline="")
    args = argparse.Namespace(json=False, no_progress=True)
    assert cli.run_lines(Recorder(), Lines(), "<test>", out, args) == 0
    # (texts of each call, lines read when it ran): never more than one block ahead.
    assert Recorder.calls == [(["一", "二"], 2), (["三", "四"], 4), (["五"], 5)]
    assert out.getvalue() == "一\r\n二\r\n三\r\n四\r\n五\r\n"


def test_file_json_marks_the_bad_line(model, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(b"\xe4\xbd\n" + WRONG.encode() + b"\n")
    assert main(["--model", model, "--input", str(source), "--json", "--no-progress"]) == 1
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0]["line"] == 1 and "UTF-8" in out[0]["error"]
    assert out[1]["target"] == RIGHT


def test_file_json_lines_end_in_newlines(model, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(WRONG.encode() + b"\r\n" + "今天".encode())  # CRLF, then no line end
    assert main(["--model", model, "--input", str(source), "--json", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("}\n") and "\r" not in out and len(out.splitlines()) == 2


def test_unreadable_file(tmp_path, capsys):
    missing = tmp_path / "missing.txt"
    assert main(["--input", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err


def test_bad_model_is_a_clear_error(tmp_path, capsys):
    assert main(["--model", str(tmp_path / "nope"), WRONG]) == 2
    assert "nope" in capsys.readouterr().err


def test_whitelist_confusion_and_threshold_options(model, tmp_path, capsys):
    whitelist = tmp_path / "w.txt"
    whitelist.write_text("因该\n", encoding="utf-8")
    pairs = tmp_path / "c.txt"
    pairs.write_text("坐 座\n", encoding="utf-8")
    assert main(["--model", model, "--whitelist", str(whitelist), "--confusion", str(pairs), WRONG]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "少先队员因该为老人让座"
    assert main(["--model", model, "--threshold", "0.99999999", WRONG]) == 0
    assert capsys.readouterr().out.splitlines() == [WRONG]


def test_module_entry_point_with_stdin(model):
    # One real process: `python -m corrector` reading stdin, progress bar on stderr.
    proc = subprocess.run(
        [sys.executable, "-m", "corrector", "--model", model, "--batch-size", "2", "--threads", "1"],
        input=(WRONG + "\n\n" + "hello 世界\n").encode(), capture_output=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().split("\n") == [RIGHT, "", "hello 世界", ""]


def test_traditional_text_is_corrected_in_its_script(model, capsys):
    assert main(["--model", model, "少先隊員因該為老人讓坐"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "少先隊員應該為老人讓座"
    assert [line.split("\t")[1] for line in lines[1:]] == ["因 -> 應", "坐 -> 座"]
    # --traditional off: the model reads the characters as written (the tiny model knows none of them)
    assert main(["--model", model, "--traditional", "off", "少先隊員因該為老人讓坐"]) == 0
    assert capsys.readouterr().out.splitlines()[0] != "少先隊員應該為老人讓座"


def test_passes_option_reaches_the_corrector(tiny_model_dir):
    from corrector.__main__ import build_corrector, parse_args

    assert build_corrector(parse_args(["--model", str(tiny_model_dir), "x"])).config.passes == 3
    assert build_corrector(parse_args(["--model", str(tiny_model_dir), "--passes", "1", "x"])).config.passes == 1
