"""Accept: which scored candidates become edits, and how the edits of a chunk, a text and two
passes are put together.

* `winners`: per position the best candidate (a word candidate wins all its positions or none);
* `accepted_edits`: the winners whose confidence reaches the edit threshold (a lower one for
  a winner that completes an idiom), as `Edit`s;
* `restore_script`: a traditional text's edits written back in its script (text/script.py);
* `limit_edits`: the max-edits guard, the most confident edits of each sentence;
* `near_edits`, `edited_sentences`: where the second pass examines and where it may edit;
* `merge_passes`: the edits of the two correction passes as edits of the text as written.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable

import numpy as np

from .resources.confusion import kind_of
from .resources.idioms import completes_idiom
from .result import Edit, Result
from .scored import ScoredBatch
from .text.script import ScriptConverter
from .text.segmentation import Chunk


def winners(position: np.ndarray, group: np.ndarray, score: np.ndarray) -> list[int]:
    """The candidates accepted before the threshold: per position the best-scoring one, where a
    word candidate (group >= 0, its members sharing one score) wins only as a whole — when it
    beats every single candidate at each of its positions, best words first, no position twice.
    Candidates scored -inf never win."""
    single = np.flatnonzero((group < 0) & (score > -np.inf))
    order = single[np.lexsort((-score[single], position[single]))]
    leaders = order[np.r_[True, position[order][1:] != position[order][:-1]]] if len(order) else order
    members = np.flatnonzero((group >= 0) & (score > -np.inf))
    if len(members) == 0:  # the default path (no word candidates): each position's leader
        return sorted(leaders.tolist())
    best_single = dict(zip(position[leaders].tolist(), leaders.tolist(), strict=True))
    taken: dict[int, list[int]] = {}  # position -> the accepted word's members
    by_group: dict[int, list[int]] = {}
    for k in members.tolist():
        by_group.setdefault(int(group[k]), []).append(k)
    for ks in sorted(by_group.values(), key=lambda ks: (-score[ks[0]], ks[0])):
        spots = [int(position[k]) for k in ks]
        if any(n in taken for n in spots):
            continue
        if all(n not in best_single or score[ks[0]] > score[best_single[n]] for n in spots):
            for n in spots:
                taken[n] = ks
    chosen = [k for n, k in best_single.items() if n not in taken]
    for ks in {id(ks): ks for ks in taken.values()}.values():
        chosen.extend(ks)
    return sorted(chosen)


def accepted_edits(scored: ScoredBatch, threshold: float, idiom_threshold: float | None = None) -> dict[int, list[Edit]]:
    """{batch row: its edits}: the winners with confidence >= `threshold`, at their offsets in
    the text (confidence rounded to 4 places). With `idiom_threshold`, also the winners from a
    confusion set that reach it and complete a four-character idiom the text breaks
    (resources/idioms.py: 迫不急待 -> 迫不及待 at 0.30)."""
    sites, cands, confidence = scored.sites, scored.cands, scored.confidence
    accepted: dict[int, list[Edit]] = {}
    for k in scored.best:
        n = int(cands.position[k])
        score = float(confidence[k])
        if score < threshold and not (idiom_threshold is not None and score >= idiom_threshold
                                      and _completes_idiom(scored, k, n)):
            continue
        accepted.setdefault(sites.rows[n], []).append(Edit(
            position=sites.offsets[n],
            source=sites.chars[n],
            target=scored.targets[k],
            confidence=round(score, 4),
            kind=kind_of(int(cands.relation[k])),
        ))
    return accepted


def _completes_idiom(scored: ScoredBatch, k: int, n: int) -> bool:
    """Whether candidate k (at flagged position n) comes from a confusion set and completes a
    four-character idiom that its text, as written, breaks."""
    sites = scored.sites
    text = sites.texts[sites.group[sites.rows[n]].text_index]
    return completes_idiom(text, sites.offsets[n], scored.targets[k], kind_of(int(scored.cands.relation[k])))


def restore_script(script: ScriptConverter, original: str, text: str, chunk: Chunk, edits: list[Edit]) -> list[Edit]:
    """A chunk's edits of `text` (the model's simplified reading of `original`) as edits of
    `original`, in its script (`ScriptConverter.restore` over the chunk's span: a long document is
    not converted once per chunk). A "correction" that only changes the script is dropped here,
    before the max-edits guard counts it, so it cannot take a real one's place."""
    start, end = chunk.start, chunk.end
    local = [dataclasses.replace(e, position=e.position - start) for e in edits]
    written = script.restore(original[start:end], text[start:end], local)
    return [dataclasses.replace(e, position=e.position + start) for e in written]


def limit_edits(edits: list[Edit], sentences: list[tuple[int, int]], limit: int) -> list[Edit]:
    """Max-edits guard: the most confident `limit` edits of each sentence (`sentences`: the
    (start, end) spans of the text's sentences in order, `segmentation.sentence_units`, or a
    chunk's `sentence_spans`).

    Many "errors" in one sentence usually mean unfamiliar text (classical Chinese, a domain
    the model never saw), not a careless writer.
    """
    ends = [end for _, end in sentences]
    by_sentence: dict[int, list[Edit]] = {}
    for edit in edits:
        by_sentence.setdefault(bisect.bisect_right(ends, edit.position), []).append(edit)
    kept = []
    for group in by_sentence.values():
        kept.extend(sorted(group, key=lambda e: (-e.confidence, e.position))[:limit])
    return kept


def near_edits(result: Result) -> set[int]:
    """The offsets the second pass examines in a text the first pass corrected: every edited
    character and its two neighbours."""
    return {p for e in result.edits for p in (e.position - 1, e.position, e.position + 1)}


def edited_sentences(result: Result, sentences: list[tuple[int, int]]) -> set[int]:
    """The offsets of the sentences of a corrected text that hold an edit (`sentences`: its
    sentence spans, `segmentation.sentence_units`): where the second pass may change characters
    (a document's other sentences keep the first pass's threshold)."""
    edited = sorted(e.position for e in result.edits)
    offsets: set[int] = set()
    for start, end in sentences:
        if bisect.bisect_left(edited, start) < bisect.bisect_left(edited, end):
            offsets.update(range(start, end))
    return offsets


def merge_passes(text: str, first: list[Edit], second: list[Edit], relation: Callable[[str, str], int],
                 limit: int, sentences: list[tuple[int, int]]) -> Result:
    """The edits of two passes as edits of `text`: a character changed twice keeps the second
    pass's target and confidence, its relation (`relation(source, target)`, confusion bits) taken
    from the original character; a character written back to the original is no edit; then the
    max-edits guard over the text's `sentences` (`segmentation.sentence_units`, the units the
    first pass's guard counted: with the whole text as one sentence, a long text without
    sentence punctuation kept 4 of its first pass's 288 edits)."""
    by_position = {e.position: e for e in first}
    for e in second:
        source = text[e.position]
        if e.target == source:
            by_position.pop(e.position, None)  # written back: no edit
        else:
            kind = kind_of(relation(source, e.target)) if e.position in by_position else e.kind
            by_position[e.position] = dataclasses.replace(e, source=source, kind=kind)
    return Result.applying(text, limit_edits(list(by_position.values()), sentences, limit))
