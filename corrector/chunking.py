"""Chunk: the texts as the model reads them — split into chunks of at most `max_positions`
characters (text/segmentation.py), encoded, with the positions that may be edited marked."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .text.protection import address_offsets, whitelisted_offsets
from .text.segmentation import Chunk, split_text
from .text.tokenization import CharTokenizer, is_cjk


def text_list(texts: Iterable[str]) -> list[str]:
    """A batch call's texts as a list: a list, tuple, generator or any other iterable of str. One
    str is refused: a batch of its characters, one result each, is never what the caller meant."""
    if isinstance(texts, str):
        raise TypeError("texts is one str: pass a list of texts, or correct(text) for one")
    return list(texts)


@dataclass
class Item:
    """One chunk of one input text, encoded."""

    text_index: int
    chunk: Chunk
    ids: list[int]
    offsets: list[int]  # original-text offset of each model position
    editable: list[bool]
    examined: list[bool] | None = None  # editable positions scored whether or not a flag rule picks them


def chunk_texts(texts: Sequence[str], tokenizer: CharTokenizer, whitelist: Sequence[str], max_positions: int,
                overlap: int, originals: Sequence[str] | None = None,
                within: Sequence[set[int]] | None = None,
                examine: Sequence[set[int]] | None = None) -> list[Item]:
    """The chunks of `texts` (as the model reads them) that hold an editable character: a CJK
    character outside whitelisted terms (which match in the text as written, `originals`, too)
    in the chunk's own span; with `within[t]`, only those offsets of text t. With `examine[t]`,
    those editable offsets of text t are marked `examined`. A text without CJK characters has
    none."""
    items = []
    for t, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{t}] is {type(text).__name__}, expected str")
        if not any(is_cjk(ch) for ch in text):
            continue
        frozen = whitelisted_offsets(text, whitelist) | address_offsets(text)  # URLs, e-mail: kept as written
        if originals is not None and originals[t] != text:
            frozen |= whitelisted_offsets(originals[t], whitelist)
        for chunk in split_text(text, max_positions, overlap):
            enc = tokenizer.encode(text[chunk.start:chunk.end])
            offsets = [chunk.start + o for o in enc.offsets]
            editable = [
                is_cjk(text[o]) and o not in frozen and chunk.own_start <= o < chunk.own_end
                and (within is None or o in within[t]) for o in offsets
            ]
            if any(editable):
                examined = (None if examine is None
                            else [e and o in examine[t] for e, o in zip(editable, offsets, strict=True)])
                items.append(Item(t, chunk, enc.ids, offsets, editable, examined))
    return items
