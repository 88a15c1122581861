"""What scoring a batch yields: its candidates with their features and confidences, and the
best one per position. Acceptance reads it (acceptance.py); calibration reads it as a list of
`ScoredCandidate`s (`scored_candidates`, `Corrector.score_candidates`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .candidates import Candidates
from .chunking import Item
from .detection import Sites
from .features import FEATURES


@dataclass
class ScoredBatch:
    sites: Sites  # the flagged positions n
    cands: Candidates  # the candidates k, at positions cands.position[k]
    targets: list[str]  # each candidate's character
    features: np.ndarray  # (K, len(FEATURES)) float32 as featurized (the prior column still 0)
    confidence: np.ndarray  # (K,) float32 the scorer's (a word candidate's members: the word's)
    best: list[int]  # the candidates that win their positions (acceptance.winners), before the threshold


@dataclass
class ScoredCandidate:
    """One candidate correction with its features, before acceptance (for calibration)."""

    text_index: int  # which input text
    position: int  # 0-based offset in that text
    source: str
    target: str
    features: dict[str, float]
    confidence: float
    best: bool  # the highest-confidence candidate at its position
    # A character of a word candidate (homophones.py): its word, as "offset of the word's first
    # change:the word's new characters" (unique within the text); "" for a single character.
    word: str = ""


def scored_candidates(scored: ScoredBatch, features: np.ndarray) -> list[tuple[Item, list[ScoredCandidate]]]:
    """Every candidate of a scored batch as a `ScoredCandidate`, by chunk; `features`: the
    batch's features as the scorer reads them (`Scorer.with_prior`)."""
    sites, cands, targets = scored.sites, scored.cands, scored.targets
    won = set(scored.best)
    rows = features.tolist()
    word_keys: dict[int, str] = {}  # group -> "offset of its first change:its new characters"
    for k in np.flatnonzero(cands.group >= 0).tolist():
        n, g = int(cands.position[k]), int(cands.group[k])
        word_keys[g] = word_keys[g] + targets[k] if g in word_keys else f"{sites.offsets[n]}:{targets[k]}"
    by_item: dict[int, list[ScoredCandidate]] = {}
    for k in range(len(cands)):
        n = int(cands.position[k])
        by_item.setdefault(sites.rows[n], []).append(ScoredCandidate(
            text_index=sites.group[sites.rows[n]].text_index,
            position=sites.offsets[n],
            source=sites.chars[n],
            target=targets[k],
            features=dict(zip(FEATURES, rows[k], strict=True)),
            confidence=float(scored.confidence[k]),
            best=k in won,
            word=word_keys.get(int(cands.group[k]), ""),
        ))
    return [(sites.group[row], found) for row, found in by_item.items()]
