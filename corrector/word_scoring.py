"""Score a word candidate as a whole (resources/homophones.py: 有期图形 -> 有期徒刑).

A word candidate's members are scored like single candidates (scoring.py), each reading the
evidence at its own character. Without a word scorer a word is as sure as its weakest member
(`weakest_member`); but a member's own evidence is weak where the word is wrong as a
whole: the generator reads the other wrong character beside it, and the n-gram LM's gain for that
one character alone is small. The word scorer is a logistic model over the word's evidence as a
whole — the n-gram gain of the whole word, its size, and the least and most of each member's
evidence and score — fitted on the dev's word candidates (`fit`, a word is right when every
member writes the gold character).

Why (shipped networks and tables, broad dev word candidates fitted on alternate halves, at edit
threshold 0.72): 81 of its 155 right words accepted at 7 wrong ones, against 40 at 1 for the
weakest member's score; ECSpell's tests 79 of 126 at 1 wrong against 29 at 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .features import FEATURE_INDEX

# The members' evidence read at its least and most (features.py names).
MEMBER_INPUTS = ("gen_logprob", "orig_logprob", "gen_top1", "detect_prob", "same_pinyin", "similar_pinyin",
                 "orig_word", "cand_word", "lm_gain", "pair_log_count", "prior")
WORD_INPUTS = ("word_gain", "word_size", "member_logit_min", "member_logit_max", "member_log_confidence_mean",
               *(f"{name}_{side}" for name in MEMBER_INPUTS for side in ("min", "max")))
# L2 penalty on the standardised weights: the dev holds ~150 right words among ~5,000.
L2 = 0.1


def word_inputs(group: np.ndarray, features: np.ndarray, confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the word ids, (G, len(WORD_INPUTS)) float64) for the word members (`group` >= 0) of a
    batch's candidates: `features` as the scorer reads them (the prior column filled) and
    `confidence` each member's own score."""
    members = np.flatnonzero(group >= 0)
    ids, word = np.unique(group[members], return_inverse=True)
    rows = np.empty((len(ids), len(WORD_INPUTS)), dtype=np.float64)
    if len(ids) == 0:
        return ids, rows
    member = np.asarray(features, dtype=np.float64)[members]
    own = np.clip(np.asarray(confidence, dtype=np.float64)[members], 1e-9, 1 - 1e-9)
    logit = np.log(own) - np.log1p(-own)
    _, first = np.unique(word, return_index=True)  # each word's first member
    rows[:, 0] = member[first, FEATURE_INDEX["word_gain"]]
    rows[:, 1] = member[first, FEATURE_INDEX["word_size"]]
    columns = [logit, *(member[:, FEATURE_INDEX[name]] for name in MEMBER_INPUTS)]
    for j, values in enumerate(columns):
        low = np.full(len(ids), np.inf)
        high = np.full(len(ids), -np.inf)
        np.minimum.at(low, word, values)
        np.maximum.at(high, word, values)
        if j == 0:
            rows[:, 2], rows[:, 3] = low, high
        else:
            rows[:, 3 + 2 * j], rows[:, 4 + 2 * j] = low, high
    rows[:, 4] = np.bincount(word, weights=np.log(own)) / np.bincount(word)
    return ids, rows


def weakest_member(group: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """Every member of a word gets the word's weakest member's confidence: a word is as sure as
    its least sure character, and its characters are accepted or refused together."""
    members = np.flatnonzero(group >= 0)
    if len(members) == 0:
        return confidence
    confidence = np.asarray(confidence)
    ids = group[members]
    weakest = np.full(int(ids.max()) + 1, np.inf, dtype=confidence.dtype)
    np.minimum.at(weakest, ids, confidence[members])
    return members_given(group, weakest, confidence)


def members_given(group: np.ndarray, by_word: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """A copy of `confidence` (in its dtype) with each word member's replaced by its word's
    value, `by_word[word id]`."""
    out = np.array(confidence)
    members = np.flatnonzero(group >= 0)
    out[members] = by_word[group[members]]
    return out


class WordScorer:
    """The fitted word scorer (`Scorer.word` in scorer.json: inputs, mean, std, weights, bias)."""

    def __init__(self, config: Mapping) -> None:
        if list(config["inputs"]) != list(WORD_INPUTS):
            raise ValueError("scorer word: its inputs are not this version's word inputs; refit with calibrate")
        self.mean, self.std, self.weights = (np.array(config[key], dtype=np.float64) for key in ("mean", "std", "weights"))
        self.bias = float(config["bias"])

    def confidence(self, group: np.ndarray, features: np.ndarray, confidence: np.ndarray) -> np.ndarray:
        """`confidence` with every word member's replaced by its word's score (float32)."""
        ids, rows = word_inputs(group, features, confidence)
        if len(ids) == 0:
            return confidence
        score = 1.0 / (1.0 + np.exp(-(((rows - self.mean) / self.std) @ self.weights + self.bias)))
        by_word = np.zeros(int(ids.max()) + 1)
        by_word[ids] = score
        return members_given(group, by_word, np.asarray(confidence, dtype=np.float32))


def fit(features: np.ndarray, confidence: np.ndarray, labels: Sequence[int], words: Sequence[tuple]) -> dict | None:
    """The word scorer's config fitted on a dev's candidates: `features` (N, len(FEATURES)) as
    the scorer reads them, `confidence` the fitted scorer's per candidate, `labels` 1 where a
    candidate writes the gold character, `words[k]` a key shared by one word's members (None for
    a single candidate). None when the dev's words are all right or all wrong."""
    import torch

    keys = {key: i for i, key in enumerate(dict.fromkeys(k for k in words if k is not None))}
    group = np.array([-1 if k is None else keys[k] for k in words], dtype=np.int64)
    ids, rows = word_inputs(group, features, confidence)
    labels = np.asarray(labels)
    right = np.ones(len(keys), dtype=bool)
    members = np.flatnonzero(group >= 0)
    np.logical_and.at(right, group[members], labels[members] > 0)
    y = right[ids].astype(np.float64)
    if len(ids) == 0 or y.min() == y.max():
        return None
    mean, std = rows.mean(0), rows.std(0)
    std[std < 1e-8] = 1.0
    z = torch.from_numpy((rows - mean) / std)
    target = torch.from_numpy(y)
    w = torch.zeros(len(WORD_INPUTS), dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=500, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ w + b, target) + L2 * (w * w).sum() / len(y)
        loss.backward()
        return loss

    optimizer.step(closure)
    return {"inputs": list(WORD_INPUTS), "mean": mean.tolist(), "std": std.tolist(),
            "weights": w.detach().tolist(), "bias": float(b.detach())}
