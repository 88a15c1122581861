"""Word documents (.docx) through python-docx: every paragraph, in the body and in table cells,
in document order, is a segment; its location is (paragraph number, column).

A paragraph's text is built from its runs (hyperlinks' runs included): the characters of each
`w:t` element, a tab for `w:tab`, a line break for `w:br`/`w:cr`. Each character of a `w:t` keeps
a reference to its element and index, so --fix replaces that one character in its element and
leaves the run's formatting, and every other element, as it was. Headers, footers, footnotes,
comments and text in tracked changes are not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .documents import Segment

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument
    from docx.table import _Cell
    from docx.text.paragraph import Paragraph
    from docx.text.run import Run


@dataclass
class ParagraphLocator:
    """One paragraph: anchors are character indices in it; `refs[i]` is the (w:t element,
    index) of character i, or None for a tab or break."""

    number: int
    refs: list[tuple[Any, int] | None] = field(default_factory=list)

    def locate(self, anchor: int) -> tuple[int, int]:
        return self.number, anchor + 1


def _paragraphs(container: DocxDocument | _Cell) -> Iterator[Paragraph]:
    """Paragraphs in document order, descending into tables (a merged cell once)."""
    from docx.table import Table

    for item in container.iter_inner_content():
        if isinstance(item, Table):
            seen: set[int] = set()
            for row in item.rows:
                for cell in row.cells:
                    if id(cell._tc) not in seen:
                        seen.add(id(cell._tc))
                        yield from _paragraphs(cell)
        else:
            yield item


def _runs(paragraph: Paragraph) -> Iterator[Run]:
    from docx.text.hyperlink import Hyperlink

    for item in paragraph.iter_inner_content():
        if isinstance(item, Hyperlink):
            yield from item.runs
        else:
            yield item


def _paragraph_segment(paragraph: Paragraph, number: int) -> Segment | None:
    from docx.oxml.ns import qn

    text_tag, tab_tag, breaks = qn("w:t"), qn("w:tab"), {qn("w:br"), qn("w:cr")}
    chars: list[str] = []
    locator = ParagraphLocator(number)
    for run in _runs(paragraph):
        for element in run._r:
            if element.tag == text_tag:
                for index, char in enumerate(element.text or ""):
                    chars.append(char)
                    locator.refs.append((element, index))
            elif element.tag == tab_tag or element.tag in breaks:
                chars.append("\t" if element.tag == tab_tag else "\n")
                locator.refs.append(None)
    text = "".join(chars)
    if not text.strip():
        return None
    anchors = [i if ref is not None else -1 for i, ref in enumerate(locator.refs)]
    return Segment(text, anchors, locator)


def docx_document(path: Path) -> tuple[DocxDocument, list[Segment]]:
    """The opened document (kept for --fix) and its segments."""
    import docx

    document = docx.Document(str(path))
    segments = []
    for number, paragraph in enumerate(_paragraphs(document), 1):
        if (segment := _paragraph_segment(paragraph, number)) is not None:
            segments.append(segment)
    return document, segments


def docx_texts(segments: list[Segment]) -> list[tuple[int, str]]:
    """(paragraph number, text) of each segment, for --diff."""
    return [(segment.locator.number, segment.text) for segment in segments]
