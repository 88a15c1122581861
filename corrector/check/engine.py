"""Segments to findings: the corrector called in batches, its edits mapped back to the source.

Segments without a CJK character are never sent (a file of English prose needs no model). A
segment longer than `WINDOW_CHARS` is sent in windows cut after a sentence end, as the CLI cuts
long lines (cli_io.cut_point): the corrector would chunk it anyway, but the texts of one call then
stay bounded. Calls take up to `BLOCK_SEGMENTS` segments or `BLOCK_CHARS` characters, enough for
well-filled batches. An edit is reported only at an anchored character (documents.py) that still
holds the edit's source character.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from ..cli_io import WINDOW_CHARS, blocks, cut_point
from .documents import Segment
from .report import Finding

if TYPE_CHECKING:
    from ..result import Result

BLOCK_SEGMENTS = 256
BLOCK_CHARS = 1 << 16
WORD_MAX = 6  # a longer "word" around an edit is shown as the character alone


class BatchCorrector(Protocol):
    def correct_batch(self, texts: list[str]) -> list[Result]: ...


def windows(segments: Iterable[Segment]) -> Iterator[Segment]:
    """The segments with CJK text, each cut into windows of at most WINDOW_CHARS characters."""
    for segment in segments:
        if not segment.has_cjk:
            continue
        start = 0
        while len(segment.text) - start > WINDOW_CHARS:
            end = start + cut_point(segment.text[start:start + WINDOW_CHARS], WINDOW_CHARS)
            yield segment.window(start, end)
            start = end
        yield segment.window(start, len(segment.text)) if start else segment


def word_spans(text: str) -> list[tuple[int, int]]:
    """Word boundaries of a corrected text (jieba, the dictionary the corrector loads anyway)."""
    from ..text.protection import ensure_jieba

    return [(start, end) for _word, start, end in ensure_jieba().tokenize(text)]


def context(source: str, target: str, position: int, spans: list[tuple[int, int]]) -> tuple[str, str]:
    """The word around `position` as written and as corrected (the corrected text's word)."""
    for start, end in spans:
        if start <= position < end:
            if end - start <= WORD_MAX:
                return source[start:end], target[start:end]
            break
    return source[position], target[position]


def findings_of(segment: Segment, result: Result, path: str) -> list[Finding]:
    """The result's edits at anchored characters, as findings."""
    found = []
    spans: list[tuple[int, int]] | None = None
    for edit in result.edits:
        anchor = segment.anchors[edit.position] if edit.position < len(segment.anchors) else -1
        if anchor < 0 or segment.text[edit.position] != edit.source:
            continue
        if spans is None:
            spans = word_spans(result.target) if len(result.target) == len(segment.text) else []
        word, suggestion = (context(segment.text, result.target, edit.position, spans) if spans
                            else (edit.source, edit.target))
        line, column = segment.locator.locate(anchor)
        ref = getattr(segment.locator, "refs", None)
        found.append(Finding(path, line, column, edit.source, edit.target, edit.kind, edit.confidence,
                             word, suggestion, ref=ref[anchor] if ref is not None else None))
    return found


def check_segments(segments: Iterable[Segment], corrector: BatchCorrector, path: str) -> list[Finding]:
    """Every finding in `segments`, in the order of the source."""
    found: list[Finding] = []
    for block in blocks(windows(segments), BLOCK_SEGMENTS, BLOCK_CHARS):
        results = corrector.correct_batch([segment.text for segment in block])
        for segment, result in zip(block, results, strict=True):
            found.extend(findings_of(segment, result, path))
    found.sort(key=lambda f: (f.line, f.column))
    return found
