"""Training splits: which pairs of the data sets (read by datasets.py) go into training, and which
are held out with everything that overlaps them (the calibration dev split)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .datasets import read_dataset


def load_pairs(
    spec: str | Path, format: str | None = None, same_length_only: bool = True
) -> list[tuple[str, str]]:
    """(source, target) pairs of a data set, e.g. for fine-tuning; length-mismatched pairs dropped by default."""
    dataset = read_dataset(spec, format=format)
    return [(e.source, e.target) for e in dataset.examples if e.same_length or not same_length_only]


class HeldOut:
    """The pairs of the data sets `exclude` (the calibration dev split) and every text that shares
    a run of `shared_span` characters with one of their correct sides.

    CSC sets repeat the same correct sentence with other errors written into it (374 of the 1,050
    dev sentences' correct sides occur again among the other training pairs), so leaving out the
    exact dev pairs alone lets the dev split read its own answers out of whatever is counted from
    the training pairs — the n-gram LM, the error pairs in context — and calibrates the scorer to
    trust those features more than text it has never seen deserves."""

    def __init__(self, exclude: Iterable[str | Path] = (), shared_span: int = 8,
                 pairs: Iterable[tuple[str, str]] = ()) -> None:
        """`pairs`: (source, target) pairs held out beside those of the data sets `exclude`."""
        self.pairs = {(e.source, e.target) for spec in exclude for e in read_dataset(spec).examples} | set(pairs)
        self.targets = {target for _, target in self.pairs}
        self.shared_span = shared_span
        self._spans = {t[i:i + shared_span] for t in self.targets for i in range(len(t) - shared_span + 1)
                       } if shared_span > 0 else set()

    def overlaps(self, text: str) -> bool:
        """Whether `text` is a held-out correct side or shares a `shared_span` run with one
        (never, for a `shared_span` of 0: then only the exact pairs are held out)."""
        n = self.shared_span
        if n <= 0:
            return False
        return text in self.targets or any(text[i:i + n] in self._spans for i in range(len(text) - n + 1))


def correct_sides(specs: Iterable[str | Path], exclude: Iterable[str | Path] = (), shared_span: int = 8,
                  held_out: HeldOut | None = None) -> list[str]:
    """The correct side of every pair of the data sets `specs`, each distinct sentence once, for
    counting as in-domain text (the n-gram LM: `pretrain ngram --pairs`), without the pairs of
    `exclude` or any sentence that overlaps them (`HeldOut`; or the given `held_out`)."""
    held_out = held_out or HeldOut(exclude, shared_span)
    seen: set[str] = set()
    sides = []
    for spec in specs:
        for example in read_dataset(spec).examples:
            target = example.target
            if not target or target in seen:
                continue
            seen.add(target)
            if not held_out.overlaps(target):
                sides.append(target)
    return sides


def training_pairs(specs: Iterable[str | Path], held_out: HeldOut) -> tuple[list[tuple[str, str]], int]:
    """The distinct same-length (source, target) pairs of the data sets `specs` (a file named
    twice, for upsampling, counts once) that `held_out` leaves in, and how many overlapping it
    were left out."""
    seen: set[tuple[str, str]] = set()
    pairs, overlapping = [], 0
    for spec in specs:
        for example in read_dataset(spec).same_length_examples:
            key = (example.source, example.target)
            if key in held_out.pairs or key in seen:
                continue
            seen.add(key)
            if held_out.overlaps(example.target):
                overlapping += 1
                continue
            pairs.append(key)
    return pairs, overlapping
