"""ELECTRA replaced-token-detection pre-training, one explicit loop.

    masked  = mask 15% of positions (85% -> [MASK], 15% kept as they are)
    gen     = generator(masked); vocabulary projection ONLY at masked positions
    sampled = sample_rows(softmax(gen logits))          # multinomial, temperature 1, no gradient
    corrupt = original with masked positions := sampled
    labels  = corrupt != original                         # a sampled original is "original"
    loss    = MLM(gen, original) + λ · BCE(discriminator(corrupt), labels)      (λ = 50)

Runs on 1 CPU, N GPUs or several nodes through Hugging Face Accelerate (`accelerate launch` or
torchrun): each process reads its own shard of a seeded batch order, DDP averages gradients.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..text.tokenization import CharTokenizer
from ..training import (
    BatchOrder,
    BatchPrefetcher,
    LoopConfig,
    compile_model,
    linear_schedule,
    make_optimizer,
    masked_mean,
    resume_step,
    run_loop,
    save_final,
    select_positions,
    setup_run,
)
from .modeling import PRESETS, ElectraSize, build_pair, count_parameters, load_pair, set_attention


@dataclass
class PretrainConfig(LoopConfig):
    corpus: list[str] = field(default_factory=list)
    output: str = "runs/pretrain"
    vocab: str | None = None  # tokenizer dir; default: built from the corpus into OUTPUT
    init: str | None = None  # continue from a model dir or hub id (its tokenizer is used)
    reinit_discriminator: bool = False  # with --init: fresh discriminator encoder + head, embeddings kept
    preset: str = "small"
    generator_size: float | None = None  # overrides the preset's fraction of the width
    max_length: int = 128
    mask_prob: float = 0.15
    mask_token_prob: float = 0.85  # of masked positions; the rest keep their token
    disc_weight: float = 50.0
    temperature: float = 1.0
    # Dropout while pre-training (None: the model config's, 0.1 for ELECTRA). Default 0: a
    # pre-training run sees most text about once, where dropout only slows learning (Geiping &
    # Goldstein 2022, "Cramming"), and on CPU drawing its masks was ~15% of a step. Only the
    # modules are changed: the saved config keeps its value, so fine-tuning uses dropout again.
    dropout: float | None = 0.0
    # Pack the corpus into full rows (corpus.pack_full_rows): no padding, no attention mask.
    full_rows: bool = True
    halfwidth: bool = False
    min_count: int = 2  # vocabulary: minimum corpus count of a CJK character


# --- the objective ------------------------------------------------------------------------


def mask_budget(positions: int, mask_prob: float) -> int:
    """The fixed number of positions a step with static shapes predicts: the expected count of
    masked positions among `positions` plus six standard deviations (a step masks more about
    once in 10^9; those extra positions then stay as they are). At 256 x 128 that is 5,305
    rows for ~4,915 expected; the rows past the count are computed and weighted 0."""
    mean = positions * mask_prob
    return min(positions, math.ceil(mean + 6 * math.sqrt(mean * (1 - mask_prob))) + 1)


def mask_positions(input_ids: torch.Tensor, special_ids: list[int] | torch.Tensor, cfg: PretrainConfig,
                   mask_token_id: int, budget: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(generator input, bool mask of the positions to predict); with `budget`, at most that
    many positions, the first ones in row-major order."""
    special = torch.as_tensor(special_ids, device=input_ids.device)
    candidates = ~torch.isin(input_ids, special)
    chosen = (torch.rand(input_ids.shape, device=input_ids.device) < cfg.mask_prob) & candidates
    if budget is not None:
        chosen &= chosen.reshape(-1).cumsum(0).view_as(chosen) <= budget
    use_mask_token = chosen & (torch.rand(input_ids.shape, device=input_ids.device) < cfg.mask_token_prob)
    masked = input_ids.masked_fill(use_mask_token, mask_token_id)
    return masked, chosen


def corrupt(input_ids: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, sampled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Discriminator input and labels: the original with `sampled` written at the flat positions
    `index` where `valid`, labels 1 where the token now differs from the original. A sample that
    happens to equal the original token is labelled original, as in ELECTRA. Rows that are not
    valid write into a spare slot past the end, so the shapes stay fixed and nothing syncs."""
    spare = input_ids.numel()
    flat = torch.cat([input_ids.reshape(-1), input_ids.new_zeros(1)])
    flat[torch.where(valid, index, spare)] = sampled
    corrupted = flat[:spare].view_as(input_ids)
    return corrupted, (corrupted != input_ids).float()


def sample_rows(probs: torch.Tensor) -> torch.Tensor:
    """One draw per row of a (n, vocab) probability matrix, by inverse transform sampling.

    The same distribution as `torch.multinomial(probs, 1)`, whose CPU kernel draws an
    exponential variate per vocabulary entry (~9% of a CPU pre-training step at 21k entries);
    this draws one uniform per row and searches the cumulative sums. side="right" never lands
    on a zero-probability entry."""
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.shape[0], 1, device=probs.device, dtype=cdf.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).clamp_(max=probs.shape[-1] - 1).squeeze(-1)


class GeneratorLossAndSample(torch.autograd.Function):
    """Mean MLM cross-entropy of (n, vocab) logits over the `valid` rows, a temperature-1 sample
    per row, and the number of valid rows whose argmax is the target, from one fp32 softmax per
    block of rows. `apply(logits, targets[, valid, rows_per_block])`: valid None = every row.

    `F.cross_entropy` + a separate softmax for sampling made five (n, vocab) fp32 tensors per
    step (upcast, log-softmax, softmax, cumulative sums, the zero-filled gradient), each larger
    than the 32 MiB that glibc reuses (see `corrector.allocator`), so every step page-faulted
    them anew; with log-softmax's slow CPU backward that was ~10% of a CPU step at 21k entries.
    Here blocks of `rows_per_block` rows stay under that size, and backward recomputes their
    softmax (cheaper than keeping an (n, vocab) fp32 tensor) to form softmax - one-hot. A GPU
    (or a compiled step) takes all rows in one block: each block is ~8 kernel launches."""

    rows_per_block = 128  # x 21,128 entries x 4 bytes = 11 MB

    @staticmethod
    def _blocks(n: int, size: int | None):
        step = max(1, size or GeneratorLossAndSample.rows_per_block)
        return (slice(start, start + step) for start in range(0, n, step))

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, *options):
        valid, rows_per_block = (*options, None, None)[:2]  # (valid, rows_per_block), both optional
        n = len(targets)
        log_likelihood = torch.zeros((), dtype=torch.float32, device=logits.device)
        correct = torch.zeros((), dtype=torch.long, device=logits.device)
        sampled = torch.empty(n, dtype=torch.long, device=logits.device)
        weights = torch.ones(n, dtype=torch.float32, device=logits.device) if valid is None else valid.float()
        for rows in GeneratorLossAndSample._blocks(n, rows_per_block):
            probs = torch.softmax(logits[rows], dim=-1, dtype=torch.float32)
            block_targets = targets[rows]
            # Gradients are exact; only the logged loss of a row is capped at -log(tiny) ~ 87
            # nats, far beyond anything a generator produces (uniform over 21k entries: ~10).
            target_probs = probs.gather(1, block_targets[:, None]).clamp_min_(torch.finfo(torch.float32).tiny)
            log_likelihood += (target_probs.log_().squeeze(1) * weights[rows]).sum()
            correct += ((probs.argmax(-1) == block_targets) & (weights[rows] > 0)).sum()
            sampled[rows] = sample_rows(probs)
        count = weights.sum().clamp_min(1)
        ctx.save_for_backward(logits, targets, weights, count)
        ctx.rows_per_block, ctx.extra_inputs = rows_per_block, len(options)
        ctx.mark_non_differentiable(sampled, correct)
        return -log_likelihood / count, sampled, correct

    @staticmethod
    def backward(ctx, grad_loss, _grad_sampled, _grad_correct):
        logits, targets, weights, count = ctx.saved_tensors
        grad = torch.empty_like(logits)
        scale = grad_loss / count
        for rows in GeneratorLossAndSample._blocks(len(targets), ctx.rows_per_block):
            probs = torch.softmax(logits[rows], dim=-1, dtype=torch.float32)
            probs[torch.arange(len(probs), device=probs.device), targets[rows]] -= 1.0
            grad[rows] = probs.mul_(scale * weights[rows, None])
        return grad, None, *(None,) * ctx.extra_inputs


def generator_logits_at(generator, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor:
    """Generator logits only at the flat positions `index`, shape (len(index), vocab).

    Projecting every position onto the vocabulary is most of a naive MLM step's cost; ELECTRA
    only needs the masked ~15%, so we gather hidden states first and project those."""
    hidden = generator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    hidden = generator.generator_predictions(hidden.reshape(-1, hidden.shape[-1])[index])
    return generator.generator_lm_head(hidden)


def set_dropout(model: nn.Module, p: float) -> None:
    """Dropout probability of every dropout module (HF's SDPA attention reads its `p` as well);
    the model's config is left as it is."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p


class ReplacedTokenDetection(nn.Module):
    """Generator + discriminator whose forward is the whole ELECTRA objective, so a DDP wrapper
    around it prepares gradient reduction for both halves in one call.

    `static_shapes` (set on a GPU and for a compiled step): a fixed number of predicted rows
    (`mask_budget`) and no value read back to the host, so the step can be captured as a
    graph; off (a CPU), the count of masked positions is read and exactly those rows are
    computed, which draws the same random numbers as before this option existed."""

    def __init__(self, discriminator, generator, cfg: PretrainConfig, special_ids: list[int], mask_token_id: int,
                 static_shapes: bool = False) -> None:
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.cfg = cfg
        # A buffer, not a tensor made each step: building one from a list on a GPU is a
        # blocking host-to-device copy. Not persistent: checkpoints keep their keys.
        self.register_buffer("special_ids", torch.tensor(special_ids), persistent=False)
        self.mask_token_id = mask_token_id
        self.static_shapes = static_shapes
        if cfg.dropout is not None:
            set_dropout(self, cfg.dropout)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
        """(loss, statistics as 0-d tensors). `attention_mask` None: every position is text (full
        rows), and the encoders run without a mask (SDPA's fused kernels)."""
        cfg = self.cfg
        budget = mask_budget(input_ids.numel(), cfg.mask_prob) if self.static_shapes else None
        masked, chosen = mask_positions(input_ids, self.special_ids, cfg, self.mask_token_id, budget)
        index, valid = select_positions(chosen, budget)
        targets = input_ids.reshape(-1)[index]
        logits = generator_logits_at(self.generator, masked, attention_mask, index)
        block = len(index) if self.static_shapes else None
        mlm_loss, sampled, gen_correct = GeneratorLossAndSample.apply(logits, targets, valid, block)
        if cfg.temperature != 1.0:  # the shared softmax is at temperature 1: draw again
            with torch.no_grad():
                sampled = sample_rows(torch.softmax(logits.detach() / cfg.temperature, dim=-1, dtype=torch.float32))
        corrupted, labels = corrupt(input_ids, index, valid, sampled)

        disc_logits = self.discriminator(input_ids=corrupted, attention_mask=attention_mask).logits
        bce = F.binary_cross_entropy_with_logits(disc_logits.float(), labels, reduction="none")
        disc_loss = masked_mean(bce, attention_mask)
        loss = mlm_loss + cfg.disc_weight * disc_loss
        return loss, self._statistics(mlm_loss, disc_loss, disc_logits, labels, attention_mask, gen_correct, valid)

    @torch.no_grad()
    def _statistics(self, mlm_loss, disc_loss, disc_logits, labels, attention_mask, gen_correct, valid) -> dict:
        predicted, truth = disc_logits > 0, labels.bool()
        if attention_mask is not None:
            active = attention_mask.bool()
            predicted, truth = predicted & active, truth & active
        true_positive = (predicted & truth).sum()
        tokens = attention_mask.sum() if attention_mask is not None else torch.full((), labels.numel(), device=labels.device)
        return {
            "mlm_loss": mlm_loss.detach(),
            "disc_loss": disc_loss.detach(),
            "gen_acc": gen_correct / valid.sum().clamp_min(1),
            "replaced": masked_mean(truth.float(), attention_mask),
            "disc_precision": true_positive / predicted.sum().clamp_min(1),
            "disc_recall": true_positive / truth.sum().clamp_min(1),
            "tokens": tokens,
        }


# --- model / tokenizer set-up ---------------------------------------------------------------


def load_or_build(cfg: PretrainConfig, log) -> tuple[ReplacedTokenDetection, CharTokenizer, str]:
    """The pair to train, its tokenizer, and the tokenizer directory to ship with it."""
    from transformers import AutoTokenizer

    if cfg.init:
        discriminator, generator, tokenizer_dir = load_pair(cfg.init)
        log(f"continuing from {cfg.init}")
        if cfg.reinit_discriminator:
            # Recovery from a collapsed discriminator (constant output): keep what the generator
            # and the shared embeddings learned, start the discriminator's layers afresh.
            for module in (discriminator.electra.encoder, discriminator.discriminator_predictions,
                           getattr(discriminator.electra, "embeddings_project", None)):
                if module is not None:
                    reinitialise(module, discriminator.config.initializer_range)
            log("discriminator encoder and head re-initialised")
    else:
        tokenizer_dir = cfg.vocab or cfg.output
        if not (Path(tokenizer_dir) / "vocab.txt").exists():
            from .corpus import CorpusStats, iter_lines, list_corpus_files
            from .vocab import build_vocab, count_characters, write_tokenizer

            counts = count_characters(iter_lines(list_corpus_files(cfg.corpus), CorpusStats(), cfg.halfwidth))
            tokens = build_vocab(counts, min_count=cfg.min_count)
            write_tokenizer(tokens, tokenizer_dir)
            log(f"vocabulary: {len(tokens)} tokens written to {tokenizer_dir}")
        size = ElectraSize(**asdict(PRESETS[cfg.preset]))
        if cfg.generator_size is not None:
            size.generator_size = cfg.generator_size
        size.max_position_embeddings = max(size.max_position_embeddings, cfg.max_length)
        vocab_size = len(AutoTokenizer.from_pretrained(tokenizer_dir))
        discriminator, generator = build_pair(size, vocab_size)
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(tokenizer_dir))
    special_ids = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]
    rtd = ReplacedTokenDetection(discriminator, generator, cfg, special_ids, tokenizer.mask_token_id)
    return rtd, tokenizer, tokenizer_dir


def reinitialise(module: nn.Module, std: float) -> None:
    """BERT initialisation, done by hand: transformers' `_init_weights` skips modules it has
    already marked as initialised, so it cannot be used to reset loaded weights."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, mean=0.0, std=std)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, nn.LayerNorm):
            nn.init.ones_(sub.weight)
            nn.init.zeros_(sub.bias)


# --- the loop -------------------------------------------------------------------------------


def load_rows(cfg: PretrainConfig, tokenizer: CharTokenizer, output: Path, log) -> np.ndarray:
    """The (rows, max_length) ids to train on: the token cache (built once, memory-mapped), cut
    into full rows unless --no-full-rows."""
    from .corpus import build_token_cache, pack_full_rows

    data = build_token_cache(cfg.corpus, tokenizer, output / "cache", cfg.max_length, cfg.halfwidth, log=log)
    if not cfg.full_rows:
        return data
    rows = pack_full_rows(np.asarray(data), tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
    log(f"full rows: {len(rows)} of {cfg.max_length} (from {len(data)} sentence-packed rows), no padding")
    return rows


def train(cfg: PretrainConfig) -> Path:
    from .flops import bf16_peak_tflops, electra_step_flops

    accelerator, output = setup_run(cfg)
    log = accelerator.print
    device = accelerator.device
    with accelerator.main_process_first():  # rank 0 builds the vocabulary and token cache
        pair, tokenizer, tokenizer_dir = load_or_build(cfg, log)
        data = load_rows(cfg, tokenizer, output, log)
    set_attention((pair.discriminator, pair.generator), device.type, accelerator.mixed_precision == "bf16")
    # A GPU step must not wait for the host, and a compiled one needs fixed shapes (see the class).
    pair.static_shapes = device.type == "cuda" or cfg.compile
    log(f"discriminator {count_parameters(pair.discriminator) / 1e6:.1f}M params, "
        f"generator {count_parameters(pair.generator) / 1e6:.1f}M, pair {count_parameters(pair) / 1e6:.1f}M (shared embeddings)")

    optimizer = make_optimizer(pair, cfg.lr, cfg.weight_decay)
    scheduler = linear_schedule(optimizer, cfg.warmup_steps, cfg.max_steps)
    order = BatchOrder(len(data), cfg.batch_size, accelerator.num_processes, accelerator.process_index, cfg.seed)
    step = resume_step(cfg, accelerator, pair, optimizer, scheduler, order, output)
    model = compile_model(pair, cfg, device.type, static=True)  # every batch is batch_size x max_length
    model, optimizer = accelerator.prepare(model, optimizer)
    if accelerator.is_main_process:
        (output / "pretrain_config.json").write_text(json.dumps(asdict(cfg), indent=1))

    pad = tokenizer.pad_token_id

    def make_batch(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch = torch.from_numpy(data[rows].astype(np.int64))
        return batch, None if cfg.full_rows else (batch != pad).long()

    flops = electra_step_flops(pair.discriminator.config, pair.generator.config, 1, cfg.max_length, cfg.mask_prob)
    run_loop(cfg, accelerator, model, optimizer, scheduler, BatchPrefetcher(make_batch, order, device), order, output,
             step, desc="pretrain", flops_per_token=flops / cfg.max_length,
             peak_tflops=cfg.peak_tflops or bf16_peak_tflops(device))
    save_final(accelerator, model, output, tokenizer_dir)
    return output
