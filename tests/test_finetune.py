"""Fine-tuning: synthetic error generation, the training loop, calibration (scorer.json)."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from corrector.finetune.synth import KINDS, ErrorSynthesizer, SynthConfig, reservoir_sample, write_pairs
from corrector.resources.confusion import ConfusionSet
from corrector.text.tokenization import is_cjk

CLEAN = [
    "少先队员应该为老人让座。",
    "我在2024年用iPhone打电话给Tom，他说应该没问题。",
    "今天天气很好，我们一起去公园散步。",
    "他的作业做得很认真，老师很高兴。",
    "北京是中国的首都，也是一座历史悠久的城市。",
]


def synthesize(confusion: ConfusionSet, seed: int, n: int = 2000) -> tuple[list[tuple[str, str]], ErrorSynthesizer]:
    synthesizer = ErrorSynthesizer(confusion, config=SynthConfig(seed=seed))
    pairs = [(synthesizer.corrupt(s), s) for s in (CLEAN * (n // len(CLEAN)))]
    return pairs, synthesizer


def test_synthetic_errors_statistics(confusion):
    pairs, synthesizer = synthesize(confusion, seed=1)
    counts = Counter(sum(a != b for a, b in zip(src, tgt, strict=True)) for src, tgt in pairs)
    assert set(counts) <= {0, 1, 2, 3}
    total = len(pairs)
    assert 0.25 < counts[0] / total < 0.35, "about 30% of sentences stay error-free"
    assert 0.40 < counts[1] / total < 0.50
    assert counts[3] > 0
    kinds = synthesizer.stats.substitutions
    assert set(kinds) == set(KINDS)
    made = sum(kinds.values())
    assert kinds["same_pinyin"] / made > 0.45, "same-pinyin substitutions dominate"
    assert 0 < kinds["random"] / made < 0.1
    for src, tgt in pairs:
        assert len(src) == len(tgt)
        for a, b in zip(src, tgt, strict=True):
            if a != b:
                assert is_cjk(a) and is_cjk(b), "only CJK characters are ever replaced"
    # Non-CJK text (digits, Latin, punctuation) is never touched.
    mixed = [src for src, tgt in pairs if tgt == CLEAN[1]]
    assert all("2024" in s and "iPhone" in s and "Tom，" in s for s in mixed)


def test_synthetic_errors_are_deterministic(confusion):
    first, _ = synthesize(confusion, seed=7, n=200)
    again, _ = synthesize(confusion, seed=7, n=200)
    other, _ = synthesize(confusion, seed=8, n=200)
    assert first == again
    assert first != other


def test_synthetic_substitutes_are_confusable(confusion):
    synthesizer = ErrorSynthesizer(confusion, config=SynthConfig(seed=0, kind_weights=(1, 0, 0, 0, 0)))
    for _ in range(50):
        out = synthesizer.corrupt("应该")
        for a, b in zip(out, "应该", strict=True):
            if a != b:
                assert confusion.relation(b, a), f"{b}->{a} is a confusion pair"


def test_synth_all_readings_draws_what_the_release_was_trained_on(tmp_path, monkeypatch):
    """`synth --all-readings` builds its confusion sets with every reading (the release's draws)."""
    from corrector.finetune import __main__ as finetune_main

    built = []
    real_build = ConfusionSet.build
    monkeypatch.setattr(ConfusionSet, "build", classmethod(
        lambda cls, *a, **kw: built.append(kw.get("all_readings", False)) or real_build(*a, **kw)))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CLEAN * 5) + "\n", encoding="utf-8")
    for flag in ([], ["--all-readings"]):
        out = tmp_path / f"synth{len(flag)}.tsv"
        assert finetune_main.main(["synth", "--corpus", str(corpus), "--output", str(out), "--size", "20", *flag]) == 0
        assert out.read_text(encoding="utf-8").count("\n") == 20
    assert built == [False, True]


# A lexicon for the homophone-word kind, so the test need not index jieba's 300k words.
LEXICON = {"债务": 500, "宅舞": 20, "习惯": 900, "惜贯": 5, "事务": 300, "实物": 200, "罕见词": 1, "应该": 900}


def test_homophone_words_replace_whole_words(confusion):
    synthesizer = ErrorSynthesizer(confusion, config=SynthConfig(seed=0, kind_weights=(0, 0, 0, 0, 1),
                                                                 error_counts=(0, 0, 1, 0)), lexicon=LEXICON)
    # The word 债务 (zhai wu) becomes the lexicon's only other word read so: both characters
    # wrong at once, the error that character-by-character substitution does not make.
    assert [synthesizer.corrupt("债务。") for _ in range(10)] == ["宅舞。"] * 10
    assert synthesizer.stats.substitutions["homophone_word"] == 20
    # Where the drawn position's word has no homophone (政府, 很), a same-pinyin character instead.
    out = synthesizer.corrupt("政府很好")
    assert sum(a != b for a, b in zip(out, "政府很好", strict=True)) == 2
    # A budget of one wrong character allows only homophone words that differ in one.
    single = ErrorSynthesizer(confusion, config=SynthConfig(seed=1, kind_weights=(0, 0, 0, 0, 1),
                                                            error_counts=(0, 1, 0, 0)), lexicon=LEXICON)
    for _ in range(20):
        out = single.corrupt("习惯")
        assert sum(a != b for a, b in zip(out, "习惯", strict=True)) == 1
    assert single.stats.substitutions["homophone_word"] == 0, "惜贯 differs in two characters"
    assert single.stats.substitutions["same_pinyin"] == 20


def test_homophone_word_kind_off_makes_character_errors_only(confusion):
    """Weight 0 for the homophone-word kind: character substitutions only; a config of fewer
    weights (from before later kinds existed) gives those kinds 0, one of too many is refused.
    (That weight 0 draws the very pairs of the earlier code was checked against it on 2,000
    corpus sentences.)"""
    synthesizer = ErrorSynthesizer(confusion, config=SynthConfig(seed=5, kind_weights=(0.6, 0.15, 0.2, 0.05, 0)))
    pairs = [synthesizer.corrupt(s) for s in CLEAN * 20]
    assert synthesizer.stats.substitutions["homophone_word"] == 0
    assert sum(p != s for p, s in zip(pairs, CLEAN * 20, strict=True)) > 50
    shorter = ErrorSynthesizer(confusion, config=SynthConfig(seed=5, kind_weights=(0.6, 0.15, 0.2, 0.05)))
    assert [shorter.corrupt(s) for s in CLEAN * 20] == pairs
    with pytest.raises(ValueError, match=f"at most {len(KINDS)} weights"):
        ErrorSynthesizer(confusion, config=SynthConfig(kind_weights=(0.1,) * (len(KINDS) + 1)))


def test_reservoir_sample_and_tsv(tmp_path: Path):
    sample = reservoir_sample((str(i) for i in range(1000)), 10, random.Random(0))
    assert len(sample) == 10 and sample == sorted(sample, key=int), "stream order is kept"
    path = tmp_path / "pairs.tsv"
    assert write_pairs(path, [("因该", "应该"), ("应该", "应该")]) == 2
    assert path.read_text(encoding="utf-8").splitlines() == ["1\t因该\t应该", "0\t应该\t应该"]
    from corrector.datasets import read_dataset

    assert [e.source for e in read_dataset(str(path)).examples] == ["因该", "应该"]


def toy_pairs() -> list[tuple[str, str]]:
    return [
        ("少先队员因该为老人让坐。", "少先队员应该为老人让座。"),
        ("我们因该去公园散步。", "我们应该去公园散步。"),
        ("他的作业做得很认真。", "他的作业做得很认真。"),
        ("请大家让坐给老人。", "请大家让座给老人。"),
        ("今天天气很好。", "今天天气很好。"),
    ] * 8


@pytest.mark.parametrize("generator_input", ["source", "masked"])
def test_finetune_loss_decreases_and_model_loads(tiny_model_dir: Path, tmp_path: Path, generator_input: str):
    from corrector.finetune.train import FinetuneConfig, train
    from corrector.runtime.models import load_model

    data = tmp_path / "train.tsv"
    write_pairs(data, toy_pairs())
    out = tmp_path / "ft"
    cfg = FinetuneConfig(train=[str(data)], dev_from=[str(data)], dev_share=0.1, init=str(tiny_model_dir),
                         output=str(out), batch_size=8, lr=3e-3, warmup_steps=5, max_steps=60,
                         save_every=30, log_every=10, cpu=True, generator_input=generator_input)
    train(cfg)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["gen_loss"] < records[0]["gen_loss"] - 0.5
    assert records[-1]["disc_loss"] < records[0]["disc_loss"]
    assert len((out / "dev.tsv").read_text(encoding="utf-8").splitlines()) == 4  # 10% of 40
    bundle = load_model(str(out))
    assert bundle.tokenizer.vocab_size > 100
    assert bundle.generator_input == generator_input  # the corrector feeds it as it was trained


def test_error_weight_scales_the_generator_loss_at_wrong_characters(tiny_model_dir: Path):
    """Weight 1 is the plain mean; a larger weight moves the loss towards the wrong characters' loss."""
    from corrector.finetune.train import CorrectionModel, FinetuneConfig
    from corrector.pretrain.modeling import load_pair

    discriminator, generator, _ = load_pair(str(tiny_model_dir))
    source = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 16, 17, 3]])
    target = source.clone()
    target[0, 2] = 20  # one wrong character
    mask = torch.ones_like(source)
    generator.eval()
    with torch.no_grad():  # the wrong character's own loss: its CE under the same model
        hidden = generator.electra(input_ids=source, attention_mask=mask).last_hidden_state
        logits = generator.generator_lm_head(generator.generator_predictions(hidden[0, 2:3]))
        wrong_loss = torch.nn.functional.cross_entropy(logits, target[0, 2:3]).item()
    losses = {}
    for weight in (1.0, 50.0):
        cfg = FinetuneConfig(error_weight=weight, extra_mask_prob=0.0)
        model = CorrectionModel(discriminator, generator, cfg, special_ids=[0, 2, 3], mask_token_id=4).eval()
        with torch.no_grad():
            losses[weight] = float(model(source, target, mask)[1]["gen_loss"])  # statistics are 0-d tensors
    assert abs(losses[50.0] - wrong_loss) < abs(losses[1.0] - wrong_loss)
    assert losses[50.0] == pytest.approx((losses[1.0] * 8 + (50 - 1) * wrong_loss) / (8 + 49), rel=1e-4)


def test_generator_from_discriminator_starts_from_the_discriminators_encoder(tiny_model_dir: Path):
    from corrector.pretrain.modeling import generator_from_discriminator, load_pair

    discriminator, generator, _ = load_pair(str(tiny_model_dir))
    assert generator.config.hidden_size < discriminator.config.hidden_size  # the pre-training shape
    wide = generator_from_discriminator(discriminator, generator)
    assert wide.config.hidden_size == discriminator.config.hidden_size
    assert wide.config.num_hidden_layers == discriminator.config.num_hidden_layers
    encoder = discriminator.electra.state_dict()
    for name, tensor in wide.electra.state_dict().items():
        assert torch.equal(tensor, encoder[name]), name
    # One set of embeddings, as in pre-training; the output layer is tied to it.
    assert wide.electra.embeddings.word_embeddings is discriminator.electra.embeddings.word_embeddings
    assert wide.generator_lm_head.weight is discriminator.electra.embeddings.word_embeddings.weight
    assert torch.equal(wide.generator_lm_head.bias, generator.generator_lm_head.bias)
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    assert wide(input_ids=ids).logits.shape == (1, 5, discriminator.config.vocab_size)


def test_finetune_with_generator_from_discriminator_saves_a_full_width_pair(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.train import FinetuneConfig, train
    from corrector.runtime.models import load_model

    data = tmp_path / "train.tsv"
    write_pairs(data, toy_pairs())
    out = tmp_path / "ft"
    cfg = FinetuneConfig(train=[str(data)], init=str(tiny_model_dir), output=str(out), batch_size=8,
                         warmup_steps=1, max_steps=3, save_every=10, log_every=1, cpu=True,
                         generator_from_discriminator=True)
    train(cfg)
    bundle = load_model(str(out))
    assert bundle.generator.config.hidden_size == bundle.discriminator.config.hidden_size
    assert bundle.generator_input == "source"
    # Continuing from that pair with the flag keeps the trained generator.
    again = tmp_path / "ft2"
    train(dataclasses.replace(cfg, init=str(out), output=str(again), max_steps=1, lr=0.0))
    before, after = load_model(str(out)).generator, load_model(str(again)).generator
    assert torch.equal(before.generator_predictions.dense.weight, after.generator_predictions.dense.weight)


def test_calibration_writes_scorer_json_that_the_corrector_uses(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.calibrate import calibrate
    from corrector.pipeline import Corrector
    from corrector.runtime.models import load_model

    dev = tmp_path / "dev.tsv"
    write_pairs(dev, toy_pairs()[:5])
    model = tmp_path / "model"
    import shutil

    shutil.copytree(tiny_model_dir, model)
    config = calibrate(model, dev, detection_grid=(0.3, 0.5), log=lambda *_: None)
    saved = json.loads((model / "scorer.json").read_text(encoding="utf-8"))
    assert saved == config
    assert {"weights", "threshold", "detection_threshold", "calibration"} <= set(saved)
    assert saved["detection_threshold"] in (0.3, 0.5)
    assert saved["calibration"]["correct_sides"] == 3  # the three pairs with errors, error-free once more
    assert saved["calibration"]["dev_sentences"] == 5 + 3
    curve = saved["calibration"]["curve"]  # the chosen setting's sweep, for `require`
    assert all(len(point) == 4 for point in curve)
    assert [saved["threshold"], saved["calibration"]["dev_f1"]] in [point[:2] for point in curve]
    assert saved["generator_input"] == "masked"  # the tiny pre-trained pair's
    assert 0.0 <= saved["calibration"]["held_out_f1"] <= 1.0  # the held-out path ran
    breakdown = saved["calibration"]["error_breakdown"]
    wrong = sum(a != b for source, target in toy_pairs()[:5] for a, b in zip(source, target, strict=True))
    assert breakdown["errors"] == wrong
    assert sum(breakdown[k] for k in ("corrected", "below_threshold", "outranked", "no_candidate")) == wrong
    corrector = Corrector(load_model(str(model)))
    assert corrector.scorer.threshold == pytest.approx(saved["threshold"])
    assert corrector.scorer.detection_threshold == pytest.approx(saved["detection_threshold"])
    assert "word_gain" not in saved["mlp"]["inputs"] and corrector.homophones is None  # words are opt-in
    assert len(saved["mlp"]["b1"]) == 5 * 16  # five networks of 16 units averaged (calibrate's default)


def test_calibration_with_word_candidates_fits_a_scorer_that_proposes_them(tiny_model_dir: Path, tmp_path: Path):
    import shutil

    from corrector.finetune.calibrate import PAIR_FLAG_GAIN, WORD_FLAG_GAIN, calibrate
    from corrector.pipeline import Corrector
    from corrector.resources.error_pairs import FILENAME as PAIRS_FILE
    from corrector.resources.error_pairs import ErrorPairs
    from corrector.resources.ngram import NgramLM
    from corrector.runtime.models import load_model

    dev = tmp_path / "dev.tsv"
    write_pairs(dev, toy_pairs()[:5])
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    NgramLM.count([target for _, target in toy_pairs()], min_char_count=1, min_count=1).save(model)  # words need one
    ErrorPairs.count(toy_pairs()[5:]).save(model / PAIRS_FILE)  # pair flags need a table and the LM
    saved = calibrate(model, dev, detection_grid=(0.0,), held_out=False, word_candidates=True, log=lambda *_: None)
    assert {"word_gain", "word_size"} <= set(saved["mlp"]["inputs"])
    assert saved["word_flag_gain"] == WORD_FLAG_GAIN  # words are examined where no other rule flags them
    assert saved["pair_flag_gain"] == PAIR_FLAG_GAIN  # and training corrections the LM prefers
    corrector = Corrector(load_model(str(model)))
    assert corrector.homophones is not None and corrector.detector.homophones is corrector.homophones


def test_ship_writes_fp16_weights_that_load_as_fp32(tiny_model_dir: Path, tmp_path: Path):
    import shutil

    import torch

    from corrector.finetune.__main__ import main
    from corrector.resources.ngram import NgramLM
    from corrector.runtime.models import load_model

    source = tmp_path / "trained"
    shutil.copytree(tiny_model_dir, source)
    (source / "scorer.json").write_text(json.dumps({"threshold": 0.3}), encoding="utf-8")
    NgramLM.count(["少先队员应该为老人让座。"], min_char_count=1).save(source)
    assert main(["ship", "--model", str(source), "--output", str(tmp_path / "release")]) == 0

    release = tmp_path / "release"
    assert {p.name for p in release.iterdir()} >= {"discriminator", "generator", "vocab.txt", "scorer.json", "ngram.safetensors"}
    weights = lambda d: (d / "discriminator" / "model.safetensors").stat().st_size  # noqa: E731
    assert weights(release) < 0.6 * weights(source)
    shipped, original = load_model(str(release)), load_model(str(source))
    assert shipped.ngram is not None and shipped.scorer_config["threshold"] == 0.3
    ids = np.array([[2, 10, 11, 12, 3]])
    mask = np.ones_like(ids)
    assert next(shipped.discriminator.parameters()).dtype == torch.float32
    assert np.allclose(shipped.replaced_probability(ids, mask), original.replaced_probability(ids, mask), atol=1e-3)


def test_error_breakdown_sorts_every_dev_error_into_one_stage():
    from corrector.features import FEATURES
    from corrector.finetune.calibrate import error_breakdown
    from corrector.scored import ScoredCandidate
    from corrector.scoring import Scorer

    scorer = Scorer(weights={"lm_gain": 1.0}, threshold=0.5)  # confidence = sigmoid(lm_gain)

    def cand(text, position, source, target, gain, detect=0.9):
        features = dict.fromkeys(FEATURES, 0.0) | {"lm_gain": gain, "detect_prob": detect}
        return ScoredCandidate(text, position, source, target, features, 0.0, False)

    sources, targets = ["因该让坐了吗", "他很好"], ["应该让座了吗", "他很好"]
    candidates = [
        cand(0, 0, "因", "应", 3.0), cand(0, 0, "因", "音", 1.0),  # corrected
        cand(0, 3, "坐", "座", -1.0),  # gold ranked first, under the threshold
        cand(1, 1, "很", "狠", 2.0),  # a false alarm at a correct character
        cand(1, 2, "好", "号", 4.0, detect=0.01),  # not examined at detection threshold 0.05
    ]
    counts = error_breakdown(candidates, sources, targets, scorer, detection_threshold=0.05)
    assert counts == {"errors": 2, "corrected": 1, "below_threshold": 1, "outranked": 0, "no_candidate": 0,
                      "false_alarms": 1, "adjacent_errors": 0, "adjacent_corrected": 0}
    candidates[2] = cand(0, 3, "坐", "做", 2.0)  # now only a wrong character is proposed there
    counts = error_breakdown(candidates + [cand(0, 3, "坐", "座", 1.0)], sources, targets, scorer, 0.05)
    assert counts["outranked"] == 1 and counts["below_threshold"] == 0
    counts = error_breakdown(candidates, sources, targets, scorer, 0.05)
    assert counts["no_candidate"] == 1
    # A word typed wrong as a whole (宅舞 for 债务): two errors side by side, here one corrected.
    counts = error_breakdown([cand(0, 0, "宅", "债", 3.0)], ["宅舞很重"], ["债务很重"], scorer, 0.05)
    assert counts["adjacent_errors"] == 2 and counts["adjacent_corrected"] == 1 and counts["corrected"] == 1


def test_discriminator_layers_keeps_evenly_spaced_layers(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.train import FinetuneConfig, train
    from corrector.pretrain.modeling import keep_layers, load_pair
    from corrector.runtime.models import load_model

    discriminator, _, _ = load_pair(str(tiny_model_dir))
    deep = [dict(layer.state_dict()) for layer in discriminator.electra.encoder.layer]
    assert keep_layers(discriminator, 1) == [len(deep) - 1]  # a single layer: the last
    assert discriminator.config.num_hidden_layers == 1
    for name, tensor in discriminator.electra.encoder.layer[0].state_dict().items():
        assert torch.equal(tensor, deep[-1][name]), name
    twelve, _, _ = load_pair(str(tiny_model_dir))
    twelve.electra.encoder.layer = torch.nn.ModuleList(twelve.electra.encoder.layer[i % 2] for i in range(12))
    assert keep_layers(twelve, 6) == [0, 2, 4, 7, 9, 11]  # first and last kept, evenly between
    deeper, _, _ = load_pair(str(tiny_model_dir))
    assert keep_layers(deeper, 2 * len(deep)) == [i // 2 for i in range(2 * len(deep))]  # each layer twice, in place
    assert deeper.config.num_hidden_layers == 2 * len(deep)
    first, copy = deeper.electra.encoder.layer[0], deeper.electra.encoder.layer[1]
    assert not set(map(id, first.parameters())) & set(map(id, copy.parameters()))  # the repeat trains apart
    for (name, a), b in zip(first.state_dict().items(), copy.state_dict().values(), strict=True):
        assert torch.equal(a, deep[0][name]), name
        branch_output = name.startswith(("attention.output.dense.", "output.dense."))
        assert torch.equal(b, torch.zeros_like(a) if branch_output else a), name  # its branches start at zero
    with pytest.raises(ValueError, match="cannot keep 0 of"):
        keep_layers(twelve, 0)

    data = tmp_path / "train.tsv"
    write_pairs(data, toy_pairs())
    out = tmp_path / "ft"
    train(FinetuneConfig(train=[str(data)], init=str(tiny_model_dir), output=str(out), batch_size=8,
                         warmup_steps=1, max_steps=2, save_every=10, log_every=1, cpu=True, discriminator_layers=1))
    bundle = load_model(str(out))
    assert bundle.discriminator.config.num_hidden_layers == 1
    assert len(bundle.discriminator.electra.encoder.layer) == 1
    assert bundle.generator.config.num_hidden_layers == len(deep)  # the generator is left as it was


def test_generator_layers_with_a_frozen_discriminator_train_the_generator_alone(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.train import FinetuneConfig, train
    from corrector.runtime.models import load_model

    before = load_model(str(tiny_model_dir))
    data = tmp_path / "train.tsv"
    write_pairs(data, toy_pairs())
    out = tmp_path / "ft"
    train(FinetuneConfig(train=[str(data)], init=str(tiny_model_dir), output=str(out), batch_size=8, lr=1e-2,
                         warmup_steps=1, max_steps=3, save_every=10, log_every=1, cpu=True,
                         generator_layers=1, freeze_discriminator=True))
    after = load_model(str(out))
    assert after.generator.config.num_hidden_layers == 1 and len(after.generator.electra.encoder.layer) == 1
    # The discriminator (and the word embeddings it shares with the generator) did not move ...
    old, new = before.discriminator.state_dict(), after.discriminator.state_dict()
    assert old.keys() == new.keys()
    for name in old:
        assert torch.equal(old[name], new[name]), name
    # ... while the generator's kept layer did (lr 1e-2: three steps change every weight matrix).
    kept = before.generator.electra.encoder.layer[-1].state_dict()
    trained = after.generator.electra.encoder.layer[0].state_dict()
    assert not torch.equal(kept["output.dense.weight"], trained["output.dense.weight"])
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("gen_loss" in row for row in log)
    assert not any("disc_loss" in row for row in log)  # the discriminator was not run


def calibration_inputs(tiny_model_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(dev set of five toy pairs, a copy of the tiny model to calibrate)."""
    import shutil

    dev = tmp_path / "dev.tsv"
    write_pairs(dev, toy_pairs()[:5])
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    return dev, model


def test_calibration_tries_generator_flag_margins_for_a_source_generator(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.calibrate import calibrate

    dev, model = calibration_inputs(tiny_model_dir, tmp_path)
    tried = []
    saved = calibrate(model, dev, detection_grid=(0.5,), margin_grid=(None, 0.0, -1e9), generator_input="source",
                      held_out=False, log=tried.append)
    assert sum("generator flag margin" in line for line in tried) >= 3  # each margin swept
    assert not any("LM weight 0.5" in line for line in tried)  # no n-gram LM: the margin alone
    assert saved.get("generator_flag_margin") in (None, 0.0, -1e9)
    # With an n-gram LM each margin is also tried with the LM's evidence added.
    from corrector.resources.ngram import FILENAME, NgramLM

    NgramLM.count([target for _, target in toy_pairs()], min_char_count=1, min_count=1).save(model)
    tried.clear()
    with_lm = calibrate(model, dev, detection_grid=(0.5,), margin_grid=(None, 0.0), lm_weight_grid=(0.0, 0.5),
                        generator_input="source", held_out=False, log=tried.append)
    swept = [line for line in tried if line.startswith("detection threshold")]
    assert len(swept) == 3 and sum("LM weight 0.5" in line for line in swept) == 1
    assert with_lm.get("generator_flag_lm_weight", 0.0) in (0.0, 0.5)
    (model / FILENAME).unlink()
    breakdown = saved["calibration"]["error_breakdown"]
    assert sum(breakdown[k] for k in ("corrected", "below_threshold", "outranked", "no_candidate")) == breakdown["errors"]
    masked = calibrate(model, dev, detection_grid=(0.5,), margin_grid=(None, -1e9), generator_input="masked",
                       held_out=False, log=lambda *_: None)
    assert "generator_flag_margin" not in masked  # masked input: the discriminator alone


def test_calibration_tries_context_flag_rates_with_a_context_table(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.calibrate import calibrate
    from corrector.resources.error_pairs import FILENAME, ErrorPairs
    from corrector.scoring import Scorer

    dev, model = calibration_inputs(tiny_model_dir, tmp_path)
    tried = []
    calibrate(model, dev, detection_grid=(0.5,), margin_grid=(None,), context_rate_grid=(None, 0.5),
              held_out=False, log=tried.append)
    assert not any("context flag rate 0.5" in line for line in tried)  # no error-pair table: no context flags
    ErrorPairs.count(toy_pairs()[5:]).save(model / FILENAME)
    tried.clear()
    saved = calibrate(model, dev, detection_grid=(0.5,), margin_grid=(None,), context_rate_grid=(None, 0.5),
                      held_out=False, log=tried.append)
    swept = [line for line in tried if line.startswith("detection threshold")]
    assert len(swept) == 2 and sum("context flag rate 0.5" in line for line in swept) == 1
    assert saved.get("context_flag_rate") in (None, 0.5)
    assert Scorer.from_config(saved).context_flag_rate == saved.get("context_flag_rate")
    assert "context_flag_rate" not in Scorer().to_config()  # old files stay as they were
    assert Scorer.from_config({"context_flag_rate": 0.7}).to_config()["context_flag_rate"] == 0.7


def test_calibrate_cli_seed_members_and_fit_detection_threshold(tiny_model_dir: Path, tmp_path: Path, capsys):
    """The refit options of the CLI reach the fit: --members sets the network's width,
    --seed its start, --fit-detection-threshold the candidates it is fitted on."""
    from corrector.finetune.__main__ import main

    dev, model = calibration_inputs(tiny_model_dir, tmp_path)
    base = ["calibrate", "--model", str(model), "--dev", str(dev), "--detection-grid", "0.5", "--margin-grid", "off",
            "--hidden", "4"]

    def fit(*extra: str) -> dict:
        assert main([*base, *extra]) == 0
        return json.loads((model / "scorer.json").read_text(encoding="utf-8"))

    two = fit("--members", "2", "--seed", "3", "--fit-detection-threshold", "0.3")
    assert len(two["mlp"]["b1"]) == 8 and two["detection_threshold"] == 0.5
    broad = capsys.readouterr().out
    one = fit("--members", "1", "--seed", "3", "--fit-detection-threshold", "0.3")
    assert len(one["mlp"]["b1"]) == 4 and one["mlp"]["w1"] == two["mlp"]["w1"][:4]  # seed 3 is the first member
    assert fit("--members", "1", "--seed", "4", "--fit-detection-threshold", "0.3")["mlp"]["w1"] != one["mlp"]["w1"]
    capsys.readouterr()
    fit("--members", "1")  # fitted at the detection grid's lowest threshold: fewer candidates than at 0.3
    count = [int(line.split(" candidates")[0].split()[-1]) for line in capsys.readouterr().out.splitlines()
             if line.startswith("dev:")]
    assert count and count[0] <= int(broad.split(" candidates")[0].split()[-1])
    assert main([*base, "--members", "0"]) == 2


def test_heldout_cli_scores_both_ways_of_each_split(tiny_model_dir: Path, tmp_path: Path, capsys):
    """`finetune heldout`: for each split seed, both halves fitted and scored (one and two passes),
    with the model's own flag settings; the same seeds give the same halves and figures."""
    from corrector.finetune.__main__ import main
    from corrector.finetune.calibrate import calibrate

    dev, model = calibration_inputs(tiny_model_dir, tmp_path)
    write_pairs(dev, toy_pairs()[:20])
    calibrate(model, dev, detection_grid=(0.5,), margin_grid=(None,), hidden=4, members=1, held_out=False,
              log=lambda *_: None)
    report_path = tmp_path / "heldout.json"
    args = ["heldout", "--model", str(model), "--dev", str(dev), "--splits", "2", "--first-split", "3",
            "--members", "1", "--fit-detection-threshold", "0", "--json", str(report_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "dev: 32 sentences (20 pairs + 12 correct sides)" in out and "held-out dev correction F1 over 4 halves" in out
    report = json.loads(report_path.read_text(encoding="utf-8"))
    halves = report["halves"]
    assert [(h["split"], h["fit_half"]) for h in halves] == [(3, 0), (3, 1), (4, 0), (4, 1)]
    assert all(0.0 <= h["one_pass"] <= 1.0 and 0.0 <= h["two_passes"] <= 1.0 for h in halves)
    assert report["one_pass"] == round(sum(h["one_pass"] for h in halves) / 4, 4)
    assert main(args) == 0 and json.loads(report_path.read_text(encoding="utf-8")) == report  # deterministic
    capsys.readouterr()
    assert main([*args[:5], "--splits", "0"]) == 2
    assert "--splits must be at least 1" in capsys.readouterr().err
    assert main([*args[:9], "--members", "1", "--no-correct-sides"]) == 0
    assert "dev: 20 sentences (20 pairs + 0 correct sides)" in capsys.readouterr().out

    train = tmp_path / "train.tsv"  # another error in one of dev's correct sentences: its 4 copies have a twin
    write_pairs(train, [("请大家让做给老人。", "请大家让座给老人。"), *toy_pairs()[:5]])
    assert main([*args, "--twins-of", str(train)]) == 0
    out = capsys.readouterr().out
    assert "dev pairs with a training twin: 4 of 20" in out and "without a training twin, over 4 halves" in out
    with_twins = json.loads(report_path.read_text(encoding="utf-8"))
    assert with_twins["two_passes"] == report["two_passes"]  # the same halves, scored once more on a subset
    assert all(0.0 <= h["subsets"]["new"]["two_passes"] <= 1.0 for h in with_twins["halves"])
    assert with_twins["subsets"]["new"] == {
        "one_pass": round(sum(h["subsets"]["new"]["one_pass"] for h in with_twins["halves"]) / 4, 4),
        "two_passes": round(sum(h["subsets"]["new"]["two_passes"] for h in with_twins["halves"]) / 4, 4),
        "halves": 4}

    part = tmp_path / "part.tsv"  # dev's 8 copies of the first two pairs (with their correct sides) form a part
    write_pairs(part, toy_pairs()[:2])
    assert main([*args, "--part", "first", str(part), "--twins-of", str(train)]) == 0
    out = capsys.readouterr().out
    assert "dev pairs from first: 8 of 20" in out and "on the dev pairs from first, over" in out
    with_part = json.loads(report_path.read_text(encoding="utf-8"))
    assert with_part["two_passes"] == report["two_passes"] and with_part["subsets"]["new"] == with_twins["subsets"]["new"]
    assert 1 <= with_part["subsets"]["first"]["halves"] <= 4
    assert main([*args, "--part", "first"]) == 2
    assert "--part takes a name and at least one training set" in capsys.readouterr().err


def test_heldout_refits_the_scorer_form_the_model_ships():
    """`heldout` refits networks of the model's own hidden size (calibrate stores its members merged
    into one layer of members x hidden rows), not always the default's 16."""
    from corrector.finetune.calibrate import DEFAULT_HIDDEN, scorer_hidden

    shipped = {"mlp": {"w1": [[0.0] * 3] * 160}}
    assert scorer_hidden(shipped, 5) == 32 and scorer_hidden(shipped, 1) == 160
    assert scorer_hidden({"mlp": {"w1": [[0.0]] * 7}}, 5) == DEFAULT_HIDDEN  # not of that form
    assert scorer_hidden({}, 5) == DEFAULT_HIDDEN  # no scorer network yet


def test_heldout_scores_the_second_pass_as_the_corrector_wrote_it():
    """The two-pass figure counts every edit the corrector made at the tuned threshold, including
    second-pass edits below it (Scorer.second_pass_threshold_factor); only the one-pass run, made at
    threshold 0, is filtered at the tuned threshold."""
    from corrector.datasets import Example
    from corrector.finetune.calibrate import fit_and_score
    from corrector.result import Edit, Result
    from corrector.scored import ScoredCandidate
    from corrector.scoring import Scorer

    examples = [Example("因该去吗", "应该去吧", str(i), i + 1) for i in range(8)]  # two errors each
    candidates = [ScoredCandidate(i, 0, "因", target, {"bias": 1.0, "same_pinyin": float(target == "应")}, 0.0, True)
                  for i in range(8) for target in ("应", "音")]
    labels = [int(c.target == "应") for c in candidates]

    class TwoPasses:  # the first pass fixes 因 (confidence 0.9); the second also 吗 -> 吧, at 0.1
        scorer = Scorer()

        def __init__(self, passes: int = 1) -> None:
            self.passes = passes

        def with_passes(self, passes: int) -> TwoPasses:
            return TwoPasses(passes)

        def correct_batch(self, texts, batch_size=None, threshold=None):
            edits = [Edit(0, "因", "应", 0.9, "pinyin")] + [Edit(3, "吗", "吧", 0.1, "other")] * (self.passes > 1)
            return [Result.applying(text, list(edits)) for text in texts]

    score = fit_and_score(lambda config: TwoPasses(), examples, candidates, labels, {}, batch_size=8,
                          half_of=[i % 2 for i in range(8)], fit_half=0, two_passes=True)
    assert score.one_pass == 0.0  # one of two errors fixed: no sentence right
    assert score.two_passes == 1.0  # the second pass's edit at 0.1 counts, whatever the tuned threshold


def test_training_twins_share_a_run_with_another_training_pair(tmp_path: Path):
    """A dev pair has a twin when its correct side shares 8 characters with a training pair's that
    is not itself a dev pair."""
    from corrector.datasets import Example
    from corrector.finetune.calibrate import training_twins

    dev = [Example(source=s, target=t, id=str(i), line=i + 1) for i, (s, t) in enumerate(toy_pairs()[:5])]
    train = tmp_path / "train.tsv"
    write_pairs(train, [*toy_pairs()[:5], ("昨天我们因该去公园散步了。", "昨天我们应该去公园散步了。")])
    assert training_twins(dev, [train]) == [False, True, False, False, False]  # 我们应该去公园散步: 9 characters
    assert training_twins(dev, [train], shared_span=10) == [False] * 5


def test_correct_sides_are_error_free_pairs_that_stay_with_their_pair():
    """`with_correct_sides`: each pair with errors once more as its correct side, nothing else;
    `pair_of` names the pair, so a held-out split keeps the two (nearly the same text) together."""
    from corrector.datasets import Example
    from corrector.finetune.calibrate import with_correct_sides

    pairs = [Example(source=s, target=t, id=str(i + 1), line=i + 1) for i, (s, t) in enumerate(toy_pairs()[:5])]
    examples, pair_of = with_correct_sides(pairs)
    assert examples[:5] == pairs and len(examples) == 8 and len(pair_of) == 8
    added = examples[5:]
    assert [e.source for e in added] == [pairs[i].target for i in (0, 1, 3)]
    assert all(not e.has_error and e.id.endswith(":correct") for e in added)
    assert pair_of == [0, 1, 2, 3, 4, 0, 1, 3]
    assert with_correct_sides([pairs[2], pairs[4]]) == ([pairs[2], pairs[4]], [0, 1])  # none with errors: none added


def test_require_takes_the_nearest_near_best_threshold_that_makes_the_promised_corrections(
        trained_model_dir: Path, tmp_path: Path, capsys):
    """`finetune require`: among the stored dev sweep's thresholds within the tolerance of the
    best dev F1, the one nearest the best at which the model makes every required correction;
    recorded, repeatable, and refused (file untouched) when no near-best threshold makes them."""
    import shutil

    from corrector.finetune.__main__ import main

    wrong, right = "少先队员因该为老人让坐", "少先队员应该为老人让座"
    model = tmp_path / "model"
    shutil.copytree(trained_model_dir, model)
    # The trained tiny pair makes both edits at ~0.999: the "best" threshold 0.999999 makes neither.
    curve = [[0.999999, 0.6, 0.7, 0.5], [0.9, 0.5985, 0.6, 0.6], [0.5, 0.598, 0.6, 0.6], [0.1, 0.4, 0.3, 0.7]]
    scorer_path = model / "scorer.json"
    scorer_path.write_text(json.dumps({"threshold": 0.999999, "calibration": {"curve": curve, "dev_f1": 0.6}}),
                           encoding="utf-8")
    args = ["require", "--model", str(model), "--pair", wrong, right]
    assert main(args) == 0
    saved = json.loads(scorer_path.read_text(encoding="utf-8"))
    assert saved["threshold"] == 0.9  # 0.5 also qualifies, but 0.9 is nearer the best
    calibration = saved["calibration"]
    assert calibration["required"] == [[wrong, right]]
    assert (calibration["unconstrained_threshold"], calibration["unconstrained_dev_f1"]) == (0.999999, 0.6)
    assert (calibration["dev_f1"], calibration["dev_precision"], calibration["dev_recall"]) == (0.5985, 0.6, 0.6)
    assert main(args) == 0 and json.loads(scorer_path.read_text(encoding="utf-8")) == saved  # from the same best
    capsys.readouterr()

    assert main([*args, "--tolerance", "0.001"]) == 2  # only the best itself is near enough, and it fails
    assert "no edit threshold within 0.001" in capsys.readouterr().err
    assert json.loads(scorer_path.read_text(encoding="utf-8")) == saved
    scorer_path.write_text(json.dumps({"threshold": 0.5}), encoding="utf-8")
    assert main(args) == 2 and "no calibration curve" in capsys.readouterr().err


def test_dev_seed_keeps_the_dev_split_when_the_seed_changes(tmp_path: Path):
    """A continued fine-tune with a new --seed (new data order) still holds out its model's dev split."""
    from corrector.finetune.train import FinetuneConfig, load_training_pairs

    data = tmp_path / "train.tsv"
    write_pairs(data, [(f"第{i}句话很好。", f"第{i}句话很好。") for i in range(200)])

    def dev_of(name: str, **seeds) -> str:
        out = tmp_path / name
        out.mkdir()
        cfg = FinetuneConfig(train=[str(data)], dev_from=[str(data)], dev_share=0.1, **seeds)
        train_pairs = load_training_pairs(cfg, out, lambda *_: None)
        assert len(train_pairs) == 180
        return (out / "dev.tsv").read_text(encoding="utf-8")

    reference = dev_of("a", seed=7)
    assert dev_of("b", seed=1, dev_seed=7) == reference
    assert dev_of("c", seed=2, dev_seed=7) == reference
    assert dev_of("d", seed=1) != reference


def test_profile_steps_writes_where_a_step_spends_its_time(tiny_model_dir: Path, tmp_path: Path):
    from corrector.finetune.train import FinetuneConfig, train

    data = tmp_path / "train.tsv"
    write_pairs(data, toy_pairs())
    out = tmp_path / "ft"
    train(FinetuneConfig(train=[str(data)], init=str(tiny_model_dir), output=str(out), batch_size=8,
                         warmup_steps=1, max_steps=13, save_every=100, log_every=5, cpu=True, profile_steps=2))
    report = (out / "profile.txt").read_text()
    assert report.startswith("2 steps, ")  # steps 10-12, after 10 warm ones
    assert "ms a step" in report and "aten::" in report and "self_cpu_time_total" in report
    short = tmp_path / "short"  # the run ends first: the steps profiled so far are reported
    train(FinetuneConfig(train=[str(data)], init=str(tiny_model_dir), output=str(short), batch_size=8,
                         warmup_steps=1, max_steps=13, save_every=100, log_every=5, cpu=True, profile_steps=50))
    assert (short / "profile.txt").read_text().startswith("3 steps, ")
