"""The scorer's prior network: its place in the scorer, the folds, and `finetune prior` end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from corrector.features import FEATURE_INDEX, FEATURES, NETWORK_FEATURES, PRIOR_INPUTS
from corrector.scoring import Scorer, fit_prior


def toy_candidates(n: int = 3000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidates whose gold label follows lm_gain (a prior input) and detect_prob (a network output)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, len(FEATURES))
    x[:, FEATURE_INDEX["bias"]] = 1.0
    x[:, FEATURE_INDEX["lm_gain"]] = torch.randn(n, generator=gen) * 3
    x[:, FEATURE_INDEX["detect_prob"]] = torch.rand(n, generator=gen)
    x[:, FEATURE_INDEX["same_pinyin"]] = (torch.rand(n, generator=gen) < 0.5).float()
    logit = 1.5 * x[:, FEATURE_INDEX["lm_gain"]] + 4 * x[:, FEATURE_INDEX["detect_prob"]] - 3
    y = (torch.rand(n, generator=gen) < torch.sigmoid(logit)).float()
    return x, y


def test_prior_inputs_are_the_evidence_the_networks_do_not_give():
    assert "lm_gain" in PRIOR_INPUTS and "ctx_log_rate" in PRIOR_INPUTS and "same_pinyin" in PRIOR_INPUTS
    assert not set(PRIOR_INPUTS) & {"bias", "prior", "word_gain", *NETWORK_FEATURES}


def test_prior_network_fills_the_prior_feature_and_the_scorer_reads_it():
    x, y = toy_candidates()
    prior = fit_prior(x, y, hidden=4)
    assert prior["inputs"] == list(PRIOR_INPUTS)
    scorer = Scorer(prior=prior)
    filled = scorer.with_prior(x.numpy())
    assert torch.equal(x[:, FEATURE_INDEX["prior"]], torch.zeros(len(x)))  # the input is left as it was
    prior_logit = filled[:, FEATURE_INDEX["prior"]]
    assert np.corrcoef(np.stack([prior_logit, x[:, FEATURE_INDEX["lm_gain"]].numpy()]))[0, 1] > 0.9
    # A scorer fitted with the prior reads its output (and keeps the network); one fitted without does not.
    with_prior = Scorer.from_config(Scorer.fit(x, y, base={"prior": prior}, hidden=4))
    without = Scorer.from_config(Scorer.fit(x, y, hidden=4))
    assert with_prior.prior == prior and with_prior.uses("prior") and with_prior.uses("lm_gain")
    assert "prior" not in without.mlp["inputs"] and not without.uses("prior")
    assert Scorer.from_config(with_prior.to_config()).prior == prior
    # Adding a prior to a scorer fitted without one changes nothing.
    late = Scorer.from_config({**without.to_config(), "prior": prior})
    assert np.allclose(late.confidence(x), without.confidence(x))
    # The scorer's confidence moves with the prior's output, which moves with lm_gain alone.
    changed = x.clone()
    changed[:, FEATURE_INDEX["lm_gain"]] += 2.0
    assert (with_prior.confidence(changed) > with_prior.confidence(x)).mean() > 0.9


def test_prior_network_refuses_network_outputs_and_one_class_labels():
    x, y = toy_candidates(200)
    with pytest.raises(ValueError, match="reads no network outputs"):
        fit_prior(x, y, inputs=["lm_gain", "detect_prob"])
    with pytest.raises(ValueError, match="some gold and some not"):
        fit_prior(x, torch.zeros(len(x)))
    prior = fit_prior(x, y, hidden=2)
    with pytest.raises(ValueError, match="cannot read its own output"):
        Scorer(prior={**prior, "inputs": [*prior["inputs"][:-1], "prior"]})


def test_folds_keep_sentences_that_share_a_run_together():
    from corrector.finetune.prior import fold_of_pairs

    base = "我们今天一起去公园散步吧"
    pairs = [("x" + base[1:], base), (base[:-1] + "x", base),  # one sentence with two errors
             ("a", "另一个完全不同的句子啊"), ("b", "第三个句子也不一样吗"), ("c", base[:9] + "的话"),  # shares 8 chars
             ("d", "短句"), ("e", "短句")]
    fold = fold_of_pairs(pairs, 2, shared_span=8, seed=0)
    assert fold[0] == fold[1] == fold[4] and fold[5] == fold[6]
    assert sorted(set(fold)) == [0, 1]
    assert fold == fold_of_pairs(pairs, 2, shared_span=8, seed=0)  # deterministic
    assert len(set(fold_of_pairs(pairs, 3, shared_span=8, seed=1))) == 3
    with pytest.raises(ValueError, match="at least 2 folds"):
        fold_of_pairs(pairs, 1)


def test_finetune_prior_writes_a_prior_that_calibrate_keeps(trained_model_dir: Path, tmp_path: Path, capsys):
    """End to end on the tiny trained pair: out-of-fold tables, candidates, the fit, scorer.json,
    then `calibrate` fits the scorer on the prior's output and the corrector uses both."""
    from test_particles import CLEAN
    from test_pipeline import CORRECT_SENTENCES, ERROR_PAIRS

    from corrector.finetune.__main__ import main
    from corrector.pipeline import Corrector
    from corrector.resources.error_pairs import ErrorPairs
    from corrector.resources.ngram import NgramLM
    from corrector.resources.particles import featurize, fit, training_sites
    from corrector.runtime.models import load_model

    model = tmp_path / "model"
    shutil.copytree(trained_model_dir, model)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORRECT_SENTENCES * 3 + CLEAN) + "\n", encoding="utf-8")
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    pairs = list(ERROR_PAIRS.items()) + [("他们因该为老人让坐。", "他们应该为老人让座。"),
                                         ("我们因该为同学让坐。", "我们应该为同学让座。"),
                                         ("你因该为老人让坐吧。", "你应该为老人让座吧。")]
    train.write_text("".join(f"1\t{s}\t{t}\n" for s, t in pairs) + "0\t今天天气很好。\t今天天气很好。\n", encoding="utf-8")
    dev.write_text("".join(f"1\t{s}\t{t}\n" for s, t in list(ERROR_PAIRS.items())[:1]), encoding="utf-8")
    NgramLM.count(CORRECT_SENTENCES, min_char_count=1, min_count=1).save(model)
    ErrorPairs.count(pairs).save(model / "error_pairs.json")
    # With a particle classifier, each fold gets its own, like the LM and the error pairs.
    fit(*featurize(training_sites(CLEAN), buckets=1 << 12), buckets=1 << 12).save(model / "particles.safetensors")

    args = ["prior", "--model", str(model), "--train", str(train), "--exclude", str(dev), "--corpus", str(corpus),
            "--hidden", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "fold 0:" in out and "fold 1:" in out and "now run `calibrate`" in out
    assert "LM, particles and error pairs" in out
    saved = json.loads((model / "scorer.json").read_text(encoding="utf-8"))
    prior = saved["prior"]
    assert prior["inputs"] == list(PRIOR_INPUTS) and len(prior["b1"]) == 2
    assert prior["fitted_on"]["folds"] == 2 and prior["fitted_on"]["pairs"] == 4  # the dev pair left out
    assert 0 < prior["fitted_on"]["gold"] < prior["fitted_on"]["candidates"]
    # The record names files, not this machine's paths.
    assert prior["fitted_on"]["train"] == ["train.tsv"] and prior["fitted_on"]["exclude"] == ["dev.tsv"]

    assert main(["calibrate", "--model", str(model), "--dev", str(train), "--detection-grid", "0.5",
                 "--margin-grid", "off", "--hidden", "2", "--members", "1"]) == 0
    assert "prior network: 2 units over" in capsys.readouterr().out
    calibrated = json.loads((model / "scorer.json").read_text(encoding="utf-8"))
    assert calibrated["prior"] == prior and "prior" in calibrated["mlp"]["inputs"]
    assert calibrated["particle_flag_gain"] == 0.0 and "particle_gain" in calibrated["mlp"]["inputs"]
    corrector = Corrector(load_model(str(model)))
    assert corrector.scorer.uses("prior")
    scored = corrector.score_candidates(["少先队员因该为老人让坐。"], detection_threshold=0.5)
    assert scored and any(c.features["prior"] != 0.0 for c in scored)

    # Bad input: too few pairs left, or a model without the tables the prior reads.
    assert main([*args[:4], str(dev), "--exclude", str(dev), *args[6:]]) == 2
    assert "too few to fold" in capsys.readouterr().err
    (model / "error_pairs.json").unlink()
    assert main(args) == 2
    assert "no n-gram LM or no error pairs" in capsys.readouterr().err
