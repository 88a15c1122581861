"""The scorer's prior network, fitted on the real training pairs out of fold (`finetune prior`).

Why: the scorer network can only be fitted on the calibration dev split (~1,000 sentences,
~900 gold candidates), because the discriminator and generator were fine-tuned on every other
real pair and have memorised them (the discriminator's average precision at the
errors is 0.72 on training sentences against 0.42 on dev). The evidence the networks do not
touch — the n-gram LM's gains, the error pairs and their contexts, the confusion relations —
can learn from ten times as many real errors, if it is counted without the sentences it is
fitted on. So:

1. The training pairs, less the dev split and every pair sharing a `shared_span`-character run
   with it, are cut into `folds` folds; pairs whose correct sides share such a run go to the same
   fold (CSC sets repeat a sentence with other errors written into it).
2. For each fold, the n-gram LM (the corpus plus the other folds' correct sides, as `pretrain
   ngram --pairs` counts them), the error-pair table (the other folds) and, for a model with one,
   the particle classifier (as `pretrain particles --pairs` fits it) are made again without it,
   and the model's networks propose candidates for the fold's sentences with those tables and
   the flag rules `calibrate` fits on.
3. One network of the scorer's form over `PRIOR_INPUTS` is fitted on all folds' candidates and
   stored as `prior` in the model's scorer.json. `calibrate` keeps it and fits the scorer on its
   output (the feature "prior") beside the other features: run it afterwards.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..pipeline import CorrectorConfig
from ..pretrain.corpus import CorpusStats, iter_lines, list_corpus_files
from ..resources.error_pairs import ErrorPairs
from ..resources.ngram import NgramLM
from ..resources.particles import PAIRS_WEIGHT as PARTICLE_PAIRS_WEIGHT
from ..resources.particles import featurize, fit_with_pairs, training_sites
from ..runtime.models import SCORER_FILE, load_model, write_scorer_config
from ..scoring import feature_matrix, fit_prior
from ..splits import HeldOut, correct_sides, training_pairs
from .calibrate import CONTEXT_RATE_GRID, LM_WEIGHT_GRID, MARGIN_GRID, candidate_labels, flagged_candidates


def fold_of_pairs(pairs: Sequence[tuple[str, str]], folds: int, shared_span: int = 8, seed: int = 0) -> list[int]:
    """A fold for each pair: pairs whose correct sides share a `shared_span`-character run (or are
    equal) are in one group, and the groups, shuffled with `seed`, fill the smallest fold first."""
    if folds < 2:
        raise ValueError(f"need at least 2 folds, got {folds}")
    parent = list(range(len(pairs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, (_, target) in enumerate(pairs):
        for start in range(max(1, len(target) - shared_span + 1)):
            span = target[start:start + shared_span]
            if span in first:
                parent[root(i)] = root(first[span])
            else:
                first[span] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(root(i), []).append(i)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    fold, sizes = [0] * len(pairs), [0] * folds
    for key in order:
        smallest = sizes.index(min(sizes))
        for i in groups[key]:
            fold[i] = smallest
        sizes[smallest] += len(groups[key])
    return fold


def fit_prior_network(model_dir: str | Path, train: Sequence[str | Path], exclude: Sequence[str | Path],
                      corpus: Sequence[str | Path], folds: int = 2, shared_span: int = 8, order: int | None = None,
                      pairs_weight: int = 3, min_count: int = 2, min_char_count: int = 2,
                      detection_threshold: float = 0.01, margin: float | None = min(m for m in MARGIN_GRID if m is not None),
                      lm_weight: float = max(LM_WEIGHT_GRID),
                      context_rate: float | None = min(r for r in CONTEXT_RATE_GRID if r is not None),
                      hidden: int = 16, seed: int = 0, batch_size: int = 32, log=print) -> dict:
    """Steps 1-3 above; writes `prior` (and how it was fitted) into MODEL/scorer.json and returns
    the prior network. `order`: the n-gram order (default: the model's LM's). The flag settings
    default to those of the candidates `calibrate` fits on with its default margin, LM-weight and
    context-rate grids and the recipe's lowest detection threshold (0.01)."""
    bundle = load_model(str(model_dir))
    if bundle.ngram is None or bundle.error_pairs is None:
        raise ValueError(f"{model_dir} has no n-gram LM or no error pairs: the prior network reads their evidence")
    order = order or bundle.ngram.order
    pool, _ = training_pairs(train, HeldOut(exclude, shared_span))
    if len(pool) < folds:
        raise ValueError(f"{len(pool)} training pairs left after excluding {list(map(str, exclude))}: too few to fold")
    fold = fold_of_pairs(pool, folds, shared_span, seed)
    stats = CorpusStats()
    lines = list(iter_lines(list_corpus_files(corpus), stats))
    log(f"{len(pool)} training pairs in {folds} folds of {[fold.count(k) for k in range(folds)]}; "
        f"corpus: {stats.files} files, {len(lines)} lines")
    config = CorrectorConfig()
    corpus_particles = featurize(training_sites(lines)) if bundle.particles is not None else None
    matrices, labels = [], []
    for k in range(folds):
        held_pairs = [pair for pair, f in zip(pool, fold, strict=True) if f == k]
        held_out = HeldOut(exclude, shared_span, pairs=held_pairs)
        sides = correct_sides(train, held_out=held_out)
        ngram = NgramLM.count_with_pairs(lines, sides, pairs_weight, order=order, min_char_count=min_char_count,
                                         min_count=min_count)
        table, _ = ErrorPairs.count_training(train, held_out)
        particles = None
        if corpus_particles is not None:
            particles = fit_with_pairs(corpus_particles, sides, PARTICLE_PAIRS_WEIGHT, seed=seed, log=lambda *_: None)
        sources, targets = [s for s, _ in held_pairs], [t for _, t in held_pairs]
        candidates = flagged_candidates(replace(bundle, ngram=ngram, error_pairs=table, particles=particles), sources,
                                        config, margin, lm_weight, context_rate, detection_threshold, batch_size)
        fold_labels = candidate_labels(candidates, sources, targets)
        errors = sum(a != b for s, t in held_pairs for a, b in zip(s, t, strict=True))
        log(f"fold {k}: {len(held_pairs)} pairs, LM{', particles' if particles else ''} and error pairs from "
            f"{len(sides)} correct sides and {table.sentences} pairs without it; {len(candidates)} candidates, {sum(fold_labels)} gold of {errors} errors")
        matrices.append(feature_matrix([c.features for c in candidates]))
        labels.extend(fold_labels)
    prior = fit_prior(np.concatenate(matrices), labels, hidden=hidden, seed=seed)
    path = Path(model_dir) / SCORER_FILE
    scorer = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    # How it was fitted travels inside the network's dict, so that `calibrate` keeps it with it.
    # File names, not paths: the record travels with the model to other machines.
    prior["fitted_on"] = {"train": [Path(p).name for p in dict.fromkeys(map(str, train))],
                          "exclude": [Path(p).name for p in map(str, exclude)],
                          "pairs": len(pool), "folds": folds, "shared_span": shared_span,
                          "candidates": len(labels), "gold": sum(labels)}
    scorer["prior"] = prior
    write_scorer_config(model_dir, scorer)
    log(f"wrote the prior network ({hidden} units over {len(prior['inputs'])} features, {len(labels)} candidates, "
        f"{sum(labels)} gold) into {path}; now run `calibrate`, which fits the scorer on its output")
    return prior
