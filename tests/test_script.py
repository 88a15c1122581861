"""Traditional-script text: read by the model in simplified form, corrections written back."""

from __future__ import annotations

import pytest
from test_pipeline import RIGHT, WRONG

from corrector.pipeline import Corrector, CorrectorConfig
from corrector.result import Edit
from corrector.text.script import ScriptConverter

TRADITIONAL_WRONG = "少先隊員因該為老人讓坐"  # WRONG in traditional script


@pytest.fixture(scope="module")
def script() -> ScriptConverter:
    return ScriptConverter("tw")


def test_traditional_text_is_read_in_simplified_script(script):
    assert script.model_text(TRADITIONAL_WRONG) == WRONG
    assert script.model_text("我們今天去學校，看著頭髮。") == "我们今天去学校，看着头发。"  # Taiwan's 著 in 看著 is 着


def test_simplified_and_script_neutral_text_is_left_as_written(script):
    for text in (WRONG, "我在2024年用iPhone打电话给Tom。", "今天天气很好", "人工智能", "", "😀 abc"):
        assert script.model_text(text) == text


def test_simplified_text_needs_only_the_standard_to_simplified_tables():
    fresh = ScriptConverter("tw")  # the other three table sets load on the first text that needs them
    assert fresh.model_text(WRONG) == WRONG and list(fresh._converters) == ["t2s"]
    assert fresh.model_text(TRADITIONAL_WRONG) == WRONG
    assert sorted(fresh._converters) == ["s2t", "t2s", "tw2s"]


def test_mixed_text_follows_its_majority_script(script):
    assert script.model_text("这个学校很好，學") == "这个学校很好，學"  # mostly simplified: as written
    assert script.model_text("這個學校很好，学") == "这个学校很好，学"


def test_offsets_survive_text_outside_chinese(script):
    text = "訪問 https://example.com/路徑 😀😀\n全角ＡＢＣ１２３\t兩個  空格\r\n𠀀擴展B字"
    simplified = script.model_text(text)
    assert len(simplified) == len(text)
    assert [i for i, (a, b) in enumerate(zip(text, simplified, strict=True)) if a != b] == [
        i for i, ch in enumerate(text) if ch in "訪問徑兩個擴"]


def test_text_that_does_not_encode_is_converted_character_by_character(script):
    text = "學校\ud800學生"  # a lone surrogate: no UTF-8 for OpenCC
    assert script.model_text(text) == "学校\ud800学生"


def test_corrections_are_written_back_in_the_words_they_make(script):
    # 头发 (hair) and 发现 (discover) share the simplified 发: the corrected word decides.
    text = "她的頭法很長，我發現了。"
    model_text = script.model_text(text)
    edits = [Edit(position=3, source="法", target="发", confidence=0.9, kind="pinyin")]
    assert script.restore(text, model_text, edits) == [
        Edit(position=3, source="法", target="髮", confidence=0.9, kind="pinyin")]
    text = "我法現了。"
    assert script.restore(text, script.model_text(text), [Edit(1, "法", "发", 0.9)])[0].target == "發"


def test_a_correction_that_only_changes_the_script_is_dropped(script):
    text = "我們學校"
    assert script.restore(text, script.model_text(text), [Edit(2, "学", "学", 0.9), Edit(3, "校", "校", 0.8)]) == []


def test_same_character_in_the_other_script(script):
    assert script.same_character("們", "们") and script.same_character("于", "於") and script.same_character("裡", "里")
    assert not script.same_character("们", "们") and not script.same_character("們", "门")
    assert not script.same_character("着", "著")  # 著 is a simplified character of its own (著作)


def test_simplified_text_loses_edits_that_only_change_the_script(trained_model_dir, confusion):
    corrector = Corrector(str(trained_model_dir), confusion=confusion)
    text = "我們因该去。"
    assert corrector.script.model_text(text) == text  # read as written
    item = corrector._items([text], [text])[0]
    edits = [Edit(1, "們", "们", 0.9), Edit(2, "因", "应", 0.8), Edit(3, "该", "該", 0.7)]
    assert corrector._guarded_edits([text], [text], item, edits) == [Edit(2, "因", "应", 0.8)]


def test_variants_write_back_their_own_forms():
    text = "因該"  # 该 -> 為/爲 is not a real correction; it shows the written form of each variant
    assert ScriptConverter("tw").restore(text, "因该", [Edit(1, "该", "为", 0.9)])[0].target == "為"
    assert ScriptConverter("t").restore(text, "因该", [Edit(1, "该", "为", 0.9)])[0].target == "爲"
    with pytest.raises(ValueError, match="unknown traditional variant"):
        ScriptConverter("jp")


def test_corrector_corrects_traditional_text_in_its_script(trained_model_dir, confusion):
    corrector = Corrector(str(trained_model_dir), confusion=confusion)
    result = corrector.correct(TRADITIONAL_WRONG)
    assert result.source == TRADITIONAL_WRONG
    assert result.target == "少先隊員應該為老人讓座"
    assert [(e.position, e.source, e.target, e.kind) for e in result.edits] == [
        (4, "因", "應", "pinyin"), (10, "坐", "座", "pinyin")]
    # The same corrections, with the same confidences, as for the simplified text.
    simplified = corrector.correct(WRONG)
    assert simplified.target == RIGHT
    assert [e.confidence for e in result.edits] == [e.confidence for e in simplified.edits]
    batch = corrector.correct_batch([TRADITIONAL_WRONG, WRONG, "今天天氣很好"])
    assert [r.target for r in batch] == ["少先隊員應該為老人讓座", RIGHT, "今天天氣很好"]


def test_whitelist_matches_traditional_terms_as_written(trained_model_dir, confusion):
    corrector = Corrector(str(trained_model_dir), confusion=confusion, whitelist=["讓坐"])
    assert corrector.correct(TRADITIONAL_WRONG).target == "少先隊員應該為老人讓坐"
    corrector = Corrector(str(trained_model_dir), confusion=confusion, whitelist=["让坐"])  # simplified form too
    assert corrector.correct(TRADITIONAL_WRONG).target == "少先隊員應該為老人讓坐"


def test_conversion_can_be_switched_off(trained_model_dir, confusion):
    corrector = Corrector(str(trained_model_dir), confusion=confusion, config=CorrectorConfig(traditional=None))
    assert corrector.script is None
    assert corrector.correct(WRONG).target == RIGHT
    for candidate in corrector.score_candidates([TRADITIONAL_WRONG], detection_threshold=0.0):
        assert candidate.source == TRADITIONAL_WRONG[candidate.position]  # read as written


def test_regional_forms_that_are_also_simplified_do_not_make_text_traditional(script):
    text = "那天他穿著时尚的衣著，带著棕色的眼睛。"  # simplified, with Taiwan's 著 for 着
    assert script.model_text(text) == text


def test_a_script_only_correction_takes_no_real_ones_place_under_the_edit_limit(trained_model_dir, confusion):
    config = CorrectorConfig(max_edits_per_sentence=1, max_positions=6)
    corrector = Corrector(str(trained_model_dir), confusion=confusion, config=config)
    original = "你們好。穿著因該"  # 着 -> 著 in the model's text is only the traditional form of what is written
    model_text = corrector.script.model_text(original)
    assert model_text == "你们好。穿着因该"
    item = corrector._items([model_text], [original])[-1]
    assert item.chunk.start == 4  # the second sentence's chunk: judged on its own span
    edits = [Edit(5, "着", "著", 0.9), Edit(6, "因", "应", 0.6)]
    # Written back in the text's script (應), and the script-only one gone before the limit counts.
    assert corrector._guarded_edits([model_text], [original], item, edits) == [Edit(6, "因", "應", 0.6)]
    # Simplified text as written: the same edits are both real, and the limit keeps the surer one.
    assert corrector._guarded_edits([model_text], None, item, edits) == [Edit(5, "着", "著", 0.9)]
