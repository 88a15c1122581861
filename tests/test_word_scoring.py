"""The word scorer: a word candidate scored as a whole from its members' evidence (word_scoring.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corrector import word_scoring
from corrector.features import FEATURE_INDEX, FEATURES
from corrector.scoring import Scorer


def batch(words: list[tuple[float, list[float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, features, confidence) for a single candidate followed by words, each given as
    (its n-gram gain, its members' own confidences)."""
    group, rows, confidence = [-1], [np.zeros(len(FEATURES))], [0.5]
    for g, (gain, members) in enumerate(words):
        for own in members:
            row = np.zeros(len(FEATURES))
            row[FEATURE_INDEX["word_gain"]] = gain
            row[FEATURE_INDEX["word_size"]] = len(members)
            row[FEATURE_INDEX["lm_gain"]] = gain / 4
            rows.append(row)
            group.append(g)
            confidence.append(own)
    return np.array(group), np.array(rows, dtype=np.float32), np.array(confidence, dtype=np.float32)


def test_word_inputs_read_the_whole_word_and_its_weakest_and_strongest_member():
    group, features, confidence = batch([(9.0, [0.2, 0.8]), (1.0, [0.5, 0.5, 0.5])])
    ids, rows = word_scoring.word_inputs(group, features, confidence)
    assert ids.tolist() == [0, 1] and rows.shape == (2, len(word_scoring.WORD_INPUTS))
    column = {name: j for j, name in enumerate(word_scoring.WORD_INPUTS)}
    assert rows[:, column["word_gain"]].tolist() == [9.0, 1.0]
    assert rows[:, column["word_size"]].tolist() == [2.0, 3.0]
    assert rows[0, column["member_logit_min"]] == pytest.approx(np.log(0.2 / 0.8), abs=1e-6)
    assert rows[0, column["member_logit_max"]] == pytest.approx(np.log(0.8 / 0.2), abs=1e-6)
    assert rows[1, column["member_log_confidence_mean"]] == pytest.approx(np.log(0.5), abs=1e-6)
    assert rows[0, column["lm_gain_max"]] == pytest.approx(2.25)


def test_a_fitted_word_scorer_gives_every_member_its_word_score_and_leaves_singles():
    # Right words gain much in the n-gram LM, wrong ones little, whatever their members' own scores.
    rng = np.random.default_rng(0)
    words = [(float(rng.uniform(6, 12)), [0.3, 0.2]) for _ in range(20)] + \
            [(float(rng.uniform(0, 4)), [0.4, 0.3]) for _ in range(60)]
    group, features, confidence = batch(words)
    right = [1] * 20 + [0] * 60
    labels = [0] + [right[g] for g in group[1:]]
    keys = [None] + [("text", int(g)) for g in group[1:]]
    config = word_scoring.fit(features, confidence, labels, keys)
    assert config is not None and config["inputs"] == list(word_scoring.WORD_INPUTS)

    scorer = Scorer.from_config({"word": config})
    assert Scorer.from_config(scorer.to_config()).word == config  # survives scorer.json
    scored = scorer.word_confidence(group, features, confidence)
    assert scored[0] == confidence[0]  # a single keeps its own
    members = {g: scored[group == g] for g in range(len(words))}
    assert all(len(set(m.tolist())) == 1 for m in members.values())  # a word's members share one score
    assert min(members[g][0] for g in range(20)) > 0.5 > max(members[g][0] for g in range(20, 80))
    # Without a word scorer a word is as sure as its weakest member.
    assert Scorer().word_confidence(group, features, confidence)[1:3].tolist() == pytest.approx([0.2, 0.2])
    # Nothing to learn from: all words right (or none).
    assert word_scoring.fit(features, confidence, [0] + [1] * (len(labels) - 1), keys) is None


def test_a_word_scorer_of_other_inputs_is_refused():
    with pytest.raises(ValueError, match="refit with calibrate"):
        Scorer.from_config({"word": {"inputs": ["word_gain"], "mean": [0], "std": [1], "weights": [1], "bias": 0}})
