"""Fitting the scorer for calibration, and reading the dev out of fold.

`sweep_scorers` fits what a scorer.json holds on the dev's labelled candidates: the networks
(`Scorer.fit`), the word scorer (`with_word_scorer`) and the acceptor (`with_acceptor`), whose
inputs are the confidences of scorers fitted on the other fold. `fold_trial` makes the corrector
the edit threshold is swept with from `sweep_scorers`: each dev sentence read by a scorer fitted
without its fold.

Why out of fold: the threshold must be chosen on confidences like those of new text. A scorer
is surer of the sentences it was fitted on, an acceptor's trees more so; a threshold swept in
sample with the acceptor changed 1.14 % of the other half's clean sentences (0.66 % without it).

Folds come from the dev pairs (`pair_of`: a pair and its correct side together): at `level`, fold
(pair >> level) & 1, so a half cut at level 0 is cut again at level 1 and a fold of that at level 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .. import acceptor, word_scoring
from ..acceptance import winners
from ..acceptor import acceptance_inputs
from ..features import FEATURES
from ..pipeline import Corrector
from ..result import Result
from ..scoring import Scorer, feature_matrix


def fold_of(pair_of: Sequence[int] | None, text_index: int, level: int) -> int:
    """The fold (0 or 1) of dev sentence `text_index` at `level` (`pair_of` None: each its own pair)."""
    return ((text_index if pair_of is None else pair_of[text_index]) >> level) & 1


def candidate_keys(candidates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position key, row, word group) per `ScoredCandidate`, as the pipeline's batches have them
    (`Candidates.position`, `Sites.rows`, `Candidates.group`): a dense key per (text, offset),
    the text as the row, an id per (text, word) and -1 for a single character."""
    text = np.array([c.text_index for c in candidates], dtype=np.int64)
    offset = np.array([c.position for c in candidates], dtype=np.int64)
    _, position = np.unique(text * (int(offset.max(initial=0)) + 1) + offset, return_inverse=True)
    words: dict[tuple[int, str], int] = {}
    group = np.array([words.setdefault((c.text_index, c.word), len(words)) if c.word else -1 for c in candidates],
                     dtype=np.int64)
    return position.reshape(-1), text, group


def candidate_confidence(scorer: Scorer, candidates) -> tuple[np.ndarray, np.ndarray]:
    """(how the scorer ranks `candidates`, the confidences the pipeline gives them), for
    `ScoredCandidate`s of whole sentences: the second is the first with the position winners'
    from the scorer's acceptor where it has one."""
    features = feature_matrix([c.features for c in candidates])
    position, row, group = candidate_keys(candidates)
    confidence = scorer.confidence(features, group)
    best = winners(position, group, confidence.astype(np.float64))
    return confidence, scorer.accepted_confidence(features, confidence, position, row, group, best)


def network_options(fit_options: Mapping) -> dict:
    """`fit_options` as `Scorer.fit` takes them: without "acceptor" (whether to fit one)."""
    return {key: value for key, value in fit_options.items() if key != "acceptor"}


def sweep_scorers(candidates, labels: Sequence[int], fit_options: dict, pair_of: Sequence[int] | None,
                  level: int) -> tuple[dict, list[dict] | None]:
    """(the scorer config fitted on the labelled candidates, the two the edit threshold is swept
    with or None). The first: the networks (`Scorer.fit`), their word scorer (`with_word_scorer`)
    and, where `fit_options["acceptor"]`, an acceptor (`with_acceptor`, read through the networks
    fitted outside each fold at `level`). The two: those same fold networks, each with its own
    acceptor (folds one level down); None without an acceptor (the sweep in sample, as the shipped
    release was calibrated) or where a fold has nothing to learn from."""
    networks = _networks(candidates, labels, fit_options)
    folds = _fold_networks(candidates, labels, fit_options, pair_of, level) if fit_options.get("acceptor") else None
    if folds is None:
        return networks, None
    swept = []
    for held, fold_networks in enumerate(folds):
        picked = [k for k, c in enumerate(candidates) if fold_of(pair_of, c.text_index, level) != held]
        inside, inside_labels = [candidates[k] for k in picked], [labels[k] for k in picked]
        inner = _fold_networks(inside, inside_labels, fit_options, pair_of, level + 1)
        swept.append(fold_networks if inner is None else
                     with_acceptor(fold_networks, inside, inside_labels, inner, pair_of, level + 1, fit_options))
    return with_acceptor(networks, candidates, labels, folds, pair_of, level, fit_options), swept


def _networks(candidates, labels: Sequence[int], fit_options: Mapping) -> dict:
    """The scorer networks and word scorer fitted on the labelled candidates."""
    return with_word_scorer(Scorer.fit([c.features for c in candidates], labels, **network_options(fit_options)),
                            candidates, labels)


def _fold_networks(candidates, labels: Sequence[int], fit_options: Mapping, pair_of: Sequence[int] | None,
                   level: int) -> list[dict] | None:
    """`_networks` fitted on the candidates outside fold 0 and outside fold 1 at `level`; None
    where a fold is empty or the rest has nothing to learn from."""
    fold = [fold_of(pair_of, c.text_index, level) for c in candidates]
    configs = []
    for held in (0, 1):
        picked = [k for k, f in enumerate(fold) if f != held]
        fit_labels = [labels[k] for k in picked]
        if len(picked) == len(fold) or not any(fit_labels) or all(fit_labels):
            return None
        configs.append(_networks([candidates[k] for k in picked], fit_labels, fit_options))
    return configs


def with_acceptor(config: dict, candidates, labels: Sequence[int], folds: Sequence[Mapping],
                  pair_of: Sequence[int] | None, level: int, fit_options: Mapping) -> dict:
    """`config` with an acceptor (acceptor.py) fitted on the candidates' position winners as
    `folds[f]` (`_fold_networks` at `level`) ranks and scores the sentences of fold f, so the
    acceptor learns from the confidences new text gets. Without one where there are too few
    winners (`acceptor.fit`)."""
    config = {key: value for key, value in config.items() if key != "acceptor"}
    fold = np.array([fold_of(pair_of, c.text_index, level) for c in candidates])
    features = feature_matrix([c.features for c in candidates])
    gold = np.asarray(labels, dtype=np.int64)
    position, row, group = candidate_keys(candidates)
    confidence = np.zeros(len(candidates), dtype=np.float32)
    for held, fold_config in enumerate(folds):
        scored = np.flatnonzero(fold == held)
        confidence[scored] = Scorer.from_config(fold_config).confidence(features[scored], group[scored])
    best = winners(position, group, confidence.astype(np.float64))
    names = (config.get("mlp") or {}).get("inputs") or [name for name in FEATURES if name != "bias"]
    inputs = acceptance_inputs(Scorer.from_config(config).with_prior(features[best]), confidence, position, row,
                               best, names)
    fitted_acceptor = acceptor.fit(inputs, gold[best], names, seed=int(fit_options.get("seed") or 0))
    return config if fitted_acceptor is None else {**config, "acceptor": fitted_acceptor}


def with_word_scorer(config: dict, candidates, labels: Sequence[int]) -> dict:
    """A fitted scorer config with its word scorer (word_scoring.py) fitted on the same candidates'
    words, read through the config's own scores; without one where they hold no word, or their
    words are all right or all wrong (a word is then as sure as its weakest member)."""
    config = {key: value for key, value in config.items() if key != "word"}
    words = [(c.text_index, c.word) if c.word else None for c in candidates]
    if any(key is not None for key in words):
        scorer = Scorer.from_config(config)
        features = scorer.with_prior(feature_matrix([c.features for c in candidates]))
        fitted = word_scoring.fit(features, scorer.confidence(features), labels, words)
        if fitted is not None:
            config["word"] = fitted
    return config


class Routed:
    """A system (`evaluation.runs.run_system`) that reads each text with the corrector assigned to
    it (`by_text`), any other with `default`; the edit threshold and passes apply to all."""

    def __init__(self, default: Corrector, by_text: Mapping[str, Corrector]) -> None:
        self.default, self.by_text = default, dict(by_text)
        # What sweeps read (`idiom_factor_of`, `single_pass`): the default's idiom factor and passes.
        self.scorer, self.config = getattr(default, "scorer", None), getattr(default, "config", None)

    def with_passes(self, passes: int) -> Routed:
        copies = {id(c): c.with_passes(passes) for c in {id(c): c for c in [self.default, *self.by_text.values()]}.values()}
        return Routed(copies[id(self.default)], {text: copies[id(c)] for text, c in self.by_text.items()})

    def correct_batch(self, texts: Sequence[str], batch_size: int | None = None,
                      threshold: float | None = None) -> list[Result]:
        results: list[Result | None] = [None] * len(texts)
        by_corrector: dict[int, tuple[Corrector, list[int]]] = {}
        for i, text in enumerate(texts):
            corrector = self.by_text.get(text, self.default)
            by_corrector.setdefault(id(corrector), (corrector, []))[1].append(i)
        for corrector, indices in by_corrector.values():
            found = corrector.correct_batch([texts[i] for i in indices], batch_size=batch_size, threshold=threshold)
            for i, result in zip(indices, found, strict=True):
                results[i] = result
        return results  # type: ignore[return-value]


def fold_trial(default: Corrector, trials: Sequence[Corrector] | None, sources: Sequence[str], indices: Iterable[int],
               pair_of: Sequence[int] | None, level: int) -> Routed | Corrector:
    """The corrector to sweep the edit threshold with: each sentence of `indices` (into `sources`)
    read by `trials[its fold at level]` (correctors of `sweep_scorers`' configs), any other text by
    `default`; `default` itself without `trials`."""
    if trials is None:
        return default
    return Routed(default, {sources[i]: trials[fold_of(pair_of, i, level)] for i in indices})
