"""Where a data set's errors are lost before the threshold: per gold edited position, whether the
corrector examined it, whether it proposed the gold character there, and whether its scorer put
the gold character first.

Over the gold edited positions of the same-length pairs (source[i] != target[i]):

* flagged share: the position got at least one candidate (flagged by the detector and proposed
  for; a position never flagged has none);
* coverage: the gold character is among the position's candidates, whatever their scores;
* ceiling: the gold character is the position's best candidate (`acceptance.winners`: the one
  acceptance takes before the threshold), i.e. the recall with the threshold at 0 and acceptance
  right at every position, the max-edits guard aside;
* recall: the corrector's own output writes the gold character there (character-level correction
  recall at its operating point), when its predictions are given.

So flagged share >= coverage >= ceiling; recall <= ceiling with one pass, and may pass it by the
few errors that only a later pass fixes (`CeilingReport.corrected_later`).

The candidates are `Corrector.score_candidates`' — one pass, the first pass's flags and scores
(a further pass reads only the sentences the first changed, so the first pass decides what can
be reached at all). That call, made for calibration, also keeps the generator, context and
particle flags below `detection.RULE_FLAG_MIN_PROB` that correction skips: on the broad dev's
mcsc, wang and ecspell parts 1 of their 1,704 gold positions is flagged that way only, none is
covered or ranked first only so: the figures are the correction's to within 0.1 point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from ..scored import ScoredCandidate
from ..text.script import ScriptConverter
from .metrics import ratio

# Sentences per `score_candidates` call: every candidate carries its feature dict (~40 floats),
# so a data set is read in slices to keep memory flat; the call batches within each slice.
SLICE = 512


class CandidateScorer(Protocol):
    """What `candidate_ceiling` needs from a corrector (`pipeline.Corrector`)."""

    script: ScriptConverter | None  # None: every text read as written

    def score_candidates(self, texts: list[str], batch_size: int | None = None) -> list[ScoredCandidate]: ...


# The counts every report has (`corrected` and `corrected_later` only with predictions).
COUNTS = ("sentences", "errors", "flagged", "covered", "ranked_first", "skipped")


@dataclass(frozen=True)
class CeilingReport:
    """Counts over the gold edited positions of a data set's same-length pairs."""

    sentences: int  # same-length pairs read
    errors: int  # gold edited positions
    flagged: int  # ... with at least one candidate
    covered: int  # ... with the gold character among the candidates
    ranked_first: int  # ... with the gold character the best candidate
    corrected: int | None = None  # ... where the corrector's output has the gold character (None: not given)
    corrected_later: int | None = None  # corrected ones whose gold character the first pass did not rank first
    skipped: int = 0  # pairs of different lengths, left out

    @property
    def flagged_share(self) -> float:
        return ratio(self.flagged, self.errors)

    @property
    def coverage(self) -> float:
        return ratio(self.covered, self.errors)

    @property
    def ceiling(self) -> float:
        return ratio(self.ranked_first, self.errors)

    @property
    def recall(self) -> float | None:
        return None if self.corrected is None else ratio(self.corrected, self.errors)

    @classmethod
    def from_dict(cls, data: dict) -> CeilingReport:
        """The report `to_dict` wrote."""
        return cls(**{name: data[name] for name in (*COUNTS, "corrected", "corrected_later")})

    def to_dict(self) -> dict:
        """The counts and the shares (fractions; `recall` None without predictions)."""
        return {**asdict(self), "flagged_share": self.flagged_share, "coverage": self.coverage,
                "ceiling": self.ceiling, "recall": self.recall}


def _model_targets(corrector: CandidateScorer, source: str, target: str) -> str:
    """The gold target as the model reads its source: in simplified script when the source is
    read so (`text/script.py`), where `score_candidates` proposes simplified characters."""
    script = corrector.script
    if script is None or script.model_text(source) == source:
        return target
    simplified = script.to_simplified(target)
    return simplified if len(simplified) == len(target) else target


def _pair_report(source: str, target: str, model_target: str, proposed: dict[int, set[str]], best: dict[int, str],
                 prediction: str | None) -> CeilingReport:
    """One same-length pair's report: `proposed` and `best`, its candidates' characters and its
    best candidate's by position; `prediction`, the corrector's output (None: not given)."""
    errors = flagged = covered = first = corrected = later = 0
    for i, (written, gold) in enumerate(zip(source, target, strict=True)):
        if written == gold:
            continue
        golds = {gold, model_target[i]}
        errors += 1
        flagged += i in proposed
        covered += bool(golds & proposed.get(i, set()))
        top = best.get(i) in golds
        first += top
        if prediction is not None and len(prediction) == len(source) and prediction[i] == gold:
            corrected += 1
            later += not top
    with_output = prediction is not None
    return CeilingReport(1, errors, flagged, covered, first, corrected if with_output else None,
                         later if with_output else None)


def pair_ceilings(corrector: CandidateScorer, pairs: Sequence[tuple[str, str]], batch_size: int | None = None,
                  predictions: Sequence[str] | None = None) -> list[CeilingReport]:
    """One report per pair of `pairs` ((source, target); a pair of different lengths is a report
    with `skipped` 1 and nothing else), over its gold edited positions; with `predictions` (the
    corrector's output per pair, as scored) its recall there too. `combine` sums them."""
    if predictions is not None and len(predictions) != len(pairs):
        raise ValueError(f"{len(pairs)} pairs but {len(predictions)} predictions")
    none = None if predictions is None else 0
    reports = [CeilingReport(0, 0, 0, 0, 0, none, none, skipped=1)] * len(pairs)
    kept = [k for k, (source, target) in enumerate(pairs) if len(source) == len(target)]
    for start in range(0, len(kept), SLICE):
        indices = kept[start:start + SLICE]
        proposed: list[dict[int, set[str]]] = [{} for _ in indices]  # by row: position -> candidates' characters
        best: list[dict[int, str]] = [{} for _ in indices]  # by row: position -> the best candidate's
        for cand in corrector.score_candidates([pairs[k][0] for k in indices], batch_size=batch_size):
            proposed[cand.text_index].setdefault(cand.position, set()).add(cand.target)
            if cand.best:
                best[cand.text_index][cand.position] = cand.target
        for row, k in enumerate(indices):
            source, target = pairs[k]
            reports[k] = _pair_report(source, target, _model_targets(corrector, source, target), proposed[row],
                                      best[row], None if predictions is None else predictions[k])
    return reports


def combine(reports: Iterable[CeilingReport]) -> CeilingReport:
    """The reports' counts summed (`corrected` None when a report lacks it, or there are none)."""
    reports = list(reports)
    total: dict = {name: sum(getattr(r, name) for r in reports) for name in COUNTS}
    for name in ("corrected", "corrected_later"):
        values = [getattr(r, name) for r in reports]
        total[name] = None if not values or None in values else sum(values)
    return CeilingReport(**total)


def candidate_ceiling(corrector: CandidateScorer, pairs: Sequence[tuple[str, str]], batch_size: int | None = None,
                      predictions: Sequence[str] | None = None) -> CeilingReport:
    """Flagged share, coverage and ceiling of `corrector` over the gold edited positions of
    `pairs` ((source, target); pairs of different lengths are skipped), and with `predictions`
    (the corrector's output per pair, as scored) its recall there too."""
    return combine(pair_ceilings(corrector, pairs, batch_size, predictions))


def mean_shares(reports: Sequence[CeilingReport]) -> dict[str, float | None]:
    """The unweighted mean of each share over `reports` with errors (the macro average), as the
    evaluator's summary averages its data sets."""
    with_errors = [r for r in reports if r.errors]
    if not with_errors:
        return dict.fromkeys(("flagged_share", "coverage", "ceiling", "recall"))
    means: dict[str, float | None] = {
        name: sum(getattr(r, name) for r in with_errors) / len(with_errors)
        for name in ("flagged_share", "coverage", "ceiling")}
    recalls = [r.recall for r in with_errors]
    means["recall"] = None if None in recalls else sum(recalls) / len(recalls)
    return means


def pooled(halves: Sequence[Mapping[str, dict]]) -> dict[str, CeilingReport]:
    """{name: the counts of its reports (`to_dict` form) summed over `halves`}: the held-out
    halves' figures, each over the gold positions of every half that has that name."""
    names = dict.fromkeys(name for half in halves for name in half)
    return {name: combine(CeilingReport.from_dict(half[name]) for half in halves if name in half) for name in names}


def shares_text(shares: Mapping[str, float | None]) -> str:
    """'flagged / coverage / ceiling / recall' in percent (a `to_dict` or `mean_shares`)."""
    return " / ".join("–" if shares[key] is None else f"{100 * shares[key]:.1f}"
                      for key in ("flagged_share", "coverage", "ceiling", "recall"))
