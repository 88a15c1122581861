"""Invisible characters (issue #69): a text is corrected as if they were absent, and they come back
where they were written (text/invisible.py)."""

from __future__ import annotations

import pytest

from corrector.pipeline import whitelist_terms
from corrector.result import Edit, Result
from corrector.runtime.models import DEFAULT_MODEL_DIR
from corrector.text.invisible import Visible, is_invisible, visible_texts

ZWSP, ZWNJ, ZWJ, WORD_JOINER, BOM, SOFT_HYPHEN = "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"
VS16, VS17, LRM = "\ufe0f", "\U000e0100", "\u200e"
INVISIBLE = (ZWSP, ZWNJ, ZWJ, WORD_JOINER, BOM, SOFT_HYPHEN, VS16, VS17, LRM)

shipped = pytest.mark.skipif(not (DEFAULT_MODEL_DIR / "discriminator" / "model.safetensors").exists(),
                             reason=f"the shipped model is not in {DEFAULT_MODEL_DIR}")


@pytest.mark.parametrize("char", INVISIBLE)
def test_invisible_characters(char):
    assert is_invisible(char)


@pytest.mark.parametrize("char", ["因", "a", "1", " ", "\n", "\u3000", "，", "😀", "\ue000", "Ａ", "\u0301"])
def test_visible_characters_and_spaces_are_not_invisible(char):
    # Spaces have their own handling (no model position, kept by offset); a combining accent shows.
    assert not is_invisible(char)


def test_a_text_without_invisible_characters_is_read_as_it_is():
    visible = Visible.of("少先队员因该为老人让坐")
    assert visible.text is visible.original and visible.offsets is None
    assert visible.position(4) == 4
    result = Result.applying(visible.text, [Edit(4, "因", "应", 0.9)])
    assert visible.restore(result) is result


def test_invisible_characters_are_left_out_and_offsets_map_back():
    text = f"{ZWJ}因{ZWJ}该{ZWJ}"
    visible = Visible.of(text)
    assert visible.text == "因该"
    assert visible.offsets == (1, 3)
    assert [visible.position(i) for i in range(2)] == [1, 3]


def test_a_result_maps_back_with_every_invisible_character_in_place():
    text = f"{BOM}他再{ZWSP}学校里读书，因{VS17}该{SOFT_HYPHEN}努力。{ZWJ}"
    visible = Visible.of(text)
    assert visible.text == "他再学校里读书，因该努力。"
    found = Result.applying(visible.text, [Edit(8, "因", "应", 0.96, "pinyin"), Edit(1, "再", "在", 0.95, "pinyin")])
    restored = visible.restore(found)
    assert restored.source == text
    # Byte for byte the text as written but the two corrected characters; the variation selector
    # stays after the character it followed.
    assert restored.target == f"{BOM}他在{ZWSP}学校里读书，应{VS17}该{SOFT_HYPHEN}努力。{ZWJ}"
    assert [(e.position, e.source, e.target, e.confidence, e.kind) for e in restored.edits] == [
        (2, "再", "在", 0.95, "pinyin"), (10, "因", "应", 0.96, "pinyin")]
    assert all(text[e.position] == e.source for e in restored.edits)


def test_only_invisible_characters_and_non_text_pass_through():
    only = Visible.of(ZWJ * 3)
    assert only.text == "" and only.offsets == ()
    assert only.restore(Result.unchanged("")) == Result.unchanged(ZWJ * 3)
    assert Visible.of(42).text == 42  # refused later by the chunk stage, with its index


def test_visible_texts():
    visible, texts = visible_texts(["因该", f"因{ZWSP}该"])
    assert texts == ["因该", "因该"]
    assert [v.original for v in visible] == ["因该", f"因{ZWSP}该"]


def test_whitelisted_terms_match_without_their_invisible_characters():
    assert whitelist_terms([f"因{ZWSP}该", "", "应该"]) == ["因该", "应该"]


@shipped
@pytest.mark.parametrize("char", INVISIBLE)
def test_corrected_as_if_the_invisible_characters_were_absent(shipped_corrector, char):
    plain = "少先队员因该为老人让坐"
    text = char + char.join(plain) + char  # one before, between and after every character
    expected = shipped_corrector.correct(plain)
    assert expected.target == "少先队员应该为老人让座"
    result = shipped_corrector.correct(text)
    assert result.source == text
    assert result.target == char + char.join(expected.target) + char
    assert [(e.position, e.source, e.target, e.confidence) for e in result.edits] == [
        (2 * e.position + 1, e.source, e.target, e.confidence) for e in expected.edits]


@shipped
def test_the_issue_example_and_its_candidates(shipped_corrector):
    # Issue #69: 因 between zero-width joiners was "corrected" to 鄞 (0.84).
    text = f"{ZWJ}因{ZWJ}该{ZWJ}"
    result, traditional = shipped_corrector.correct_batch([text, f"我們因{ZWSP}該去"])
    assert result.target == f"{ZWJ}应{ZWJ}该{ZWJ}"
    assert [(e.position, e.source, e.target) for e in result.edits] == [(1, "因", "应")]
    assert traditional.target == f"我們應{ZWSP}該去"  # written back in its script, past the ZWSP
    assert [(e.position, e.source, e.target) for e in traditional.edits] == [(2, "因", "應")]
    best = [(c.position, c.source, c.target) for c in shipped_corrector.score_candidates([text]) if c.best]
    assert best == [(1, "因", "应")]
