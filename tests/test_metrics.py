"""Metric functions against hand-computed cases (the same example is worked through in docs/evaluate.md)."""

from __future__ import annotations

import pytest

from corrector.datasets import Example
from corrector.evaluation.metrics import PRF, changed_positions, drop_de_edits, judge, metric_value, score
from corrector.evaluation.runs import apply_edits, prediction_of, score_results
from corrector.evaluation.sweep import (
    best_point,
    best_threshold,
    default_thresholds,
    read_calibration,
    sweep,
    sweep_datasets,
    write_calibration,
)
from corrector.result import Edit, Result

ERR, GOLD = "因该让坐", "应该让座"  # errors at positions 0 and 3

# (label, source, target, prediction, category) — one sentence per branch.
CASES = [
    ("A untouched error-free", "我爱北京", "我爱北京", "我爱北京", "correct"),
    ("B over-correction of an error-free sentence", "今天很好", "今天很好", "今天很号", "over-corrected"),
    ("C fully corrected", ERR, GOLD, "应该让座", "correct"),
    ("D partial detection, right char", ERR, GOLD, "应该让坐", "missed"),
    ("E right positions, wrong char", ERR, GOLD, "英该让做", "right-position-wrong-char"),
    ("F extra change on an erroneous sentence", ERR, GOLD, "应该他座", "over-corrected"),
    ("G partial detection, wrong char", ERR, GOLD, "英该让坐", "wrong-candidate"),
    ("H nothing changed", ERR, GOLD, ERR, "missed"),
]


def triples(cases=CASES):
    return [(s, t, p) for _, s, t, p, _ in cases]


@pytest.mark.parametrize("label, source, target, prediction, category", CASES, ids=[c[0] for c in CASES])
def test_categories(label, source, target, prediction, category):
    assert judge(source, target, prediction).category == category


def test_judgement_sets():
    j = judge(ERR, GOLD, "应该他座")
    assert j.gold == {0, 3} and j.predicted == {0, 2, 3} and j.right_chars == {0, 3}
    assert not j.detection_correct and not j.correction_correct
    e = judge(ERR, GOLD, "英该让做")
    assert e.detection_correct and not e.correction_correct and e.right_chars == frozenset()
    untouched = judge("我爱北京", "我爱北京", "我爱北京")
    assert untouched.detection_correct and untouched.correction_correct and not untouched.changed


def test_sentence_standard_protocol():
    s = score(triples())
    # 6 changed sentences (B..G); detection right (D == G) on C and E; correction right on C only.
    assert (s.sentence_detection.tp, s.sentence_detection.fp, s.sentence_detection.fn) == (2, 4, 4)
    assert s.sentence_detection.precision == pytest.approx(2 / 6)
    assert s.sentence_detection.recall == pytest.approx(2 / 6)
    assert s.sentence_detection.f1 == pytest.approx(1 / 3)
    assert (s.sentence_correction.tp, s.sentence_correction.fp, s.sentence_correction.fn) == (1, 5, 5)
    assert s.sentence_correction.precision == pytest.approx(1 / 6)
    assert s.sentence_correction.recall == pytest.approx(1 / 6)
    assert s.detection_accuracy == pytest.approx(3 / 8)  # A, C, E
    assert s.correction_accuracy == pytest.approx(2 / 8)  # A, C


def test_sentence_lenient_protocol():
    s = score(triples())
    # Only B (changed, error-free) is a false positive; recall is the standard protocol's.
    assert (s.lenient_detection.tp, s.lenient_detection.fp, s.lenient_detection.fn) == (2, 1, 4)
    assert s.lenient_detection.precision == pytest.approx(2 / 3)
    assert s.lenient_detection.recall == pytest.approx(1 / 3)
    assert s.lenient_detection.f1 == pytest.approx(4 / 9)
    assert (s.lenient_correction.tp, s.lenient_correction.fp, s.lenient_correction.fn) == (1, 1, 5)
    assert s.lenient_correction.precision == pytest.approx(1 / 2)
    assert s.lenient_correction.recall == pytest.approx(1 / 6)
    assert s.lenient_correction.f1 == pytest.approx(1 / 4)
    assert s.lenient_correction.recall == s.sentence_correction.recall


def test_char_level():
    s = score(triples())
    # predicted positions: B1 C2 D1 E2 F3 G1 = 10; gold: 6 sentences x 2 = 12;
    # detected gold positions: C2 D1 E2 F2 G1 = 8; of those with the gold char: C2 D1 F2 = 5.
    assert (s.char_detection.tp, s.char_detection.fp, s.char_detection.fn) == (8, 2, 4)
    assert s.char_detection.precision == pytest.approx(0.8)
    assert s.char_detection.recall == pytest.approx(8 / 12)
    assert (s.char_correction.tp, s.char_correction.fp, s.char_correction.fn) == (5, 5, 7)
    assert s.char_correction.precision == pytest.approx(0.5)
    assert s.char_correction.recall == pytest.approx(5 / 12)
    assert s.char_correction.f1 == pytest.approx(2 * 0.5 * (5 / 12) / (0.5 + 5 / 12))


def test_fpr_counts_and_categories():
    s = score(triples())
    assert (s.sentences, s.error_sentences, s.error_free_sentences) == (8, 6, 2)
    assert s.false_positives == 1 and s.fpr == pytest.approx(0.5)
    assert s.characters == 32
    assert s.categories == {
        "correct": 2,
        "over-corrected": 2,
        "missed": 2,
        "right-position-wrong-char": 1,
        "wrong-candidate": 1,
    }


def test_to_dict_layout_and_metric_value():
    d = score(triples()).to_dict()
    for protocol in ("sentence", "lenient", "char"):
        for task in ("detection", "correction"):
            block = d[protocol][task]
            assert {"precision", "recall", "f1", "tp", "fp", "fn"} <= block.keys()
            assert all(0.0 <= block[k] <= 1.0 for k in ("precision", "recall", "f1"))
    assert d["fpr"] == pytest.approx(0.5) and d["sentences"] == 8
    assert metric_value(d, "lenient.correction.precision") == pytest.approx(0.5)
    with pytest.raises(KeyError):
        metric_value(d, "sentence.nothing.f1")


def test_identity_and_empty_denominators():
    s = score([(s, t, s) for s, t, _ in triples()])
    for block in (s.sentence_detection, s.sentence_correction, s.lenient_correction, s.char_correction):
        assert block.precision == 0.0 and block.recall == 0.0 and block.f1 == 0.0
    assert s.fpr == 0.0
    empty = score([])
    assert empty.sentences == 0 and empty.fpr == 0.0 and empty.sentence_correction.f1 == 0.0
    assert PRF(0, 0, 0).to_dict()["precision"] == 0.0
    assert PRF(3, 1, 0).precision == 0.75 and PRF(3, 1, 0).recall == 1.0


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError):
        judge("北京是中国的首都", "北京是中国首都", "北京是中国的首都")
    with pytest.raises(ValueError):
        changed_positions("ab", "abc")


def test_ignore_de():
    # 的 -> 得 is the gold correction, but the convention drops every predicted 的/地/得 edit.
    source, target = "他跑的很快", "他跑得很快"
    assert drop_de_edits(source, "他跑得很快") == source
    assert drop_de_edits("我在家", "我的家") == "我在家"  # a change *to* 的 is dropped too
    assert drop_de_edits("因该", "应该") == "应该"  # other edits stay
    plain = score([(source, target, "他跑得很快")])
    ignored = score([(source, target, "他跑得很快")], ignore_de=True)
    assert plain.sentence_correction.tp == 1
    assert ignored.sentence_correction.tp == 0 and ignored.categories["missed"] == 1


# ---- applying edits, threshold filtering and the sweep -------------------------------------


def edits_for(source: str, changes: list[tuple[int, str, float]]) -> list[Edit]:
    return [Edit(pos, source[pos], char, conf) for pos, char, conf in changes]


def test_apply_edits_and_thresholds():
    edits = edits_for(ERR, [(0, "应", 0.9), (3, "座", 0.4)])
    assert apply_edits(ERR, edits) == ("应该让座", [])
    assert apply_edits(ERR, edits, threshold=0.5) == ("应该让坐", [])
    assert apply_edits(ERR, edits, threshold=0.4)[0] == "应该让座"  # confidence >= threshold is kept
    bad = [Edit(9, "x", "y", 1.0), Edit(1, "错", "应", 1.0), Edit(0, "因", "应该", 1.0)]
    text, problems = apply_edits(ERR, bad)
    assert text == ERR and len(problems) == 3


def test_prediction_of_uses_target_unless_its_length_is_wrong():
    result = Result(ERR, "应该让座", edits_for(ERR, [(0, "应", 0.9), (3, "座", 0.4)]))
    assert prediction_of(ERR, result) == ("应该让座", [])
    assert prediction_of(ERR, result, threshold=0.5) == ("应该让坐", [])
    broken = Result(ERR, "应该让座了", result.edits)
    prediction, problems = prediction_of(ERR, broken)
    assert prediction == "应该让座" and problems


def sweep_fixture():
    examples = [
        Example(ERR, GOLD, "e1", 1),
        Example("今天很好", "今天很好", "e2", 2),
        Example("公圆散步", "公园散步", "e3", 3),
    ]
    results = [
        Result(ERR, "应该让座", edits_for(ERR, [(0, "应", 0.9), (3, "座", 0.6)])),
        Result("今天很好", "今天很号", edits_for("今天很好", [(3, "号", 0.3)])),
        Result("公圆散步", "公园散步", edits_for("公圆散步", [(1, "园", 0.2)])),
    ]
    return examples, results


def test_score_results_at_thresholds():
    examples, results = sweep_fixture()
    _, at0 = score_results(examples, results, threshold=0.0)
    assert at0.sentence_correction.tp == 2 and at0.false_positives == 1
    _, at5 = score_results(examples, results, threshold=0.5)
    assert at5.sentence_correction.tp == 1 and at5.false_positives == 0


def test_sweep_and_best_threshold():
    examples, results = sweep_fixture()
    points = sweep(examples, results, thresholds=default_thresholds(11))
    f1 = {p.threshold: p.value("sentence.correction.f1") for p in points}
    # t <= 0.2: P 2/3, R 1 -> 0.8;  0.2 < t <= 0.3: P 1/2, R 1/2 -> 0.5;
    # 0.3 < t <= 0.6: P 1, R 1/2 -> 2/3;  t > 0.6: nothing right -> 0.
    assert f1[0.0] == pytest.approx(0.8) and f1[0.2] == pytest.approx(0.8)
    assert f1[0.3] == pytest.approx(0.5)
    assert f1[0.4] == pytest.approx(2 / 3) and f1[0.6] == pytest.approx(2 / 3)
    assert f1[0.7] == 0.0
    # The best run is {0.0, 0.1, 0.2}; its middle threshold is returned.
    assert best_threshold(points) == pytest.approx(0.1)
    assert best_point(points, "sentence.correction.precision").threshold == pytest.approx(0.5)  # run 0.4-0.6


def test_calibration_file_round_trip(tmp_path):
    examples, results = sweep_fixture()
    result = sweep_datasets(
        {"fixture": (examples, results)}, system="fake", thresholds=default_thresholds(11)
    )
    assert set(result.curves) == {"fixture", "all"}
    path = write_calibration(tmp_path / "calibration.json", result)
    assert read_calibration(path) == pytest.approx(0.1)
    (tmp_path / "bad.json").write_text('{"threshold": 3}', encoding="utf-8")
    with pytest.raises(ValueError):
        read_calibration(tmp_path / "bad.json")


def test_sweep_runs_a_two_pass_corrector_with_one_pass():
    from types import SimpleNamespace

    from corrector.datasets import Example
    from corrector.evaluation.sweep import calibrate
    from corrector.result import Result

    class TwoPass:
        seen: list[int] = []

        def __init__(self, passes=2):
            self.config = SimpleNamespace(passes=passes)

        def with_passes(self, passes):
            return TwoPass(passes)

        def correct_batch(self, texts, batch_size=32, threshold=None):
            self.seen.append(self.config.passes)
            return [Result.unchanged(t) for t in texts]

    system = TwoPass()
    calibrate(system, {"dev": [Example(source="因该", target="应该", id="1", line=1)]}, thresholds=[0.5])
    assert system.seen and set(system.seen) == {1}  # the threshold-0 run models one pass
    assert system.config.passes == 2  # on a copy: the system given is not changed
