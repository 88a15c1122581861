"""The candidate ceiling (corrector/evaluation/ceiling.py): flagged share, coverage, ceiling and
recall over the gold edited positions, by hand on a fake corrector, on the tiny trained model,
and through `python -m evaluate --ceiling` and `finetune heldout`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrector.datasets import Example
from corrector.evaluation import ceiling as ceiling_module
from corrector.evaluation.ceiling import (
    CeilingReport,
    candidate_ceiling,
    combine,
    mean_shares,
    pair_ceilings,
    pooled,
    shares_text,
)
from corrector.result import Edit, Result
from corrector.scored import ScoredCandidate

FIXTURES = Path(__file__).parent / "fixtures"

# Five pairs: 4 gold edited positions over the same-length ones, one pair of different lengths.
PAIRS = [
    ("因该去吗", "应该去吧"),  # 因: 应 proposed and first; 吗: flagged, but only 嘛 proposed
    ("他再家", "他在家"),  # 再: never flagged (a candidate at 他 only)
    ("做下", "坐下"),  # 做: 坐 proposed, 作 first
    ("一二", "一二三"),  # different lengths: skipped, never sent to the corrector
    ("好的", "好的"),  # error-free
]
# (pair, position, candidate, best) — what the fake corrector "scores" per source.
CANDIDATES = {
    "因该去吗": [(0, "应", True), (0, "音", False), (3, "嘛", True)],
    "他再家": [(0, "她", True)],
    "做下": [(0, "作", True), (0, "坐", False)],
    "好的": [],
}
# The corrector's output: 因 fixed (ranked first), 做 fixed although 作 was first (a later pass).
PREDICTIONS = ["应该去吗", "他再家", "坐下", "一二", "好的"]


class FakeCorrector:
    """`score_candidates` from CANDIDATES, by the index of each text in the call."""

    script = None

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def score_candidates(self, texts, batch_size=None):
        self.calls.append(list(texts))
        return [ScoredCandidate(t, position, text[position], target, {}, 0.5, best)
                for t, text in enumerate(texts) for position, target, best in CANDIDATES[text]]


def test_counts_by_hand_on_a_fake_corrector():
    fake = FakeCorrector()
    report = candidate_ceiling(fake, PAIRS, predictions=PREDICTIONS)
    assert report == CeilingReport(sentences=4, errors=4, flagged=3, covered=2, ranked_first=1, corrected=2,
                                   corrected_later=1, skipped=1)
    assert (report.flagged_share, report.coverage, report.ceiling, report.recall) == (0.75, 0.5, 0.25, 0.5)
    assert fake.calls == [["因该去吗", "他再家", "做下", "好的"]]  # the length-mismatched pair is not read
    assert candidate_ceiling(FakeCorrector(), PAIRS).recall is None  # no predictions: no recall
    assert CeilingReport.from_dict(report.to_dict()) == report
    with pytest.raises(ValueError, match="5 pairs but 2 predictions"):
        candidate_ceiling(fake, PAIRS, predictions=PREDICTIONS[:2])


def test_slices_and_pairs_sum_to_the_whole(monkeypatch):
    """Read two sentences a call, the text indices of each call still find their pairs; the
    per-pair reports sum to the data set's."""
    whole = candidate_ceiling(FakeCorrector(), PAIRS, predictions=PREDICTIONS)
    monkeypatch.setattr(ceiling_module, "SLICE", 2)
    fake = FakeCorrector()
    per_pair = pair_ceilings(fake, PAIRS, predictions=PREDICTIONS)
    assert len(fake.calls) == 2 and combine(per_pair) == whole
    assert [r.ranked_first for r in per_pair] == [1, 0, 0, 0, 0] and per_pair[3].skipped == 1
    assert combine(per_pair[:2]).errors == 3 and combine([]).corrected is None


def test_traditional_text_is_compared_in_the_script_the_model_reads():
    """A traditional text's candidates are simplified characters (score_candidates); its gold
    character counts in either script."""
    from corrector.text.script import ScriptConverter

    class Traditional(FakeCorrector):
        script = ScriptConverter("tw")

        def score_candidates(self, texts, batch_size=None):
            return [ScoredCandidate(0, 5, "式", "试", {}, 0.9, True)]

    report = candidate_ceiling(Traditional(), [("我們明天考式。", "我們明天考試。")], predictions=["我們明天考試。"])
    assert (report.covered, report.ranked_first, report.corrected, report.corrected_later) == (1, 1, 1, 0)


def test_means_pooling_and_text():
    a = CeilingReport(2, 4, 3, 2, 1, 1, 0)
    b = CeilingReport(1, 2, 2, 2, 2, 2, 0)
    clean = CeilingReport(3, 0, 0, 0, 0, 0, 0)
    means = mean_shares([a, b, clean])  # the error-free set does not count
    assert means == {"flagged_share": (0.75 + 1.0) / 2, "coverage": 0.75, "ceiling": 0.625, "recall": 0.625}
    assert mean_shares([clean]) == dict.fromkeys(("flagged_share", "coverage", "ceiling", "recall"))
    halves = pooled([{"all": a.to_dict(), "x": b.to_dict()}, {"all": b.to_dict()}])
    assert halves["all"] == CeilingReport(3, 6, 5, 4, 3, 3, 0) and halves["x"] == b
    assert shares_text(a.to_dict()) == "75.0 / 50.0 / 25.0 / 25.0"
    assert shares_text(CeilingReport(1, 1, 1, 1, 1).to_dict()).endswith("/ –")


@pytest.fixture(scope="module")
def trained(trained_model_dir):
    from corrector.pipeline import Corrector, CorrectorConfig

    return Corrector(str(trained_model_dir), config=CorrectorConfig(passes=1))


def test_the_tiny_trained_model_orders_its_shares(trained):
    """recall <= ceiling <= coverage <= flagged share, and the recall is the evaluator's character
    correction recall."""
    from test_pipeline import CORRECT_SENTENCES, ERROR_PAIRS

    from corrector.evaluation.metrics import score

    pairs = [*ERROR_PAIRS.items(), ("他的作业作得很认真。", "他的作业做得很认真。"), *((s, s) for s in CORRECT_SENTENCES)]
    predictions = [r.target for r in trained.correct_batch([s for s, _ in pairs])]
    report = candidate_ceiling(trained, pairs, batch_size=4, predictions=predictions)
    assert report.errors == 4 and report.sentences == len(pairs)
    assert 0.0 < report.recall <= report.ceiling <= report.coverage <= report.flagged_share <= 1.0
    assert report.corrected_later == 0  # one pass: nothing it fixes was not ranked first
    chars = score((s, t, p) for (s, t), p in zip(pairs, predictions, strict=True)).char_correction
    assert report.recall == chars.recall


def test_evaluate_ceiling_option(tiny_model_dir, tmp_path, capsys):
    from evaluate.__main__ import main

    out, md = tmp_path / "out.json", tmp_path / "report.md"
    assert main([str(FIXTURES / "pairs.tsv"), "--system", "identity,corrector", "--model", str(tiny_model_dir),
                 "--ceiling", "--json", str(out), "--report", str(md), "--no-progress"]) == 0
    printed = capsys.readouterr()
    assert "Candidate ceiling" in printed.out and "coverage" in printed.out
    assert "identity: no candidate ceiling" in printed.err
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["settings"]["ceiling"] is True
    figures = document["ceiling"]["systems"]["corrector"]["datasets"]["pairs"]
    metrics = document["systems"]["corrector"]["datasets"]["pairs"]
    assert figures["sentences"] == metrics["sentences"] and figures["skipped"] == 1  # the length mismatch
    assert figures["errors"] == metrics["char"]["correction"]["tp"] + metrics["char"]["correction"]["fn"]
    assert figures["recall"] == metrics["char"]["correction"]["recall"]
    assert figures["ceiling"] <= figures["coverage"] <= figures["flagged_share"]
    assert set(document["ceiling"]["skipped"]) == {"identity"}
    report = md.read_text(encoding="utf-8")
    assert "## Candidate ceiling" in report and "| pairs | corrector |" in report
    assert main([str(FIXTURES / "pairs.tsv"), "--system", "identity", "--json", str(out), "--no-progress"]) == 0
    assert "ceiling" not in json.loads(out.read_text(encoding="utf-8"))  # only when asked for


def test_heldout_scores_the_ceiling_of_the_other_half():
    """fit_and_score(ceiling=True): the other half's ceiling in all and per subset, its recall the
    default passes' output at the tuned threshold."""
    from corrector.finetune.calibrate import fit_and_score
    from corrector.scoring import Scorer

    examples = [Example("因该去吗", "应该去吧", str(i), i + 1) for i in range(8)]  # two errors each
    candidates = [ScoredCandidate(i, 0, "因", target, {"bias": 1.0, "same_pinyin": float(target == "应")}, 0.0, True)
                  for i in range(8) for target in ("应", "音")]
    labels = [int(c.target == "应") for c in candidates]

    class Trial(FakeCorrector):  # fixes 因 only
        scorer = Scorer()

        def with_passes(self, passes: int) -> Trial:
            return self

        def correct_batch(self, texts, batch_size=None, threshold=None):
            return [Result.applying(text, [Edit(0, "因", "应", 0.9, "pinyin")]) for text in texts]

    subsets = {"odd": [i % 4 == 1 for i in range(8)]}
    score = fit_and_score(lambda config: Trial(), examples, candidates, labels, {}, batch_size=8,
                          half_of=[i % 2 for i in range(8)], fit_half=0, two_passes=True, subsets=subsets, ceiling=True)
    # The 4 odd sentences: 因 and 吗 flagged, 应 proposed and first (and fixed), 吧 not proposed.
    assert score.ceiling["all"] == CeilingReport(4, 8, 8, 4, 4, 4, 0).to_dict()
    assert score.ceiling["odd"]["errors"] == 4 and score.ceiling["odd"]["ceiling"] == 0.5
    without = fit_and_score(lambda config: Trial(), examples, candidates, labels, {}, batch_size=8,
                            half_of=[i % 2 for i in range(8)], fit_half=0, two_passes=True)
    assert without.ceiling is None


def test_heldout_prints_and_writes_the_pooled_ceiling(monkeypatch, tmp_path, capsys):
    from corrector.finetune import calibrate
    from corrector.finetune.__main__ import main
    from corrector.finetune.calibrate import HalfScore

    def halves(*args, **kwargs) -> list[HalfScore]:
        first = {"all": CeilingReport(2, 4, 3, 2, 1, 1, 0).to_dict(), "a": CeilingReport(1, 2, 2, 2, 1, 1, 0).to_dict()}
        second = {"all": CeilingReport(2, 4, 4, 4, 3, 2, 0).to_dict(), "clean": CeilingReport(3, 0, 0, 0, 0, 0, 0).to_dict()}
        return [HalfScore(0, 0, 0.5, 0.4, 0.5, ceiling=first), HalfScore(0, 1, 0.5, 0.6, 0.7, ceiling=second)]

    monkeypatch.setattr(calibrate, "held_out_splits", halves)
    report = tmp_path / "ho.json"
    assert main(["heldout", "--model", "m", "--dev", "d", "--splits", "1", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "candidate ceiling over 2 halves' errors" in out and "all 87.5 / 75.0 / 50.0 / 37.5; a " in out
    assert "clean" not in out  # no errors: no shares to print
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["ceiling"]["all"] == CeilingReport(4, 8, 7, 6, 4, 3, 0).to_dict()
    assert written["ceiling"]["a"]["ceiling"] == 0.5 and written["ceiling"]["clean"]["sentences"] == 3
    assert written["halves"][1]["ceiling"] == halves()[1].ceiling
