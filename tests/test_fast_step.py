"""The step that keeps a GPU busy (#67), checked on the CPU with tiny models: full pre-training
rows, bucketed fine-tuning widths, a step equal to the one before it, fixed shapes that trace
without graph breaks, SDPA attention, time-based checkpoints that resume exactly, and MFU."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from corrector.pretrain.modeling import PRESETS, build_pair, set_attention
from corrector.pretrain.train import PretrainConfig, ReplacedTokenDetection, mask_budget, train
from corrector.training import StatsWindow, latest_checkpoint, make_optimizer, optimizer_step

CLS, SEP, PAD, MASK = 2, 3, 0, 4
TEXT = "\n".join(["少先队员应该为老人让座。我们一起去公园散步！今天天气很好。",
                  "他的作业做得很认真。北京是中国的首都；上海是一座大城市。"] * 30)


def tiny_rtd(static: bool = False, vocab: int = 100) -> ReplacedTokenDetection:
    torch.manual_seed(0)
    discriminator, generator = build_pair(PRESETS["tiny"], vocab_size=vocab)
    set_attention((discriminator, generator), "cpu", False)
    return ReplacedTokenDetection(discriminator, generator, PretrainConfig(), [CLS, SEP, PAD], MASK, static_shapes=static)


def full_rows(batch: int = 4, length: int = 16, vocab: int = 100) -> torch.Tensor:
    ids = torch.randint(5, vocab, (batch, length), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[:, -1] = CLS, SEP
    return ids


# --- fixed shapes --------------------------------------------------------------------------


def test_full_rows_have_no_padding_and_rebuild_the_token_stream(tmp_path: Path):
    from transformers import AutoTokenizer

    from corrector.pretrain.corpus import build_token_cache, pack_full_rows
    from corrector.pretrain.vocab import build_vocab, count_characters, write_tokenizer
    from corrector.text.tokenization import CharTokenizer

    (tmp_path / "corpus.txt").write_text(TEXT, encoding="utf-8")
    write_tokenizer(build_vocab(count_characters(TEXT.splitlines()), min_count=1), tmp_path / "vocab")
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(str(tmp_path / "vocab")))
    sentences = np.asarray(build_token_cache([tmp_path / "corpus.txt"], tokenizer, tmp_path / "cache", 32, log=lambda *_: None))
    assert (sentences == tokenizer.pad_token_id).any(), "sentence-packed rows are padded"
    rows = pack_full_rows(sentences, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
    assert rows.shape[1] == 32 and rows.dtype == sentences.dtype
    assert not (rows == tokenizer.pad_token_id).any()
    assert (rows[:, 0] == tokenizer.cls_token_id).all() and (rows[:, -1] == tokenizer.sep_token_id).all()
    special = (sentences == tokenizer.cls_token_id) | (sentences == tokenizer.sep_token_id) | (sentences == tokenizer.pad_token_id)
    stream = sentences[~special]
    assert len(rows) == len(stream) // 30  # every full row, the partial last one left out
    assert np.array_equal(rows[:, 1:-1].reshape(-1), stream[: len(rows) * 30])
    expected = "".join(line for line in TEXT.splitlines())
    assert "".join(tokenizer.token(i) for i in rows[0, 1:-1]) == expected[:30]
    with pytest.raises(ValueError, match="do not fill one row"):
        pack_full_rows(sentences[:1], tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, 128)


def test_bucketed_lengths_map_to_the_fixed_widths():
    from corrector.finetune.train import BatchMaker, bucket_widths

    assert bucket_widths([32, 64, 96, 128], 128) == [32, 64, 96, 128]
    assert bucket_widths([32, 64, 96, 128], 100) == [32, 64, 96, 100]  # cut to --max-length, which is always one
    assert bucket_widths([0], 128) == []
    sources = [[CLS] + [7] * n + [SEP] for n in (3, 30, 31, 62, 94, 126)]
    maker = BatchMaker(sources, sources, PAD, bucket_widths([32, 64, 96, 128], 128))
    widths = {len(sources[i]): maker(np.array([i]))[0].shape[1] for i in range(len(sources))}
    assert widths == {5: 32, 32: 32, 33: 64, 64: 64, 96: 96, 128: 128}
    source, target, mask = maker(np.array([0, 2]))
    assert source.shape == target.shape == mask.shape == (2, 64)
    assert mask.sum().item() == 5 + 33 and (source[mask == 0] == PAD).all()
    unbucketed = BatchMaker(sources, sources, PAD, [])
    assert unbucketed(np.array([0, 2]))[0].shape == (2, 33)  # off: the longest sentence


def test_static_step_traces_without_graph_breaks():
    """What torch.compile and CUDA graphs need: one graph, no value read back to the host."""
    from corrector.finetune.train import CorrectionModel, FinetuneConfig

    rtd = tiny_rtd(static=True)
    explained = torch._dynamo.explain(rtd)(full_rows(), None)
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
    correction = CorrectionModel(rtd.discriminator, rtd.generator, FinetuneConfig(), [CLS, SEP, PAD], MASK,
                                 static_shapes=True)
    source = full_rows()
    target = source.clone()
    target[0, 3] = 9
    mask = torch.ones_like(source)
    mask[1, 10:] = 0
    explained = torch._dynamo.explain(correction)(source, target, mask)
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]


def test_mask_budget_covers_the_count_of_masked_positions():
    assert mask_budget(32768, 0.15) == 5305  # 4,915 expected + 6 standard deviations
    assert mask_budget(10, 0.15) <= 10
    ids = full_rows(64, 128)
    rtd = tiny_rtd(static=True)
    from corrector.pretrain.train import mask_positions

    _, chosen = mask_positions(ids, rtd.special_ids, rtd.cfg, MASK, budget=5)
    assert chosen.sum() == 5 and chosen.reshape(-1).nonzero()[-1] < 200  # the first five in row-major order


# --- the same step as before ---------------------------------------------------------------


def old_step_loss(rtd: ReplacedTokenDetection, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """ReplacedTokenDetection.forward as it was before #67 (commit cf36485), condensed: boolean
    indexing, the mask checked on the host, one softmax block (fewer than 128 masked rows)."""
    cfg, generator = rtd.cfg, rtd.generator
    candidates = ~torch.isin(input_ids, torch.tensor([CLS, SEP, PAD]))
    chosen = (torch.rand(input_ids.shape) < cfg.mask_prob) & candidates
    use_mask_token = chosen & (torch.rand(input_ids.shape) < cfg.mask_token_prob)
    masked = input_ids.masked_fill(use_mask_token, MASK)
    targets = input_ids[chosen]
    model_mask = None if bool(attention_mask.all()) else attention_mask
    hidden = generator.electra(input_ids=masked, attention_mask=model_mask).last_hidden_state
    logits = generator.generator_lm_head(generator.generator_predictions(hidden[chosen]))
    mlm_loss = F.cross_entropy(logits.float(), targets)
    probs = torch.softmax(logits.detach(), dim=-1, dtype=torch.float32)
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.shape[0], 1, dtype=cdf.dtype) * cdf[:, -1:]
    sampled = torch.searchsorted(cdf, u, right=True).clamp_(max=probs.shape[-1] - 1).squeeze(-1)
    corrupted = input_ids.clone()
    corrupted[chosen] = sampled
    labels = (corrupted != input_ids).float()
    disc_logits = rtd.discriminator(input_ids=corrupted, attention_mask=model_mask).logits
    active = attention_mask.bool()
    return mlm_loss + cfg.disc_weight * F.binary_cross_entropy_with_logits(disc_logits[active].float(), labels[active])


@pytest.mark.parametrize("static", [False, True])
def test_step_without_compile_equals_the_old_step_on_a_fixed_seed(static: bool):
    ids = full_rows()
    old, new = tiny_rtd(), tiny_rtd(static=static)
    torch.manual_seed(7)
    expected = old_step_loss(old, ids, torch.ones_like(ids))
    expected.backward()
    torch.manual_seed(7)
    loss, stats = new(ids, None)
    loss.backward()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    assert float(stats["tokens"]) == ids.numel()
    for (name, a), b in zip(old.named_parameters(), new.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-5), name


def test_loss_trajectory_equals_the_old_loop_for_a_few_steps():
    """Three optimizer steps of the shared `optimizer_step` against the old loop's own lines."""
    ids = full_rows()
    old, new = tiny_rtd(), tiny_rtd()
    old_opt, new_opt = make_optimizer(old, 1e-3, 0.01), make_optimizer(new, 1e-3, 0.01)
    torch.manual_seed(3)
    old_losses = []
    for _ in range(3):
        loss = old_step_loss(old, ids, torch.ones_like(ids))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(old.parameters(), 1.0)
        old_opt.step()
        old_opt.zero_grad(set_to_none=True)
        old_losses.append(loss.item())
    torch.manual_seed(3)
    window, new_losses = StatsWindow(), []
    for _ in range(3):
        optimizer_step(new, new_opt, None, lambda: (ids, None), window, 1, 1.0)
        means, tokens = window.read()
        new_losses.append(means["mlm_loss"] + PretrainConfig().disc_weight * means["disc_loss"])
        assert tokens == ids.numel()
    assert new_losses == pytest.approx(old_losses, abs=1e-4)


def test_compiled_step_equals_the_eager_one():
    """torch.compile's graphs (AOTAutograd's forward and backward, run by the eager backend: the
    inductor backend compiles the same graphs, in ~40 s on two cores) give the eager loss and
    gradients."""
    eager, compiled = tiny_rtd(static=True), tiny_rtd(static=True)
    graph = torch.compile(compiled, backend="aot_eager", dynamic=False)
    ids = full_rows()
    torch.manual_seed(5)
    expected, _ = eager(ids, None)
    expected.backward()
    torch.manual_seed(5)
    loss, _ = graph(ids, None)
    loss.backward()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    for a, b in zip(eager.parameters(), compiled.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-5)


def test_sdpa_attention_equals_the_eager_attention():
    """SDPA (the GPU's kernel and fp32 CPU's) and HF's matmul attention (bf16 CPU's) give the same
    hidden states, with and without padding, in the same saved layout."""
    discriminator, _ = build_pair(PRESETS["tiny"], vocab_size=100)
    discriminator.eval()
    ids = full_rows()
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    outputs = {}
    for kind in ("eager", "sdpa"):
        discriminator.config._attn_implementation = kind
        with torch.no_grad():
            outputs[kind] = [discriminator.electra(input_ids=ids, attention_mask=m).last_hidden_state for m in (None, mask)]
    for eager, sdpa in zip(outputs["eager"], outputs["sdpa"], strict=True):
        assert torch.allclose(eager, sdpa, atol=1e-5)


# --- time-based checkpoints ----------------------------------------------------------------


def tiny_config(corpus: Path, output: Path, **overrides) -> PretrainConfig:
    values = dict(corpus=[str(corpus)], output=str(output), preset="tiny", max_length=32, batch_size=4, lr=2e-3,
                  warmup_steps=2, max_steps=8, save_every=1000, log_every=1, min_count=1, cpu=True, seed=3)
    values.update(overrides)
    return PretrainConfig(**values)


def test_time_based_checkpoint_then_resume_continues_the_same_trajectory(tmp_path: Path, monkeypatch):
    import corrector.training as training

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    train(tiny_config(corpus, tmp_path / "straight"))
    straight = [json.loads(line) for line in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]

    real_step, calls = training.optimizer_step, []

    def killed_at_the_sixth_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt  # the lease's call ends mid-step
        return real_step(*args, **kwargs)

    monkeypatch.setattr(training, "optimizer_step", killed_at_the_sixth_step)
    with pytest.raises(KeyboardInterrupt):  # a checkpoint every 0 s: after each step
        train(tiny_config(corpus, tmp_path / "resumed", checkpoint_every_s=0.0))
    monkeypatch.setattr(training, "optimizer_step", real_step)
    checkpoint = latest_checkpoint(tmp_path / "resumed")
    assert checkpoint is not None and checkpoint.name == "step-00000005"
    state = torch.load(checkpoint / "state.pt", weights_only=False)
    assert state["extra"]["position"] == 5 and state["scheduler"]["last_epoch"] == 5 and state["optimizer"]["state"]
    train(tiny_config(corpus, tmp_path / "resumed", resume=True))
    resumed = [json.loads(line) for line in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resumed] == list(range(1, 9))
    for a, b in zip(straight, resumed, strict=True):
        for key in ("mlm_loss", "disc_loss", "lr", "grad_norm", "epoch"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-7), (a["step"], key)


# --- FLOPs and MFU -------------------------------------------------------------------------


def test_mfu_formula_on_a_known_config():
    """6 x weights x tokens + 12 x layers x hidden x seq^2 a sequence, and the vocabulary head at
    the masked share, worked by hand for a small pair; MFU against a given peak."""
    from corrector.pretrain.flops import electra_step_flops, finetune_flops_per_token, mfu

    layer = SimpleNamespace(hidden_size=64, intermediate_size=256, embedding_size=64, num_hidden_layers=2, vocab_size=1000)
    weights = 2 * (4 * 64 * 64 + 2 * 64 * 256)  # the four attention projections and the FFN, 2 layers: 65,536
    batch, seq = 8, 32
    tokens = batch * seq
    dense = 6 * weights * tokens * 2  # generator and discriminator encoders, same shape
    attention = 2 * 12 * 2 * 64 * seq**2 * batch
    head = 6 * 0.15 * tokens * (64 * 64 + 64 * 1000)  # generator head + vocabulary at the masked 15 %
    discriminator_head = 6 * tokens * (64 * 64 + 64)
    expected = dense + attention + head + discriminator_head
    assert electra_step_flops(layer, layer, batch, seq, 0.15) == pytest.approx(expected)
    assert finetune_flops_per_token(layer, layer, seq) == pytest.approx(
        (dense + attention + discriminator_head) / tokens + 6 * (64 * 64 + 64 * 1000))
    # 1 GFLOP a token at 100 k tokens/s is 100 TFLOP/s: 10.1 % of an H200's 989.
    assert mfu(1e9, 1e5, 989.0) == pytest.approx(100 / 989)
    assert mfu(1e9, 1e5, None) is None


def test_training_logs_tokens_per_second_and_mfu(tmp_path: Path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    train(tiny_config(corpus, tmp_path / "run", max_steps=2, peak_tflops=0.001))
    record = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["tokens_per_s"] > 0 and record["tflops"] > 0
    assert record["mfu"] == pytest.approx(record["tflops"] / 0.001)


def test_stats_window_averages_on_the_device_and_sums_tokens():
    window = StatsWindow()
    for loss, tokens in ((1.0, 10), (3.0, 30)):
        window.add({"loss": torch.tensor(loss), "tokens": torch.tensor(tokens)})
    assert window.read() == ({"loss": 2.0}, 40.0)
    assert window.read() == ({}, 0.0)


def test_prefetched_batches_follow_the_order_and_its_position():
    from corrector.training import BatchOrder, BatchPrefetcher

    order, reference = BatchOrder(50, 4, seed=1), BatchOrder(50, 4, seed=1)
    prefetch = BatchPrefetcher(lambda rows: (torch.from_numpy(rows.copy()), None), order, torch.device("cpu"))
    for _ in range(15):  # past an epoch (12 batches)
        rows, nothing = prefetch()
        assert nothing is None and rows.tolist() == reference.next_indices().tolist()
    assert order.position == 15
    order.position = 3  # a resume moves the position: the next batch is batch 3
    assert prefetch()[0].tolist() == BatchOrder(50, 4, seed=1).indices_at(3).tolist()
    prefetch.close()


def test_compiled_checkpoints_keep_the_plain_keys():
    from accelerate import Accelerator

    from corrector.training import bare_model

    rtd = tiny_rtd()
    wrapped = torch.compile(copy.copy(rtd), backend="eager")
    assert list(bare_model(Accelerator(cpu=True), wrapped).state_dict()) == list(rtd.state_dict())


def test_a_shrunk_checkpoint_travels_without_the_pair_and_resumes(tmp_path: Path):
    """lease.sh's trip: moments in bf16, the saved pair left behind and rebuilt from the checkpoint."""
    import shutil

    from corrector.pretrain.lease import restore, shrink

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    run = tmp_path / "run"
    train(tiny_config(corpus, run, stop_at_step=3))
    checkpoint = shrink(run)
    state = torch.load(checkpoint / "state.pt", weights_only=False)
    moments = next(iter(state["optimizer"]["state"].values()))
    assert moments["exp_avg"].dtype == moments["exp_avg_sq"].dtype == torch.bfloat16
    trip = tmp_path / "trip"  # what lease.sh packs: no weights files, no token cache
    shutil.copytree(run, trip, ignore=shutil.ignore_patterns("model.safetensors", "cache"))
    assert restore(trip)
    from corrector.pretrain.modeling import load_pair

    discriminator, generator, _ = load_pair(str(trip))
    weights = state["model"]
    for name, value in discriminator.state_dict().items():
        assert torch.equal(value, weights["discriminator." + name]), name
    assert generator.electra.embeddings.word_embeddings is discriminator.electra.embeddings.word_embeddings
    train(tiny_config(corpus, trip, init=str(trip), resume=True))
    records = [json.loads(line) for line in (trip / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 9))
    assert not restore(tmp_path / "nothing")
