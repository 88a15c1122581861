"""Confusion sets built from pypinyin and char_similar data, plus user pairs."""

from __future__ import annotations

import json
import time

import pytest

from corrector.resources.confusion import (
    SAME_PINYIN,
    SIMILAR_PINYIN,
    SIMILAR_SHAPE,
    USER_PAIR,
    ConfusionSet,
    fuzzy_syllable,
    kind_of,
    load_tables,
    read_pairs,
)


@pytest.mark.parametrize("a,b,bit", [
    ("坐", "座", SAME_PINYIN),
    ("在", "再", SAME_PINYIN),
    ("的", "地", SAME_PINYIN),  # heteronym: 地 is also read de
    ("因", "应", SIMILAR_PINYIN),  # yin / ying
    ("是", "四", SIMILAR_PINYIN),  # shi / si
    ("南", "蓝", SIMILAR_PINYIN),  # nan / lan
    ("未", "末", SIMILAR_SHAPE),
    ("己", "已", SIMILAR_SHAPE),
    ("戊", "戌", SIMILAR_SHAPE),
    ("拔", "拨", SIMILAR_SHAPE),
    ("坐", "座", SIMILAR_SHAPE),  # 坐 is a component of 座
])
def test_known_pairs(confusion, a, b, bit):
    assert confusion.relation(a, b) & bit
    assert confusion.relation(b, a) & bit


def test_unrelated_and_kinds(confusion):
    assert confusion.relation("因", "猫") == 0
    assert kind_of(confusion.relation("因", "应")) == "pinyin"
    assert kind_of(confusion.relation("未", "末")) == "shape"
    assert kind_of(confusion.relation("坐", "座")) == "pinyin"  # sound wins
    assert kind_of(0) == "other"
    assert "因" not in confusion.relations("因")


def test_readings_are_those_people_use_unless_all_are_asked_for(confusion):
    # 逐 is read zhú; pypinyin also lists dí, which no phrase uses: nobody types 的 for 逐.
    assert confusion.pinyin("逐") == ["zhu"]
    assert not confusion.relation("逐", "的") & (SAME_PINYIN | SIMILAR_PINYIN)
    assert not confusion.relation("有", "为") & SAME_PINYIN  # 有 wèi: no phrase
    assert set(confusion.pinyin("行")) >= {"xing", "hang"} and set(confusion.pinyin("长")) == {"chang", "zhang"}
    every = ConfusionSet.build(all_readings=True)
    assert "di" in every.pinyin("逐") and every.relation("逐", "的") & SAME_PINYIN
    assert ConfusionSet.build().pinyin("逐") == ["zhu"]  # each kind keeps its own cache file


def test_targets_are_common_characters(confusion):
    assert all(c in confusion.common for c in confusion.relations("一"))
    assert 5000 < len(confusion.common) < 8000


def test_fuzzy_syllables():
    assert fuzzy_syllable("zhang") == fuzzy_syllable("zan") == "zan"
    assert fuzzy_syllable("ling") == fuzzy_syllable("nin")
    assert fuzzy_syllable("xiang") == fuzzy_syllable("xian")
    assert fuzzy_syllable("shi") == "si" and fuzzy_syllable("a") == "a"


def test_user_pairs(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text("# my pairs\n猫 狗\n\n甲:乙丙\n", encoding="utf-8")
    assert read_pairs(path) == [("猫", "狗"), ("甲", "乙"), ("甲", "丙")]
    confusion = ConfusionSet.build(path)
    assert confusion.relation("猫", "狗") & USER_PAIR and confusion.relation("狗", "猫") & USER_PAIR
    assert confusion.relation("丙", "甲") & USER_PAIR
    assert confusion.relation("坐", "座") & SAME_PINYIN  # built-in sets still there


def test_bad_user_file_names_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("猫 狗\n猫狗\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        read_pairs(path)


def test_cache_is_written_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("ELECTRA_CSC_CACHE", str(tmp_path))
    start = time.perf_counter()
    built = load_tables()
    build_seconds = time.perf_counter() - start
    files = list(tmp_path.glob("confusion-*.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text(encoding="utf-8")) == built
    start = time.perf_counter()
    assert load_tables() == built
    assert time.perf_counter() - start < max(1.0, build_seconds)
