"""Long texts cut into pieces that share the model fairly with short requests (batching.py).

A text of 10,000 characters takes ~1.5 s of one core with the shipped model (5-6 thousand
characters a second, measured on 2 cores); run whole, it would hold a correction process that
long and every request behind it would wait. Cut into pieces of about `piece_chars` characters
(~0.05 s each) it runs between the other requests' texts instead.

Cuts fall after a line or sentence end (。！？；!?;… and closing quotes after them), where the
corrector's own chunking (corrector/segmentation.py) would cut anyway, so a piece keeps the
context of its sentences; a sentence longer than `piece_chars` is cut after a clause mark (，、：),
and text without any punctuation hard at `piece_chars` (the corrector windows such text with
128-position windows itself). Results are joined back by offset, so the answer is one result per
text, with positions in the whole text.
"""

from __future__ import annotations

from corrector.result import Edit, Result

SENTENCE_END = frozenset("。！？；!?;…\n")
CLAUSE_END = frozenset("，、：,:")
CLOSERS = frozenset("”’」』）)】》〉\"'")


def _cuts_after(text: str, start: int, end: int, marks: frozenset[str]) -> list[int]:
    """Offsets in (start, end] just after a mark and the marks/closers that follow it."""
    cuts = []
    i = start
    while i < end:
        if text[i] in marks:
            i += 1
            while i < end and (text[i] in marks or text[i] in CLOSERS):
                i += 1
            cuts.append(i)
        else:
            i += 1
    return cuts


def split_into_pieces(text: str, piece_chars: int) -> list[tuple[int, str]]:
    """(offset, piece) covering `text` exactly, each piece at most `piece_chars` characters
    (one piece, possibly empty, for a text that fits)."""
    if len(text) <= piece_chars:
        return [(0, text)]
    pieces: list[tuple[int, str]] = []
    start = 0
    while len(text) - start > piece_chars:
        limit = start + piece_chars
        end = next((c for c in reversed(_cuts_after(text, start, limit, SENTENCE_END)) if c <= limit), None)
        if end is None:
            end = next((c for c in reversed(_cuts_after(text, start, limit, CLAUSE_END)) if c <= limit), limit)
        pieces.append((start, text[start:end]))
        start = end
    pieces.append((start, text[start:]))
    return pieces


def join_results(texts: list[str], pieces: list[tuple[int, int, str]], results: list[Result | None]) -> list[Result]:
    """One result per text from its pieces' results (`pieces`: (text index, offset, piece))."""
    targets: list[list[str]] = [[] for _ in texts]
    edits: list[list[Edit]] = [[] for _ in texts]
    for (t, offset, _), result in zip(pieces, results, strict=True):
        assert result is not None  # every piece answered before joining
        targets[t].append(result.target)
        edits[t].extend(Edit(e.position + offset, e.source, e.target, e.confidence, e.kind) for e in result.edits)
    return [Result(text, "".join(target), edit) for text, target, edit in zip(texts, targets, edits, strict=True)]
