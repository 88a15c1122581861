"""--fix and --diff: the corrected characters written into the file, nothing else touched.

A text file is rewritten a piece at a time (encodings.pieces, the walk the reader made, so lines
and columns agree) into a temporary file beside it that replaces it only when complete
(outputs.atomic_output: os.replace, the file's permission bits kept, a symlink written through).
It is written in its own encoding, with its byte order mark and its line endings; each replaced
character is first checked to still be the one reported, and a file whose bytes would not come
back unchanged from decoding and encoding (a legacy codec with two spellings of a character) is
left alone. A .docx file has each character replaced in its own `w:t` element and is saved by
python-docx (the zip is written anew; the document's XML is otherwise as it was).

--diff prints a unified diff of the same changes and writes nothing.
"""

from __future__ import annotations

import bisect
import codecs
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..outputs import atomic_output
from .encodings import Encoding, numbered, round_trips
from .report import Finding

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument

CONTEXT = 3  # lines of context around a change in --diff


class FixProblem(Exception):
    """A file that could not be fixed as reported: left as it was, reported (exit status 2)."""


def _by_line(findings: list[Finding]) -> dict[int, list[Finding]]:
    lines: dict[int, list[Finding]] = defaultdict(list)
    for finding in findings:
        lines[finding.line].append(finding)
    return lines


def _apply(text: str, line: int, column: int, edits: list[Finding]) -> str:
    """The piece `text` (starting at 0-based `column` of `line`) with its edits written in."""
    chars = None
    for finding in edits:
        index = finding.column - 1 - column
        if 0 <= index < len(text):
            if text[index] != finding.source:
                raise FixProblem(f"line {line} column {finding.column} is {text[index]!r}, not {finding.source!r}: "
                                 "the file changed since it was read")
            chars = chars if chars is not None else list(text)
            chars[index] = finding.target
    return "".join(chars) if chars is not None else text


def fixable(findings: list[Finding], encoding: Encoding) -> list[Finding]:
    """The findings whose correction the file's encoding can hold."""
    kept = []
    for finding in findings:
        try:
            finding.target.encode(encoding.codec)
        except UnicodeEncodeError:
            continue
        kept.append(finding)
    return kept


def fix_text_file(path: Path, encoding: Encoding, findings: list[Finding]) -> int:
    """Write the findings' corrections into `path`; how many were written."""
    findings = fixable(findings, encoding)
    if not findings:
        return 0
    if not round_trips(path, encoding):
        raise FixProblem(f"its {encoding.codec} bytes do not decode and encode back unchanged; not rewritten")
    lines = _by_line(findings)
    encoder = codecs.getincrementalencoder(encoding.codec)(errors="strict")
    with atomic_output(path, "wb") as out:
        out.write(encoding.bom)
        for line, column, text, ending in numbered(path, encoding):
            if line in lines:
                text = _apply(text, line, column, lines[line])
            out.write(encoder.encode(text + (ending or "")))
        out.write(encoder.encode("", final=True))
    for finding in findings:
        finding.fixed = True
    return len(findings)


def _hunks(changed: list[int]) -> list[tuple[int, int]]:
    """Line ranges (first, last) of the diff's hunks: changed lines with CONTEXT lines around,
    merged where they meet."""
    hunks: list[tuple[int, int]] = []
    for line in sorted(set(changed)):
        first, last = max(1, line - CONTEXT), line + CONTEXT
        if hunks and first <= hunks[-1][1] + 1:
            hunks[-1] = (hunks[-1][0], last)
        else:
            hunks.append((first, last))
    return hunks


def _whole_lines(path: Path, encoding: Encoding, lines: dict[int, list[Finding]],
                 wanted: list[tuple[int, int]]) -> Iterator[tuple[int, str, str, str]]:
    """(line, text, corrected text, ending) of the lines inside `wanted`, pieces joined."""
    number, old, new = 1, [], []
    ranges = iter(wanted)
    current = next(ranges, None)
    for line, column, text, ending in numbered(path, encoding):
        while current is not None and line > current[1]:
            current = next(ranges, None)
        if current is None:
            return
        if line < current[0]:
            continue
        old.append(text)
        new.append(_apply(text, line, column, lines.get(line, [])))
        if ending is not None:
            yield line, "".join(old), "".join(new), ending
            old, new = [], []
        number = line
    if old:
        yield number, "".join(old), "".join(new), ""


def text_diff(path: Path, encoding: Encoding, findings: list[Finding], name: str) -> str:
    """The unified diff of the findings' corrections (lines keep their own endings)."""
    findings = fixable(findings, encoding)
    if not findings:
        return ""
    lines = _by_line(findings)
    hunks = _hunks(list(lines))
    firsts = [first for first, _last in hunks]
    bodies: dict[int, list[str]] = defaultdict(list)
    starts: dict[int, int] = {}
    for line, old, new, ending in _whole_lines(path, encoding, lines, hunks):
        hunk = bisect.bisect_right(firsts, line) - 1
        starts.setdefault(hunk, line)
        suffix = ending or "\n\\ No newline at end of file\n"
        bodies[hunk].append((f"{old}{suffix}", f"{new}{suffix}") if old != new else f"{old}{suffix}")
    out = [f"--- {name}\n", f"+++ {name}\n"]
    for hunk in sorted(bodies):
        out += _hunk(starts[hunk], bodies[hunk])
    return "".join(out)


def _hunk(first: int, body: list[str | tuple[str, str]]) -> list[str]:
    """A hunk's lines: context as it is, each run of changed lines as its old lines then its new."""
    out = [f"@@ -{first},{len(body)} +{first},{len(body)} @@\n"]  # as many old lines as new ones
    old: list[str] = []
    new: list[str] = []
    for item in [*body, None]:
        if isinstance(item, tuple):
            old.append("-" + item[0])
            new.append("+" + item[1])
            continue
        out += old + new
        old, new = [], []
        if item is not None:
            out.append(" " + item)
    return out


def fix_docx(document: DocxDocument, path: Path, findings: list[Finding]) -> int:
    """Replace each finding's character in its w:t element, then save atomically."""
    done = []
    for finding in findings:
        if finding.ref is None:
            continue
        element, index = finding.ref
        text = element.text or ""
        if index >= len(text) or text[index] != finding.source:
            raise FixProblem(f"paragraph {finding.line} column {finding.column} is not {finding.source!r}")
        element.text = text[:index] + finding.target + text[index + 1:]
        done.append(finding)
    if done:
        with atomic_output(path, "wb") as out:
            document.save(out)
        for finding in done:
            finding.fixed = True
    return len(done)


def docx_diff(name: str, paragraphs: list[tuple[int, str]], findings: list[Finding]) -> str:
    """A unified diff of the changed paragraphs (one "line" per paragraph, no context)."""
    lines = _by_line([f for f in findings if f.ref is not None])
    out: list[str] = []
    for number, text in paragraphs:
        if number in lines:
            new = _apply(text, number, 0, lines[number])
            out += [f"@@ -{number},1 +{number},1 @@\n", f"-{text}\n", f"+{new}\n"]
    return "".join([f"--- {name}\n", f"+++ {name}\n", *out]) if out else ""
