"""The correction pipeline end to end, on tiny models built here.

`trained_model_dir` trains the tiny ELECTRA pair for a few seconds so that its discriminator
flags 因/坐 in 少先队员因该为老人让坐 and its generator puts 应/座 there: a real model that
flags and proposes, so these tests check that the pipeline turns that into corrections (and
nothing else), not mocks. `tiny_model_dir` (random weights) checks alignment and bookkeeping
with thresholds forced to 0, where the pipeline edits wildly and must still keep every non-CJK
character and every offset right.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import build_tiny_model

from corrector import Corrector, Edit, Result, load_model
from corrector.acceptance import merge_passes
from corrector.baselines.classic import ClassicCorrector
from corrector.candidates import top_columns
from corrector.features import FEATURES, lm_margin
from corrector.pipeline import CorrectorConfig
from corrector.runtime.threads import batch_pool
from corrector.scored import ScoredCandidate
from corrector.scoring import Scorer
from corrector.text.protection import proper_noun_offsets, whitelisted_offsets
from corrector.text.segmentation import sentence_units
from corrector.text.tokenization import is_cjk

WRONG = "少先队员因该为老人让坐"
RIGHT = "少先队员应该为老人让座"
CORRECT_SENTENCES = [
    "少先队员应该为老人让座。",
    "我在2024年用iPhone打电话给Tom，他说应该没问题。",
    "今天天气很好，我们一起去公园散步。",
    "他的作业做得很认真。",
    "北京是中国的首都。",
    "张三和李四在上海工作。",
]
ERROR_PAIRS = {
    "少先队员因该为老人让坐。": "少先队员应该为老人让座。",
    "我在2024年用iPhone打电话给Tom，他说因该没问题。": "我在2024年用iPhone打电话给Tom，他说应该没问题。",
}
MIXED = "我在2024年用iPhone打电话给Tom，他说因该没问题。"
NASTY = (
    "访问 https://example.com/路径?q=因该 或写信给 tom@example.com 😀😀\n"
    "全角ＡＢＣ１２３，半角abc123；　全角空格\t制表符  两个空格\r\n"
    "emoji🎉在中间，𠀀扩展B字。\n\n最后一行"
)


def train_tiny(output_dir: Path, steps: int = 100, seed: int = 0, lr: float = 3e-3) -> Path:
    """Fit the tiny pair on a handful of sentences: errors -> discriminator 1, masks -> gold.

    lr 3e-3: at 1e-2 the discriminator fitted on Intel CPUs but collapsed to
    a constant (P(replaced) ~0.01 everywhere) on an AMD EPYC, whose float kernels round
    differently; at 3e-3 it flags both errors with P ~1.0 on that CPU for every seed tried."""
    build_tiny_model(output_dir, seed=seed)
    bundle = load_model(str(output_dir))
    tok = bundle.tokenizer
    disc, gen = bundle.discriminator.train(), bundle.generator.train()
    rng = random.Random(seed)
    torch.manual_seed(seed)
    pairs = [(s, s) for s in CORRECT_SENTENCES] + list(ERROR_PAIRS.items())
    optimizer = torch.optim.AdamW([*disc.parameters(), *gen.parameters()], lr=lr)
    for _ in range(steps):
        sources, targets = [], []
        for _ in range(8):  # 1-3 sentences per example so each appears at many offsets
            chosen = [rng.choice(pairs) for _ in range(rng.randint(1, 3))]
            src, tgt = "".join(s for s, _ in chosen), "".join(t for _, t in chosen)
            if rng.random() < 0.3:
                src, tgt = src.rstrip("。"), tgt.rstrip("。")
            sources.append(tok.with_special_tokens(tok.encode(src).ids))
            targets.append(tok.with_special_tokens(tok.encode(tgt).ids))
        width = max(map(len, sources))
        ids = torch.zeros(len(sources), width, dtype=torch.long)
        gold = torch.zeros_like(ids)
        for i, (s, t) in enumerate(zip(sources, targets, strict=True)):
            ids[i, : len(s)], gold[i, : len(t)] = torch.tensor(s), torch.tensor(t)
        attention = (ids != tok.pad_token_id).long()
        wrong = ids != gold
        d_logits = disc(input_ids=ids, attention_mask=attention).logits
        d_loss = torch.nn.functional.binary_cross_entropy_with_logits(
            d_logits[attention.bool()], wrong[attention.bool()].float()
        )
        masked = wrong | ((torch.rand(ids.shape) < 0.1) & attention.bool())
        masked[:, 0] = False
        g_input = torch.where(masked, torch.full_like(ids, tok.mask_token_id), gold)
        g_logits = gen(input_ids=g_input, attention_mask=attention).logits
        g_loss = torch.nn.functional.cross_entropy(g_logits[masked], gold[masked])
        optimizer.zero_grad()
        (d_loss + g_loss).backward()
        optimizer.step()
    from corrector.runtime.models import save_pair

    save_pair(disc.eval(), gen.eval(), str(output_dir))
    return output_dir


@pytest.fixture(scope="session")
def trained(trained_model_dir, confusion) -> Corrector:
    return Corrector(str(trained_model_dir), confusion=confusion)


@pytest.fixture(scope="session")
def wild(tiny_model_dir, confusion) -> Corrector:
    """Random weights, every CJK position flagged and every best candidate accepted (one pass: a
    second would edit the edits' neighbours again)."""
    config = CorrectorConfig(max_edits_per_sentence=10_000, passes=1)
    return Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.0, confusion=confusion, config=config)


# ---- end to end ------------------------------------------------------------------------------


def test_keyword_overrides_apply_to_a_given_config(tiny_model_dir, confusion):
    corrector = Corrector(str(tiny_model_dir), confusion=confusion, config=CorrectorConfig(batch_size=8, passes=1),
                          batch_size=4, max_edits_per_sentence=2)
    assert (corrector.config.batch_size, corrector.config.max_edits_per_sentence, corrector.config.passes) == (4, 2, 1)
    assert Corrector(corrector.bundle, confusion=confusion).config == CorrectorConfig()  # nothing given: the defaults


def test_corrects_the_classic_example(trained):
    result = trained.correct(WRONG)
    assert result.source == WRONG
    assert result.target == RIGHT
    assert [(e.position, e.source, e.target, e.kind) for e in result.edits] == [
        (4, "因", "应", "pinyin"),  # yin/ying: similar pinyin
        (10, "坐", "座", "pinyin"),  # same pinyin (and similar shape)
    ]
    assert all(0.5 <= e.confidence <= 1 for e in result.edits)
    assert isinstance(result.edits[0], Edit) and isinstance(result, Result)


def test_correct_text_is_left_alone(trained):
    for text in [RIGHT, *CORRECT_SENTENCES]:
        assert trained.correct(text).target == text


def test_mixed_text_keeps_everything_but_the_fix(trained):
    result = trained.correct(MIXED)
    assert result.target == MIXED.replace("因该", "应该")
    assert [(e.position, e.source, e.target) for e in result.edits] == [(MIXED.index("因"), "因", "应")]


def test_long_text_with_punctuation_is_stitched(trained_model_dir, confusion):
    # Chunks of <= 60 characters: the tiny model only ever saw up to three sentences in a row.
    trained = Corrector(str(trained_model_dir), confusion=confusion, config=CorrectorConfig(max_positions=60))
    parts = []
    for i in range(120):  # ~1,500 characters, far over the model's 254
        if i % 3 == 0:  # on a line of its own, as the tiny model learnt it
            parts.append("少先队员因该为老人让坐。" + ["\n", "\n\n", " \n", "\r\n"][i % 4])
        else:
            parts.append(CORRECT_SENTENCES[i % len(CORRECT_SENTENCES)] + ["", " ", "\t", "  "][i % 4])
    text = "".join(parts)
    assert len(text) > 5 * trained.bundle.max_length
    result = trained.correct(text)
    assert result.target == text.replace("因该为老人让坐", "应该为老人让座")
    assert len(result.edits) == 2 * 40
    assert all(text[e.position] == e.source for e in result.edits)


def test_threshold_per_call(trained):
    assert trained.correct(WRONG, threshold=0.99999999).target == WRONG
    assert trained.correct_batch([WRONG], threshold=0.5)[0].target == RIGHT
    assert trained.correct(WRONG).target == RIGHT  # the override did not stick


def test_whitelist_freezes_terms(trained_model_dir, confusion):
    corrector = Corrector(str(trained_model_dir), whitelist=["因该"], confusion=confusion)
    assert corrector.correct(WRONG).target == "少先队员因该为老人让座"
    assert whitelisted_offsets("因该因该x因该", ["因该"]) == {0, 1, 2, 3, 5, 6}


def test_whitelist_file(tmp_path, trained_model_dir, confusion):
    path = tmp_path / "whitelist.txt"
    path.write_text("# names\n让坐\n", encoding="utf-8")
    corrector = Corrector(str(trained_model_dir), whitelist=path, confusion=confusion)
    assert corrector.correct(WRONG).target == "少先队员应该为老人让坐"


def test_hub_layout_directories(tmp_path, trained_model_dir, confusion):
    disc = tmp_path / "hfl" / "chinese-electra-180g-small-discriminator"
    gen = tmp_path / "hfl" / "chinese-electra-180g-small-generator"
    shutil.copytree(trained_model_dir / "discriminator", disc)
    shutil.copytree(trained_model_dir / "generator", gen)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (trained_model_dir / name).exists():
            shutil.copy2(trained_model_dir / name, disc / name)
    corrector = Corrector(str(disc), confusion=confusion)
    assert corrector.bundle.name == str(disc)
    assert corrector.correct(WRONG).target == RIGHT


def test_scorer_json_in_model_dir_sets_thresholds(tmp_path, trained_model_dir, confusion):
    model = tmp_path / "model"
    shutil.copytree(trained_model_dir, model)
    config = Scorer().to_config()
    config["threshold"] = 0.99999999
    config["detection_threshold"] = 0.3
    (model / "scorer.json").write_text(json.dumps(config), encoding="utf-8")
    corrector = Corrector(str(model), confusion=confusion)
    assert corrector.threshold == 0.99999999 and corrector.scorer.detection_threshold == 0.3
    assert corrector.correct(WRONG).target == WRONG  # nothing is that confident
    assert Corrector(str(model), threshold=0.5, confusion=confusion).correct(WRONG).target == RIGHT


def test_classic_baseline_corrects_too(trained):
    classic = ClassicCorrector(trained.bundle, confusion=trained.confusion)
    result = classic.correct(WRONG)
    assert result.target == RIGHT
    assert [(e.position, e.target) for e in result.edits] == [(4, "应"), (10, "座")]
    assert [r.target for r in classic.correct_batch([WRONG, MIXED, ""])] == [RIGHT, MIXED.replace("因该", "应该"), ""]


# ---- calibration -----------------------------------------------------------------------------


def test_score_candidates_and_fit(trained):
    texts = [WRONG, MIXED, "他的作业做得很认真。"]
    scored = trained.score_candidates(texts, detection_threshold=0.01)
    assert scored and all(isinstance(c, ScoredCandidate) for c in scored)
    assert all(list(c.features) == list(FEATURES) for c in scored)
    assert all(texts[c.text_index][c.position] == c.source for c in scored)
    gold = {(0, 4): "应", (0, 10): "座", (1, MIXED.index("因")): "应"}
    labels = [float(gold.get((c.text_index, c.position)) == c.target) for c in scored]
    assert sum(labels) == 3  # every gold correction is among the candidates
    best = {(c.text_index, c.position): c.target for c in scored if c.best}
    assert all(best[key] == target for key, target in gold.items())

    # lm_margin: each candidate's n-gram gain against the best other one at its position.
    from corrector.resources.ngram import NgramLM

    lm = NgramLM.count([RIGHT, "他的作业做得很认真。", "我们应该让座。"] * 3, order=3, min_char_count=1, min_count=1)
    with_lm = Corrector(dataclasses.replace(trained.bundle, ngram=lm), scorer={}, confusion=trained.confusion)
    with_gains = with_lm.score_candidates(texts, detection_threshold=0.01)
    assert len({c.features["lm_gain"] for c in with_gains}) > 2
    by_position: dict[tuple[int, int], list[float]] = {}
    for c in with_gains:
        by_position.setdefault((c.text_index, c.position), []).append(c.features["lm_gain"])
    for c in with_gains:
        others = list(by_position[(c.text_index, c.position)])
        others.remove(c.features["lm_gain"])
        expected = c.features["lm_gain"] - max(others + [-20.0])
        assert c.features["lm_margin"] == pytest.approx(expected, abs=1e-5)

    config = Scorer.fit([c.features for c in scored], labels, base=trained.scorer.to_config())
    assert set(config["weights"]) == set(FEATURES)
    assert config["threshold"] == trained.scorer.threshold
    json.dumps(config)  # scorer.json material
    refit = Corrector(trained.bundle, scorer=config, confusion=trained.confusion)
    # One pass: the second examines every character beside an edit, flagged or not, where a
    # logistic fit on three gold candidates extrapolates to any confidence (the shipped scorer is
    # fitted on ~85 k candidates, down to detection threshold 0.01).
    assert refit.with_passes(1).correct(WRONG).target == RIGHT


def test_lm_margin_compares_each_candidate_with_the_best_other_one_at_its_position():
    import numpy as np

    position = np.array([0, 0, 0, 1, 2, 2, 3, 3])
    gain = np.array([3.0, 1.0, -2.0, 5.0, 2.0, 2.0, -25.0, -30.0])
    margin = lm_margin(position, gain)
    # The leader leads by its gap to the runner-up; the others trail the leader; a lone
    # candidate is measured against the floor (-20); a tie is a margin of 0 for both.
    assert margin.tolist() == [2.0, -2.0, -5.0, 25.0, 0.0, 0.0, -5.0, -10.0]
    assert lm_margin(np.zeros(0, dtype=int), np.zeros(0)).shape == (0,)
    # In the pipeline it is computed per flagged position from the candidates' lm_gain.
    shuffled = np.array([2, 0, 1, 0, 2, 0])
    assert lm_margin(shuffled, np.array([1.0, 4.0, 0.5, 6.0, -1.0, 5.0])).tolist() == [2.0, -2.0, 20.5, 1.0, -2.0, -1.0]


def test_fit_recovers_a_known_rule():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(2000, len(FEATURES), generator=gen)
    x[:, 0] = 1.0
    true_logit = 6 * x[:, FEATURES.index("gen_logprob")] - 6 * x[:, FEATURES.index("recheck_prob")]
    labels = (torch.rand(2000, generator=gen) < torch.sigmoid(true_logit)).float()
    weights = Scorer.fit(x, labels, l2=1e-4)["weights"]
    assert weights["gen_logprob"] > 3 and weights["recheck_prob"] < -3
    assert abs(weights["similar_shape"]) < 1.0


def test_network_scorer_learns_an_interaction_the_linear_one_cannot():
    """A frequent error pair is right only where the LM agrees: an AND of two features."""
    gen = torch.Generator().manual_seed(0)
    x = torch.zeros(3000, len(FEATURES))
    x[:, 0] = 1.0
    pair = (torch.rand(3000, generator=gen) < 0.5).float()
    gain = torch.randn(3000, generator=gen)
    x[:, FEATURES.index("pair_log_count")] = pair * 4
    x[:, FEATURES.index("lm_gain")] = gain
    labels = ((pair > 0) & (gain > 0.5)).float()
    inputs = ["pair_log_count", "lm_gain"]
    config = Scorer.fit(x, labels, hidden=8, inputs=inputs)
    json.dumps(config)
    network = Scorer.from_config(config)
    assert network.uses("lm_gain") and not network.uses("recheck_prob") and not network.uses("gen_logprob")
    gold = labels.numpy() > 0.5
    accuracy = ((network.confidence(x) > 0.5) == gold).mean()
    assert accuracy > 0.97
    # The round trip keeps the scores.
    again = Scorer.from_config(network.to_config())
    assert np.allclose(again.logits(x), network.logits(x))
    linear = Scorer.from_config(Scorer.fit(x, labels))
    assert ((linear.confidence(x) > 0.5) == gold).mean() < accuracy
    with pytest.raises(ValueError, match="unknown"):
        Scorer.fit(x, labels, hidden=4, inputs=["no_such_feature"])


def test_network_members_average_into_one_wider_network():
    """members=3: three seeds' networks side by side, whose logit is the mean of theirs."""
    gen = torch.Generator().manual_seed(1)
    x = torch.zeros(600, len(FEATURES))
    x[:, 0] = 1.0
    x[:, FEATURES.index("lm_gain")] = torch.randn(600, generator=gen)
    x[:, FEATURES.index("pair_log_count")] = torch.rand(600, generator=gen) * 3
    labels = (x[:, FEATURES.index("lm_gain")] + x[:, FEATURES.index("pair_log_count")] > 2).float()
    inputs = ["pair_log_count", "lm_gain"]
    ensemble = Scorer.from_config(Scorer.fit(x, labels, hidden=4, inputs=inputs, seed=7, members=3))
    singles = [Scorer.from_config(Scorer.fit(x, labels, hidden=4, inputs=inputs, seed=s)) for s in (7, 8, 9)]
    assert len(ensemble.mlp["b1"]) == 12 and len(ensemble.mlp["w1"][0]) == 2
    mean_logit = np.stack([s.logits(x) for s in singles]).mean(0)
    assert np.allclose(ensemble.logits(x), mean_logit, atol=1e-4)
    assert ((ensemble.confidence(x) > 0.5) == (labels.numpy() > 0.5)).mean() > 0.95
    with pytest.raises(ValueError, match="members"):
        Scorer.fit(x, labels, hidden=4, inputs=inputs, members=0)
    # A network or a linear fit keeps the base's thresholds and flag settings.
    base = {"threshold": 0.3, "detection_threshold": 0.05, "generator_flag_margin": -0.5,
            "generator_flag_lm_weight": 0.5, "context_flag_rate": 0.5}
    for hidden in (4, 0):
        refit = Scorer.fit(x, labels, base=base, hidden=hidden, inputs=inputs if hidden else None)
        assert {key: refit[key] for key in base} == base


def test_scorer_config_round_trip():
    scorer = Scorer.from_config({"weights": {"bias": -1.0, "gen_logprob": 2.0}, "threshold": 0.7})
    again = Scorer.from_config(scorer.to_config())
    assert again.weights == scorer.weights and again.threshold == 0.7
    assert again.weights["same_pinyin"] == 0.0  # absent weights are 0 in a given config
    assert Scorer.from_config(None).weights["same_pinyin"] > 0  # defaults without one
    with pytest.raises(ValueError):
        Scorer(weights={"no_such_feature": 1.0})


# ---- alignment and bookkeeping with a model that edits everything ----------------------------


def assert_only_cjk_changed(text: str, result: Result) -> None:
    assert result.source == text and len(result.target) == len(text)
    changed = {i for i, (a, b) in enumerate(zip(text, result.target, strict=True)) if a != b}
    assert changed == {e.position for e in result.edits}
    for e in result.edits:
        assert is_cjk(e.source) and is_cjk(e.target) and text[e.position] == e.source != e.target
        assert e.kind in ("pinyin", "shape", "other")
    for i, (a, b) in enumerate(zip(text, result.target, strict=True)):
        if not is_cjk(a):
            assert a == b, f"non-CJK character {a!r} at {i} changed"


def test_mixed_text_alignment_with_wild_model(wild):
    for text in [MIXED, NASTY, "ＡＢＣ，。！", "😀", " \n\t", ""]:
        result = wild.correct(text)
        assert_only_cjk_changed(text, result)
    result = wild.correct(MIXED)
    assert len(result.edits) == sum(map(is_cjk, MIXED))  # every CJK char flagged and replaced


def test_long_text_without_punctuation_uses_overlapping_windows(wild):
    rng = random.Random(1)
    chars = "少先队员应该为老人让座今天天气很好我们一起去公园散步"
    text = "".join(rng.choice(chars) + (" " if rng.random() < 0.05 else "") for _ in range(1000))
    result = wild.correct(text)
    assert_only_cjk_changed(text, result)
    positions = [e.position for e in result.edits]
    assert len(positions) == len(set(positions)) == sum(map(is_cjk, text))  # each owned once


def test_small_chunks_match_positions(tiny_model_dir, confusion):
    corrector = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.0, confusion=confusion,
                          config=CorrectorConfig(max_positions=7, max_edits_per_sentence=10_000, passes=1))
    result = corrector.correct(NASTY)
    assert_only_cjk_changed(NASTY, result)
    # Every CJK character is edited except those inside the URL and e-mail address, kept as written.
    from corrector.text.protection import address_offsets

    kept = address_offsets(NASTY)
    assert kept and len(result.edits) == sum(is_cjk(ch) for i, ch in enumerate(NASTY) if i not in kept)


def test_max_edits_guard(tiny_model_dir, wild, confusion):
    limited = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.0, confusion=confusion,
                        config=CorrectorConfig(max_edits_per_sentence=2, passes=1))
    text = "今天天气很好，我们一起去公园散步。他的作业做得很认真。\n北京是中国的首都"
    free, kept = wild.correct(text), limited.correct(text)
    sentences = [(0, 17), (17, 27), (28, len(text))]
    for start, end in sentences:
        inside = [e for e in free.edits if start <= e.position < end]
        top = sorted(inside, key=lambda e: (-e.confidence, e.position))[:2]
        assert {e.position for e in kept.edits if start <= e.position < end} == {e.position for e in top}


def test_batch_equals_single(wild, trained):
    texts = [MIXED, NASTY, WRONG, "", "今天天气很好", RIGHT * 30, "北京"]
    for corrector in (wild, trained):
        singles = [corrector.correct(t) for t in texts]
        for batch_size in (1, 3, 32):
            batched = corrector.correct_batch(texts, batch_size=batch_size)
            assert [r.target for r in batched] == [r.target for r in singles]
            assert [[(e.position, e.target) for e in r.edits] for r in batched] == [
                [(e.position, e.target) for e in r.edits] for r in singles
            ]


def test_parallel_batches_give_what_the_calling_thread_gives(trained, wild):
    texts = [MIXED, NASTY, WRONG, "", RIGHT, "少先队员因该为老人让坐。" * 5, "北京"] * 2
    for inline in (trained, wild):
        parallel = Corrector(inline.bundle, confusion=inline.confusion, scorer=inline.scorer,
                             config=dataclasses.replace(inline.config, workers=2))
        assert (inline.workers, parallel.workers) == (1, 2)  # the tests run torch on one thread
        for batch_size in (1, 3, 32):
            assert [r.to_dict() for r in parallel.correct_batch(texts, batch_size=batch_size)] == [
                r.to_dict() for r in inline.correct_batch(texts, batch_size=batch_size)]
        key = lambda c: (c.text_index, c.position, c.target, c.confidence)  # noqa: E731
        # Same batches (the split changes padding, which moves confidences by ~1e-8): same candidates.
        assert [key(c) for c in parallel.score_candidates(texts, batch_size=3)] == [
            key(c) for c in inline.score_candidates(texts, batch_size=3)]
    with pytest.raises(TypeError):  # bad input fails the call, as in the calling thread
        parallel.correct_batch(["好", None])
    with pytest.raises(ValueError, match="workers"):
        Corrector(trained.bundle, confusion=trained.confusion, config=CorrectorConfig(workers=0))


def test_parallel_corrector_works_in_a_forked_child(trained):
    """A child forked after the pool started (multiprocessing, gunicorn --preload) has none of
    the parent's pool threads; it must start its own instead of waiting on them forever."""
    import multiprocessing

    parallel = Corrector(trained.bundle, confusion=trained.confusion, config=CorrectorConfig(workers=2))
    texts = [WRONG, RIGHT, MIXED, "少先队员因该为老人让坐。"] * 2
    expected = [r.target for r in parallel.correct_batch(texts)]  # the parent's pool is running
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=lambda: queue.put([r.target for r in parallel.correct_batch(texts)]))
    child.start()
    try:
        assert queue.get(timeout=120) == expected
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def test_batch_pool_threads_have_their_own_torch_thread_count():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        pool = batch_pool(3, 1)  # a pool no other test uses: started here, with the default at 2
        assert set(pool.map(lambda _: torch.get_num_threads(), range(12))) == {1}
        assert torch.get_num_threads() == 2  # the caller's setting ...
        seen = []
        thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        thread.start()
        thread.join()
        assert seen == [2]  # ... and the default of threads started later are untouched
        assert batch_pool(3, 1) is pool  # one pool per shape, shared by every Corrector
    finally:
        torch.set_num_threads(before)


def test_int8_and_bf16_networks_give_the_fp32_corrections(trained_model_dir, trained):
    exact = Corrector(str(trained_model_dir), quantize=False, confusion=trained.confusion)
    bf16 = Corrector(exact.bundle, bf16=True, confusion=trained.confusion)
    assert bf16.bundle.bf16 and not exact.bundle.bf16  # a copy; the shared bundle is untouched
    assert (exact.precision, trained.precision, bf16.precision) == ("fp32", "int8", "bf16")
    texts = [WRONG, MIXED, RIGHT, "今天天气很好"]
    reference = exact.correct_batch(texts)
    for other in (trained, bf16):
        rounded = other.correct_batch(texts)
        assert [r.target for r in rounded] == [r.target for r in reference]
        for a, b in zip(reference, rounded, strict=True):
            assert [e.position for e in a.edits] == [e.position for e in b.edits]
            assert all(abs(x.confidence - y.confidence) < 0.05 for x, y in zip(a.edits, b.edits, strict=True))


def test_thread_safety(trained, wild):
    texts = [WRONG, MIXED, NASTY, RIGHT, "少先队员因该为老人让坐。" * 5] * 3
    expected = {id(c): [r.to_dict() for r in c.correct_batch(texts)] for c in (trained, wild)}

    def work(args):
        corrector, i = args
        return id(corrector), i, corrector.correct(texts[i]).to_dict()

    jobs = [(c, i) for c in (trained, wild) for i in range(len(texts))] * 2
    with ThreadPoolExecutor(max_workers=6) as pool:
        for key, i, got in pool.map(work, jobs):
            assert got == expected[key][i]


def test_proper_nouns_are_protected(tiny_model_dir, wild, confusion):
    text = "张三和李四在上海工作，王小明去了北京大学。"
    nouns = proper_noun_offsets(text)
    assert {text.index("上"), text.index("海"), text.index("北"), text.index("学")} <= nouns
    assert text.index("工") not in nouns and text.index("在") not in nouns
    assert proper_noun_offsets("坤难") == set()  # no HMM: a typo is not a place name

    scored = wild.score_candidates([text])
    flags = {c.position: c.features["proper_noun"] for c in scored}
    assert flags[text.index("海")] == 1.0 and flags[text.index("工")] == 0.0
    # The default weight makes an edit inside a name less confident than the same evidence elsewhere.
    assert wild.scorer.weights["proper_noun"] < 0

    veto = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.0, confusion=confusion,
                     config=CorrectorConfig(veto_proper_nouns=True, max_edits_per_sentence=10_000, passes=1))
    edited = {e.position for e in veto.correct(text).edits}
    assert edited and not edited & nouns


def test_rejects_non_strings(wild):
    with pytest.raises(TypeError):
        wild.correct_batch(["好", None])


def count_encoder_passes(bundle, monkeypatch) -> dict[str, list]:
    """The input ids of every encoder pass of the bundle's (ONNX Runtime) networks, by network."""
    seen: dict[str, list] = {"discriminator": [], "generator": []}
    for name, passes in seen.items():
        network = getattr(bundle, name)
        encode = network.encode

        def counted(input_ids, *args, encode=encode, passes=passes, **kwargs):
            passes.append(np.array(input_ids))
            return encode(input_ids, *args, **kwargs)

        monkeypatch.setattr(network, "encode", counted)
    return seen


def test_one_generator_pass_per_batch(wild, monkeypatch):
    seen = count_encoder_passes(wild.bundle, monkeypatch)
    results = wild.correct_batch([MIXED, NASTY, WRONG, RIGHT], batch_size=32)
    monkeypatch.undo()
    calls = {name: len(passes) for name, passes in seen.items()}
    assert sum(len(r.edits) for r in results) > 10  # many flagged positions ...
    assert calls == {"discriminator": 1, "generator": 1}  # ... one detection pass, one generator pass


def test_source_input_reads_the_sentence_as_written(trained):
    """mask=False: the log-probs of one unmasked pass, taken at the flagged positions only."""
    from corrector.runtime.passes import generator_log_probs, make_batch

    bundle = trained.bundle
    texts = [WRONG, RIGHT[:5]]
    batch = make_batch([bundle.tokenizer.encode(t).ids for t in texts], bundle)
    rows, index = np.array([0, 0, 1]), np.array([2, 5, 1])
    got = generator_log_probs(bundle, batch, rows, index, mask=False)
    network = bundle.generator_network()  # the whole head at every position of the unmasked batch
    hidden = network.encode(batch.input_ids, batch.attention_mask)
    every_row, every_column = np.indices(batch.input_ids.shape).reshape(2, -1)
    full = network.logits(network.states(hidden, every_row, every_column)).reshape(*batch.input_ids.shape, -1)
    full = full - np.log(np.exp(full - full.max(-1, keepdims=True)).sum(-1, keepdims=True)) - full.max(-1, keepdims=True)
    assert np.allclose(got, full[rows, index + 1], atol=1e-4)
    assert not np.allclose(got, generator_log_probs(bundle, batch, rows, index), atol=1e-3)


def test_generator_input_comes_from_calibration_then_fine_tuning(trained, monkeypatch):
    bundle = dataclasses.replace(trained.bundle, scorer_config={})
    monkeypatch.delattr(bundle.generator.config, "csc_generator_input", raising=False)
    assert bundle.generator_input == "masked"  # a pre-trained generator
    monkeypatch.setattr(bundle.generator.config, "csc_generator_input", "source", raising=False)
    assert bundle.generator_input == "source"  # what fine-tuning trained it for
    assert dataclasses.replace(bundle, scorer_config={"generator_input": "masked"}).generator_input == "masked"
    assert Corrector(bundle, config=CorrectorConfig(generator_input="masked")).generator_input == "masked"
    with pytest.raises(ValueError, match="generator input 'sideways'"):
        Corrector(bundle, config=CorrectorConfig(generator_input="sideways"))


def test_source_input_is_one_unmasked_generator_pass_per_batch(tiny_model_dir, confusion, monkeypatch):
    config = CorrectorConfig(max_edits_per_sentence=10_000, generator_input="source", passes=1)
    corrector = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.0, confusion=confusion,
                          config=config)
    seen = count_encoder_passes(corrector.bundle, monkeypatch)["generator"]
    results = corrector.correct_batch([MIXED, WRONG, RIGHT], batch_size=32)
    monkeypatch.undo()
    assert sum(len(r.edits) for r in results) > 10
    assert len(seen) == 1  # one pass ...
    assert not (seen[0] == corrector.bundle.tokenizer.mask_token_id).any()  # ... over the text as written


def test_generator_flags_examine_characters_the_discriminator_leaves(tiny_model_dir, confusion):
    # The discriminator's threshold out of reach: only the generator's confusion margin flags.
    texts = [WRONG, MIXED, RIGHT]

    def corrector(margin):
        return Corrector(str(tiny_model_dir), detection_threshold=1.0, confusion=confusion,
                         scorer={"generator_flag_margin": margin}, config=CorrectorConfig(generator_input="source"))

    def examined(margin):
        return {(c.text_index, c.position) for c in corrector(margin).score_candidates(texts)}

    everything, some, nothing = examined(-1e9), examined(0.0), examined(1e9)
    assert examined(None) == set() and nothing == set()
    assert some <= everything
    # At -inf every character whose confusion set the vocabulary holds (the tiny one lacks many).
    sets = corrector(None).vocab_confusion
    assert everything == {(t, i) for t, text in enumerate(texts) for i, ch in enumerate(text)
                          if is_cjk(ch) and len(sets(ch)[0])}
    assert len(everything) > 10
    # A masked-input generator never flags: it reads the flagged positions masked, so a margin
    # over the written text would be read from a pass the corrector does not make.
    masked = Corrector(str(tiny_model_dir), detection_threshold=1.0, confusion=confusion,
                       scorer={"generator_flag_margin": -1e9}, config=CorrectorConfig(generator_input="masked"))
    assert masked.score_candidates([WRONG]) == []


def test_confusion_margins_equal_the_full_heads_logits(tiny_model_dir, confusion):
    from corrector.candidates import VocabConfusion
    from corrector.runtime.models import quantized
    from corrector.runtime.passes import GeneratorPass, make_batch, output_layer

    bundle = load_model(str(tiny_model_dir))
    ids = bundle.tokenizer.encode(WRONG).ids
    batch = make_batch([ids], bundle)
    rows, index = np.zeros(len(ids), dtype=np.int64), np.arange(len(ids))
    written = np.array(ids)
    vocab_confusion = VocabConfusion(confusion, bundle)
    sets = [vocab_confusion(ch)[0] for ch in WRONG]
    sets[3] = sets[3][:0]  # a character without a confusion set is never flagged
    margins = GeneratorPass(bundle, batch.input_ids, batch.attention_mask).confusion_margins(
        rows, index, written, sets, output_layer(bundle))
    with torch.no_grad():
        logits = bundle.generator(input_ids=torch.from_numpy(batch.input_ids),
                                  attention_mask=torch.from_numpy(batch.attention_mask)).logits[0, 1:-1].numpy()
    expected = np.array([logits[i, s].max() - logits[i, ids[i]] if len(s) else -np.inf for i, s in enumerate(sets)])
    assert np.allclose(margins, expected, atol=1e-4)
    # An int8 head's rows are read dequantized: within half a quantization step of the weights
    # (the torch int8 head and the ONNX network's numpy one alike).
    weight = bundle.generator.generator_lm_head.weight.detach().numpy()
    step = np.abs(weight).max(axis=1, keepdims=True) / 127
    for runtime in ("torch", "onnxruntime"):
        dequantized = output_layer(quantized(bundle, runtime)).weight
        assert (np.abs(dequantized - weight) <= step / 2 + 1e-7).all()


def test_generator_flag_scores_add_the_lm_evidence_above_the_floor(tiny_model_dir, confusion):
    """Flag score = margin + weight x the n-gram LM's best gain over the confusion set, read only
    where the margin clears FLAG_LM_FLOOR (-inf elsewhere); weight 0 keeps the margin alone."""
    import numpy as np

    from corrector.detection import FLAG_LM_FLOOR
    from corrector.resources.ngram import NgramLM

    lm = NgramLM.count([RIGHT, "我们应该让座。", "老人应该坐下。"] * 3, order=3, min_count=1, min_char_count=1)
    bundle = dataclasses.replace(load_model(str(tiny_model_dir)), ngram=lm)
    scorer = {"generator_flag_margin": 0.0, "generator_flag_lm_weight": 0.5}
    corrector = Corrector(bundle, detection_threshold=1.0, confusion=confusion, scorer=scorer,
                          config=CorrectorConfig(generator_input="source"))
    assert corrector.scorer.generator_flag_lm_weight == 0.5
    assert Scorer.from_config(corrector.scorer.to_config()).generator_flag_lm_weight == 0.5
    assert "generator_flag_lm_weight" not in Scorer(generator_flag_margin=0.0).to_config()  # old files stay as they were

    group = corrector._items([WRONG])
    item = group[0]
    index = [i for i, editable in enumerate(item.editable) if editable]
    rows_t, index_t = np.zeros(len(index), dtype=np.int64), np.array(index)
    sets = [corrector.vocab_confusion(WRONG[item.offsets[i]])[0] for i in index]
    margins = np.linspace(FLAG_LM_FLOOR - 2, 2.0, len(index), dtype=np.float32)
    scores = corrector.detector.with_lm_evidence([WRONG], group, rows_t, index_t, sets, margins, 0.5)
    for n, i in enumerate(index):
        if margins[n] <= FLAG_LM_FLOOR or len(sets[n]) == 0:
            assert scores[n] == float("-inf")
            continue
        site = (WRONG, item.offsets[i])
        gains = lm.site_gains([site], np.zeros(len(sets[n]), dtype=np.int64), corrector.vocab_to_lm[sets[n]])
        assert scores[n] == pytest.approx(float(margins[n]) + 0.5 * float(gains.max()), abs=1e-4)
    assert np.isfinite(scores).sum() > 2
    # In the corrector: exactly the characters whose score clears the margin are examined.
    from corrector.runtime.passes import GeneratorPass, make_batch, output_layer

    batch = make_batch([item.ids], corrector.bundle)
    written = batch.input_ids[rows_t, index_t + 1]
    true_margins = GeneratorPass(corrector.bundle, batch.input_ids, batch.attention_mask).confusion_margins(
        rows_t, index_t, written, sets, output_layer(corrector.bundle))
    flag_scores = corrector.detector.with_lm_evidence([WRONG], group, rows_t, index_t, sets, true_margins, 0.5)
    expected = {item.offsets[i] for n, i in enumerate(index) if flag_scores[n] > 0.0}
    assert 0 < len(expected) < int((true_margins > 0.0).sum())  # the LM's evidence moved the flags
    assert {c.position for c in corrector.score_candidates([WRONG])} == expected


# ---- the second pass ---------------------------------------------------------------------------


def test_second_pass_examines_its_offsets_whether_flagged_or_not(tiny_model_dir, confusion, monkeypatch):
    import corrector.detection as detection

    config = CorrectorConfig(max_edits_per_sentence=10_000, passes=1)
    corrector = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.5, confusion=confusion,
                          config=config)
    # A discriminator that flags nothing, and no other flag rule (the default scorer has none).
    monkeypatch.setattr(detection, "detect", lambda bundle, batch: np.zeros((batch.input_ids.shape[0],
                                                                             batch.input_ids.shape[1] - 2)))
    text = "今天天气很好，我们一起去公园散步。"
    assert corrector._correct_once([text], None, 0.0)[0].edits == []  # the first pass examines nothing
    second = corrector._correct_once([text], None, 0.0, examine=[{3, 4}])[0]
    assert {e.position for e in second.edits} == {3, 4}  # every offset examined, best candidate accepted


def test_second_pass_reads_the_whole_edited_sentence_and_no_other(tiny_model_dir, confusion, monkeypatch):
    """The second pass corrects the sentences the first pass edited as corrected, flags computed
    afresh: an error far from the first pass's edit that only the corrected sentence flags is
    fixed too; a document's other sentences it leaves alone (they keep the first pass's threshold)."""
    import corrector.detection as detection

    text = "今天天气很好，我们一起去公园散步。明天也去公园。"
    config = CorrectorConfig(max_edits_per_sentence=10_000, passes=2)
    corrector = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.5, confusion=confusion,
                          config=config)
    first_char = corrector.bundle.tokenizer.encode(text).ids[0]

    def detect(bundle, batch):  # as written: 今 flagged; once 今 is corrected: 散 (14) and 也 (19)
        probs = np.zeros((batch.input_ids.shape[0], batch.input_ids.shape[1] - 2))
        for row in range(len(probs)):
            probs[row, [0] if int(batch.input_ids[row, 1]) == first_char else [14, 19]] = 1.0
        return probs

    monkeypatch.setattr(detection, "detect", detect)
    edited = {e.position for e in corrector.correct(text).edits}
    # 14 is far from the first pass's edit at 0 and its neighbours (examined, so at threshold 0
    # they may change too); the second sentence had no first-pass edit.
    assert 14 in edited and 19 not in edited


def test_a_third_pass_reads_only_the_texts_the_second_changed(tiny_model_dir, confusion, monkeypatch):
    import corrector.detection as detection

    long, short = "今天天气很好，我们一起去公园散步。明天也去公园。", "今天很好。"
    corrector = Corrector(str(tiny_model_dir), threshold=0.0, detection_threshold=0.5, confusion=confusion,
                          config=CorrectorConfig(max_edits_per_sentence=10_000, passes=3))
    first_char = corrector.bundle.tokenizer.encode(long).ids[0]

    def detect(bundle, batch):  # as written: 今 flagged; once 今 is corrected: 散 (14), which only `long` has
        probs = np.zeros((batch.input_ids.shape[0], batch.input_ids.shape[1] - 2))
        for row in range(len(probs)):
            probs[row, [0] if int(batch.input_ids[row, 1]) == first_char else [14]] = 1.0
        return probs

    monkeypatch.setattr(detection, "detect", detect)
    calls = []
    once = corrector._correct_once

    def spy(texts, *args, **kwargs):
        results = once(texts, *args, **kwargs)
        calls.append((list(texts), results))
        return results

    monkeypatch.setattr(corrector, "_correct_once", spy)
    results = corrector.correct_batch([long, short])
    assert len(calls) == 3 and len(calls[1][0]) == 2  # both texts edited by the first pass
    assert 0 < len(calls[2][0]) and calls[2][0] == [r.target for r in calls[1][1] if r.edits]  # the second's changes
    assert any(text[14] != long[14] for text in calls[2][0])  # 散, flagged once 今 was corrected
    assert 14 in {e.position for e in results[0].edits}
    corrector.config = dataclasses.replace(corrector.config, passes=2)
    calls.clear()
    corrector.correct_batch([long, short])
    assert len(calls) == 2  # two passes: no third


def test_a_documents_other_sentences_keep_what_the_first_pass_made_of_them(shipped_corrector):
    """The second pass's lower threshold stays in the sentences the first pass edited: one typo
    must not lower it for a document's unrelated sentences (over the whole text the shipped
    model changed 绩分战 -> 积分战 below, at 0.65)."""
    head = "少先队员因该为老人让坐。"
    text = head + "对战模式可选择单人对战，还多出了绩分战、时间战等模式。"
    result = shipped_corrector.correct(text)
    assert result.target.startswith("少先队员应该")
    assert result.target[len(head):] == shipped_corrector.with_passes(1).correct(text).target[len(head):]


def test_second_pass_accepts_from_its_share_of_the_edit_threshold(trained, monkeypatch):
    scorer = {**trained.scorer.to_config(), "second_pass_threshold_factor": 0.5}
    assert Scorer.from_config(Scorer.from_config(scorer).to_config()).second_pass_threshold_factor == 0.5
    corrector = Corrector(trained.bundle, scorer=scorer, confusion=trained.confusion)
    thresholds = []
    once = corrector._correct_once

    def spy(texts, batch_size, threshold, **kwargs):
        thresholds.append(threshold)
        return once(texts, batch_size, threshold, **kwargs)

    monkeypatch.setattr(corrector, "_correct_once", spy)
    assert corrector.correct("少先队员因该为老人让坐。", threshold=0.6).edits
    assert thresholds == [0.6, 0.3]  # the call's threshold, then half of it for the second pass
    assert Scorer().second_pass_threshold(0.6) == 0.6  # without a factor: the edit threshold


def test_two_passes_merge_into_edits_of_the_original_text(trained):
    from corrector.result import Edit

    rules = (trained.confusion.relation, trained.config.max_edits_per_sentence)

    def merge(text, first, second):
        return merge_passes(text, first, second, *rules, sentence_units(text, 128))

    # The second pass writes one first-pass edit back and fixes its neighbour.
    merged = merge("我也方再这样。", [Edit(3, "再", "在", 0.8, "pinyin")],
                   [Edit(2, "方", "放", 0.9, "pinyin"), Edit(3, "在", "再", 0.7, "pinyin")])
    assert merged.target == "我也放再这样。"
    assert [(e.position, e.source, e.target) for e in merged.edits] == [(2, "方", "放")]
    # A character changed twice: the original as source, the second pass's target and confidence.
    merged = merge("上次我作了车", [Edit(3, "作", "做", 0.5, "pinyin")], [Edit(3, "做", "坐", 0.8, "pinyin")])
    assert [(e.position, e.source, e.target, e.confidence) for e in merged.edits] == [(3, "作", "坐", 0.8)]
    # The max-edits guard counts both passes' edits.
    first = [Edit(k, ch, "应", 0.9 - k / 100, "other") for k, ch in enumerate("今天天气")]
    merged = merge("今天天气很好", first, [Edit(4, "很", "狠", 0.99, "pinyin")])
    assert len(merged.edits) == trained.config.max_edits_per_sentence == 4
    assert 4 in {e.position for e in merged.edits}  # the most confident ones stay
    # ... per sentence as the first pass counted them: a text without sentence punctuation is
    # one per chunk, not one for the whole text (it kept 4 edits of 400 characters).
    text = "我们因该" * 100
    first = [Edit(k, "因", "应", 0.9, "pinyin") for k in range(2, len(text), 4)]
    merged = merge(text, first, [])
    units = sentence_units(text, 128)
    assert len(merged.edits) == 4 * len(units) > 4


def test_a_batch_call_takes_any_iterable_of_texts_and_refuses_one_str(trained):
    texts = ["今天天气很好", "我们一起去公园"]
    expected = [r.target for r in trained.correct_batch(texts)]
    assert [r.target for r in trained.correct_batch(t for t in texts)] == expected  # was: not subscriptable
    assert [r.target for r in trained.correct_batch(tuple(texts))] == expected
    assert len(trained.score_candidates(iter(texts))) == len(trained.score_candidates(texts))
    with pytest.raises(TypeError, match="one str"):  # was: one result per character
        trained.correct_batch("今天天气很好")


def test_thresholds_outside_zero_to_one_are_refused(trained, trained_model_dir):
    # nan compares false with everything: as an edit threshold it accepted every candidate.
    for bad in (float("nan"), -1.0, 1.5):
        with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\]"):
            trained.correct("今天天气很好", threshold=bad)
        with pytest.raises(ValueError, match="detection_threshold"):
            trained.score_candidates(["今天天气很好"], detection_threshold=bad)
    with pytest.raises(ValueError, match="threshold"):
        Corrector(str(trained_model_dir), threshold=float("nan"))
    assert trained.correct("今天天气很好", threshold=1).target == "今天天气很好"


def test_second_pass_runs_only_on_texts_with_edits(trained, monkeypatch):
    calls = []
    once = trained._correct_once

    def spy(texts, *args, **kwargs):
        calls.append((list(texts), kwargs.get("examine") if len(args) < 3 else args[2]))
        return once(texts, *args, **kwargs)

    monkeypatch.setattr(trained, "_correct_once", spy)
    texts = ["今天天气很好。", "少先队员因该为老人让坐。"]
    results = trained.correct_batch(texts)
    assert [r.target for r in results] == ["今天天气很好。", "少先队员应该为老人让座。"]
    assert trained.config.passes == 3  # the library default
    assert len(calls) == 2 and calls[1][0] == ["少先队员应该为老人让座。"]
    edited = {e.position for e in results[1].edits}
    assert calls[1][1] == [{p + d for p in edited for d in (-1, 0, 1)}]
    with pytest.raises(ValueError, match="passes"):
        Corrector(trained.bundle, config=CorrectorConfig(passes=4))
    # One pass on a copy that shares the networks and scorer; the corrector itself keeps three.
    single = trained.with_passes(1)
    calls.clear()
    assert [r.target for r in single.correct_batch(texts)] == [r.target for r in results]  # here one pass suffices
    assert len(calls) == 1 and single.config.passes == 1 and trained.config.passes == 3
    assert single.bundle is trained.bundle and single.scorer is trained.scorer
    with pytest.raises(ValueError, match="passes"):
        trained.with_passes(0)


def test_top_columns_are_each_rows_largest_values_in_order():
    """The generator's top characters: the sampled bound must never drop one of them; equal
    values come in column order; -inf columns (not characters) only where nothing else is left."""
    rng = np.random.default_rng(0)
    values = (rng.normal(size=(30, 6884)) * 3).astype(np.float32)
    values[:, ::7] = -np.inf
    values[0, :500] = 1.0  # ties above the rest
    values[1, 8::8] = 50.0 + np.arange(860)  # the largest values on the sampled columns only
    values[2, 1::8] = 50.0 + np.arange(861)  # ... and never on them
    for top in (1, 6, 11):
        want = np.argsort(-values, axis=1, kind="stable")[:, :top]
        assert np.array_equal(top_columns(values, top), want)
    tiny = np.array([[0.0, 2.0, -np.inf, 2.0]], dtype=np.float32)
    assert top_columns(tiny, 3).tolist() == [[1, 3, 0]]
    assert top_columns(np.zeros((0, 6884), np.float32), 6).shape == (0, 6)
