"""The acceptor: a second look at each position's winner before the threshold (acceptor.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corrector import acceptor
from corrector.acceptor import CONTEXT_INPUTS, LOGIT_CLIP, Acceptor, TreeEnsemble, acceptance_inputs
from corrector.features import FEATURE_INDEX, FEATURES
from corrector.scored import ScoredCandidate
from corrector.scoring import Scorer


def logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def test_acceptance_inputs_read_the_runner_up_the_position_and_the_best_winner_elsewhere():
    # Row 0: position 0 has three candidates (winner 0.9), position 1 one (0.6); row 1: position 2 alone (0.2).
    confidence = np.array([0.9, 0.5, 0.3, 0.6, 0.2], dtype=np.float32)
    position = np.array([0, 0, 0, 1, 2])
    row = np.array([0, 0, 0, 0, 1])
    best = [0, 3, 4]
    features = np.zeros((3, len(FEATURES)), dtype=np.float32)
    features[:, FEATURE_INDEX["lm_gain"]] = [1.0, 2.0, 3.0]
    x = acceptance_inputs(features, confidence, position, row, best, ["lm_gain"])
    assert x.shape == (3, 1 + len(CONTEXT_INPUTS))
    column = {name: j + 1 for j, name in enumerate(CONTEXT_INPUTS)}
    assert x[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert x[:, column["logit"]] == pytest.approx([logit(0.9), logit(0.6), logit(0.2)], abs=1e-5)
    assert x[:, column["runner_up"]] == pytest.approx([logit(0.5), -LOGIT_CLIP, -LOGIT_CLIP], abs=1e-5)
    assert x[0, column["margin"]] == pytest.approx(logit(0.9) - logit(0.5), abs=1e-5)
    assert x[:, column["candidates"]].tolist() == [3.0, 1.0, 1.0]
    # The best winner elsewhere in the row: 0.9's is 0.6, 0.6's is 0.9, the lone 0.2 has none.
    assert x[:, column["best_elsewhere"]] == pytest.approx([logit(0.6), logit(0.9), -LOGIT_CLIP], abs=1e-5)


def test_numpy_trees_give_lightgbm_s_raw_scores():
    lightgbm = pytest.importorskip("lightgbm", reason="lightgbm (the train extra) fits the trees")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 6))
    y = (x[:, 0] + x[:, 1] * x[:, 2] + rng.normal(scale=0.5, size=3000) > 0).astype(float)
    booster = lightgbm.train({**acceptor.TREE_PARAMS, "seed": 0}, lightgbm.Dataset(x, y), num_boost_round=30)
    trees = TreeEnsemble(TreeEnsemble.from_lightgbm(booster.dump_model()).to_config())
    test = rng.normal(size=(500, 6))
    assert trees.raw(test) == pytest.approx(booster.predict(test, raw_score=True), abs=1e-9)


def test_the_acceptor_replaces_the_winners_confidence_and_a_word_is_accepted_whole():
    # One tree splitting on lm_gain: <= 1 -> leaf -2, else +2.
    trees = {"feature": [0], "threshold": [1.0], "left": [~0], "right": [~1], "value": [-2.0, 2.0], "roots": [0]}
    config = {"inputs": ["lm_gain", *CONTEXT_INPUTS], "trees": trees}
    scorer = Scorer.from_config({"acceptor": config})
    assert Scorer.from_config(scorer.to_config()).acceptor == config  # survives scorer.json
    features = np.zeros((4, len(FEATURES)), dtype=np.float32)
    features[:, FEATURE_INDEX["lm_gain"]] = [5.0, 0.0, 5.0, 0.0]
    confidence = np.array([0.7, 0.6, 0.5, 0.5], dtype=np.float32)
    # Candidates 0 and 1 win positions 0 and 1 on their own; 2 and 3 are one word at positions 2 and 3.
    out = scorer.accepted_confidence(features, confidence, np.array([0, 1, 2, 3]), np.zeros(4, dtype=np.int64),
                                     np.array([-1, -1, 0, 0]), [0, 1, 2, 3])
    up, down = 1 / (1 + np.exp(-2.0)), 1 / (1 + np.exp(2.0))
    assert out.tolist() == pytest.approx([up, down, down, down], abs=1e-6)  # the word: its weakest member's
    # A candidate that does not win keeps the scorer's confidence; without an acceptor nothing changes.
    assert scorer.accepted_confidence(features, confidence, np.array([0, 0, 1, 1]), np.zeros(4, dtype=np.int64),
                                      np.full(4, -1), [0, 2])[[1, 3]].tolist() == pytest.approx([0.6, 0.5])
    assert Scorer().accepted_confidence(features, confidence, np.arange(4), np.zeros(4), np.full(4, -1),
                                        [0, 1]) is confidence


def test_a_residual_acceptor_adds_its_trees_to_the_scorers_logit():
    # The same tree as above, fitted as a correction to the winner's logit.
    trees = {"feature": [0], "threshold": [1.0], "left": [~0], "right": [~1], "value": [-0.5, 1.0], "roots": [0]}
    scorer = Scorer.from_config({"acceptor": {"inputs": ["lm_gain", *CONTEXT_INPUTS], "trees": trees, "residual": True}})
    features = np.zeros((2, len(FEATURES)), dtype=np.float32)
    features[:, FEATURE_INDEX["lm_gain"]] = [5.0, 0.0]
    confidence = np.array([0.7, 0.2], dtype=np.float32)
    out = scorer.accepted_confidence(features, confidence, np.array([0, 1]), np.zeros(2, dtype=np.int64),
                                     np.full(2, -1), [0, 1])
    expected = [1 / (1 + np.exp(-(logit(0.7) + 1.0))), 1 / (1 + np.exp(-(logit(0.2) - 0.5)))]
    assert out.tolist() == pytest.approx(expected, abs=1e-6)


def test_a_residual_fit_starts_from_the_scorers_logit():
    pytest.importorskip("lightgbm", reason="lightgbm (the train extra) fits the trees")
    rng = np.random.default_rng(0)
    n = 4000
    x = np.zeros((n, 1 + len(CONTEXT_INPUTS)))
    x[:, 0] = rng.normal(size=n)  # evidence the scorer missed
    x[:, 1] = rng.normal(scale=2.0, size=n)  # the scorer's logit, already well calibrated
    y = (rng.random(n) < 1 / (1 + np.exp(-(x[:, 1] + x[:, 0])))).astype(float)
    config = acceptor.fit(x, y, ["lm_gain"])
    assert config["residual"] is True
    trees = TreeEnsemble(config["trees"])
    # The trees learn only what the logit lacks: the first input's effect, not the logit's.
    low, high = x.copy(), x.copy()
    low[:, 0], high[:, 0] = -1.0, 1.0
    assert (trees.raw(high) - trees.raw(low)).mean() > 1.0
    shifted = x.copy()
    shifted[:, 1] += 2.0
    assert abs((trees.raw(shifted) - trees.raw(x)).mean()) < 0.3


def test_acceptor_inputs_must_end_in_the_context_inputs():
    trees = {"feature": [], "threshold": [], "left": [], "right": [], "value": [0.0], "roots": [~0]}
    with pytest.raises(ValueError, match="acceptor inputs"):
        Acceptor({"inputs": ["lm_gain", "no_such_feature", *CONTEXT_INPUTS], "trees": trees})
    with pytest.raises(ValueError, match="acceptor inputs"):
        Acceptor({"inputs": ["lm_gain", "logit"], "trees": trees})


def dev_candidates(n_sentences: int, seed: int = 0) -> tuple[list[ScoredCandidate], list[int]]:
    """Two candidates at one position of each sentence; in half the sentences the position is an
    error and a strong n-gram gain marks its gold candidate, in the rest nothing is."""
    rng = np.random.default_rng(seed)
    candidates, labels = [], []
    for t in range(n_sentences):
        error = t % 2 == 0
        for k, target in enumerate("甲乙"):
            gold = error and k == 0
            gain = rng.normal(3.0 if gold else 0.0, 1.0)
            candidates.append(ScoredCandidate(t, 1, "丙", target, {"bias": 1.0, "lm_gain": float(gain)}, 0.0, False))
            labels.append(int(gold))
    return candidates, labels


def test_calibration_fits_the_acceptor_out_of_fold_and_only_on_a_dev_large_enough():
    pytest.importorskip("lightgbm", reason="lightgbm (the train extra) fits the trees")
    from corrector.finetune.crossfit import candidate_confidence, sweep_scorers

    options = dict(hidden=0, inputs=None, acceptor=True)
    candidates, labels = dev_candidates(2400)
    config, folds = sweep_scorers(candidates, labels, options, None, 1)
    assert config["acceptor"]["inputs"][-len(CONTEXT_INPUTS):] == list(CONTEXT_INPUTS)
    scorer = Scorer.from_config(config)
    fresh, _ = dev_candidates(400, seed=1)
    ranking, confidence = candidate_confidence(scorer, fresh)
    confidence = confidence[np.arange(0, len(fresh), 2) + ranking.reshape(-1, 2).argmax(axis=1)]  # the winners'
    assert np.mean(confidence[0::2]) > 0.6 > np.mean(confidence[1::2])  # errors' winners above the others'
    small, small_labels = dev_candidates(200)
    assert "acceptor" not in sweep_scorers(small, small_labels, options, None, 1)[0]  # 200 winners: too few for trees
    unasked, no_folds = sweep_scorers(candidates, labels, {**options, "acceptor": False}, None, 1)
    assert "acceptor" not in unasked and no_folds is None  # not asked for: no acceptor, the sweep in sample
    assert len(folds) == 2 and all("acceptor" in c for c in folds)  # the sweep's fold scorers, each with its own


class Recording:
    """A corrector stand-in that records the texts it was asked to correct."""

    def __init__(self, passes: int = 1) -> None:
        self.seen: list[str] = []
        self.passes = passes

    def correct_batch(self, texts, batch_size=None, threshold=None):
        from corrector.result import Result

        self.seen.extend(texts)
        return [Result.applying(text, []) for text in texts]

    def with_passes(self, passes: int) -> Recording:
        return Recording(passes)


def test_the_sweep_reads_each_dev_sentence_with_the_scorer_fitted_without_its_fold():
    from corrector.finetune.crossfit import Routed, fold_of, fold_trial

    pair_of = [0, 1, 2, 3, 0, 2]  # four pairs, then the correct sides of pairs 0 and 2
    assert [fold_of(pair_of, i, 0) for i in range(6)] == [0, 1, 0, 1, 0, 0]
    assert [fold_of(pair_of, i, 1) for i in range(6)] == [0, 0, 1, 1, 0, 1]
    sources = ["甲", "乙", "丙", "丁", "戊", "己"]
    default, trials = Recording(), [Recording(), Recording()]
    assert fold_trial(default, None, sources, range(6), pair_of, 0) is default  # no fold scorers: no routing
    routed = fold_trial(default, trials, sources, [0, 1, 2, 3], pair_of, 0)
    assert isinstance(routed, Routed)
    results = routed.correct_batch(["丁", "甲", "戊", "乙", "丙"])
    assert [r.target for r in results] == ["丁", "甲", "戊", "乙", "丙"]  # in the order asked
    assert trials[0].seen == ["甲", "丙"] and trials[1].seen == ["丁", "乙"] and default.seen == ["戊"]
    again = routed.with_passes(3)
    assert {again.default.passes, *(c.passes for c in again.by_text.values())} == {3}
    assert again.by_text["甲"] is again.by_text["丙"] is not again.by_text["乙"]  # one copy per corrector
