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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..text.tokenization import CharTokenizer
from ..training import (
    BatchOrder,
    LoopConfig,
    linear_schedule,
    make_optimizer,
    resume_step,
    run_loop,
    save_final,
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
    compile: bool = False
    halfwidth: bool = False
    min_count: int = 2  # vocabulary: minimum corpus count of a CJK character


# --- the objective ------------------------------------------------------------------------


def mask_positions(input_ids: torch.Tensor, special_ids: list[int], cfg: PretrainConfig, mask_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(generator input, bool mask of the positions to predict)."""
    candidates = ~torch.isin(input_ids, torch.tensor(special_ids, device=input_ids.device))
    chosen = (torch.rand(input_ids.shape, device=input_ids.device) < cfg.mask_prob) & candidates
    use_mask_token = chosen & (torch.rand(input_ids.shape, device=input_ids.device) < cfg.mask_token_prob)
    masked = input_ids.masked_fill(use_mask_token, mask_token_id)
    return masked, chosen


def corrupt(input_ids: torch.Tensor, positions: torch.Tensor, sampled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Discriminator input and labels: 1 where the token now differs from the original. A sample
    that happens to equal the original token is labelled original, as in ELECTRA."""
    corrupted = input_ids.clone()
    corrupted[positions] = sampled
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
    """Mean MLM cross-entropy of (n, vocab) logits, a temperature-1 sample per row, and the
    number of rows whose argmax is the target, from one fp32 softmax per block of rows.

    `F.cross_entropy` + a separate softmax for sampling made five (n, vocab) fp32 tensors per
    step (upcast, log-softmax, softmax, cumulative sums, the zero-filled gradient), each larger
    than the 32 MiB that glibc reuses (see `corrector.allocator`), so every step page-faulted
    them anew; with log-softmax's slow CPU backward that was ~10% of a CPU step at 21k entries.
    Here blocks of `rows_per_block` rows stay under that size, and backward recomputes their
    softmax (cheaper than keeping an (n, vocab) fp32 tensor) to form softmax - one-hot."""

    rows_per_block = 128  # x 21,128 entries x 4 bytes = 11 MB

    @staticmethod
    def _blocks(n: int):
        step = GeneratorLossAndSample.rows_per_block
        return (slice(start, start + step) for start in range(0, n, step))

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor):
        n = len(targets)
        log_likelihood = torch.zeros((), dtype=torch.float32, device=logits.device)
        correct = torch.zeros((), dtype=torch.long, device=logits.device)
        sampled = torch.empty(n, dtype=torch.long, device=logits.device)
        for rows in GeneratorLossAndSample._blocks(n):
            probs = torch.softmax(logits[rows], dim=-1, dtype=torch.float32)
            block_targets = targets[rows]
            # Gradients are exact; only the logged loss of a row is capped at -log(tiny) ~ 87
            # nats, far beyond anything a generator produces (uniform over 21k entries: ~10).
            target_probs = probs.gather(1, block_targets[:, None]).clamp_min_(torch.finfo(torch.float32).tiny)
            log_likelihood += target_probs.log_().sum()
            correct += (probs.argmax(-1) == block_targets).sum()
            sampled[rows] = sample_rows(probs)
        ctx.save_for_backward(logits, targets)
        ctx.mark_non_differentiable(sampled, correct)
        return -log_likelihood / max(1, n), sampled, correct

    @staticmethod
    def backward(ctx, grad_loss, _grad_sampled, _grad_correct):
        logits, targets = ctx.saved_tensors
        grad = torch.empty_like(logits)
        scale = grad_loss / max(1, len(targets))
        for rows in GeneratorLossAndSample._blocks(len(targets)):
            probs = torch.softmax(logits[rows], dim=-1, dtype=torch.float32)
            probs[torch.arange(len(probs), device=probs.device), targets[rows]] -= 1.0
            grad[rows] = probs.mul_(scale)
        return grad, None


def generator_logits_at(generator, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Generator logits only for `positions` (bool), shape (n_masked, vocab).

    Projecting every position onto the vocabulary is most of a naive MLM step's cost; ELECTRA
    only needs the masked ~15%, so we gather hidden states first and project those."""
    hidden = generator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    hidden = generator.generator_predictions(hidden[positions])
    return generator.generator_lm_head(hidden)


def set_dropout(model: nn.Module, p: float) -> None:
    """Dropout probability of every dropout module (HF's SDPA attention reads its `p` as well);
    the model's config is left as it is."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p


class ReplacedTokenDetection(nn.Module):
    """Generator + discriminator whose forward is the whole ELECTRA objective, so a DDP wrapper
    around it prepares gradient reduction for both halves in one call."""

    def __init__(self, discriminator, generator, cfg: PretrainConfig, special_ids: list[int], mask_token_id: int) -> None:
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.cfg = cfg
        self.special_ids = special_ids
        self.mask_token_id = mask_token_id
        if cfg.dropout is not None:
            set_dropout(self, cfg.dropout)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, dict]:
        cfg = self.cfg
        masked, positions = mask_positions(input_ids, self.special_ids, cfg, self.mask_token_id)
        targets = input_ids[positions]
        # Packed sequences have no padding: without a mask SDPA can use its fused kernel.
        model_mask = None if bool(attention_mask.all()) else attention_mask
        logits = generator_logits_at(self.generator, masked, model_mask, positions)
        mlm_loss, sampled, gen_correct = GeneratorLossAndSample.apply(logits, targets)
        if cfg.temperature != 1.0:  # the shared softmax is at temperature 1: draw again
            with torch.no_grad():
                sampled = sample_rows(torch.softmax(logits.detach() / cfg.temperature, dim=-1, dtype=torch.float32))
        corrupted, labels = corrupt(input_ids, positions, sampled)

        disc_logits = self.discriminator(input_ids=corrupted, attention_mask=model_mask).logits
        active = attention_mask.bool()
        disc_loss = F.binary_cross_entropy_with_logits(disc_logits[active].float(), labels[active])
        loss = mlm_loss + cfg.disc_weight * disc_loss

        with torch.no_grad():
            predicted = disc_logits[active] > 0
            truth = labels[active].bool()
            true_positive = (predicted & truth).sum().item()
            stats = {
                "mlm_loss": mlm_loss.item(),
                "disc_loss": disc_loss.item(),
                "gen_acc": gen_correct.item() / max(1, targets.numel()),
                "replaced": truth.float().mean().item(),
                "disc_precision": true_positive / max(1, predicted.sum().item()),
                "disc_recall": true_positive / max(1, truth.sum().item()),
                "tokens": int(active.sum().item()),
            }
        return loss, stats


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


def train(cfg: PretrainConfig) -> Path:
    from .corpus import build_token_cache

    accelerator, output = setup_run(cfg)
    log = accelerator.print
    with accelerator.main_process_first():  # rank 0 builds the vocabulary and token cache
        pair, tokenizer, tokenizer_dir = load_or_build(cfg, log)
        data = build_token_cache(cfg.corpus, tokenizer, output / "cache", cfg.max_length, cfg.halfwidth, log=log)
    set_attention((pair.discriminator, pair.generator), accelerator.device.type, accelerator.mixed_precision == "bf16")
    log(f"discriminator {count_parameters(pair.discriminator) / 1e6:.1f}M params, "
        f"generator {count_parameters(pair.generator) / 1e6:.1f}M, pair {count_parameters(pair) / 1e6:.1f}M (shared embeddings)")

    optimizer = make_optimizer(pair, cfg.lr, cfg.weight_decay)
    scheduler = linear_schedule(optimizer, cfg.warmup_steps, cfg.max_steps)
    order = BatchOrder(len(data), cfg.batch_size, accelerator.num_processes, accelerator.process_index, cfg.seed)
    step = resume_step(cfg, accelerator, pair, optimizer, scheduler, order, output)
    model = torch.compile(pair) if cfg.compile else pair
    model, optimizer = accelerator.prepare(model, optimizer)
    if accelerator.is_main_process:
        (output / "pretrain_config.json").write_text(json.dumps(asdict(cfg), indent=1))

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        batch = torch.from_numpy(data[order.next_indices()].astype(np.int64)).to(accelerator.device)
        return batch, (batch != tokenizer.pad_token_id).long()

    run_loop(cfg, accelerator, model, optimizer, scheduler, next_batch, order, output, step, desc="pretrain")
    save_final(accelerator, model, output, tokenizer_dir)
    return output
