"""A second look at each position's winner before the edit threshold (accept stage).

The scorer (scoring.py) ranks a position's candidates: its confidence is fitted over every
candidate, most of them easy negatives. Whether the winner should become an edit is a narrower
question, and the evidence around it tells: how far the winner leads the runner-up, how many
candidates the position had, and how sure the corrector is of the best winner elsewhere in the
same sentence (errors come together; a lone unsure winner in a fluent sentence is a false alarm's
shape). The acceptor is a small gradient-boosted tree ensemble over the winner's scorer inputs and
those five, fitted on the dev's winners with the scorer's confidences out of fold (calibrate.py),
so it sees the confidences it will see on new text. The trees start from the winner's logit
(LightGBM's init_score) and learn a correction to it: where the dev says nothing, the scorer's
ranking stands. Its probability replaces the winner's confidence: the edit threshold, the idiom
and second-pass thresholds apply to it.

Why (offline, broad dev: scorer and acceptor fitted on one half, the threshold at 0.5 % of the
fitting half's clean sentences changed, applied to the other half): character correction F1 of the
error parts 67.8 -> 70.7 at the same clean rate (0.59 %); recall 53.0 -> 57.2. Trees of 7 leaves,
100 rounds: larger ensembles (15 leaves, 400 rounds) rank better but are surer on the sentences
they were fitted on, and a threshold chosen there changed 0.96 % of the other half's clean ones.

In the pipeline (`finetune calibrate --acceptor`, thresholds swept out of fold: crossfit.py), broad
dev held out over four halves (`heldout --splits 2`): macro 61.6 at 0.33 % of clean sentences
changed, against 61.6 at 0.61 % without it; six public tests' mean F1 66.1 -> 66.4, SIGHAN-15
55.3 -> 55.1. In the release since the dev's clean parts hold 300 sentences a domain (threshold
0.62; docs/history.md, "Clean parts of 300; the acceptor shipped").

At run time the trees are evaluated in numpy (`TreeEnsemble`); LightGBM only fits them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .features import FEATURE_INDEX

# What the acceptor reads beside the winner's named scorer inputs, from the scores at its
# position and in its batch row (`acceptance_inputs`).
CONTEXT_INPUTS = ("logit", "runner_up", "margin", "candidates", "best_elsewhere")
LOGIT = CONTEXT_INPUTS.index("logit")  # the logit's column among them
# Logits are read from float32 confidences: past ~16 they saturate, so both ends are clipped there.
LOGIT_CLIP = 16.0
# LightGBM settings (see the module docstring for the measured trade-off).
TREE_PARAMS = dict(objective="binary", learning_rate=0.08, num_leaves=7, min_data_in_leaf=200, lambda_l2=10.0,
                   feature_fraction=0.8, bagging_fraction=0.8, bagging_freq=1, verbose=-1, deterministic=True,
                   force_row_wise=True, num_threads=2)
ROUNDS = 100
# Below this many winners, or this many right ones, the dev is too small to fit trees: no acceptor.
MIN_WINNERS = 1000
MIN_RIGHT = 50


def logits_of(confidence: np.ndarray) -> np.ndarray:
    """The logits of float32 confidences, float64, clipped to +-LOGIT_CLIP."""
    p = np.clip(np.asarray(confidence, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.clip(np.log(p) - np.log1p(-p), -LOGIT_CLIP, LOGIT_CLIP)


def acceptance_inputs(winner_features: np.ndarray, confidence: np.ndarray, position: np.ndarray, row: np.ndarray,
                      best: Sequence[int], names: Sequence[str]) -> np.ndarray:
    """The acceptor's inputs of the winners `best` among K candidates, (len(best), len(names) +
    len(CONTEXT_INPUTS)) float64: the named columns of `winner_features` (the winners' rows of the
    features as the scorer reads them: the prior column filled), then CONTEXT_INPUTS. Per candidate:
    `position`, its position key (candidates at one position share it; dense small integers),
    `row`, its sentence's (batch row), `confidence`, the scorer's (a word's members: their word's)."""
    best = np.asarray(best, dtype=np.int64)
    position = np.asarray(position, dtype=np.int64)
    row = np.asarray(row, dtype=np.int64)
    logit = logits_of(confidence)
    n_positions = int(position.max()) + 1 if len(position) else 0
    loser = np.ones(len(position), dtype=bool)
    loser[best] = False
    runner_up = np.full(n_positions, -LOGIT_CLIP)
    np.maximum.at(runner_up, position[loser], logit[loser])
    count = np.bincount(position, minlength=n_positions)
    won = logit[best]
    won_row = row[best]
    # The best winner of each row, and the second best, for "the best winner elsewhere".
    n_rows = int(row.max()) + 1 if len(row) else 0
    order = np.lexsort((-won, won_row))
    first_of_row = np.r_[True, won_row[order][1:] != won_row[order][:-1]] if len(order) else np.zeros(0, dtype=bool)
    top, second = np.full(n_rows, -LOGIT_CLIP), np.full(n_rows, -LOGIT_CLIP)
    top[won_row[order[first_of_row]]] = won[order[first_of_row]]
    second_of_row = np.r_[False, first_of_row[:-1] & ~first_of_row[1:]] if len(order) else first_of_row
    second[won_row[order[second_of_row]]] = won[order[second_of_row]]
    is_top = np.zeros(len(best), dtype=bool)
    is_top[order[first_of_row]] = True
    elsewhere = np.where(is_top, second[won_row], top[won_row])
    at = position[best]
    columns = np.asarray(winner_features, dtype=np.float64)[:, [FEATURE_INDEX[n] for n in names]]
    context = np.stack([won, runner_up[at], won - runner_up[at], count[at].astype(np.float64), elsewhere], axis=1)
    return np.concatenate([columns, context], axis=1)


class TreeEnsemble:
    """A binary LightGBM model's trees as flat arrays, evaluated in numpy: raw score = the sum of
    each tree's leaf. Nodes hold (feature, threshold, left, right); a child < 0 is leaf ~child."""

    def __init__(self, config: Mapping) -> None:
        self.feature = np.array(config["feature"], dtype=np.int64)
        self.threshold = np.array(config["threshold"], dtype=np.float64)
        self.left = np.array(config["left"], dtype=np.int64)
        self.right = np.array(config["right"], dtype=np.int64)
        self.value = np.array(config["value"], dtype=np.float64)
        self.roots = np.array(config["roots"], dtype=np.int64)
        if not (len(self.feature) == len(self.threshold) == len(self.left) == len(self.right)):
            raise ValueError("acceptor trees: node arrays of different lengths")

    @classmethod
    def from_lightgbm(cls, dump: Mapping) -> TreeEnsemble:
        """From `Booster.dump_model()` (numeric splits, `<=`, no missing values: the inputs have none)."""
        nodes: dict[str, list] = {"feature": [], "threshold": [], "left": [], "right": [], "value": [], "roots": []}

        def add(node: Mapping) -> int:
            if "leaf_value" in node:
                nodes["value"].append(float(node["leaf_value"]))
                return ~(len(nodes["value"]) - 1)
            if node.get("decision_type", "<=") != "<=":
                raise ValueError(f"acceptor trees: unsupported split {node.get('decision_type')}")
            k = len(nodes["feature"])
            for key in ("feature", "threshold", "left", "right"):
                nodes[key].append(0)
            nodes["feature"][k] = int(node["split_feature"])
            nodes["threshold"][k] = float(node["threshold"])
            nodes["left"][k] = add(node["left_child"])
            nodes["right"][k] = add(node["right_child"])
            return k

        for tree in dump["tree_info"]:
            nodes["roots"].append(add(tree["tree_structure"]))
        return cls(nodes)

    def to_config(self) -> dict:
        return {"feature": self.feature.tolist(), "threshold": self.threshold.tolist(), "left": self.left.tolist(),
                "right": self.right.tolist(), "value": self.value.tolist(), "roots": self.roots.tolist()}

    def raw(self, x: np.ndarray) -> np.ndarray:
        """The summed leaf values of each row of `x` (N, inputs)."""
        x = np.asarray(x, dtype=np.float64)
        node = np.broadcast_to(self.roots, (len(x), len(self.roots))).copy()
        inner = node >= 0
        while inner.any():
            r, t = np.nonzero(inner)
            k = node[r, t]
            node[r, t] = np.where(x[r, self.feature[k]] <= self.threshold[k], self.left[k], self.right[k])
            inner = node >= 0
        return self.value[~node].sum(axis=1)


class Acceptor:
    """The fitted acceptor of a scorer.json (`Scorer.acceptor`): {"inputs": the scorer features
    it reads, then CONTEXT_INPUTS; "trees": `TreeEnsemble.to_config()`; "residual": whether the
    trees' sum is added to the winner's logit (absent: False, the trees alone)}."""

    def __init__(self, config: Mapping) -> None:
        self.names = [n for n in config["inputs"] if n not in CONTEXT_INPUTS]
        unknown = set(self.names) - set(FEATURE_INDEX)
        if unknown or list(config["inputs"][len(self.names):]) != list(CONTEXT_INPUTS):
            raise ValueError(f"acceptor inputs: unknown features {sorted(unknown)} or not ending in {CONTEXT_INPUTS}")
        self.trees = TreeEnsemble(config["trees"])
        self.residual = bool(config.get("residual", False))
        self.logit_column = len(self.names) + LOGIT

    def confidence(self, winner_features: np.ndarray, confidence: np.ndarray, position: np.ndarray, row: np.ndarray,
                   group: np.ndarray, best: Sequence[int]) -> np.ndarray:
        """`confidence` with each winner's replaced by the acceptor's probability (a word's
        members all get the least of theirs: a word is accepted whole or not at all);
        `acceptance_inputs` names the arguments."""
        out = np.array(confidence, dtype=np.float32)
        if len(best) == 0:
            return out
        best = np.asarray(best, dtype=np.int64)
        x = acceptance_inputs(winner_features, confidence, position, row, best, self.names)
        raw = self.trees.raw(x) + (x[:, self.logit_column] if self.residual else 0.0)
        p = 1.0 / (1.0 + np.exp(-raw))
        words = np.asarray(group)[best]
        if (words >= 0).any():
            ids, inverse = np.unique(words, return_inverse=True)
            least = np.full(len(ids), np.inf)
            np.minimum.at(least, inverse, p)
            p = np.where(words >= 0, least[inverse], p)
        out[best] = p.astype(np.float32)
        return out


def fit(inputs: np.ndarray, labels: np.ndarray, names: Sequence[str], seed: int = 0) -> dict | None:
    """An acceptor config fitted on winners' `acceptance_inputs` (their scorer confidences out of
    fold) and labels (1: the winner is the gold correction); None when there are fewer than
    MIN_WINNERS winners or MIN_RIGHT right ones (or all are right). The trees start from the winners'
    logits and learn a correction ("residual"; trees from nothing: broad dev held out 61.2 against
    62.2). Needs LightGBM (the train extra)."""
    import lightgbm

    labels = np.asarray(labels, dtype=np.float64)
    right = int(labels.sum())
    if len(labels) < MIN_WINNERS or right < MIN_RIGHT or right == len(labels):
        return None
    inputs = np.asarray(inputs, dtype=np.float64)
    init = np.ascontiguousarray(inputs[:, len(names) + LOGIT])
    booster = lightgbm.train({**TREE_PARAMS, "seed": seed}, lightgbm.Dataset(inputs, labels, init_score=init),
                             num_boost_round=ROUNDS)
    return {"inputs": [*names, *CONTEXT_INPUTS], "trees": TreeEnsemble.from_lightgbm(booster.dump_model()).to_config(),
            "residual": True}
