"""What the n-gram LM adds beyond the confusion sets: its own candidates (resources/lm_proposals.py)
and pair flags (detection.py) — the knowledge that raises the candidate ceiling."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from test_ngram import LINES  # short sentences with 应该 and 让座

from corrector.candidates import CandidateConfig, GeneratorView, propose
from corrector.config import CorrectorConfig
from corrector.resources.error_pairs import FILENAME as PAIRS_FILE
from corrector.resources.error_pairs import ErrorPairs
from corrector.resources.lm_proposals import LMProposals
from corrector.resources.ngram import NgramLM


@pytest.fixture(scope="module")
def lm() -> NgramLM:
    return NgramLM.count(LINES, order=3, min_count=1, min_char_count=1)


def test_proposals_fit_both_neighbours_and_never_the_written_character(lm):
    proposals = LMProposals(lm)
    text = "我们应该为老人让书。"  # 书: nothing the LM has seen between 让 and 。
    found = proposals([(text, 8)], per_site=4)[0]
    assert lm.chars[int(found[0])] == "座"  # 让座 and 座。 both counted
    assert lm.ids("书")[0] not in found.tolist()
    assert len(proposals([(text, 8)], per_site=1)[0]) == 1
    # At the text's start only the right neighbour constrains: 应 is seen before 该.
    start = proposals([("因该没问题。", 0)], per_site=8)[0]
    assert lm.ids("应")[0] in start.tolist()
    # Nothing fits an unknown neighbour on both sides.
    assert len(proposals([("甲乙丙", 1)], per_site=4)[0]) == 0


def test_predecessor_index_is_every_bigram_sorted_by_its_second_character(lm):
    """The reverse index (a stable sort by the second id) holds the bigrams re-packed as
    (second, first), in order, each with its own count."""
    reverse_keys, reverse_counts = LMProposals(lm)._reverse_bigrams()
    bits, mask = np.uint64(lm.bits), np.uint64((1 << lm.bits) - 1)
    swapped = ((lm.keys[1] & mask) << bits) | (lm.keys[1] >> bits)
    order = np.argsort(swapped)
    assert np.array_equal(reverse_keys, swapped[order])
    assert np.array_equal(reverse_counts, lm.counts[1][order])


def test_extra_candidates_come_on_top_of_the_cap_and_keep_a_confusion_relation():
    vocab, chars = 6, ["甲"]
    log_probs = np.log(np.full((1, vocab), 1 / vocab, dtype=np.float32))
    view = GeneratorView.of(log_probs, np.array([0]), np.zeros(vocab, np.float32), 4)

    def confusion(char):  # ids 1 and 2 confusable with the written id 0, relation bit 1
        return np.array([1, 2]), np.array([1, 1]), np.zeros(2, np.float32)

    config = CandidateConfig(top_k=1, max_candidates=2)
    plain = propose(view, np.array([0]), chars, confusion, config)
    assert len(plain) == 2
    extra = (np.array([0, 0]), np.array([2, 5]), np.array([0.5, 1.5]))  # 2 is confusable too; 5 is the LM's own
    both = propose(view, np.array([0]), chars, confusion, config, extra=extra)
    assert sorted(both.target_id.tolist()) == sorted(set(plain.target_id.tolist()) | {5})
    relation = dict(zip(both.target_id.tolist(), both.relation.tolist(), strict=True))
    assert relation[5] == 0 and relation[2] == 1
    # The gain the proposer ranked the extra by is its candidate's (not scored a second time).
    assert dict(zip(both.target_id.tolist(), both.lm_gain.tolist(), strict=True))[5] == 1.5


def _model_with_lm(tiny_model_dir, tmp_path, pairs=()):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    NgramLM.count(LINES * 5, order=3, min_count=1, min_char_count=1).save(model)
    if pairs:
        ErrorPairs.count(pairs).save(model / PAIRS_FILE)
    return model


def test_the_lm_proposes_what_no_confusion_set_holds(tiny_model_dir, tmp_path):
    """书 -> 座 is no confusable pair and a random generator does not guess it: the LM's proposal is
    the only way the candidate comes, and a scorer that trusts the LM takes it."""
    from corrector import Corrector

    model = _model_with_lm(tiny_model_dir, tmp_path)
    scorer = {"weights": {"bias": -4.0, "lm_gain": 1.0}, "threshold": 0.5, "detection_threshold": 0.0}
    text = "我们应该为老人让书。"
    with_lm = Corrector(str(model), scorer=scorer)
    assert with_lm.correct(text).target == "我们应该为老人让座。"
    off = CorrectorConfig(candidates=CandidateConfig(lm_proposals=0))
    without = Corrector(str(model), scorer=scorer, config=off)
    assert "座" not in {c.target for c in without.score_candidates([text]) if c.position == 8}


def test_pair_flags_examine_a_trained_correction_the_lm_prefers(tiny_model_dir, tmp_path):
    from corrector import Corrector

    model = _model_with_lm(tiny_model_dir, tmp_path, pairs=[("让坐", "让座")] * 3)
    # The discriminator flags nothing (no probability exceeds 1): only the rule can.
    scorer = {"weights": {"bias": -4.0, "lm_gain": 1.0}, "threshold": 0.5, "detection_threshold": 1.0}
    text = "我们应该为老人让坐。"
    off = Corrector(str(model), scorer=scorer)
    assert off.scorer.pair_flag_gain is None and off.score_candidates([text]) == []
    flagged = Corrector(str(model), scorer={**scorer, "pair_flag_gain": 0.0})
    assert {c.position for c in flagged.score_candidates([text])} == {8}
    assert flagged.correct(text).target == "我们应该为老人让座。"
    gain = float(flagged.bundle.ngram.replacement_gains([(text, 8)], [["座"]])[0][0])
    above = Corrector(str(model), scorer={**scorer, "pair_flag_gain": gain + 0.5})
    assert above.score_candidates([text]) == []
    config = dataclasses.replace(flagged.scorer, pair_flag_gain=3.0).to_config()
    assert config["pair_flag_gain"] == 3.0
