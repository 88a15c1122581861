"""Issue #69 (items 2 and 5) for `python -m corrector`: outputs that are inputs, atomic --output,
closed and failing streams, long lines in bounded windows, Ctrl-C, empty file names, files and
arguments that are not UTF-8, a byte order mark.

No test loads a model: inputs without Chinese need none, and the others get `Fake` through
`build_corrector`. Processes are started only where real file descriptors matter.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import stat
import subprocess
import sys
from itertools import islice
from pathlib import Path

import pytest

import corrector.__main__ as cli
from corrector import cli_io
from corrector.__main__ import main
from corrector.result import Edit, Result

ROOT = Path(__file__).resolve().parent.parent


class Fake:
    """Corrects 因该 -> 应该 (edit at 因), recording each correct_batch call's texts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def correct_batch(self, texts, batch_size=None, threshold=None):
        self.calls.append(list(texts))
        results = []
        for text in texts:
            edits, start = [], text.find("因该")
            while start >= 0:
                edits.append(Edit(start, "因", "应", 0.9, "pinyin"))
                start = text.find("因该", start + 1)
            results.append(Result.applying(text, edits))
        return results

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]


@pytest.fixture
def fake(monkeypatch) -> Fake:
    corrector = Fake()
    monkeypatch.setattr(cli, "build_corrector", lambda args: corrector)
    return corrector


@pytest.fixture
def no_model(monkeypatch) -> None:
    """Fails the test if the run gets as far as loading a model."""

    def refuse(args):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(cli, "build_corrector", refuse)


def run_cli(*args: str | bytes, **kwargs) -> subprocess.CompletedProcess:
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.run([sys.executable, "-m", "corrector", *args], cwd=ROOT, timeout=60, **streams)


def temporary_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# --- 1. an output that is an input is refused; --output is replaced only when complete -----------


@pytest.mark.parametrize("how", ["same name", "symlink", "hard link"])
def test_an_output_that_is_the_input_is_refused(how, tmp_path, capsys, no_model):
    source = tmp_path / "in.txt"
    source.write_text("因该\n", encoding="utf-8")
    output = source if how == "same name" else tmp_path / "out.txt"
    if how == "symlink":
        output.symlink_to(source)
    elif how == "hard link":
        os.link(source, output)
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert source.read_text(encoding="utf-8") == "因该\n"


def test_a_failed_run_leaves_the_old_output_as_it_was(fake, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "BLOCK_LINES", 1)
    calls = []

    def fail_on_the_second_block(texts, **_):
        calls.append(texts)
        if len(calls) == 2:
            raise RuntimeError("the model failed")
        return Fake().correct_batch(texts)

    monkeypatch.setattr(fake, "correct_batch", fail_on_the_second_block)
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("因该\n二\n", encoding="utf-8")
    output.write_text("old\n", encoding="utf-8")
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 2
    assert "the model failed" in capsys.readouterr().err
    assert output.read_text(encoding="utf-8") == "old\n"  # not the first block's line, not empty
    assert temporary_files(tmp_path) == []
    # A run that completes replaces it.
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 0
    assert output.read_text(encoding="utf-8") == "应该\n二\n"


def test_an_unwritable_output_is_found_before_the_model_loads(tmp_path, capsys, no_model):
    assert main(["--output", str(tmp_path / "missing" / "out.txt"), "因该"]) == 2
    assert "does not exist" in capsys.readouterr().err


# --- 2. stdin or stdout closed ------------------------------------------------------------------


def test_closed_stdout_is_a_clear_error():
    proc = subprocess.run(["sh", "-c", 'exec "$0" -m corrector abc >&-', sys.executable], cwd=ROOT,
                          capture_output=False, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 2
    assert b"stdout is closed" in proc.stderr and b"Traceback" not in proc.stderr


@pytest.mark.parametrize("options", [["--input", "-"], []])
def test_closed_stdin_is_a_clear_error(options):
    command = 'exec "$0" -m corrector --no-progress "$@" <&-'
    proc = subprocess.run(["sh", "-c", command, sys.executable, *options], cwd=ROOT, capture_output=True,
                          timeout=60)
    assert proc.returncode == 2
    assert b"stdin is closed" in proc.stderr and b"Traceback" not in proc.stderr


# --- 3. failing writes: one message, exit 2; a closed pipe: quiet --------------------------------


def test_a_full_device_as_output_is_one_clear_error(capsys):
    assert main(["--output", "/dev/full", "abc"]) == 2
    err = capsys.readouterr().err
    assert err == "error: cannot write /dev/full: No space left on device\n"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written to, not renamed over


def test_a_full_stdout_is_one_clear_error():
    with open("/dev/full", "wb") as full:
        proc = run_cli("abc", stdout=full)
    assert proc.returncode == 2
    assert proc.stderr == b"error: cannot write <stdout>: No space left on device\n"


def test_a_closed_pipe_ends_the_run_quietly(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("line\n" * 100_000, encoding="utf-8")  # far more than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "corrector", "--input", str(source), "--no-progress"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"line\n"
    proc.stdout.close()  # `| head -1`
    assert proc.wait(timeout=60) == 141  # as a tool killed by SIGPIPE
    assert proc.stderr.read() == b""


# --- 4. long lines: windows of bounded size, the output as one line -----------------------------


def sentences(count: int) -> str:
    return "".join(f"第{n}句他说因该去，“好。”" for n in range(count))


@pytest.fixture
def small_windows(monkeypatch) -> int:
    """Windows of 50 characters and reads of 64 bytes, so that short texts have long lines."""
    monkeypatch.setattr(cli_io, "WINDOW_CHARS", 50)
    monkeypatch.setattr(cli_io, "READ_BYTES", 64)
    return 50


def test_a_long_line_is_corrected_in_windows_cut_at_sentence_ends(fake, small_windows, tmp_path):
    line = sentences(40) + "最后因该"
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(f"{line}\r\n短句因该\n{line}".encode())
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 0
    fixed = line.replace("因该", "应该")
    assert output.read_bytes() == f"{fixed}\r\n短句应该\n{fixed}".encode()
    windows = fake.texts[:fake.texts.index("短句因该")]
    assert "".join(windows) == line and len(windows) > 10
    assert max(len(w) for w in fake.texts) <= small_windows
    assert all(w.endswith("。”") for w in windows[:-1])  # after the sentence end and its closing quote


def test_a_line_without_sentence_ends_is_cut_at_clauses_else_hard(fake, small_windows, tmp_path):
    clauses, bare = "他说因该去，" * 30, "因该" * 500
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text(f"{clauses}\n{bare}\n", encoding="utf-8")
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 0
    assert output.read_text(encoding="utf-8") == f"{clauses}\n{bare}\n".replace("因该", "应该")
    assert all(w.endswith("，") for w in fake.texts if "说" in w)
    assert {len(w) for w in fake.texts if "说" not in w} == {small_windows}


def test_json_gives_a_long_line_one_object_per_window(fake, small_windows, tmp_path, capsys):
    line = sentences(10)
    source = tmp_path / "in.txt"
    source.write_text(f"短句因该\n{line}\n", encoding="utf-8")
    assert main(["--input", str(source), "--json", "--no-progress"]) == 0
    objects = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert objects[0] == {"source": "短句因该", "target": "短句应该", "edits": [
        {"position": 2, "source": "因", "target": "应", "confidence": 0.9, "kind": "pinyin"}]}
    windows = objects[1:]
    assert len(windows) > 1 and {w["line"] for w in windows} == {2}
    assert "".join(w["source"] for w in windows) == line
    offset = 0
    for window in windows:
        assert window["offset"] == offset
        offset += len(window["source"])
        for edit in window["edits"]:  # positions in the whole line
            assert line[edit["position"]:edit["position"] + 2] == "因该"
    assert sum(len(w["edits"]) for w in windows) == line.count("因该")


def test_a_character_split_between_two_reads_is_valid_utf8(fake, small_windows, tmp_path, capsys):
    line = "ab" + "因该。" * 100  # 3-byte characters across most 64-byte reads
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text(line + "\n", encoding="utf-8")
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    assert output.read_text(encoding="utf-8") == line.replace("因该", "应该") + "\n"
    assert len(fake.texts) > 1


def test_a_bad_byte_in_a_long_line_is_reported_and_the_rest_passed_through(fake, small_windows, tmp_path,
                                                                           capsys):
    head, tail = sentences(12).encode(), ("因该" * 40).encode()
    line = head + b"\xff" + tail
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(b"ok\n" + line + b"\r\n" + "因该\n".encode())
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 1
    assert capsys.readouterr().err == f"{source}:2: not valid UTF-8 (byte 0xff at column {len(head) + 1})\n"
    written = output.read_bytes()
    assert written.endswith(b"\xff" + tail + b"\r\n" + "应该\n".encode())  # as read from the bad window on
    assert written.replace("应".encode(), "因".encode()) == source.read_bytes()  # else only corrections
    assert "应该".encode() in written[:len(head)]  # the windows before it were corrected


def test_pieces_give_back_the_input_byte_for_byte(monkeypatch):
    # Random lines (CRLF, lone CR, 4-byte characters, bad bytes, a BOM, a cut-off character),
    # read 1-64 bytes at a time into windows of 1-50 characters: the pieces and their endings are
    # the input again, one ending per line, the error on exactly the lines that are not UTF-8.
    import random

    draw = random.Random(69)
    alphabet = ["a", "因", "该", "。", "，", "\r", "😀", " ", "\r\n", "\n", "”"]
    for _ in range(1500):
        monkeypatch.setattr(cli_io, "READ_BYTES", draw.choice([1, 2, 3, 5, 7, 16, 64]))
        monkeypatch.setattr(cli_io, "WINDOW_CHARS", draw.choice([1, 2, 3, 8, 50]))
        data = "".join(draw.choice(alphabet) for _ in range(draw.randint(0, 40))).encode()
        if draw.random() < 0.3:
            data = b"\xef\xbb\xbf" + data
        if draw.random() < 0.3:
            at = draw.randint(0, len(data))
            data = data[:at] + b"\xff" + data[at:]
        if draw.random() < 0.2:
            data = data[:draw.randint(0, len(data))]
        reader = cli_io.LineReader(io.BytesIO(data), "<t>")
        pieces = list(reader)
        text = b"".join((p.text if isinstance(p.text, bytes) else p.text.encode()) + (p.ending or "").encode()
                        for p in pieces)
        assert (b"\xef\xbb\xbf" if reader.bom else b"") + text == data
        lines = text.split(b"\n")
        if lines[-1] == b"" and not (reader.bom and not text):  # a file of only a BOM: one empty line
            lines.pop()
        assert [p.line for p in pieces if p.ending is not None] == list(range(1, len(lines) + 1))
        assert all(len(p.text) <= cli_io.WINDOW_CHARS for p in pieces if isinstance(p.text, str))
        bad = {p.line for p in pieces if p.error}
        for number, line in enumerate(lines, 1):
            assert (number in bad) == (line.decode("utf-8", "replace").encode() != line), (data, pieces)


def test_an_endless_line_is_read_in_bounded_pieces():
    class Endless:
        """A stream of 因该 without end or newline, recording the size of each read."""

        pattern = "因该".encode() * 50_000

        def __init__(self) -> None:
            self.position = 0
            self.reads: list[int] = []

        def readline(self, limit: int) -> bytes:
            self.reads.append(limit)
            start = self.position % 6
            self.position += limit
            return self.pattern[start:start + limit]

    stream = Endless()
    pieces = list(islice(cli_io.LineReader(stream, "<endless>"), 200))
    assert {len(piece.text) for piece in pieces} == {cli_io.WINDOW_CHARS}  # no sentence end: hard cuts
    assert max(stream.reads) <= cli_io.READ_BYTES
    # Reading stays one window and one read ahead of what was handed out.
    assert sum(stream.reads) <= 3 * 200 * cli_io.WINDOW_CHARS + 3 * cli_io.WINDOW_CHARS + cli_io.READ_BYTES


def test_a_block_of_long_lines_holds_a_bounded_number_of_characters(fake, monkeypatch, small_windows, tmp_path):
    monkeypatch.setattr(cli, "BLOCK_CHARS", 120)
    source = tmp_path / "in.txt"
    source.write_text((sentences(20) + "\n") * 5, encoding="utf-8")
    assert main(["--input", str(source), "--output", str(tmp_path / "out.txt"), "--no-progress"]) == 0
    assert len(fake.calls) > 5
    assert max(sum(len(t) for t in call) for call in fake.calls) < 120 + small_windows


def test_dev_zero_as_input_streams_in_bounded_memory():
    def one_gib_at_most():  # before the fix: MemoryError at once instead of filling the machine
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    proc = subprocess.Popen([sys.executable, "-m", "corrector", "--input", "/dev/zero", "--no-progress"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=one_gib_at_most)
    try:
        received = 0
        while received < 2 << 20 and (chunk := proc.stdout.read1(1 << 20)):
            assert chunk.count(0) == len(chunk)
            received += len(chunk)
        status = Path(f"/proc/{proc.pid}/status").read_text()
    finally:
        proc.kill()
        proc.wait()
    assert received >= 2 << 20, proc.stderr.read()[-2000:]
    peak_kib = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
    assert peak_kib < 150_000  # no model (no Chinese): an interpreter, one window and one read


# --- 5. Ctrl-C: "interrupted", exit 130, --output untouched --------------------------------------


def test_ctrl_c_leaves_the_output_as_it_was(tmp_path):
    output = tmp_path / "out.txt"
    output.write_text("old\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "corrector", "--output", str(output)], cwd=ROOT,
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"abc\n")
        proc.stdin.flush()
        shown = b""
        while b"line" not in shown:  # the progress bar: it is reading stdin, the output file open
            shown += (chunk := os.read(proc.stderr.fileno(), 200))
            assert chunk, shown
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        proc.kill()
        proc.wait()
    err = proc.stderr.read()
    assert err.rstrip().endswith(b"interrupted") and b"Traceback" not in err
    assert output.read_text(encoding="utf-8") == "old\n"
    assert temporary_files(tmp_path) == []


def test_ctrl_c_in_process_returns_130(fake, monkeypatch, tmp_path, capsys):
    def interrupted(texts, **_):
        raise KeyboardInterrupt

    monkeypatch.setattr(fake, "correct_batch", interrupted)
    output = tmp_path / "out.txt"
    output.write_text("old\n", encoding="utf-8")
    assert main(["--output", str(output), "因该"]) == 130
    assert capsys.readouterr().err == "interrupted\n"
    assert output.read_text(encoding="utf-8") == "old\n"


# --- 6. empty file names ------------------------------------------------------------------------


@pytest.mark.parametrize("option, words", [("--input", "--input needs a file name; use - for stdin"),
                                           ("--output", "--output needs a file name")])
def test_an_empty_file_name_is_refused(option, words, capsys, no_model, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"abc\n")))
    assert main([option, "", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert words in captured.err and captured.out == ""


def test_a_dash_output_is_stdout(capsys):
    assert main(["--output", "-", "abc"]) == 0
    assert capsys.readouterr().out == "abc\n"
    assert not Path("-").exists()


# --- 7. a --whitelist or --confusion file that is not UTF-8 is named ----------------------------


@pytest.mark.parametrize("option", ["--whitelist", "--confusion"])
def test_a_file_option_that_is_not_utf8_is_named(option, tmp_path, capsys, no_model):
    bad = tmp_path / "terms.txt"
    bad.write_bytes("因该\n".encode() + b"ok \xfe\n")
    assert main([option, str(bad), "因该"]) == 2
    assert capsys.readouterr().err == f"error: {option} {bad}: not UTF-8 (byte 0xfe at line 2, column 4)\n"


def test_a_missing_file_option_is_named(tmp_path, capsys, no_model):
    assert main(["--whitelist", str(tmp_path / "none.txt"), "因该"]) == 2
    assert f"cannot read --whitelist {tmp_path / 'none.txt'}" in capsys.readouterr().err


# --- 8. a byte order mark is kept ---------------------------------------------------------------


def test_a_byte_order_mark_is_kept(fake, tmp_path, capsys):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(b"\xef\xbb\xbf" + "因该去\r\nabc\n".encode())
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 0
    assert output.read_bytes() == b"\xef\xbb\xbf" + "应该去\r\nabc\n".encode()
    assert main(["--input", str(source), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["source"] == "因该去"  # no BOM in JSON


def test_a_byte_order_mark_before_a_bad_line_is_kept(tmp_path, capsys):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(b"\xef\xbb\xbfab\xff\nok\n")
    assert main(["--input", str(source), "--output", str(output), "--no-progress"]) == 1
    assert output.read_bytes() == source.read_bytes()
    assert f"{source}:1: not valid UTF-8 (byte 0xff at column 3)" in capsys.readouterr().err


# --- 9. text arguments that are not UTF-8 -------------------------------------------------------


def test_an_argument_that_is_not_utf8_is_reported_in_valid_json(capsys):
    # Python hands the undecodable byte 0xff of argv over as the lone surrogate U+DCFF.
    assert main(["--json", "abc", "x\udcff"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "argument 2: not valid UTF-8 (byte 0xff at column 2)\n"
    assert [json.loads(line) for line in captured.out.splitlines()] == [
        {"source": "abc", "target": "abc", "edits": []},
        {"argument": 2, "error": "argument 2: not valid UTF-8 (byte 0xff at column 2)"}]


def test_an_argument_that_is_not_utf8_passes_through_as_given():
    proc = run_cli(b"x\xff", b"abc")
    assert proc.returncode == 1
    assert proc.stdout == b"x\xff\nabc\n"
    assert proc.stderr == b"argument 1: not valid UTF-8 (byte 0xff at column 2)\n"
    proc = run_cli(b"--json", b"\xff")
    assert proc.returncode == 1
    assert json.loads(proc.stdout.decode("utf-8")) == {
        "argument": 1, "error": "argument 1: not valid UTF-8 (byte 0xff at column 1)"}
