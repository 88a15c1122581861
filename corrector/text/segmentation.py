"""Long text -> chunks that fit the model, with offsets back into the original string.

A chunk is a span `text[start:end]`; the model sees its non-space characters (see
`CharTokenizer.encode`), so a chunk's size is counted in model positions, not in characters.

Splitting order, from most to least natural:
1. lines (a newline always ends a chunk: lines are separate paragraphs or records);
2. sentences, ending at 。！？；!?; or … (plus closing quotes/brackets after them); consecutive
   sentences of one line are packed together up to `max_positions` so that short sentences
   keep some context;
3. clauses, ending at ，、：,: — for sentences longer than `max_positions`;
4. hard windows of `max_positions` with `overlap` positions shared between neighbours — for text
   without any punctuation. Each window only *owns* the middle of the overlap on each side
   (`own_start`/`own_end`), so every position is corrected by exactly one window, and the one
   that sees more context around it.

Nothing is ever dropped or rewritten here: chunks are views on the original string and edits are
applied by offset, so newlines and spacing survive untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

SENTENCE_END = set("。！？；!?;…")
CLAUSE_END = set("，、：,:")
# Closing marks that belong to the sentence before them: 他说：“好。”下一句
CLOSERS = set("”’」』）)】》〉\"'")


@dataclass(frozen=True)
class Chunk:
    start: int  # offset in the original text of the first character of the span
    end: int  # offset one past the last character of the span
    own_start: int  # edits are only taken from [own_start, own_end): windows overlap
    own_end: int


def count_positions(text: str, start: int = 0, end: int | None = None) -> int:
    """Model positions in text[start:end]: one per non-space character."""
    end = len(text) if end is None else end
    return sum(1 for i in range(start, end) if not text[i].isspace())


def _split_after(text: str, start: int, end: int, marks: set[str]) -> list[tuple[int, int]]:
    """Spans of text[start:end] each ending after a mark (and any closers following it)."""
    spans: list[tuple[int, int]] = []
    begin = i = start
    while i < end:
        if text[i] in marks:
            i += 1
            while i < end and (text[i] in marks or text[i] in CLOSERS):
                i += 1
            spans.append((begin, i))
            begin = i
        else:
            i += 1
    if begin < end:
        spans.append((begin, end))
    return spans


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of text[start:end]; newlines also end sentences."""
    end = len(text) if end is None else end
    spans = []
    for begin, stop in _split_after(text, start, end, SENTENCE_END | {"\n"}):
        if count_positions(text, begin, stop):
            spans.append((begin, stop))
    return spans


def sentence_units(text: str, max_positions: int, overlap: int = 16) -> list[tuple[int, int]]:
    """The sentences as the corrector counts them (the max-edits guard, the second pass's scope),
    in order: the sentence spans of each chunk's own part (`split_text`), so a sentence longer
    than a chunk counts once per chunk, as the first pass reads it. Text without sentence
    punctuation (a transcript, a chain of clauses) is then many sentences, not one."""
    return [span for chunk in split_text(text, max_positions, overlap)
            for span in sentence_spans(text, chunk.own_start, chunk.own_end)]


def _windows(text: str, start: int, end: int, max_positions: int, overlap: int) -> list[Chunk]:
    """Overlapping hard windows over text[start:end], `max_positions` positions each."""
    offsets = [i for i in range(start, end) if not text[i].isspace()]
    if len(offsets) <= max_positions:
        return [Chunk(start, end, start, end)]
    overlap = min(overlap, max_positions // 2)
    stride = max_positions - overlap
    firsts = list(range(0, len(offsets) - overlap, stride))
    chunks = []
    for n, first in enumerate(firsts):
        last = min(first + max_positions, len(offsets))  # exclusive, in positions
        is_first, is_last = n == 0, n == len(firsts) - 1 or last == len(offsets)
        # Hand over to the next window in the middle of the shared part.
        own_first = first if is_first else first + overlap // 2
        own_last = last if is_last else last - (overlap - overlap // 2)
        chunks.append(
            Chunk(
                start=start if is_first else offsets[first],
                end=end if is_last else offsets[last - 1] + 1,
                own_start=start if is_first else offsets[own_first],
                own_end=end if is_last else offsets[own_last],
            )
        )
        if is_last:
            break
    return chunks


def _pack(text: str, spans: list[tuple[int, int]], max_positions: int) -> list[tuple[int, int]]:
    """Merge consecutive spans greedily while the merged span fits."""
    packed: list[tuple[int, int]] = []
    size = 0
    for begin, end in spans:
        n = count_positions(text, begin, end)
        if packed and size + n <= max_positions:
            packed[-1] = (packed[-1][0], end)
            size += n
        else:
            packed.append((begin, end))
            size = n
    return packed


def split_text(text: str, max_positions: int, overlap: int = 16) -> list[Chunk]:
    """Chunks covering every non-space character of `text` exactly once (by ownership)."""
    if max_positions < 1:
        raise ValueError("max_positions must be positive")
    chunks: list[Chunk] = []
    line_start = 0
    while line_start <= len(text):
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        sentences = _pack(text, _split_after(text, line_start, line_end, SENTENCE_END), max_positions)
        for s_begin, s_end in sentences:
            if count_positions(text, s_begin, s_end) <= max_positions:
                pieces = [(s_begin, s_end)]
            else:
                pieces = _pack(text, _split_after(text, s_begin, s_end, CLAUSE_END), max_positions)
            for begin, end in pieces:
                if count_positions(text, begin, end) == 0:
                    continue  # whitespace only: nothing for the model
                chunks.extend(_windows(text, begin, end, max_positions, overlap))
        line_start = line_end + 1
    return chunks
