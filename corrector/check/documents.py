"""Documents as the corrector reads them: prose `Segment`s, each character tied to where it is.

A reader turns a file into segments: the text the corrector sees (a paragraph, a subtitle, a
line) and, for each of its characters, an anchor: where the character is in the source, or -1
for what is not there verbatim (a placeholder for code left out, a line break joined away, an
entity). Only anchored characters are ever reported or fixed, so a reader that cannot place a
character loses a finding rather than inventing one. A segment's `locator` turns an anchor into
the (line, column) of a report; both are 1-based, columns in characters.

Readers here: plain text (`text_segments`, one line at a time), subtitles (`srt_segments`),
reStructuredText (`rst_segments`); Markdown is markdown.py, Word is word.py.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..text.tokenization import is_cjk
from .encodings import LINE_BREAK

PLACEHOLDER = "_"  # what the corrector sees in place of code: a neutral non-CJK character


class Locator(Protocol):
    def locate(self, anchor: int) -> tuple[int, int]:
        """The 1-based (line, column) of the character at `anchor`."""


@dataclass(frozen=True)
class Segment:
    """Text for the corrector, an anchor per character (-1: not in the source as such)."""

    text: str
    anchors: Sequence[int]
    locator: Locator

    def window(self, start: int, end: int) -> Segment:
        return Segment(self.text[start:end], self.anchors[start:end], self.locator)

    @property
    def has_cjk(self) -> bool:
        return any(is_cjk(ch) for ch in self.text)


@dataclass(frozen=True)
class LineLocator:
    """One piece of one line (plain text read a line at a time): anchors count from `column`."""

    line: int
    column: int = 0

    def locate(self, anchor: int) -> tuple[int, int]:
        return self.line, self.column + anchor + 1


class TextLocator:
    """A whole decoded document: anchors are offsets in it; lines end at \\r\\n, \\n or \\r, as
    everywhere in the checker (encodings.LINE_BREAK)."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in LINE_BREAK.finditer(text)]

    def locate(self, anchor: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, anchor)
        return line, anchor - self.starts[line - 1] + 1


class SegmentBuilder:
    """Collects characters and anchors for one segment."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.anchors: list[int] = []

    def add(self, text: str, start: int) -> None:
        """`text` as found at offset `start` of the source."""
        self.chars.append(text)
        self.anchors.extend(range(start, start + len(text)))

    def add_char(self, char: str, anchor: int) -> None:
        self.chars.append(char)
        self.anchors.append(anchor)

    def placeholder(self, text: str = PLACEHOLDER) -> None:
        """Text the corrector reads that is not in the source as such (never reported)."""
        self.chars.append(text)
        self.anchors.extend([-1] * len(text))

    def last_char(self) -> str:
        return self.chars[-1][-1:] if self.chars else ""

    def build(self, locator: Locator) -> Segment | None:
        text = "".join(self.chars)
        return Segment(text, self.anchors, locator) if text.strip() else None


def lines_of(text: str) -> list[tuple[int, str]]:
    """Each line's offset in `text` and the line without its ending."""
    found, start = [], 0
    for match in LINE_BREAK.finditer(text):
        found.append((start, text[start:match.start()]))
        start = match.end()
    if start < len(text):
        found.append((start, text[start:]))
    return found


def join_lines(builder: SegmentBuilder, lines: Iterable[tuple[int, str]]) -> None:
    """Lines of one paragraph into one segment, leading indentation left out. Lines are joined
    without a break, as a renderer joins Chinese lines; a space stands between two that are not
    Chinese where they meet, so that words do not run together."""
    for start, line in lines:
        stripped = line.lstrip()
        if not stripped:
            continue
        if builder.chars and not (is_cjk(builder.last_char()) or is_cjk(stripped[0])):
            builder.placeholder(" ")
        builder.add(stripped.rstrip(), start + len(line) - len(stripped))


def masked(segment: Segment, spans: Iterable[tuple[int, int]], placeholder: str = PLACEHOLDER) -> Segment:
    """`segment` with each of the (start, end) spans of its text replaced by `placeholder`
    (unanchored): inline code, markup, addresses the corrector must not read as prose."""
    chars, anchors, last = [], [], 0
    for start, end in sorted(spans):
        if start < last:
            continue  # overlapping: the first span wins
        chars.append(segment.text[last:start])
        anchors.extend(segment.anchors[last:start])
        chars.append(placeholder)
        anchors.extend([-1] * len(placeholder))
        last = end
    chars.append(segment.text[last:])
    anchors.extend(segment.anchors[last:])
    return Segment("".join(chars), anchors, segment.locator)


def text_segments(numbered_pieces: Iterable[tuple[int, int, str, str | None]]) -> Iterator[Segment]:
    """Plain text: each line (or window of a long line) is a segment of its own; nothing is ever
    held but the current piece."""
    for line, column, text, _ending in numbered_pieces:
        if text.strip():
            yield Segment(text, range(len(text)), LineLocator(line, column))


# ---- subtitles ---------------------------------------------------------------------------------

SRT_TIMING = re.compile(r"^\s*\d[\d:.,]*\s*-->\s*\d[\d:.,]*")
SRT_TAGS = re.compile(r"</?[a-zA-Z][^<>]*>|\{\\[^{}]*\}")  # <i>, <font ...>, {\an8}


def srt_segments(text: str) -> Iterator[Segment]:
    """SubRip: per cue, its text lines (after the index and the timing line) as one segment,
    formatting tags left out; indices and timings are never read."""
    locator = TextLocator(text)
    cue: list[tuple[int, str]] = []
    for start, line in [*lines_of(text), (len(text), "")]:
        if line.strip():
            cue.append((start, line))
            continue
        if len(cue) > 1 and cue[0][1].strip().isdigit() and SRT_TIMING.match(cue[1][1]):
            cue = cue[2:]
        elif cue and SRT_TIMING.match(cue[0][1]):
            cue = cue[1:]
        if cue:
            builder = SegmentBuilder()
            join_lines(builder, cue)
            if (segment := builder.build(locator)) is not None:
                yield masked(segment, [m.span() for m in SRT_TAGS.finditer(segment.text)], "")
        cue = []


# ---- reStructuredText ----------------------------------------------------------------------------

RST_IGNORE = re.compile(r"\.\.\s+corrector:\s*ignore\s*$")
RST_EXPLICIT = re.compile(r"\.\.(\s|$)")  # directives, comments, targets, footnotes
RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1+\s*$")  # section over/underlines, transitions
RST_TABLE_RULE = re.compile(r"[+|][-=+|: ]*$")  # grid table borders
RST_INLINE = re.compile(
    r"``.+?``"  # inline literal
    r"|:[\w.+-]+:`[^`]*`"  # role:  :code:`x`, :ref:`target`
    r"|`[^`]*`:[\w.+-]+:"  # role as suffix
    r"|<[^<>`\s]+>(?=`_{1,2})"  # the address of `text <url>`_
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block_end(lines: list[tuple[int, str]], i: int, indent: int) -> int:
    """The index after the indented body that follows line i: blank lines and lines indented
    deeper than `indent` (a directive's content, a literal block)."""
    j = i + 1
    while j < len(lines) and (not lines[j][1].strip() or _indent(lines[j][1]) > indent):
        j += 1
    while j > i + 1 and not lines[j - 1][1].strip():
        j -= 1
    return j


def rst_segments(text: str) -> Iterator[Segment]:
    """reStructuredText, read with care rather than parsed: paragraphs are prose; explicit markup
    (directives, comments, targets) with their indented bodies, literal blocks after `::`,
    section adornments and table borders are not; inline literals, roles and the addresses of
    links are masked. `.. corrector: ignore` skips the next paragraph."""
    locator = TextLocator(text)
    lines = lines_of(text)
    i, ignore_next = 0, False
    while i < len(lines):
        line = lines[i][1]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if RST_EXPLICIT.match(stripped):
            ignore_next = ignore_next or bool(RST_IGNORE.match(stripped))
            i = _block_end(lines, i, _indent(line))
            continue
        j = i
        while j < len(lines) and lines[j][1].strip() and not RST_EXPLICIT.match(lines[j][1].strip()):
            j += 1
        paragraph = lines[i:j]
        if not ignore_next:
            yield from _rst_paragraph(paragraph, locator)
        ignore_next = False
        i = _block_end(lines, j - 1, _indent(line)) if paragraph[-1][1].rstrip().endswith("::") else j


def _rst_paragraph(paragraph: list[tuple[int, str]], locator: TextLocator) -> Iterator[Segment]:
    """One paragraph's segments: runs of prose lines between adornments; a table row alone."""
    run: list[tuple[int, str]] = []

    def flush() -> Iterator[Segment]:
        builder = SegmentBuilder()
        join_lines(builder, run)
        run.clear()
        if (segment := builder.build(locator)) is not None:
            yield masked(segment, [m.span() for m in RST_INLINE.finditer(segment.text)])

    for start, line in paragraph:
        stripped = line.strip()
        if RST_ADORNMENT.match(stripped) or RST_TABLE_RULE.match(stripped):
            yield from flush()
        elif stripped.startswith("|"):  # a table row (or line block): on its own
            yield from flush()
            run.append((start, line))
            yield from flush()
        else:
            run.append((start, line))
    yield from flush()
