"""`python -m corrector check`: readers, offsets, encodings, config, formats and --fix mechanics,
with a fake corrector that fixes a few known words (no model: fast and exact)."""

from __future__ import annotations

import json
import re
import sys

import pytest

from corrector import check
from corrector.check import config as check_config
from corrector.check.documents import rst_segments, srt_segments
from corrector.check.encodings import Encoding, detect, numbered
from corrector.check.engine import check_segments
from corrector.check.markdown import markdown_segments
from corrector.check.report import Finding, github_line, sarif_log
from corrector.cli_io import WINDOW_CHARS
from corrector.result import Edit, Result

WRONG = {"因该": "应该", "高心": "高兴", "天汽": "天气", "做业": "作业", "己经": "已经"}


class FakeCorrector:
    """Corrects the words of WRONG wherever they are, character by character."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def correct_batch(self, texts: list[str]) -> list[Result]:
        self.texts.extend(texts)
        results = []
        for text in texts:
            edits = []
            for wrong, right in WRONG.items():
                for match in re.finditer(wrong, text):
                    edits += [Edit(match.start() + i, a, b, 0.9, "pinyin")
                              for i, (a, b) in enumerate(zip(wrong, right, strict=True)) if a != b]
            results.append(Result.applying(text, edits))
        return results


def findings(segments, path="f") -> list[Finding]:
    return check_segments(segments, FakeCorrector(), path)


def positions(text: str, found: list[Finding]) -> list[tuple[int, int, str]]:
    """(line, column, source) of each finding, after checking that the character there in `text`
    (lines split as the checker splits them) is the finding's source."""
    lines = re.split(r"\r\n|\r|\n", text)
    for f in found:
        assert lines[f.line - 1][f.column - 1] == f.source, f
    return [(f.line, f.column, f.source) for f in found]


def planted(template: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The text of a template whose expected findings are marked ⟦因该⟧, and where their wrong
    characters are: (line, column, character)."""
    text = template.replace("⟦", "").replace("⟧", "")
    out = []
    for number, line in enumerate(re.split(r"\r\n|\r|\n", template), 1):
        for match in re.finditer("⟦([^⟧]+)⟧", line):
            column = len(line[:match.start()].replace("⟦", "").replace("⟧", "")) + 1
            wrong = match.group(1)
            out += [(number, column + i, a) for i, (a, b) in enumerate(zip(wrong, WRONG[wrong], strict=True)) if a != b]
    return text, sorted(out)


# ---- Markdown --------------------------------------------------------------------------------

MARKDOWN = """\
---
title: 因该
tags: [高心]
---
# 标题⟦因该⟧ #

Setext 标题⟦因该⟧
===

少先队员⟦因该⟧为老人**让座**，*我们* ~~⟦因该⟧~~ 这样做
续行：他今天很⟦高心⟧。

> 引用中我们⟦因该⟧这样
> - 列表里他很⟦高心⟧

1. 第一项⟦因该⟧
   续行⟦天汽⟧很好

用 `因该` 函数、``x`因该`x`` 和 <span title="因该">标签</span>，然后⟦因该⟧
见[链接⟦因该⟧](http://example.com/因该 "标题因该")和[参考][因该]以及 <http://x.cn/因该> 后⟦因该⟧
图片 ![因该](a/因该.png) 后⟦因该⟧ 转义 \\*⟦因该⟧\\* &amp; &#22240;该 与 ⟦因该⟧

| 列 | 说明 |
|----|------|
| 我们⟦因该⟧ | 他很⟦高心⟧ |
| `因该` | [⟦天汽⟧](http://a/天汽) 与 ⟦天汽⟧ |

```python
s = "因该"
```

    缩进代码因该

<div>
HTML 块因该
</div>

<!-- corrector: ignore -->
被忽略的因该。

忽略之后⟦因该⟧

[因该]: http://example.com/因该
"""


def test_markdown_reports_prose_at_its_exact_place_and_nothing_else():
    text, want = planted(MARKDOWN)
    # `&#22240;该` is 因该 written with an entity: read, never reported (it cannot be fixed in place)
    assert positions(text, findings(markdown_segments(text))) == want


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_markdown_columns_with_other_line_endings(ending):
    text, want = planted(MARKDOWN.replace("\n", ending))
    assert positions(text, findings(markdown_segments(text))) == want


def test_markdown_joins_chinese_lines_and_keeps_code_out_of_the_text():
    corrector = FakeCorrector()
    check_segments(markdown_segments("我们\n因该 `因该` 做。\n"), corrector, "f")
    assert corrector.texts == ["我们因该 _ 做。"]


# ---- reStructuredText and subtitles ------------------------------------------------------------

RST = """\
标题⟦因该⟧
========

少先队员⟦因该⟧为老人让座，他很⟦高心⟧
第二行⟦天汽⟧很好

示例::

    代码因该 = 1

    还是代码因该

回到正文⟦因该⟧

.. note::

   指令里的因该

.. _因该: http://x/因该

.. corrector: ignore

被忽略的因该

用 ``因该`` 和 :code:`因该` 以及 `链接⟦因该⟧ <http://x/因该>`_ 后⟦因该⟧

+------+------+
| ⟦因该⟧ | ⟦高心⟧ |
+------+------+
"""


def test_rst_skips_literal_blocks_directives_and_inline_code():
    text, want = planted(RST)
    assert positions(text, findings(rst_segments(text))) == want


SRT = """\
1
00:00:01,000 --> 00:00:02,500
少先队员⟦因该⟧
<i>为老人让座，他很⟦高心⟧</i>

2
00:00:03,000 --> 00:00:04,000
{\\an8}今天⟦天汽⟧很好

"""


def test_srt_reads_only_subtitle_text():
    text, want = planted(SRT)
    found = findings(srt_segments(text))
    assert positions(text, found) == want
    assert all(f.line not in (1, 2, 6, 7) for f in found)


# ---- encodings and plain text ------------------------------------------------------------------

@pytest.mark.parametrize(("codec", "bom"), [("utf-8", b""), ("utf-8", b"\xef\xbb\xbf"), ("gb18030", b""),
                                            ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")])
def test_encodings_are_detected(tmp_path, codec, bom):
    path = tmp_path / "a.txt"
    path.write_bytes(bom + "第一行。\r\n少先队员因该为老人让座。\n".encode(codec if codec != "gb18030" else "gbk"))
    assert detect(path) == Encoding(codec, bom)
    lines = [(line, text, ending) for line, _col, text, ending in numbered(path, detect(path))]
    assert lines == [(1, "第一行。", "\r\n"), (2, "少先队员因该为老人让座。", "\n")]


def test_binary_and_undecodable_files_are_told_apart(tmp_path):
    from corrector.check.encodings import BinaryFile, DecodeProblem

    (tmp_path / "bin.txt").write_bytes(b"\x00\x01\x02abc")
    with pytest.raises(BinaryFile):
        detect(tmp_path / "bin.txt")
    (tmp_path / "bad.txt").write_bytes(b"\xef\xbb\xbf\xff\xfe\xfd")  # a UTF-8 BOM, then no UTF-8
    with pytest.raises(DecodeProblem):
        detect(tmp_path / "bad.txt")


def test_long_lines_are_read_in_windows_with_their_columns(tmp_path):
    filler = "这是一个很长的句子。" * (WINDOW_CHARS // 10 + 7)
    text = filler + "他很高心。" + filler + "我们因该\n"
    path = tmp_path / "long.txt"
    path.write_text(text, encoding="utf-8")
    pieces = list(numbered(path, detect(path)))
    assert len(pieces) > 2 and all(len(piece[2]) <= WINDOW_CHARS for piece in pieces)
    corrector = FakeCorrector()
    assert check.main([str(path)], corrector=corrector) == 1
    assert max(len(t) for t in corrector.texts) <= WINDOW_CHARS
    out = tmp_path / "fixed"
    out.write_bytes(path.read_bytes())
    assert check.main(["--fix", str(out)], corrector=FakeCorrector()) == 1
    assert out.read_text(encoding="utf-8") == text.replace("高心", "高兴").replace("因该", "应该")


# ---- the command: exit status, fix, diff, config, files ----------------------------------------

def run(argv, capsys, corrector=None):
    status = check.main(argv, corrector=corrector or FakeCorrector())
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_exit_status_clean_findings_and_errors(tmp_path, capsys):
    (tmp_path / "clean.md").write_text("今天天气很好。\n", encoding="utf-8")
    (tmp_path / "bad.md").write_text("我们因该这样。\n", encoding="utf-8")
    assert run([str(tmp_path / "clean.md")], capsys)[0] == 0
    status, out, _ = run([str(tmp_path)], capsys)
    assert status == 1 and out == f"{tmp_path / 'bad.md'}:1:3: 因该 → 应该 (pinyin, 0.90)\n"
    status, out, err = run([str(tmp_path), str(tmp_path / "missing.md")], capsys)
    assert status == 2 and "missing.md: no such file" in err and "bad.md:1:3" in out
    with pytest.raises(SystemExit) as exit_info:
        check.main(["--format", "xml", str(tmp_path)])
    assert exit_info.value.code == 2


def test_an_undecodable_file_is_reported_left_alone_and_the_others_checked(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xef\xbb\xbf\xe5\x9b\xa0\xe8\xaf\xa5\xff\n")
    good = tmp_path / "good.txt"
    good.write_text("我们因该这样。\n", encoding="utf-8")
    status, out, err = run(["--fix", str(tmp_path)], capsys)
    assert status == 2 and "bad.txt: error" in err
    assert bad.read_bytes() == b"\xef\xbb\xbf\xe5\x9b\xa0\xe8\xaf\xa5\xff\n"
    assert good.read_text(encoding="utf-8") == "我们应该这样。\n"


def test_fix_changes_only_the_corrected_characters(tmp_path, capsys):
    cases = {  # name: (text, fixed text, codec, byte order mark)
        "crlf.md": ("# 标题\r\n\r\n我们因该这样，`因该`。\r\n他很高心\r\n",
                    "# 标题\r\n\r\n我们应该这样，`因该`。\r\n他很高兴\r\n", "utf-8", b""),
        "bom.txt": ("我们因该这样。\n第二行\n没有换行结尾的高心", "我们应该这样。\n第二行\n没有换行结尾的高兴",
                    "utf-8", b"\xef\xbb\xbf"),
        "gbk.txt": ("第一行。\r\n少先队员因该为老人让座。\r\n", "第一行。\r\n少先队员应该为老人让座。\r\n", "gb18030", b""),
        "utf16.rst": ("标题\n====\n\n他今天很高心。\n", "标题\n====\n\n他今天很高兴。\n", "utf-16-le", b"\xff\xfe"),
        "subs.srt": ("1\r\n00:00:01,000 --> 00:00:02,000\r\n我们因该走了\r\n",
                     "1\r\n00:00:01,000 --> 00:00:02,000\r\n我们应该走了\r\n", "utf-8", b""),
    }
    for name, (text, _fixed, codec, bom) in cases.items():
        (tmp_path / name).write_bytes(bom + text.encode(codec))
    status, _out, _err = run(["--fix", str(tmp_path)], capsys)
    assert status == 1
    for name, (_text, fixed, codec, bom) in cases.items():
        assert (tmp_path / name).read_bytes() == bom + fixed.encode(codec), name
    assert run([str(tmp_path)], capsys)[0] == 0


def test_fix_keeps_permissions_and_writes_through_symlinks(tmp_path, capsys):
    real = tmp_path / "real.md"
    real.write_text("我们因该这样。\n", encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "sub" / "link.md"
    link.parent.mkdir()
    link.symlink_to(real)
    assert run(["--fix", str(link)], capsys)[0] == 1
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "我们应该这样。\n"
    assert real.stat().st_mode & 0o777 == 0o640
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "a.md"
    text = "第一行\n\n我们因该这样。\n\n1\n2\n3\n4\n5\n6\n7\n8\n他很高心"
    path.write_text(text, encoding="utf-8")
    status, out, _ = run(["--diff", str(path)], capsys)
    assert status == 1 and path.read_text(encoding="utf-8") == text
    assert out == (f"--- {path}\n+++ {path}\n@@ -1,6 +1,6 @@\n 第一行\n \n-我们因该这样。\n+我们应该这样。\n \n 1\n 2\n"
                   f"@@ -10,4 +10,4 @@\n 6\n 7\n 8\n-他很高心\n\\ No newline at end of file\n+他很高兴\n"
                   "\\ No newline at end of file\n")


def test_walk_skips_hidden_unsupported_excluded_and_out_of_tree_links(tmp_path, capsys):
    tree = tmp_path / "tree"
    for name in ("a.md", "b.txt", "c.py", ".hidden.md", ".git/x.md", "node/d.md", "keep/e.rst"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("我们因该这样。\n", encoding="utf-8")
    outside = tmp_path / "outside.md"
    outside.write_text("我们因该这样。\n", encoding="utf-8")
    (tree / "out.md").symlink_to(outside)
    (tree / "dirlink").symlink_to(tree / "keep", target_is_directory=True)
    (tree / "in.md").symlink_to(tree / "a.md")  # the same file twice: read once
    (tree / "bin.md").write_bytes(b"\x00\x00binary")
    status, out, err = run(["--exclude", "node", str(tree)], capsys)
    paths = sorted(line.split(":")[0] for line in out.splitlines())
    assert status == 1
    assert paths == [str(tree / "a.md"), str(tree / "b.txt"), str(tree / "keep/e.rst")]
    assert "out.md: skipped, a symlink out of" in err and "bin.md: skipped, binary" in err
    # a file named on the command line is checked whatever its suffix
    assert run([str(tree / "c.py")], capsys)[0] == 1


def test_config_files_and_flags_over_them(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    (project / "docs" / "old").mkdir(parents=True)
    for name in ("docs/a.md", "docs/old/b.md", "docs/c.txt"):
        (project / name).write_text("我们因该这样。\n", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[tool.corrector]\nthreshold = 0.5\ninclude = ["*.md"]\nexclude = ["docs/old/**"]\n'
        'whitelist = ["因该这样"]\nconfusion = ["因 应"]\n', encoding="utf-8")
    monkeypatch.chdir(project / "docs")
    settings = check.settings_for(check.parse_args(["."]))
    assert settings.source == project / "pyproject.toml" and settings.threshold == 0.5
    assert settings.whitelist == ["因该这样"] and settings.confusion == ["因 应"]
    status, out, _ = run(["."], capsys)
    assert status == 1 and [line.split(":")[0] for line in out.splitlines()] == ["a.md"]
    status, out, _ = run(["--include", "*.txt", "--exclude", "nothing", "."], capsys)
    assert [line.split(":")[0] for line in out.splitlines()] == ["c.txt"]
    (project / ".corrector.toml").write_text("threshold = 0.7\n", encoding="utf-8")  # before pyproject.toml
    assert check.settings_for(check.parse_args(["."])).threshold == 0.7
    assert check.settings_for(check.parse_args(["--threshold", "0.2", "."])).threshold == 0.2
    assert check.settings_for(check.parse_args(["--no-config", "."])).threshold is None


@pytest.mark.parametrize("table", ["threshold = 2\n", "colour = 1\n", "include = \"*.md\"\n", "threshold = [\n"])
def test_bad_config_is_a_usage_error(tmp_path, capsys, monkeypatch, table):
    (tmp_path / ".corrector.toml").write_text(table, encoding="utf-8")
    (tmp_path / "a.md").write_text("我们因该这样。\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    status, out, err = run(["a.md"], capsys)
    assert status == 2 and out == "" and ".corrector.toml" in err


def test_config_pairs_become_a_confusion_set(tmp_path):
    confusion = check.user_confusion(["因 应", "坐:座"])
    assert "应" in confusion.user["因"] and "座" in confusion.user["坐"]
    with pytest.raises(check.ConfigError):
        check.user_confusion(["因应 x"])


def test_globs():
    cases = [("*.md", "docs/a.md", True), ("docs/**", "docs/x/y.md", True), ("**/CHANGELOG.md", "CHANGELOG.md", True),
             ("docs/*.md", "docs/x/y.md", False), ("vendor", "a/vendor/b.md", True), ("a?.md", "ab.md", True),
             ("[!x].md", "x.md", False)]
    for pattern, path, result in cases:
        assert check_config.matches([pattern], check_config.Path(path), check_config.Path.cwd()) is result, pattern


def test_missing_extra_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "markdown_it", None)
    (tmp_path / "a.md").write_text("我们因该这样。\n", encoding="utf-8")
    status, _out, err = run([str(tmp_path)], capsys)
    assert status == 2 and "pip install 'electra-csc[check]'" in err and "markdown-it-py" in err


def test_the_module_command_runs_check(tmp_path, capsys, monkeypatch):
    from corrector import __main__

    path = tmp_path / "a.md"
    path.write_text("No Chinese text: the model is never loaded.\n", encoding="utf-8")
    assert __main__.main(["check", "--no-config", str(path)]) == 0
    assert __main__.main(["check", "--no-config", str(tmp_path / "missing.md")]) == 2


# ---- report formats ----------------------------------------------------------------------------

GITHUB = re.compile(r"::warning file=[^,:]+,line=\d+,col=\d+,endColumn=\d+,title=[^:,]+::.+")


def sample_findings() -> list[Finding]:
    return [Finding("docs/说明 a.md", 3, 5, "因", "应", "pinyin", 0.9612, "因该", "应该"),
            Finding("w.docx", 2, 1, "己", "已", "shape", 0.97, "己经", "已经"),
            Finding("x,y:%.md", 1, 1, "做", "作", "other", 0.5)]


def test_github_annotations():
    lines = [github_line(f) for f in sample_findings()]
    assert lines[0] == "::warning file=docs/说明 a.md,line=3,col=5,endColumn=5,title=Chinese spelling::因该 → 应该 (pinyin, 0.96)"
    assert all(GITHUB.fullmatch(line) for line in lines)
    assert lines[2].startswith("::warning file=x%2Cy%3A%25.md,")


def test_json_format(tmp_path, capsys):
    (tmp_path / "a.md").write_text("我们因该这样。\n", encoding="utf-8")
    status, out, _ = run(["--format", "json", str(tmp_path)], capsys)
    assert status == 1
    assert json.loads(out) == [{"path": str(tmp_path / "a.md"), "line": 1, "column": 3, "source": "因", "target": "应",
                                "word": "因该", "suggestion": "应该", "kind": "pinyin", "confidence": 0.9,
                                "fixed": False}]


def _object(properties: dict, required: tuple[str, ...] = (), **extra) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": properties,
            **({"required": list(required)} if required else {}), **extra}


# The part of the SARIF 2.1.0 schema (oasis-tcs/sarif-spec, Schemata/sarif-schema-2.1.0.json, draft-04)
# that covers what the checker writes: the same types, required properties, enums, minimums and
# additionalProperties: false; properties the checker never writes are left out (so they fail here).
LEVEL = {"enum": ["none", "note", "warning", "error"], "type": "string"}
SARIF_SUBSET = _object({
    "$schema": {"type": "string", "format": "uri"},
    "version": {"enum": ["2.1.0"], "type": "string"},
    "runs": {"type": ["array", "null"], "items": {"$ref": "#/definitions/run"}},
}, ("version", "runs"), **{"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {
    "run": _object({"tool": {"$ref": "#/definitions/tool"},
                    "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
                    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"], "type": "string"}}, ("tool",)),
    "tool": _object({"driver": {"$ref": "#/definitions/toolComponent"}}, ("driver",)),
    "toolComponent": _object({"name": {"type": "string"}, "version": {"type": "string"},
                              "rules": {"type": "array", "uniqueItems": True,
                                        "items": {"$ref": "#/definitions/reportingDescriptor"}}}, ("name",)),
    "reportingDescriptor": _object({"id": {"type": "string"}, "name": {"type": "string"},
                                    "shortDescription": {"$ref": "#/definitions/multiformatMessageString"},
                                    "defaultConfiguration": _object({"level": LEVEL})}, ("id",)),
    "multiformatMessageString": _object({"text": {"type": "string"}}, ("text",)),
    "message": _object({"text": {"type": "string"}, "id": {"type": "string"}},
                       anyOf=[{"required": ["text"]}, {"required": ["id"]}]),
    "result": _object({"ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": -1},
                       "level": LEVEL, "message": {"$ref": "#/definitions/message"},
                       "locations": {"type": "array", "items": {"$ref": "#/definitions/location"}},
                       "fixes": {"type": "array", "uniqueItems": True, "items": {"$ref": "#/definitions/fix"}},
                       "properties": {"type": "object"}}, ("message",)),
    "location": _object({"physicalLocation": {"$ref": "#/definitions/physicalLocation"}}),
    "physicalLocation": _object({"artifactLocation": {"$ref": "#/definitions/artifactLocation"},
                                 "region": {"$ref": "#/definitions/region"}},
                                anyOf=[{"required": ["address"]}, {"required": ["artifactLocation"]}]),
    "artifactLocation": _object({"uri": {"type": "string", "format": "uri-reference"}, "uriBaseId": {"type": "string"}}),
    "region": _object({"startLine": {"type": "integer", "minimum": 1}, "startColumn": {"type": "integer", "minimum": 1},
                       "endLine": {"type": "integer", "minimum": 1}, "endColumn": {"type": "integer", "minimum": 1}}),
    "fix": _object({"description": {"$ref": "#/definitions/message"},
                    "artifactChanges": {"type": "array", "minItems": 1, "uniqueItems": True,
                                        "items": {"$ref": "#/definitions/artifactChange"}}}, ("artifactChanges",)),
    "artifactChange": _object({"artifactLocation": {"$ref": "#/definitions/artifactLocation"},
                               "replacements": {"type": "array", "minItems": 1,
                                                "items": {"$ref": "#/definitions/replacement"}}},
                              ("artifactLocation", "replacements")),
    "replacement": _object({"deletedRegion": {"$ref": "#/definitions/region"},
                            "insertedContent": _object({"text": {"type": "string"}})}, ("deletedRegion",)),
}})


def test_sarif_validates_against_the_schema(tmp_path, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft4Validator(SARIF_SUBSET)
    log = sarif_log(sample_findings(), "0.1.0")
    validator.validate(log)
    result = log["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "docs/%E8%AF%B4%E6%98%8E%20a.md"
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 5, "endColumn": 6}
    assert log["runs"][0]["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    (tmp_path / "a.md").write_text("我们因该这样。\n", encoding="utf-8")
    status, out, _ = run(["--format", "sarif", str(tmp_path)], capsys)
    assert status == 1
    validator.validate(json.loads(out))
    broken = json.loads(out)
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert not validator.is_valid(broken)


# ---- Word ----------------------------------------------------------------------------------------

def test_docx_paragraphs_tables_and_fix_inside_runs(tmp_path, capsys):
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("这是第一段，没有错误。")
    paragraph = document.add_paragraph("少先队员")
    paragraph.add_run("因").bold = True
    paragraph.add_run("该为老人让座。")
    document.add_table(rows=1, cols=2).cell(0, 1).paragraphs[0].add_run("他今天很高心。")
    path = tmp_path / "a.docx"
    document.save(path)
    status, out, _ = run([str(path)], capsys)
    assert status == 1
    assert out.splitlines() == [f"{path}:2:5: 因该 → 应该 (pinyin, 0.90)", f"{path}:4:6: 高心 → 高兴 (pinyin, 0.90)"]
    assert run(["--fix", str(path)], capsys)[0] == 1
    fixed = docx.Document(str(path))
    runs = fixed.paragraphs[1].runs
    assert [r.text for r in runs] == ["少先队员", "应", "该为老人让座。"] and runs[1].bold
    assert fixed.tables[0].cell(0, 1).text == "他今天很高兴。"
    assert run([str(path)], capsys)[0] == 0


def test_pre_commit_hook_definition():
    yaml = pytest.importorskip("yaml")
    root = check_config.Path(__file__).resolve().parent.parent
    (hook,) = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "chinese-spelling" and hook["entry"] == "python -m corrector check"
    assert hook["language"] == "python" and hook["require_serial"] is True
    files = re.compile(hook["files"])
    assert all(files.search(name) for name in ("a.md", "docs/b.markdown", "c.txt", "d.rst", "e.srt", "f.docx"))
    assert not any(files.search(name) for name in ("a.py", "md", "a.md.bak"))
    extra = check_config.tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(hook["additional_dependencies"]) == {d for d in extra["check"] if "python_version" not in d}
