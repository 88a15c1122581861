"""ELECTRA pre-training module: objective, vocabulary, corpus cache, resume, multi-process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertTokenizerFast

from corrector.pretrain.corpus import build_token_cache, corpus_domain, sample_by_domain
from corrector.pretrain.modeling import PRESETS, build_pair, electra_configs
from corrector.pretrain.train import PretrainConfig, ReplacedTokenDetection, corrupt, mask_positions, train
from corrector.pretrain.vocab import build_vocab, count_characters, write_tokenizer
from corrector.text.tokenization import CharTokenizer
from corrector.training import latest_checkpoint

ROOT = Path(__file__).resolve().parent.parent

TOY_CORPUS = "\n".join(
    [
        "少先队员应该为老人让座。我们一起去公园散步！今天天气很好。",
        "他的作业做得很认真。北京是中国的首都；上海是一座大城市。",
        "我在2024年用iPhone打电话给Tom，他说应该没问题。",
        "",  # empty lines are skipped and counted
    ]
    * 40
)


@pytest.fixture()
def toy_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TOY_CORPUS, encoding="utf-8")
    return path


def tiny_config(corpus: Path, output: Path, **overrides) -> PretrainConfig:
    values = dict(corpus=[str(corpus)], output=str(output), preset="tiny", max_length=32, batch_size=8,
                  lr=2e-3, warmup_steps=2, max_steps=6, save_every=3, log_every=1, min_count=1, cpu=True)
    values.update(overrides)
    return PretrainConfig(**values)


def test_masking_statistics():
    torch.manual_seed(0)
    cfg = PretrainConfig()
    ids = torch.randint(5, 1000, (64, 128))
    ids[:, 0], ids[:, -1] = 2, 3
    ids[:, -10:-1] = 0  # padding
    masked, chosen = mask_positions(ids, [2, 3, 0], cfg, mask_token_id=4)
    candidates = (ids > 4)
    assert not chosen[~candidates].any(), "special tokens and padding are never masked"
    share = chosen.sum().item() / candidates.sum().item()
    assert 0.14 < share < 0.16
    mask_share = (masked[chosen] == 4).float().mean().item()
    assert 0.82 < mask_share < 0.88  # 85% [MASK], the rest keep their original token
    kept = chosen & (masked != 4)
    assert torch.equal(masked[kept], ids[kept])
    assert torch.equal(masked[~chosen], ids[~chosen])


def test_labels_mark_only_real_replacements():
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    index = torch.tensor([1, 2, 0])  # flat positions; the last row is padding of a fixed-size step
    valid = torch.tensor([True, True, False])
    sampled = torch.tensor([10, 99, 77])  # first sample equals the original token
    corrupted, labels = corrupt(ids, index, valid, sampled)
    assert corrupted.tolist() == [[2, 10, 99, 12, 3]]  # the padding row wrote nowhere
    assert labels.tolist() == [[0.0, 0.0, 1.0, 0.0, 0.0]]


def test_sampling_follows_the_generator_distribution():
    from corrector.pretrain.train import sample_rows

    torch.manual_seed(0)
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2], [1.0, 0.0, 0.0, 0.0, 0.0]])
    draws = sample_rows(probs.repeat(20000, 1)).view(20000, 2)
    frequency = torch.bincount(draws[:, 0], minlength=5).float() / 20000
    assert torch.allclose(frequency, probs[0], atol=0.015)
    assert (frequency[[0, 2]] == 0).all()  # zero-probability entries are never drawn
    assert (draws[:, 1] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_generator_loss_matches_cross_entropy_across_row_blocks(monkeypatch, dtype):
    import torch.nn.functional as F

    from corrector.pretrain.train import GeneratorLossAndSample

    monkeypatch.setattr(GeneratorLossAndSample, "rows_per_block", 3)  # 10 rows: blocks 3+3+3+1
    torch.manual_seed(0)
    base = (torch.randn(10, 50) * 3).to(dtype)
    targets = torch.randint(0, 50, (10,))
    ours = base.clone().requires_grad_()
    loss, sampled, correct = GeneratorLossAndSample.apply(ours, targets)
    (2.0 * loss).backward()
    reference = base.clone().float().requires_grad_()
    expected = F.cross_entropy(reference, targets)
    (2.0 * expected).backward()
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    assert torch.allclose(loss, expected, atol=tolerance)
    assert ours.grad.dtype == dtype
    assert torch.allclose(ours.grad.float(), reference.grad, atol=tolerance)
    assert int(correct) == int((base.float().argmax(-1) == targets).sum())
    assert sampled.shape == (10,) and sampled.dtype == torch.long and (sampled < 50).all()
    empty_loss, empty_sampled, _ = GeneratorLossAndSample.apply(base[:0].clone().requires_grad_(), targets[:0])
    assert empty_loss.item() == 0.0 and empty_sampled.numel() == 0


def test_allocator_setting_is_applied_once_on_linux():
    from corrector.runtime.allocator import retain_freed_memory

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc malloc tuning only applies on Linux")
    assert retain_freed_memory() is True
    assert retain_freed_memory() is True  # idempotent


def test_attention_kernel_follows_device_and_precision():
    from corrector.pretrain.modeling import attention_implementation, set_attention

    assert attention_implementation("cuda", True) == "sdpa"
    assert attention_implementation("cpu", False) == "sdpa"
    assert attention_implementation("cpu", True) == "eager"
    discriminator, generator = build_pair(PRESETS["tiny"], vocab_size=100)
    set_attention((discriminator, generator), "cpu", True)
    assert discriminator.config._attn_implementation == generator.config._attn_implementation == "eager"


def test_pretraining_dropout_is_set_on_the_modules_not_the_config():
    discriminator, generator = build_pair(PRESETS["tiny"], vocab_size=100)
    rtd = ReplacedTokenDetection(discriminator, generator, PretrainConfig(), [2, 3, 0], 4)
    assert all(m.p == 0.0 for m in rtd.modules() if isinstance(m, torch.nn.Dropout))
    assert discriminator.config.hidden_dropout_prob == 0.1  # fine-tuning reads this again
    kept = ReplacedTokenDetection(*build_pair(PRESETS["tiny"], vocab_size=100), PretrainConfig(dropout=None), [2, 3, 0], 4)
    assert any(m.p == 0.1 for m in kept.modules() if isinstance(m, torch.nn.Dropout))


def test_embeddings_are_shared_and_stay_shared():
    discriminator, generator = build_pair(PRESETS["tiny"], vocab_size=100)
    disc_emb, gen_emb = discriminator.electra.embeddings, generator.electra.embeddings
    assert disc_emb.word_embeddings.weight is gen_emb.word_embeddings.weight
    assert disc_emb.position_embeddings.weight is gen_emb.position_embeddings.weight
    assert generator.generator_lm_head.weight is disc_emb.word_embeddings.weight
    assert generator.config.hidden_size == discriminator.config.hidden_size // 2  # tiny: 1/2 width
    rtd = ReplacedTokenDetection(discriminator, generator, PretrainConfig(), [2, 3, 0], 4)
    names = [n for n, _ in rtd.named_parameters()]
    assert sum("word_embeddings" in n for n in names) == 1, "one parameter, seen once by the optimizer"
    loss, _ = rtd(torch.randint(5, 100, (4, 16)), torch.ones(4, 16, dtype=torch.long))
    loss.backward()
    assert disc_emb.word_embeddings.weight.grad is not None


def test_vocab_round_trip_and_alignment(tmp_path: Path):
    text = "我在2024年用iPhone打电话给Tom，他说因该没问题。"
    tokens = build_vocab(count_characters([text]), min_count=1)
    write_tokenizer(tokens, tmp_path)
    loaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert isinstance(loaded, BertTokenizerFast)
    assert [loaded.convert_ids_to_tokens(i) for i in range(len(tokens))] == tokens
    assert loaded.tokenize("少先队员") == ["[UNK]", "[UNK]", "[UNK]", "[UNK]"]  # unseen chars
    chars = CharTokenizer(loaded)
    encoding = chars.encode(text)
    assert len(encoding.ids) == len(text)
    assert [text[i] for i in encoding.offsets] == list(text)
    assert [chars.token(i) for i in encoding.ids] == list(text)


def test_corpus_cache_counts_bad_lines_and_is_reused(tmp_path: Path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes("今天天气很好。\n\n".encode() + b"\xff\xfe bad\n" + "我们去公园散步！".encode() + b"\n")
    tokens = build_vocab(count_characters(["今天天气很好我们去公园散步"]), min_count=1)
    write_tokenizer(tokens, tmp_path / "tok")
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(str(tmp_path / "tok")))
    messages: list[str] = []
    data = build_token_cache([corpus], tokenizer, tmp_path / "cache", max_length=20, log=messages.append)
    assert data.shape == (1, 20) and data.dtype == np.uint16
    assert data[0, 0] == tokenizer.cls_token_id and tokenizer.sep_token_id in data[0]
    stats = json.loads(next((tmp_path / "cache").glob("*.json")).read_text())
    assert stats["bad_encoding"] == 1 and stats["empty"] == 1 and stats["sentences"] == 2
    assert any("c.txt:3" in m for m in messages), "the invalid line is named with its number"
    build_token_cache([corpus], tokenizer, tmp_path / "cache", max_length=20, log=messages.append)
    assert "token cache:" in messages[-1]


def test_sample_by_domain_caps_each_domain(tmp_path: Path):
    """What travels to a GPU for pre-training on all the text: every domain, none beyond its cap."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    sentence = "今天天气很好。我们去公园散步！"
    (folder / "fiction_a.txt").write_text((sentence + "\n") * 30, encoding="utf-8")
    (folder / "fiction_b.txt").write_text((sentence + "\n") * 30, encoding="utf-8")
    (folder / "law_code.txt").write_text((sentence + "\n") * 3, encoding="utf-8")
    tokens = build_vocab(count_characters([sentence]), min_count=1)
    write_tokenizer(tokens, tmp_path / "tok")
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(str(tmp_path / "tok")))
    messages: list[str] = []
    sample = sample_by_domain([folder], tokenizer, tmp_path / "cache", rows_per_domain=5, max_length=20,
                              log=messages.append)
    law = build_token_cache([folder / "law_code.txt"], tokenizer, tmp_path / "cache", max_length=20)
    assert sample.shape == (5 + len(law), 20) and len(law) < 5, "fiction capped at 5 rows, law whole"
    assert messages == [f"fiction: 5 of {2 * len(law) * 10} sequences", f"law: {len(law)} of {len(law)} sequences"]
    assert corpus_domain("corpus_domains/games_arknights.txt.xz") == "games" and corpus_domain("reviews.txt") == "reviews"
    with pytest.raises(ValueError, match="at least 1"):
        sample_by_domain([folder], tokenizer, tmp_path / "cache", rows_per_domain=0)


def test_token_arrays_train_without_the_raw_text(toy_corpus: Path, tmp_path: Path):
    """A cache array carried to another machine (a GPU box gets tokens, not text) is a corpus."""
    first = tmp_path / "first"
    train(tiny_config(toy_corpus, first, max_steps=2, save_every=100))
    array = next((first / "cache").glob("tokens-*.npy"))
    carried = tmp_path / "carried.npy"
    carried.write_bytes(array.read_bytes())
    second = tmp_path / "second"
    train(tiny_config(carried, second, max_steps=2, save_every=100, vocab=str(first)))
    assert (second / "discriminator" / "model.safetensors").exists()
    assert not (second / "cache").exists() or not any((second / "cache").iterdir()), "nothing re-tokenized"
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(str(first)))
    with pytest.raises(ValueError, match="expected \\(sequences, 64\\)"):
        build_token_cache([carried], tokenizer, tmp_path / "cache", max_length=64)
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.full((2, 32), tokenizer.vocab_size, dtype=np.uint16))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        build_token_cache([wrong], tokenizer, tmp_path / "cache", max_length=32)


def test_empty_corpus_is_a_clear_error(tmp_path: Path):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n\n", encoding="utf-8")
    tokens = build_vocab(count_characters(["你好"]), min_count=1)
    write_tokenizer(tokens, tmp_path / "tok")
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(str(tmp_path / "tok")))
    with pytest.raises(ValueError, match="corpus is empty"):
        build_token_cache([corpus], tokenizer, tmp_path / "cache")


def test_loss_decreases_on_toy_corpus(toy_corpus: Path, tmp_path: Path):
    out = tmp_path / "run"
    train(tiny_config(toy_corpus, out, max_steps=40, save_every=100, log_every=5, warmup_steps=4))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["mlm_loss"] < records[0]["mlm_loss"] - 0.5
    assert records[-1]["disc_loss"] < records[0]["disc_loss"]
    for key in ("gen_acc", "disc_precision", "disc_recall", "tokens_per_s", "lr"):
        assert key in records[-1]
    # The final model loads with plain transformers and with the corrector's loader.
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    from corrector.runtime.models import load_model

    ElectraForPreTraining.from_pretrained(str(out / "discriminator"))
    ElectraForMaskedLM.from_pretrained(str(out / "generator"))
    bundle = load_model(str(out))
    assert bundle.tokenizer.vocab_size == len((out / "vocab.txt").read_text(encoding="utf-8").split())


def _weights(out: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(out / "discriminator" / "model.safetensors"))


def test_resume_gives_identical_weights(toy_corpus: Path, tmp_path: Path):
    straight = tmp_path / "straight"
    train(tiny_config(toy_corpus, straight, max_steps=6, save_every=100))
    resumed = tmp_path / "resumed"
    train(tiny_config(toy_corpus, resumed, max_steps=6, save_every=100, stop_at_step=3))  # N steps
    first_stop = latest_checkpoint(resumed)
    assert first_stop is not None and first_stop.name == "step-00000003"
    train(tiny_config(toy_corpus, resumed, max_steps=6, save_every=100, resume=True))  # + N more
    a, b = _weights(straight), _weights(resumed)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def _run_module(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, **kwargs)


def test_sigkill_mid_training_then_resume(toy_corpus: Path, tmp_path: Path):
    out = tmp_path / "killed"
    args = ["corrector.pretrain", "train", "--corpus", str(toy_corpus), "--output", str(out), "--preset", "tiny",
            "--max-length", "32", "--batch-size", "8", "--max-steps", "400", "--save-every", "2", "--log-every", "1",
            "--min-count", "1", "--cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 90
    while time.time() < deadline:
        checkpoint = latest_checkpoint(out)
        if checkpoint is not None and int(checkpoint.name.split("-")[1]) >= 4:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = latest_checkpoint(out)
    assert killed_at is not None, "a checkpoint was written before the kill"
    state = torch.load(killed_at / "state.pt", weights_only=False)  # not corrupted
    assert state["step"] == int(killed_at.name.split("-")[1])
    # The tiny steps are fast: the kill may land some steps after the checkpoint seen, so the resumed
    # run goes 8 steps past wherever the killed one stopped.
    end = state["step"] + 8
    done = _run_module([*args, "--max-steps", str(end), "--resume"], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resumed from {killed_at}" in done.stdout + done.stderr
    final = latest_checkpoint(out)
    assert final is not None and final.name == f"step-{end:08d}"
    assert not list((out / "checkpoints").glob("*.tmp")), "no half-written checkpoint is left"


def test_two_process_accelerate_run_keeps_replicas_identical(toy_corpus: Path, tmp_path: Path):
    """2 CPU processes (gloo) through torchrun, the launcher Accelerate uses for multi-process
    runs; the Accelerator in the trainer picks the process group up from the environment."""
    out = tmp_path / "ddp"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "corrector.pretrain", "train", "--corpus", str(toy_corpus),
               "--output", str(out), "--preset", "tiny", "--max-length", "32", "--batch-size", "4",
               "--max-steps", "3", "--save-every", "3", "--min-count", "1", "--cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    fingerprints = [json.loads((out / "ranks" / f"rank-{r}.json").read_text())["sha256"] for r in (0, 1)]
    assert fingerprints[0] == fingerprints[1]
    assert latest_checkpoint(out).name == "step-00000003"


def test_cli_help_documents_every_option():
    done = _run_module(["corrector.pretrain", "train", "--help"], timeout=300)
    assert done.returncode == 0
    for flag in ("--corpus", "--init", "--resume", "--preset", "--generator-size", "--disc-weight", "--grad-accum",
                 "--save-every", "--max-steps", "--compile", "--bf16"):
        assert flag in done.stdout


def test_continue_from_hub_layout_directories(toy_corpus: Path, tmp_path: Path):
    """`--init` accepts a discriminator dir/hub id whose sibling `…-generator` holds the
    generator (the hfl/chinese-electra-180g-* layout); its tokenizer is reused, and
    `--reinit-discriminator` starts the discriminator's layers afresh but keeps the rest."""
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    base = tmp_path / "base"
    train(tiny_config(toy_corpus, base, max_steps=2, save_every=100))
    hub = tmp_path / "hfl"
    disc_dir, gen_dir = hub / "chinese-electra-180g-small-discriminator", hub / "chinese-electra-180g-small-generator"
    ElectraForPreTraining.from_pretrained(str(base / "discriminator")).save_pretrained(str(disc_dir))
    ElectraForMaskedLM.from_pretrained(str(base / "generator")).save_pretrained(str(gen_dir))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(base / name, disc_dir / name)

    out = tmp_path / "continued"
    train(tiny_config(toy_corpus, out, init=str(disc_dir), max_steps=1, lr=1e-9, warmup_steps=1,
                      reinit_discriminator=True))
    assert (out / "vocab.txt").read_text(encoding="utf-8") == (base / "vocab.txt").read_text(encoding="utf-8")
    before, after = _weights(base), _weights(out)
    layer = "electra.encoder.layer.0.attention.self.query.weight"
    assert not torch.allclose(before[layer], after[layer]), "discriminator layers re-initialised"
    embeddings = "electra.embeddings.word_embeddings.weight"
    assert torch.allclose(before[embeddings], after[embeddings], atol=1e-6), "shared embeddings kept"


def test_bench_times_both_steps_and_writes_json(tmp_path):
    from corrector.pretrain.bench import run_bench

    path = tmp_path / "bench.json"
    result = run_bench("tiny", batch_size=2, max_length=16, vocab_size=64, steps=1, json_path=str(path))
    assert json.loads(path.read_text()) == result
    for key in ("naive_tokens_per_s", "ours_tokens_per_s", "ours_fp32_tokens_per_s", "ours_dropout_tokens_per_s",
                "speedup", "speedup_fp32"):
        assert result[key] > 0
    assert result["ours_precision"] in ("bf16 autocast", "fp32")
    assert result["ours_attention"] in ("eager", "sdpa")
    assert result["ours_achieved_tflops"] > 0 and result["mfu"] is None  # no peak known for a CPU


def test_step_flops_match_six_n_per_token_plus_attention_and_vocabulary():
    from corrector.pretrain.bench import electra_step_flops

    disc, gen = electra_configs(PRESETS["small"], 21128)
    discriminator, generator = build_pair(PRESETS["small"], 21128)

    def matmul_params(model) -> int:  # weights applied to every token (not embeddings, not the vocabulary head)
        return sum(p.numel() for n, p in model.named_parameters()
                   if p.ndim == 2 and "embeddings." not in n and "lm_head" not in n)

    tokens = 32 * 128
    dense = 6 * tokens * (matmul_params(discriminator) + matmul_params(generator.electra))
    flops = electra_step_flops(disc, gen, 32, 128, 0.15)
    attention = 3 * tokens * 4 * 128 * (disc.hidden_size * disc.num_hidden_layers + gen.hidden_size * gen.num_hidden_layers)
    vocabulary = 3 * tokens * 0.15 * 2 * (gen.hidden_size * gen.embedding_size + gen.embedding_size * 21128)
    assert flops == pytest.approx(dense + attention + vocabulary, rel=0.01)


def test_two_runs_cannot_write_one_output_at_once(tmp_path: Path, capsys):
    from filelock import FileLock

    from corrector.pretrain.__main__ import main

    out = tmp_path / "run"
    out.mkdir()
    with FileLock(out / ".train.lock", timeout=0):  # a run in progress (flock: per open file, as another process)
        assert main(["train", "--corpus", str(tmp_path / "missing"), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "another `pretrain train` is writing" in err and str(out) in err
    # Once the first run ends the lock is free: this one gets as far as the (missing) corpus.
    assert main(["train", "--corpus", str(tmp_path / "missing"), "--output", str(out)]) == 2
    assert "another" not in capsys.readouterr().err
