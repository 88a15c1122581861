"""Word candidates: the homophone-word index, group bookkeeping, and the pipeline writing a
misspelt word as a whole (必近 -> 毕竟) on a tiny model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import TINY_TEXT, build_tiny_model

from corrector import Corrector, CorrectorConfig
from corrector.acceptance import winners
from corrector.features import lm_margin
from corrector.resources.homophones import HomophoneWords, load_index, whole_words
from corrector.resources.ngram import NgramLM
from corrector.scoring import Scorer
from corrector.word_scoring import weakest_member

WRONG = "他必近是个孩子。"  # 毕竟 typed by sound (bi jing -> bi jin): two characters wrong
RIGHT = "他毕竟是个孩子。"


@pytest.fixture(scope="module")
def homophones(confusion, tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("ELECTRA_CSC_CACHE", str(tmp_path_factory.mktemp("cache")))
    load_index.cache_clear()  # built here, into that cache, whatever an earlier test loaded
    return HomophoneWords.build(confusion)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_index_finds_words_that_sound_like_the_span(homophones):
    found = {(m.start, m.word) for m in homophones.matches(WRONG, lambda offset: True)}
    assert (1, "毕竟") in found  # bi jin ~ bi jing (in/ing folded)
    assert all(len(word) >= 2 for _, word in found)
    for start, word in found:  # every match changes at least two characters of its span
        assert sum(a != b for a, b in zip(WRONG[start:start + len(word)], word, strict=True)) >= 2
    # Only at allowed offsets: with 近 frozen, no word may change it.
    frozen = {(m.start, m.word) for m in homophones.matches(WRONG, lambda offset: offset != 2)}
    assert (1, "毕竟") not in frozen
    assert all(word[2 - start] == "近" for start, word in frozen if start <= 2 < start + len(word))
    # A chunk's bounds are respected.
    assert all(m.start >= 2 for m in homophones.matches(WRONG, lambda offset: True, start=2))
    # The spans' words are remembered: a fresh index (nothing remembered) finds the same.
    fresh = HomophoneWords(homophones.index, homophones.confusion)
    for allowed in (lambda offset: True, lambda offset: offset != 2):
        assert fresh.matches(WRONG, allowed, most_frequent=3) == homophones.matches(WRONG, allowed, most_frequent=3)
    assert "必近" in homophones._spans


def test_index_is_cached_and_rebuilt_identically(homophones, confusion):
    from corrector.resources.confusion import cache_dir

    assert len(list(cache_dir().glob("homophone-words-*.json"))) == 1
    load_index.cache_clear()
    again = HomophoneWords.build(confusion)  # from the JSON cache written by the fixture
    assert HomophoneWords.build(confusion).index is again.index  # then once per process
    assert again.index == homophones.index
    assert all(freq >= 10 for words in again.index.values() for _, freq in words)


def test_span_gain_is_the_difference_of_whole_text_log_probs():
    lm = NgramLM.count([RIGHT, "毕竟不是。", "他毕竟是个孩子吧。"] * 3, order=3, min_count=1, min_char_count=1)

    def total(text: str) -> float:
        ids = [0, 0] + list(lm.ids(text)) + [0]
        return float(lm.log_prob(np.array([ids[i:i + 3] for i in range(len(ids) - 2)], dtype=np.uint64)).sum())

    sites = [(WRONG, 1), (WRONG, 0), (WRONG, 4), ("必近", 1)]
    words = ["毕竟", "他们", "个孩子。", "竟"]
    for (text, start), word, gain in zip(sites, words, lm.span_gains(sites, words), strict=True):
        changed = text[:start] + word + text[start + len(word):]
        assert gain == pytest.approx(total(changed) - total(text), abs=1e-9)
    # One character: the same as the single-candidate gain.
    single = lm.site_gains([(WRONG, 2)], np.array([0]), lm.ids("竟"))
    assert lm.span_gains([(WRONG, 2)], ["竟"])[0] == pytest.approx(single[0])


def test_a_word_wins_only_as_a_whole():
    # positions 0 and 1: singles a (0.6 at 0), b (0.3 at 1); word g0 over 0+1 at 0.5: loses at 0.
    position = np.array([0, 1, 0, 1, 2, 1, 2])
    group = np.array([-1, -1, 0, 0, -1, 1, 1])
    score = np.array([0.6, 0.3, 0.5, 0.5, 0.1, 0.4, 0.4])
    assert winners(position, group, score) == [0, 5, 6]  # word 1 beats b at 1 and the single at 2
    score[[2, 3]] = 0.7  # now word 0 beats both singles at 0 and 1 and takes position 1 first
    assert winners(position, group, score) == [2, 3, 4]
    score[[2, 3]] = -np.inf
    assert winners(position, group, score) == [0, 5, 6]
    assert winners(np.array([0]), np.array([-1]), np.array([-np.inf])) == []


def test_group_confidence_and_incomplete_words():
    group = np.array([-1, 0, 0, 1, 1])
    confidence = np.array([0.9, 0.8, 0.3, 0.6, 0.7])
    assert weakest_member(group, confidence).tolist() == pytest.approx([0.9, 0.3, 0.3, 0.6, 0.6])
    assert confidence.tolist() == pytest.approx([0.9, 0.8, 0.3, 0.6, 0.7])  # not modified in place

    from corrector.candidates import Candidates

    base = Candidates.empty()
    cands = Candidates(**{name: np.zeros(5) for name in Candidates.__dataclass_fields__})
    cands = dataclasses.replace(cands, group=group, word_size=np.array([0, 2, 2, 2, 2.0]))
    kept = whole_words(cands.select(np.array([True, True, True, True, False])))
    assert kept.group.tolist() == [-1, 0, 0]  # word 1 lost a member: dropped whole
    assert len(base) == 0


def test_margin_of_a_word_member_is_that_of_the_single_it_repeats():
    position = np.array([0, 0, 0, 0])
    target = np.array([7, 8, 7, 9])
    gain = np.array([5.0, 2.0, 5.0, 1.0])
    rival = np.array([True, True, False, False])
    margin = lm_margin(position, gain, target=target, rival=rival)
    assert margin.tolist() == pytest.approx([3.0, -3.0, 3.0, -4.0])


@pytest.fixture(scope="module")
def word_model(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("word_model"), text=TINY_TEXT + RIGHT + WRONG)
    return path


def test_pipeline_writes_a_misspelt_word_as_a_whole(word_model, confusion, homophones):
    lm = NgramLM.count([RIGHT, "毕竟不是。", "他毕竟是个孩子吧。", "孩子们。"] * 3, order=3, min_count=1, min_char_count=1)
    from corrector import load_model

    bundle = dataclasses.replace(load_model(str(word_model)), ngram=lm)
    # A hand-set scorer that trusts only the word evidence: singles stay under the threshold.
    scorer = {"weights": {"bias": -6.0, "word_gain": 1.0}, "threshold": 0.5, "detection_threshold": 0.0}
    corrector = Corrector(bundle, scorer=scorer, confusion=confusion, quantize=False,
                          config=CorrectorConfig(workers=1))
    assert corrector.homophones is not None  # the scorer reads word_gain: words are proposed
    result = corrector.correct(WRONG)
    assert result.target == RIGHT
    assert [(e.position, e.source, e.target) for e in result.edits] == [(1, "必", "毕"), (2, "近", "竟")]
    assert result.edits[0].confidence == result.edits[1].confidence  # a word's characters share one
    assert corrector.correct(RIGHT).target == RIGHT

    scored = corrector.score_candidates([WRONG], detection_threshold=0.0)
    members = [c for c in scored if c.word == "1:毕竟"]
    assert [(c.position, c.target) for c in members] == [(1, "毕"), (2, "竟")]
    assert all(c.features["word_size"] == 2 and c.features["word_gain"] > 0 and c.best for c in members)
    assert all(c.features["word_gain"] == 0 and c.features["word_size"] == 0 for c in scored if not c.word)

    # A whitelisted term freezes its characters: the word cannot be written over it.
    frozen = Corrector(bundle, scorer=scorer, confusion=confusion, quantize=False, whitelist=["必近"],
                       config=CorrectorConfig(workers=1))
    assert frozen.correct(WRONG).target == WRONG
    # A scorer fitted without word features proposes no words (it would score them as singles).
    plain = Corrector(bundle, scorer=Scorer().to_config(), confusion=confusion, quantize=False,
                      config=CorrectorConfig(workers=1))
    assert plain.homophones is None


def test_word_flags_examine_a_misspelt_word_no_other_rule_flags(word_model, confusion, homophones):
    """A wrong word the detector leaves unflagged (detection threshold 1: nothing is) is examined
    where the homophone word gains more than `word_flag_gain` in the n-gram LM, and written."""
    lm = NgramLM.count([RIGHT, "毕竟不是。", "他毕竟是个孩子吧。", "孩子们。"] * 3, order=3, min_count=1, min_char_count=1)
    from corrector import load_model

    bundle = dataclasses.replace(load_model(str(word_model)), ngram=lm)
    scorer = {"weights": {"bias": -6.0, "word_gain": 1.0}, "threshold": 0.5, "detection_threshold": 1.0}
    corrector = Corrector(bundle, scorer=scorer, confusion=confusion, quantize=False, config=CorrectorConfig(workers=1))
    assert corrector.correct(WRONG).target == WRONG  # no flag, no candidate
    gain = lm.span_gains([(WRONG, 1)], ["毕竟"])[0]
    flagged = Corrector(bundle, scorer={**scorer, "word_flag_gain": float(gain) - 0.5}, confusion=confusion,
                        quantize=False, config=CorrectorConfig(workers=1))
    result = flagged.correct(WRONG)
    assert result.target == RIGHT and [e.position for e in result.edits] == [1, 2]
    assert flagged.correct(RIGHT).target == RIGHT
    above = Corrector(bundle, scorer={**scorer, "word_flag_gain": float(gain) + 0.5}, confusion=confusion,
                      quantize=False, config=CorrectorConfig(workers=1))
    assert above.correct(WRONG).target == WRONG  # the word gains less than the rule asks
    assert Scorer.from_config({**scorer, "word_flag_gain": 8}).to_config()["word_flag_gain"] == 8.0
