"""Idioms (resources/idioms.py): when a correction completes a four-character phrase, and the
lower edit threshold the acceptance stage gives such a winner (Scorer.idiom_threshold_factor)."""

from __future__ import annotations

import pytest

from corrector.resources.idioms import MIN_FREQ, MIN_WORD_FREQ, Idioms
from corrector.runtime.models import DEFAULT_MODEL_DIR
from corrector.scoring import Scorer

PHRASES = {"迫不及待": 303, "一鼓作气": 88, "罕见成语": MIN_FREQ - 1}
WORDS = {**PHRASES, "迫不急待": 3, "所谓": 500, "也就是说": 400, "大使": 300, "常见说法": 2_000}


def completes(idioms: Idioms, text: str, offset: int, target: str) -> bool:
    return target in idioms.fixes(text).get(offset, ())


@pytest.fixture
def idioms() -> Idioms:
    return Idioms(PHRASES, WORDS)


def test_a_character_that_completes_a_broken_idiom(idioms):
    assert completes(idioms, "他迫不急待地打开了礼物。", 3, "及")
    assert completes(idioms, "我们要一股作气完成任务。", 4, "鼓")
    assert not completes(idioms, "他迫不急待地打开了礼物。", 3, "急")  # the written character
    assert not completes(idioms, "他迫不急待地打开了礼物。", 3, "即")  # no phrase
    assert not completes(idioms, "罕见成与", 3, "语")  # phrases rarer than MIN_FREQ do not count


def test_no_completion_where_the_window_already_reads_well(idioms):
    # The window is a phrase itself, or a common word: not 10x rarer than the phrase.
    assert not completes(Idioms({"迫不及待": 303, "迫不急待": 300}, WORDS), "迫不急待", 2, "及")
    assert not completes(Idioms({"常见说话": 100}, WORDS), "常见说法", 3, "话")


def test_a_character_inside_a_word_across_the_window_is_left_alone():
    idioms = Idioms({"也就是说": 400}, WORDS)
    assert not completes(idioms, "也就是所谓的", 3, "说")  # 所 belongs to 所谓
    assert completes(idioms, "也就是所，", 3, "说")
    assert MIN_WORD_FREQ <= WORDS["所谓"]


def test_windows_outside_chinese_text_are_ignored(idioms):
    assert not completes(idioms, "迫不急", 2, "及")  # too short
    assert not completes(idioms, "迫不急2", 2, "及")


def test_the_factor_round_trips_through_scorer_json():
    scorer = Scorer.from_config({"idiom_threshold_factor": 0.4, "threshold": 0.7})
    assert scorer.idiom_threshold(0.7) == pytest.approx(0.28)
    assert Scorer.from_config(scorer.to_config()).idiom_threshold_factor == 0.4
    assert Scorer.from_config({}).idiom_threshold(0.7) is None


@pytest.mark.skipif(not (DEFAULT_MODEL_DIR / "scorer.json").exists(), reason="the shipped model is not in data/model")
def test_the_shipped_corrector_completes_an_idiom_under_its_edit_threshold(shipped_corrector):
    from corrector import Corrector

    text = "他迫不急待地打开了礼物。"
    scorer = shipped_corrector.scorer.to_config()
    off = Corrector(shipped_corrector.bundle, scorer={**scorer, "idiom_threshold_factor": None})
    on = Corrector(shipped_corrector.bundle, scorer=scorer)  # the release's factor (0.35)
    assert scorer["idiom_threshold_factor"] is not None
    assert off.correct(text).target == text  # 急 -> 及 scores ~0.28, under the edit threshold
    edit, = on.correct(text).edits
    assert (edit.position, edit.source, edit.target) == (3, "急", "及") and edit.confidence < on.threshold
    assert on.correct("我们明天讨论这个问题。").target == "我们明天讨论这个问题。"


def test_a_threshold_sweep_keeps_idiom_completions_as_the_corrector_does():
    # A sweep re-filters one threshold-0 run; with the idiom rule that equals running at each
    # threshold only if the filter applies the rule too (resources.idioms.passes_threshold).
    from corrector.datasets import Example
    from corrector.evaluation.sweep import sweep
    from corrector.result import Edit, Result

    source, target = "他迫不急待地打开了礼物。", "他迫不及待地打开了礼物。"
    idiom = Result.applying(source, [Edit(3, "急", "及", 0.3, "pinyin")])
    other = Result.applying(source, [Edit(3, "急", "及", 0.3, "other")])  # no confusion relation
    example = Example(source, target, "1", 1)

    def f1(result: Result, factor: float | None) -> float:
        return sweep([example], [result], [0.72], idiom_factor=factor)[0].value("sentence.correction.f1")

    assert f1(idiom, 0.4) == 1.0  # 0.3 >= 0.4 x 0.72
    assert f1(idiom, None) == 0.0 and f1(idiom, 0.45) == 0.0 and f1(other, 0.4) == 0.0  # 0.3 < 0.324


@pytest.mark.skipif(not (DEFAULT_MODEL_DIR / "scorer.json").exists(), reason="the shipped model is not in data/model")
def test_the_idiom_rule_flags_and_proposes_what_no_other_rule_examines(shipped_corrector):
    from corrector import Corrector

    text = "我们要一股作气完成任务。"  # 股 -> 鼓 (一鼓作气): no other flag rule examines 股 but the pair
    # flags (股 -> 鼓 is a training correction the n-gram LM prefers here), turned off to see this one alone
    scorer = {**shipped_corrector.scorer.to_config(), "pair_flag_gain": None}
    off = Corrector(shipped_corrector.bundle, scorer={**scorer, "idiom_threshold_factor": None})
    on = Corrector(shipped_corrector.bundle, scorer={**scorer, "idiom_threshold_factor": 0.4})
    assert not [c for c in off.score_candidates([text]) if c.position == 4]
    proposed = {c.target: c for c in on.score_candidates([text]) if c.position == 4}
    assert "鼓" in proposed and proposed["鼓"].features["detect_prob"] < on.scorer.detection_threshold


def test_jieba_s_phrases_are_read_from_the_user_cache_after_the_first_build(tmp_path, monkeypatch):
    monkeypatch.setenv("ELECTRA_CSC_CACHE", str(tmp_path))
    built = Idioms.from_jieba()
    assert len(list(tmp_path.glob("idioms-*.bin"))) == 1
    cached = Idioms.from_jieba()
    assert cached.freq == built.freq and built.freq["迫不及待"] >= MIN_FREQ
    assert completes(cached, "他迫不急待地打开了礼物。", 3, "及")


def test_fixes_of_a_span_read_only_its_neighbourhood_and_match_the_whole_text():
    from corrector.resources.idioms import idiom_fixes, shared_idioms

    text = "他说也就是所谓的事，我们要一股作气完成，他迫不急待地打开礼物。" * 3
    whole = shared_idioms().fixes(text)
    assert whole  # 鼓, 及 …
    for start in range(0, len(text), 5):
        end = min(len(text), start + 5)
        assert idiom_fixes(text, start, end) == {o: c for o, c in whole.items() if start <= o < end}
