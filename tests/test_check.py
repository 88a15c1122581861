"""`python -m corrector check` with the shipped model on a tree of every format and encoding:
each planted error found at its line and column, nothing in code, addresses or front matter,
--fix changing exactly the planted characters, byte for byte, in each file's encoding."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from corrector import check

ROOT = Path(__file__).resolve().parent.parent
FIXES = {"因该": "应该", "高心": "高兴", "天汽": "天气", "做业": "作业", "己经": "已经"}

# Planted errors are marked ⟦因该⟧: where the shipped model must find them. The same words
# outside the marks (code, addresses, front matter, an ignored paragraph) must not be reported.
GUIDE = """\
---
title: 我们因该好好学习
---
# 使用说明：我们⟦因该⟧好好学习

这个问题很重要，我们⟦因该⟧认真对待。今天⟦天汽⟧很好。

```python
print("我们因该好好学习")
```

调用 `因该()` 之前，请看[文档](https://example.com/因该/高心 "我们因该好好学习")和 <https://example.com/天汽>。

| 项目 | 说明 |
|------|------|
| 作业 | 我们的作业⟦己经⟧做完了。 |
| 要求 | 请大家按时完成⟦做业⟧。 |

<!-- corrector: ignore -->
他今天很高心。

他今天很⟦高心⟧。
"""

FILES = {  # name: (template, codec, byte order mark, line ending)
    "docs/guide.md": (GUIDE, "utf-8", b"", "\n"),
    "docs/notes.txt": ("第一行没有错误。\n他今天很⟦高心⟧。\n我们⟦因该⟧好好学习。\n", "utf-8", b"", "\n"),
    "docs/legacy-gbk.txt": ("这是一个旧文件。\n请大家按时完成⟦做业⟧。\n", "gb18030", b"", "\n"),
    "docs/wide.md": ("# 标题\n\n我们的作业⟦己经⟧做完了。\n", "utf-16-le", b"\xff\xfe", "\n"),
    "docs/windows.rst": ("标题\n====\n\n今天⟦天汽⟧很好。\n\n示例::\n\n    我们因该好好学习\n", "utf-8",
                         b"\xef\xbb\xbf", "\r\n"),
    "media/film.srt": ("1\n00:00:01,000 --> 00:00:03,000\n这个问题很重要，\n我们⟦因该⟧认真对待。\n\n"
                       "2\n00:00:04,000 --> 00:00:05,000\n他今天很⟦高心⟧。\n", "utf-8", b"", "\n"),
}
DOCX = ["第一段没有错误。", "这个问题很重要，我们⟦因该⟧认真对待。", "今天⟦天汽⟧很好。"]


def planted(template: str) -> tuple[str, str, list[tuple[int, int, str, str]]]:
    """The text, its corrected text, and (line, column, source, target) of each planted error."""
    text = template.replace("⟦", "").replace("⟧", "")
    fixed = re.sub("⟦([^⟧]+)⟧", lambda m: FIXES[m.group(1)], template)
    found = []
    for number, line in enumerate(template.split("\n"), 1):
        for match in re.finditer("⟦([^⟧]+)⟧", line):
            column = len(line[:match.start()].replace("⟦", "").replace("⟧", "")) + 1
            wrong = match.group(1)
            found += [(number, column + i, a, b) for i, (a, b) in enumerate(zip(wrong, FIXES[wrong], strict=True))
                      if a != b]
    return text, fixed, found


def docx_file(path: Path, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    document.save(path)


@pytest.fixture(scope="module")
def corrector():
    """The shipped model, loaded once for the module."""
    from corrector import Corrector

    if not (ROOT / "data" / "model" / "scorer.json").exists():
        pytest.skip("the shipped model (data/model) is not here")
    return Corrector()


@pytest.fixture()
def tree(tmp_path):
    """The files of FILES and a .docx; (root, {relative path: (original bytes, fixed bytes)}, planted)."""
    expected_bytes, expected_findings = {}, {}
    for name, (template, codec, bom, ending) in FILES.items():
        text, fixed, found = planted(template)
        data, fixed_data = (bom + t.replace("\n", ending).encode(codec) for t in (text, fixed))
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
        expected_bytes[name] = (data, fixed_data)
        expected_findings[name] = found
    docx_text, _, docx_found = planted("\n".join(DOCX))
    docx_file(tmp_path / "docs/report.docx", docx_text.split("\n"))
    expected_findings["docs/report.docx"] = docx_found
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.md").write_text("我们因该好好学习。\n", encoding="utf-8")
    return tmp_path, expected_bytes, expected_findings


def reported(out: str, root: Path) -> dict[str, list[tuple[int, int, str, str]]]:
    """Findings of the text format: {relative path: [(line, column, source, target)]}, by the
    word pair's differing character."""
    found: dict[str, list] = {}
    for line in out.splitlines():
        match = re.fullmatch(r"(.+):(\d+):(\d+): (\S+) → (\S+) \((\w+), (\d\.\d\d)\)", line)
        assert match, line
        path, row, column, word, suggestion = match.group(1, 2, 3, 4, 5)
        source, target = next((a, b) for a, b in zip(word, suggestion, strict=True) if a != b)
        found.setdefault(Path(path).relative_to(root).as_posix(), []).append((int(row), int(column), source, target))
    return found


def test_every_planted_error_is_reported_at_its_place_and_nothing_else(tree, corrector, capsys, monkeypatch):
    root, _bytes, want = tree
    monkeypatch.chdir(root)
    status = check.main([str(root)], corrector=corrector)
    out = capsys.readouterr().out
    assert status == 1
    assert reported(out, root) == want


def test_fix_changes_exactly_the_planted_characters(tree, corrector, capsys, monkeypatch):
    import docx

    root, expected_bytes, _want = tree
    monkeypatch.chdir(root)
    assert check.main(["--fix", str(root)], corrector=corrector) == 1
    for name, (_original, fixed) in expected_bytes.items():
        assert (root / name).read_bytes() == fixed, name
    paragraphs = [p.text for p in docx.Document(str(root / "docs/report.docx")).paragraphs]
    assert paragraphs == planted("\n".join(DOCX))[1].split("\n")
    capsys.readouterr()
    assert check.main([str(root)], corrector=corrector) == 0


def test_diff_writes_nothing(tree, corrector, capsys, monkeypatch):
    root, expected_bytes, _want = tree
    monkeypatch.chdir(root)
    assert check.main(["--diff", str(root / "docs")], corrector=corrector) == 1
    out = capsys.readouterr().out
    assert "-他今天很高心。\n+他今天很高兴。\n" in out and "+请大家按时完成作业。\n" in out
    for name, (original, _fixed) in expected_bytes.items():
        assert (root / name).read_bytes() == original, name


def test_an_undecodable_file_exits_2_and_the_rest_is_still_checked(tree, corrector, capsys):
    root, _bytes, want = tree
    broken = b"\xef\xbb\xbf" + "他今天很高心。".encode() + b"\xff\n"  # a UTF-8 mark, then a byte UTF-8 never has
    (root / "docs" / "broken.txt").write_bytes(broken)
    assert check.main(["--fix", str(root)], corrector=corrector) == 2
    captured = capsys.readouterr()
    assert "broken.txt: error: not valid utf-8 near byte 24" in captured.err
    assert reported(captured.out.replace(" [fixed]", ""), root) == want
    assert (root / "docs" / "broken.txt").read_bytes() == broken


GITHUB = re.compile(r"::warning file=([^,]+),line=(\d+),col=(\d+),endColumn=(\d+),title=Chinese spelling::"
                    r"(\S+) → (\S+) \((pinyin|shape|other), (\d\.\d\d)\)")


def test_github_format(tree, corrector, capsys, monkeypatch):
    root, _bytes, want = tree
    monkeypatch.chdir(root)
    assert check.main(["--format", "github", "docs"], corrector=corrector) == 1
    lines = capsys.readouterr().out.splitlines()
    matches = [GITHUB.fullmatch(line) for line in lines]
    assert all(matches), lines
    assert {(m.group(1), int(m.group(2)), int(m.group(3))) for m in matches} == {
        (name, line, column) for name, found in want.items() if name.startswith("docs/")
        for line, column, _s, _t in found}


def test_the_command_line(tree):
    """`python -m corrector check` as a user runs it: the model loaded by the checker itself."""
    root, _bytes, want = tree
    result = subprocess.run([sys.executable, "-m", "corrector", "check", "docs/notes.txt"], cwd=root,
                            capture_output=True, text=True, timeout=300,
                            env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1, result.stderr
    assert [line.split(": ")[0] for line in result.stdout.splitlines()] == [
        f"docs/notes.txt:{line}:{column}" for line, column, _s, _t in want["docs/notes.txt"]]
