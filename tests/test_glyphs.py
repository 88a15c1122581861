"""Graded shape measures of any character pair (resources/glyphs.py) and their scorer features."""

from __future__ import annotations

import numpy as np
import pytest

from corrector.features import GLYPH_FEATURES
from corrector.resources.glyphs import GLYPH_MEASURES, GlyphSimilarity


def measures(confusion, a: str, b: str) -> dict[str, float]:
    return dict(zip(GLYPH_MEASURES, confusion.glyphs.pair(a, b), strict=True))


def test_pairs_that_look_alike_measure_higher(confusion):
    # 冬/各: the same top strokes and four-corner digits 2 7 _ 0 _; 接/搜: the same hand radical
    # and component; 坐/座: one inside the other.
    assert measures(confusion, "冬", "各")["corners"] == pytest.approx(0.6)
    assert measures(confusion, "接", "搜")["radical"] == 1.0
    assert measures(confusion, "接", "搜")["parts"] == pytest.approx(0.5)
    assert measures(confusion, "坐", "座")["contains"] == 1.0
    unrelated = measures(confusion, "冬", "但")
    assert unrelated["radical"] == unrelated["contains"] == unrelated["parts"] == 0.0
    assert measures(confusion, "冬", "各")["strokes"] > unrelated["strokes"]


def test_symmetric_and_zero_where_unknown(confusion):
    assert confusion.glyphs.pair("界", "军") == confusion.glyphs.pair("军", "界")
    assert confusion.glyphs.pair("a", "军") == (0.0,) * len(GLYPH_MEASURES)
    assert confusion.glyphs.pair("军", "军") == (0.0,) * len(GLYPH_MEASURES)
    rows = confusion.glyphs.measures(["冬", "接"], ["各", "搜"])
    assert rows.shape == (2, len(GLYPH_MEASURES)) and np.all(rows >= 0) and np.all(rows <= 1)
    assert GlyphSimilarity({}).measures([], []).shape == (0, len(GLYPH_MEASURES))


def test_tables_without_glyphs_leave_the_features_zero():
    from corrector.resources.confusion import ConfusionSet

    assert ConfusionSet({"common": "", "pinyin": {}, "shape": {}}).glyphs is None


def test_every_candidate_carries_the_measures(shipped_corrector):
    # 冠界 -> 冠军: the n-gram LM's candidate 军 is in no confusion set; its features now say how
    # much it looks like 界.
    scored = [c for c in shipped_corrector.score_candidates(["女子个人冠界"]) if c.position == 5]
    assert scored
    for candidate in scored:
        assert set(GLYPH_FEATURES) <= set(candidate.features)
        expected = shipped_corrector.confusion.glyphs.pair("界", candidate.target)
        assert [candidate.features[name] for name in GLYPH_FEATURES] == pytest.approx(expected, abs=1e-6)
