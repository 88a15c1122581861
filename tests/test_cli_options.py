"""Issue #46 for the library and CLI: option checks, addresses kept as written, lines that are not
UTF-8 passed through, the progress bar's clock, and the documented ProcessCorrector snippet run as
a script from another directory."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_pipeline import RIGHT, WRONG

from corrector.__main__ import main
from corrector.runtime.models import DEFAULT_MODEL_DIR

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = (DEFAULT_MODEL_DIR / "discriminator" / "model.safetensors").exists()


# --- 5. options out of range: a clear message and exit status 2, before any model loads --------


BAD_OPTIONS = {  # option and value: what the message says
    "--threshold -1": "outside [0, 1]", "--threshold 1.5": "outside [0, 1]", "--threshold nan": "outside [0, 1]",
    "--threshold high": "not a number", "--detection-threshold inf": "outside [0, 1]",
    "--max-edits -1": "below 0", "--max-edits 2.5": "not a whole number", "--batch-size 0": "below 1",
    "--threads -2": "below 1",
}


@pytest.mark.parametrize("given", BAD_OPTIONS)
def test_out_of_range_options_exit_2_with_a_clear_message(given, capsys):
    option, value = given.split()
    words = BAD_OPTIONS[given]
    with pytest.raises(SystemExit) as stop:
        main(["--model", "/nonexistent/model", option, value, WRONG])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and words in err, err


def test_options_at_the_edges_of_their_range_are_accepted(trained_model_dir, capsys):
    assert main(["--model", str(trained_model_dir), "--threshold", "1", "--max-edits", "0", WRONG]) == 0
    assert capsys.readouterr().out.splitlines() == [WRONG]


# --- 6. Chinese inside URLs and e-mail addresses is kept byte for byte --------------------------


def test_address_offsets_cover_urls_and_email_addresses():
    from corrector.text.protection import address_offsets

    text = "请访问 https://example.com/因该?q=1 或 test@因该.com。联系我test@a.cn，见www.因该.cn/路径。因该"
    kept = "".join(text[i] if i in address_offsets(text) else "_" for i in range(len(text)))
    assert [m for m in re.split("_+", kept) if m] == [
        "https://example.com/因该?q=1", "test@因该.com", "test@a.cn", "www.因该.cn/路径"]


def test_chinese_inside_addresses_is_not_corrected(trained_model_dir):
    from corrector.pipeline import Corrector

    corrector = Corrector(str(trained_model_dir))
    text = f"请访问 https://example.com/{WRONG}?q=1 或 test@{WRONG}.com 然后{WRONG}"
    result = corrector.correct(text)
    assert result.target == f"请访问 https://example.com/{WRONG}?q=1 或 test@{WRONG}.com 然后{RIGHT}"
    assert all(e.position > text.index(".com ") for e in result.edits)


@pytest.mark.skipif(not SHIPPED, reason="the shipped model is not in data/model")
def test_shipped_model_keeps_the_issue_sentence():
    from corrector.pipeline import Corrector

    text = "请访问 https://example.com/因该?q=1 或 test@因该.com"
    assert Corrector(None).correct(text).target == text


# --- 9. --input: a line that is not UTF-8 passes through; the bar's clock ----------------------


def test_a_line_that_is_not_utf8_is_passed_through_unchanged(trained_model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    bad = b"bad \xff\xfe line \xe5\x9b"
    source.write_bytes(WRONG.encode() + b"\n" + bad + b"\r\n" + "今天天气很好\n".encode())
    output = tmp_path / "out.txt"
    status = main(["--model", str(trained_model_dir), "--input", str(source), "--output", str(output),
                   "--no-progress"])
    assert status == 1
    assert f"{source}:2:" in capsys.readouterr().err
    assert output.read_bytes() == RIGHT.encode() + b"\n" + bad + b"\r\n" + "今天天气很好\n".encode()


def test_progress_clock_starts_after_the_model_is_loaded(monkeypatch):
    import argparse

    import corrector.__main__ as cli

    class SlowToLoad(cli.LazyCorrector):
        def load_for(self, texts):
            time.sleep(1.0)  # "loading the model"
            self.corrector = object()
            return True

        def correct_batch(self, texts):
            from corrector.result import Result

            return [Result.unchanged(t) for t in texts]

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    lines = io.BytesIO("一\n二\n".encode())
    args = argparse.Namespace(json=False, no_progress=False)
    assert cli.run_lines(SlowToLoad(args), lines, "<test>", io.StringIO(), args, total=2) == 0
    final = err.getvalue().rsplit("\r", 1)[-1]
    assert "2/2" in final and "00:00<" in final, final  # elapsed 0 s, not the 1 s of loading


# --- 8. the ProcessCorrector snippet of the docs, pasted into a script, run from elsewhere ------


def _documented_snippet(document: str) -> str:
    text = (ROOT / document).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return next(block for block in blocks if "ProcessCorrector(" in block)


@pytest.mark.skipif(not SHIPPED, reason="the shipped model is not in data/model")
def test_process_corrector_snippet_runs_as_a_script_from_another_directory(tmp_path):
    snippet = _documented_snippet("docs/service.md")
    assert 'if __name__ == "__main__":' in snippet and 'CorrectorSpec("data/model")' in snippet
    script = tmp_path / "fix.py"
    script.write_text(snippet, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CORRECTOR_MODEL", None)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0].startswith("少先队员应该为老人")
    assert "Loading weights" not in proc.stderr  # no loading bars from the processes


def test_a_relative_model_path_missing_here_says_so(tmp_path, monkeypatch):
    from corrector.runtime.models import resolve_model_paths

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="no model directory"):
        resolve_model_paths("models/mine")


def test_free_memory_goes_back_after_every_block(monkeypatch):
    import argparse

    import corrector.__main__ as cli
    from corrector.result import Result
    from corrector.runtime.allocator import release_free_memory

    assert release_free_memory() in (True, False)  # callable anywhere; True where glibc trimmed
    calls = []
    monkeypatch.setattr(cli, "BLOCK_LINES", 2)
    monkeypatch.setattr(cli, "release_free_memory", lambda: calls.append(1))

    class Echo:
        def correct_batch(self, texts):
            return [Result.unchanged(t) for t in texts]

    args = argparse.Namespace(json=False, no_progress=True)
    assert cli.run_lines(Echo(), io.BytesIO("一\n二\n三\n四\n五\n".encode()), "<t>", io.StringIO(), args) == 0
    assert len(calls) == 3  # one per block of 2 lines
