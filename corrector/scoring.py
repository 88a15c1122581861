"""The scorer: a logistic model over a small, named feature vector per candidate correction.

For each candidate correction the features x are those of features.py (names, formulas), and

    confidence = sigmoid(w . x)

A candidate is accepted when it is the best one for its
position and confidence >= `threshold`. The weights and thresholds are one JSON dict —
`scorer.json` in the model directory — so calibration (`Scorer.fit`) can replace the hand-set
defaults below without touching code.

A fitted scorer may instead be a one-hidden-layer network over a named subset of the features
(`mlp` in scorer.json: standardisation, tanh layer, output):

    confidence = sigmoid(w2 . tanh(W1 . (x - mean) / std + b1) + b2)

Why: the evidence interacts. A frequent real error pair (他->她, 的->地) is only a likely fix
where the context prefers the new character; a linear score adds the pair's prior everywhere
and, measured on held-out dev halves, loses precision (sentence correction F1 0.27 -> 0.21 when
the error-pair features are added), while 8-32 hidden units reach 0.34-0.36.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from .acceptor import Acceptor
from .features import FEATURE_INDEX, FEATURES, NETWORK_FEATURES, PRIOR_COLUMN, PRIOR_INPUTS
from .word_scoring import WordScorer, weakest_member

if TYPE_CHECKING:
    import torch

# Hand-set so that an untrained-scorer model behaves sensibly: a confident generator, a change
# the discriminator likes better, a confusion relation and a real word must add up before an
# edit is made; a proper noun needs overwhelming evidence.
DEFAULT_WEIGHTS: dict[str, float] = {
    "bias": -3.0,
    "gen_logprob": 1.0,
    "orig_logprob": -0.5,
    "gen_top1": 0.5,
    "detect_prob": 2.0,
    "recheck_prob": -2.0,  # a copy of detect_prob (features.py): with it, detect_prob weighs 0
    "same_pinyin": 2.0,
    "similar_pinyin": 1.5,
    "similar_shape": 1.5,
    "user_pair": 2.0,
    "cand_word": 0.5,
    "orig_word": -0.5,
    "proper_noun": -3.0,
    "lm_gain": 0.5,
    "lm_gain_unrelated": -0.25,
    "pair_log_count": 0.0,  # only meaningful once fitted with the model's own table
    "pair_log_rate": 0.0,
    "lm_margin": 0.0,  # only meaningful once fitted
    "word_gain": 0.0,  # word candidates are proposed only for a scorer fitted to read them
    "word_size": 0.0,
    "ctx_log_count": 0.0,  # only meaningful once fitted with the model's own table
    "ctx_log_rate": 0.0,
    "particle_gain": 0.0,  # only meaningful once fitted with the model's own particle classifier
    "prior": 0.0,  # computed by a fitted scorer's `prior` network, 0 without one
}
DEFAULT_THRESHOLD = 0.5  # minimum confidence of an accepted edit
DEFAULT_DETECTION_THRESHOLD = 0.5  # discriminator probability above which a position is examined
SCHEMA_VERSION = 1
# The scorer's settings that are off (None) unless scorer.json gives a number, in to_config's order.
OPTIONAL_SETTINGS = ("generator_flag_margin", "context_flag_rate", "particle_flag_gain", "idiom_threshold_factor",
                     "second_pass_threshold_factor", "word_flag_gain", "pair_flag_gain")


def probability(value: float, name: str = "threshold") -> float:
    """`value` as a float in [0, 1], else ValueError — nan too: every comparison with nan is false,
    so a nan edit threshold accepted every candidate."""
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return number


@dataclass
class Scorer:
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    threshold: float = DEFAULT_THRESHOLD
    detection_threshold: float = DEFAULT_DETECTION_THRESHOLD
    mlp: dict | None = None  # {"inputs", "mean", "std", "w1", "b1", "w2", "b2"}; replaces `weights`
    # A network of the same form over features that do not come from the networks (LM, error
    # pairs, confusion relations), fitted on the real training pairs with the LM and error pairs
    # counted without them (out of fold); its logit is the feature "prior". Why: the scorer
    # proper can only be fitted on the 1,050-sentence dev split, because the discriminator and
    # generator memorised the training pairs; the evidence they do not touch can learn from ten
    # times as many real errors.
    prior: dict | None = None
    # A character the discriminator leaves below `detection_threshold` is examined too when the
    # generator ("source" input) gives a character of its confusion set a logit this much above
    # the written one's (runtime.passes.GeneratorPass.confusion_margins); None: the discriminator alone.
    generator_flag_margin: float | None = None
    # With an n-gram LM, the flag score is the margin plus this weight times the LM's best gain
    # over the confusion set (in nats), read where the margin is above detection.FLAG_LM_FLOOR; 0: the margin
    # alone. Why (dev split): at the characters the discriminator leaves, margin +
    # 0.5 x LM holds 128 errors in its top 779 characters, the margin alone 100 in its top 770.
    generator_flag_lm_weight: float = 0.0
    # A character is examined too when, with its left or right neighbour as written, it was
    # corrected in the model's training data (error_pairs.py) in at least this share of that
    # bigram's occurrences (and at least CONTEXT_FLAG_MIN_COUNT times); None: no context flags.
    context_flag_rate: float | None = None
    # A written particle (的/地/得) is examined too when the model's particle classifier gives
    # another particle at least this much more log-probability (particles.py); None: no such flags.
    particle_flag_gain: float | None = None
    # A character is examined too where one of its corrections in the model's training data
    # raises the n-gram LM by more than this (nats; detection.py); None: no such flags.
    pair_flag_gain: float | None = None
    # A winning candidate from a confusion set that completes a four-character idiom the text
    # breaks (resources/idioms.py) is accepted from this share of the edit threshold on; None:
    # the edit threshold for all.
    idiom_threshold_factor: float | None = None
    # The second correction pass (CorrectorConfig.passes) accepts edits from this share of the
    # edit threshold on; None: the edit threshold. Why lower there: it reads only sentences the
    # first pass changed, where errors cluster, so it cannot change one more clean sentence that
    # the first pass left alone.
    second_pass_threshold_factor: float | None = None
    # With word candidates (a scorer that reads `word_gain`), the characters a dictionary word
    # read like the written span changes are examined too where writing the word raises the
    # n-gram LM by more than this (nats; detection.py); None: no such flags.
    word_flag_gain: float | None = None
    # A word candidate's score as a whole (word_scoring.py: inputs, mean, std, weights, bias);
    # None: its weakest member's.
    word: dict | None = None
    # A second look at each position's winner (acceptor.py): its probability replaces the
    # winner's confidence before the thresholds; None: the scorer's confidence decides.
    acceptor: dict | None = None

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(FEATURES)
        if self.mlp is not None:
            unknown |= set(self.mlp["inputs"]) - set(FEATURES)
        if self.prior is not None:
            unknown |= set(self.prior["inputs"]) - set(FEATURES)
            if "prior" in self.prior["inputs"]:
                raise ValueError("the scorer's prior network cannot read its own output")
        if unknown:
            raise ValueError(f"scorer weights name unknown features: {sorted(unknown)}")
        # Missing weights are 0: an old scorer.json keeps working when a feature is added.
        self.vector = np.array([float(self.weights.get(name, 0.0)) for name in FEATURES], dtype=np.float32)
        self._mlp = _Network(self.mlp, "mlp") if self.mlp is not None else None
        self._prior = _Network(self.prior, "prior") if self.prior is not None else None
        self._word = WordScorer(self.word) if self.word is not None else None
        self._acceptor = Acceptor(self.acceptor) if self.acceptor is not None else None

    def idiom_threshold(self, threshold: float) -> float | None:
        """The edit threshold of a winner that completes an idiom, for edit threshold `threshold`."""
        return None if self.idiom_threshold_factor is None else threshold * self.idiom_threshold_factor

    def second_pass_threshold(self, threshold: float) -> float:
        """The second pass's edit threshold, for edit threshold `threshold`."""
        return threshold if self.second_pass_threshold_factor is None else threshold * self.second_pass_threshold_factor

    def uses(self, feature: str) -> bool:
        """Whether the score depends on `feature` (the pipeline skips work for unused ones)."""
        if self._prior is not None and feature in self.prior["inputs"] and self.uses("prior"):
            return True
        if self.mlp is not None:
            return feature in self.mlp["inputs"]
        return self.weights.get(feature, 0.0) != 0.0

    def word_confidence(self, group: np.ndarray, features: np.ndarray, confidence: np.ndarray) -> np.ndarray:
        """`confidence` (the candidates' own) with each word candidate's members given their word's
        score: the word scorer's where the scorer has one, else the weakest member's. `features`
        as the scorer reads them (the prior column filled, `with_prior`)."""
        if not (group >= 0).any():
            return confidence
        if self._word is None:
            return weakest_member(group, confidence)
        return self._word.confidence(group, features, confidence)

    def with_prior(self, features: np.ndarray) -> np.ndarray:
        """`features` with the "prior" column filled by the prior network (as they are without one)."""
        if self._prior is None:
            return features
        x = np.array(features)
        x[:, PRIOR_COLUMN] = self._prior.logits(x.astype(np.float32)).astype(x.dtype)
        return x

    @classmethod
    def from_config(cls, config: Mapping | None) -> Scorer:
        """From a scorer.json dict; absent keys fall back to the defaults."""
        config = dict(config or {})
        weights = dict(DEFAULT_WEIGHTS)
        if "weights" in config:
            weights = {name: float(config["weights"].get(name, 0.0)) for name in FEATURES}
        return cls(
            weights=weights,
            threshold=float(config.get("threshold", DEFAULT_THRESHOLD)),
            detection_threshold=float(config.get("detection_threshold", DEFAULT_DETECTION_THRESHOLD)),
            mlp=config.get("mlp"),
            prior=config.get("prior"),
            word=config.get("word"),
            acceptor=config.get("acceptor"),
            generator_flag_lm_weight=float(config.get("generator_flag_lm_weight") or 0.0),
            **{name: None if config.get(name) is None else float(config[name]) for name in OPTIONAL_SETTINGS},
        )

    def to_config(self) -> dict:
        config = {
            "version": SCHEMA_VERSION,
            "features": list(FEATURES),
            "weights": {name: float(self.weights.get(name, 0.0)) for name in FEATURES},
            "threshold": self.threshold,
            "detection_threshold": self.detection_threshold,
        }
        if self.generator_flag_margin is not None:
            config["generator_flag_margin"] = self.generator_flag_margin
            if self.generator_flag_lm_weight:
                config["generator_flag_lm_weight"] = self.generator_flag_lm_weight
        for name in OPTIONAL_SETTINGS[1:]:  # the margin above, with its LM weight
            if getattr(self, name) is not None:
                config[name] = getattr(self, name)
        if self.mlp is not None:
            config["mlp"] = self.mlp
        if self.prior is not None:
            config["prior"] = self.prior
        if self.word is not None:
            config["word"] = self.word
        if self.acceptor is not None:
            config["acceptor"] = self.acceptor
        return config

    def logits(self, features: np.ndarray) -> np.ndarray:
        """The score before the sigmoid for an (N, len(FEATURES)) array, float32."""
        return self._logits(self.with_prior(np.asarray(features, dtype=np.float32)))

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return x @ self.vector if self._mlp is None else self._mlp.logits(x)

    def confidence(self, features: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
        """The sigmoid of `logits`, float32 (computed in float64: no overflow at large margins);
        with `group` (`Candidates.group`), each word candidate's members get their word's
        (`word_confidence`), the prior network run once for both."""
        x = self.with_prior(np.asarray(features, dtype=np.float32))
        confidence = (1.0 / (1.0 + np.exp(-self._logits(x).astype(np.float64)))).astype(np.float32)
        return confidence if group is None else self.word_confidence(group, x, confidence)

    def accepted_confidence(self, features: np.ndarray, confidence: np.ndarray, position: np.ndarray,
                            row: np.ndarray, group: np.ndarray, best: Sequence[int]) -> np.ndarray:
        """`confidence` (`confidence()`'s, K candidates) with the winners `best` (`acceptance.winners`)
        given the acceptor's probability; unchanged without one. `features` (K, FEATURES) as
        featurized, `position` each candidate's position key, `row` its batch row, `group` its word."""
        if self._acceptor is None or len(best) == 0:
            return confidence
        winner_features = self.with_prior(np.asarray(features, dtype=np.float32)[np.asarray(best, dtype=np.int64)])
        return self._acceptor.confidence(winner_features, confidence, position, row, group, best)

    @classmethod
    def fit(
        cls,
        features: torch.Tensor | Sequence[Sequence[float]] | Sequence[Mapping[str, float]],
        labels: torch.Tensor | Sequence[float],
        base: Mapping | None = None,
        l2: float = 1e-2,
        positive_weight: float = 1.0,
        max_iter: int = 200,
        hidden: int = 0,
        inputs: Sequence[str] | None = None,
        seed: int = 0,
        members: int = 1,
    ) -> dict:
        """Logistic regression of labels (1 = the candidate is the gold correction) on features.

        `features` is an (N, F) array in `FEATURES` order, or a list of {name: value} dicts as
        returned by `Corrector.score_candidates`. Returns a new scorer config (thresholds and
        flag settings are kept from `base`, or the defaults). `l2` penalises every weight except the bias.
        `hidden` > 0 fits the network form instead, over `inputs` (default: every feature but
        the bias), with weight decay `l2` / 100 (its weights are many and small); `members` > 1
        fits that many networks from seeds `seed`, `seed` + 1, ... and stores their average
        logit as one network `members` x `hidden` units wide (exact: they share one
        standardisation). Why: ~870 positive candidates leave each fit at the mercy of its
        start — held-out dev F1 moves by up to ~0.016 with the seed — and the average of five beat
        one network on six of eight held-out halves (0.512 vs 0.505).
        """
        import torch

        x = feature_matrix(features)
        y = torch.as_tensor(np.asarray(labels, dtype=np.float64)).reshape(-1)
        if x.shape[0] != y.shape[0] or x.shape[0] == 0:
            raise ValueError(f"need as many labels as feature rows, got {x.shape[0]} rows and {y.shape[0]} labels")
        base_scorer = cls.from_config(base)
        x = torch.from_numpy(base_scorer.with_prior(x))  # the fit reads the prior network's output as one input
        if members < 1:
            raise ValueError(f"members must be at least 1, got {members}")
        if hidden > 0:
            names = list(inputs or [f for f in FEATURES if f != "bias"])
            if base_scorer.prior is None:  # a column of zeros now; it must not read a prior added later
                names = [name for name in names if name != "prior"]
            mlp = _average([_fit_mlp(x, y, names, hidden, l2 / 100, max_iter, seed + m) for m in range(members)])
            # Thresholds and flag settings are kept from `base`; only the scoring is new (an acceptor
            # read the old scores: it is refitted, `finetune/crossfit.py`).
            return replace(base_scorer, weights={}, mlp=mlp, acceptor=None).to_config()
        # Standardise for a well-conditioned problem, then map the weights back.
        mean, std = x.mean(0), x.std(0)
        std[std < 1e-8] = 1.0
        mean[FEATURE_INDEX["bias"]], std[FEATURE_INDEX["bias"]] = 0.0, 1.0
        z = (x - mean) / std
        w = torch.zeros(len(FEATURES), dtype=torch.float64, requires_grad=True)
        sample_weight = torch.where(y > 0.5, positive_weight, 1.0).double()
        penalty = torch.ones(len(FEATURES), dtype=torch.float64)
        penalty[FEATURE_INDEX["bias"]] = 0.0
        optimizer = torch.optim.LBFGS([w], max_iter=max_iter, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ w, y, weight=sample_weight)
            loss = loss + l2 * (penalty * w * w).sum() / 2
            loss.backward()
            return loss

        optimizer.step(closure)
        raw = (w.detach() / std)
        raw[FEATURE_INDEX["bias"]] -= float((w.detach() * mean / std).sum())
        weights = {name: round(float(raw[i]), 6) for i, name in enumerate(FEATURES)}
        return replace(base_scorer, weights=weights, mlp=None, acceptor=None).to_config()


def fit_prior(features, labels, inputs: Sequence[str] = PRIOR_INPUTS, hidden: int = 16, l2: float = 1e-2,
              max_iter: int = 200, seed: int = 0) -> dict:
    """The prior network (`Scorer.prior`): the scorer network's form, fitted on candidates of
    the real training pairs whose counted evidence (n-gram LM, error pairs) was counted without
    them (`finetune prior`); weight decay `l2` / 100 as in `Scorer.fit`."""
    import torch

    x = torch.from_numpy(feature_matrix(features))
    y = torch.as_tensor(np.asarray(labels, dtype=np.float64)).reshape(-1)
    if x.shape[0] != y.shape[0] or not 0 < float(y.sum()) < len(y):
        raise ValueError("the prior network needs as many labels as candidates, some gold and some not")
    if set(inputs) & {"prior", *NETWORK_FEATURES}:
        raise ValueError(f"the prior network reads no network outputs: {sorted(set(inputs) & {'prior', *NETWORK_FEATURES})}")
    return _fit_mlp(x, y, list(inputs), hidden, l2 / 100, max_iter, seed)


class _Network:
    """A one-hidden-layer scoring network (`Scorer.mlp`, `Scorer.prior`) as float32 arrays."""

    def __init__(self, config: Mapping, name: str) -> None:
        self.inputs = np.array([FEATURE_INDEX[n] for n in config["inputs"]], dtype=np.int64)
        self.mean, self.std = (np.array(config[key], dtype=np.float32) for key in ("mean", "std"))
        self.w1, self.b1 = (np.array(config[key], dtype=np.float32) for key in ("w1", "b1"))
        self.w2, self.b2 = np.array(config["w2"], dtype=np.float32), np.float32(config["b2"])
        if self.w1.shape != (len(self.b1), len(config["inputs"])) or self.w2.shape != self.b1.shape:
            raise ValueError(f"scorer {name}: layer shapes do not match its inputs")

    def logits(self, x: np.ndarray) -> np.ndarray:
        z = (x[:, self.inputs] - self.mean) / self.std
        return np.tanh(z @ self.w1.T + self.b1) @ self.w2 + self.b2


def _fit_mlp(x: torch.Tensor, y: torch.Tensor, inputs: list[str], hidden: int, weight_decay: float,
             max_iter: int, seed: int) -> dict:
    """Fit the one-hidden-layer scorer by full-batch L-BFGS (deterministic for a seed)."""
    import torch

    unknown = set(inputs) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown scorer inputs: {sorted(unknown)}")
    columns = x[:, [FEATURE_INDEX[name] for name in inputs]].float()
    mean, std = columns.mean(0), columns.std(0)
    std[std < 1e-6] = 1.0
    z = (columns - mean) / std
    generator = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(hidden, len(inputs), generator=generator) / len(inputs) ** 0.5).requires_grad_()
    b1 = torch.zeros(hidden, requires_grad=True)
    w2 = (torch.randn(hidden, generator=generator) / hidden ** 0.5).requires_grad_()
    b2 = torch.zeros((), requires_grad=True)
    params = [w1, b1, w2, b2]
    optimizer = torch.optim.LBFGS(params, max_iter=max(max_iter, 300), line_search_fn="strong_wolfe")
    target = y.float()

    def closure():
        optimizer.zero_grad()
        logits = torch.tanh(z @ w1.T + b1) @ w2 + b2
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
        loss = loss + weight_decay * ((w1 * w1).sum() + (w2 * w2).sum())
        loss.backward()
        return loss

    optimizer.step(closure)

    def rounded(t: torch.Tensor):
        return torch.round(t.detach() * 1e6).div(1e6).tolist()

    return {"inputs": inputs, "mean": rounded(mean), "std": rounded(std), "w1": rounded(w1), "b1": rounded(b1),
            "w2": rounded(w2), "b2": round(float(b2.detach()), 6)}


def _average(networks: list[dict]) -> dict:
    """One network whose logit is the mean of `networks`' logits: their hidden units side by
    side, each output weight divided by their number. All must share inputs and standardisation
    (fits on the same data do)."""
    first = networks[0]
    if any(n["inputs"] != first["inputs"] or n["mean"] != first["mean"] or n["std"] != first["std"] for n in networks):
        raise ValueError("only networks with the same inputs and standardisation can be averaged")
    if len(networks) == 1:
        return first
    k = len(networks)
    return {**first, "w1": [row for n in networks for row in n["w1"]], "b1": [v for n in networks for v in n["b1"]],
            "w2": [round(v / k, 6) for n in networks for v in n["w2"]], "b2": round(sum(n["b2"] for n in networks) / k, 6)}


def feature_matrix(features) -> np.ndarray:
    """An (N, len(FEATURES)) float64 matrix from an array (or tensor) in FEATURES order or from
    {name: value} dicts (`ScoredCandidate.features`); missing names are 0."""
    if hasattr(features, "detach"):  # a torch tensor (the fits' callers)
        features = features.detach().cpu().numpy()
    if len(features) and isinstance(features[0], Mapping):
        x = np.array([[float(row.get(name, 0.0)) for name in FEATURES] for row in features], dtype=np.float64)
    else:
        x = np.array(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURES):
        raise ValueError(f"features must be (N, {len(FEATURES)}) in FEATURES order")
    if not np.isfinite(x).all():
        raise ValueError("features contain NaN or infinity")
    return x


def clip_logprob(value: float) -> float:
    return max(-20.0, min(0.0, value)) if not math.isnan(value) else -20.0
