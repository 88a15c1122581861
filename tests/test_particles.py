"""The 的/地/得 classifier (corrector/particles.py): fitted on clean text, read by the scorer."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from corrector.resources.particles import (
    FILENAME,
    PARTICLE_INDEX,
    ParticleModel,
    context_features,
    featurize,
    fit,
    fit_with_pairs,
    particle_sites,
    training_sites,
)

# Clean text: 地 between an adverbial and its verb, 得 between a verb and its complement, 的
# before a noun — each pattern with several words, so the model learns the frame, not a string.
CLEAN = [
    *(f"他{adverb}地{verb}。" for adverb in ("认真", "慢慢", "高兴", "努力") for verb in ("学习", "工作", "唱歌")),
    *(f"她{verb}得很{adjective}。" for verb in ("跑", "说", "写", "唱") for adjective in ("快", "好", "漂亮")),
    *(f"这是{owner}的{noun}。" for owner in ("我", "他", "老师", "朋友") for noun in ("书", "车", "房子")),
] * 5


@pytest.fixture(scope="module")
def particles() -> ParticleModel:
    ids, labels = featurize(training_sites(CLEAN), buckets=1 << 12)
    return fit(ids, labels, buckets=1 << 12, epochs=10, log=lambda *_: None)


def best(model: ParticleModel, text: str) -> str:
    offset = particle_sites(text)[0]
    return "的地得"[int(np.argmax(model.log_probs([(text, offset)])[0]))]


def test_sites_and_features_do_not_read_the_particle_itself():
    assert particle_sites("我的书，跑得快，认真地学") == [1, 5, 10]
    assert list(training_sites(["跑得快", "没有"])) == [("跑得快", 1, PARTICLE_INDEX["得"])]
    # Whichever particle is written, the features are the same: they describe the context only.
    assert context_features("他认真的学习", 3) == context_features("他认真地学习", 3)
    assert "l1=真" in context_features("他认真的学习", 3) and "r1=学" in context_features("他认真的学习", 3)
    assert "l1=^" in context_features("的", 0) and "r1=$" in context_features("的", 0)


def test_it_learns_which_particle_the_context_needs(particles):
    # Unseen combinations of the learned frames.
    assert best(particles, "她高兴的工作。") == "地"
    assert best(particles, "他写的很快。") == "得"
    assert best(particles, "这是老师地房子。") == "的"
    gain = particles.best_other_gain([("她高兴的工作。", 3), ("她高兴地工作。", 3)])
    assert gain[0] > 0 > gain[1]  # only the wrong particle is outranked


def test_candidate_gains_only_between_particles(particles):
    sites = [("她高兴的工作。", 3), ("她高兴的工作。", 1)]
    gains = particles.candidate_gains(sites, [0, 0, 0, 1], ["地", "得", "地", "地"])
    written = particles.log_probs([sites[0]])[0]
    assert gains[0] == pytest.approx(written[PARTICLE_INDEX["地"]] - written[PARTICLE_INDEX["的"]])
    assert gains[0] > 0 and gains[1] < gains[0]
    gains = particles.candidate_gains(sites, [0, 1], ["快", "地"])
    assert gains.tolist() == [0.0, 0.0]  # a non-particle candidate; a non-particle written there


def test_save_load_round_trip(particles, tmp_path):
    path = tmp_path / FILENAME
    particles.save(path)
    loaded = ParticleModel.load(path)
    assert loaded.buckets == particles.buckets
    site = [("她高兴的工作。", 3)]
    assert np.allclose(loaded.log_probs(site), particles.log_probs(site), atol=1e-2)  # fp16 weights
    from safetensors.numpy import save_file

    save_file({"keys_1": np.zeros(2, np.uint64)}, str(tmp_path / "ngram.safetensors"), metadata={"format": "other"})
    with pytest.raises(ValueError, match="not a particle model"):
        ParticleModel.load(tmp_path / "ngram.safetensors")


def test_no_particles_is_a_clear_error():
    ids, labels = featurize(training_sites(["没有助词"]))
    assert ids.shape == (0, len(context_features("", 0))) and len(labels) == 0
    with pytest.raises(ValueError, match="no particle"):
        fit(ids, labels)


def test_fit_with_pairs_counts_the_pairs_convention(particles):
    # The corpus writes 非常的好 (的 everywhere); the training pairs' gold writes 地 before a verb.
    corpus = featurize(training_sites(["他非常的好。", "她非常的美。"] * 20), buckets=1 << 12)
    sides = ["他非常地喜欢。"]
    assert best(fit_with_pairs(corpus, [], buckets=1 << 12, epochs=5, log=lambda *_: None), "她非常的喜欢。") == "的"
    weighted = fit_with_pairs(corpus, sides, pairs_weight=40, buckets=1 << 12, epochs=5, log=lambda *_: None)
    assert best(weighted, "她非常的喜欢。") == "地"


def test_cli_fits_into_a_model_directory(tmp_path, capsys):
    from corrector.pretrain.__main__ import main

    corpus, pairs, dev = tmp_path / "corpus.txt", tmp_path / "train.tsv", tmp_path / "dev.tsv"
    corpus.write_text("\n".join(CLEAN) + "\n", encoding="utf-8")
    pairs.write_text("1\t他认真的学习。\t他认真地学习。\n0\t我的书。\t我的书。\n", encoding="utf-8")
    dev.write_text("0\t我的书。\t我的书。\n", encoding="utf-8")
    args = ["particles", "--corpus", str(corpus), "--output", str(tmp_path / "model"), "--epochs", "1"]
    assert main([*args, "--pairs", str(pairs), "--exclude", str(dev)]) == 0
    assert "and 1 sentences of pairs x 10" in capsys.readouterr().out  # the dev sentence left out
    assert best(ParticleModel.load(tmp_path / "model" / FILENAME), "她高兴的工作。") == "地"
    with pytest.raises(SystemExit):
        main([*args, "--exclude", str(dev)])  # --exclude without --pairs


def test_particle_flags_and_feature_in_the_pipeline(particles, tmp_path):
    """With particle flags, a written particle the classifier finds wrong is examined even where
    the discriminator flags nothing, and scored by `particle_gain`; without them it is not."""
    from conftest import TINY_TEXT, build_tiny_model

    from corrector import Corrector
    from corrector.scoring import Scorer

    model = build_tiny_model(tmp_path / "model", text=TINY_TEXT + "".join(CLEAN[:60]))
    particles.save(model / FILENAME)
    scorer = {"weights": {"bias": -3.0, "particle_gain": 3.0}, "threshold": 0.5, "detection_threshold": 1.0}
    assert Corrector(str(model), scorer=scorer).correct("她高兴的工作。").target == "她高兴的工作。"
    flagged = Corrector(str(model), scorer={**scorer, "particle_flag_gain": 0.0})
    assert flagged.bundle.particles is not None
    result = flagged.correct("她高兴的工作。")
    assert result.target == "她高兴地工作。"
    assert [(e.position, e.source, e.target) for e in result.edits] == [(3, "的", "地")]
    scored = {c.target: c.features for c in flagged.score_candidates(["她高兴的工作。"]) if c.position == 3}
    assert scored["地"]["particle_gain"] > 1.0
    assert all(f["particle_gain"] == 0 for target, f in scored.items() if target not in PARTICLE_INDEX)
    assert flagged.correct("她高兴地工作。").target == "她高兴地工作。"  # right as written: not examined
    assert Scorer.from_config(Scorer(particle_flag_gain=0.5).to_config()).particle_flag_gain == 0.5
    assert "particle_flag_gain" not in Scorer().to_config()
    shutil.rmtree(model)
