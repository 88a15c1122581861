"""Fine-tune a pre-trained ELECTRA pair for spelling correction.

    discriminator(source)                          -> BCE against  source[i] != target[i]
    generator, --generator-input source (default): the sentence as written, a random 15% of its
        characters masked                          -> cross-entropy against target at EVERY character
    generator, --generator-input masked: source with the errors AND a random 15% of other
        characters masked                          -> cross-entropy against target at masked positions
    loss = generator CE + λ · discriminator BCE

Decision (masked input vs. seeing the wrong character), measured on the calibration dev split
(README "Model"): "source" is the BERT-CSC formulation (Hong et al. 2019, MacBERT4CSC): the
generator reads the wrong character and all its neighbours and learns to copy correct text and
rewrite errors, so at correction time one pass over the text as written scores every position in
full context. "masked" matches pre-training: the corrector masks the flagged positions, which
with a low detection threshold hides most of the sentence from the generator. The mode is
written into the generator's config (`csc_generator_input`) so the corrector feeds the
generator the way it was trained. The random 15% masks keep the generator using context rather
than only copying (MacBERT's masking, without its similar-word replacement).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..runtime.models import GENERATOR_INPUT_KEY, check_generator_input
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


@dataclass
class FinetuneConfig(LoopConfig):
    train: list[str] = field(default_factory=list)  # dataset files (any format corrector.datasets reads)
    init: str = "runs/pretrain"  # pre-trained model dir or hub discriminator id
    output: str = "runs/finetune"
    dev_from: list[str] = field(default_factory=list)  # train files whose held-out share becomes dev.tsv
    dev_share: float = 0.05
    # Seed of the dev split (None: `seed`). A continued fine-tune that should see the data in a
    # new order (another `seed`) must still hold out the dev split its model was calibrated on.
    dev_seed: int | None = None
    max_length: int = 128
    lr: float = 3e-4
    warmup_steps: int = 200
    max_steps: int = 3000
    generator_input: str = "source"  # "source": predict every character of the text as written; "masked": see above
    extra_mask_prob: float = 0.15  # characters also masked for the generator
    disc_weight: float = 20.0
    # Weight of the generator's cross-entropy at wrong characters against the others. Wrong
    # characters are ~1.5% of the scored positions, and in "source" mode the rest is mostly
    # copying what is written: at weight 1 a GPU fine-tune of ~1 epoch left the generator's
    # top-1 at errors at ~7% (it copies); >1 gives the correction itself a larger share.
    error_weight: float = 1.0
    # Replace a narrower pre-training generator by one of the discriminator's width and weights
    # (pretrain.modeling.generator_from_discriminator); no-op when it already has that width.
    generator_from_discriminator: bool = False
    # Start from this many of the initial discriminator's layers, evenly spaced (None: all of them;
    # pretrain.modeling.keep_layers): fewer for a faster discriminator on the CPU, more (each layer
    # repeated in place) for a deeper one.
    discriminator_layers: int | None = None
    # The same for the generator: its pass over a sentence cost as much as the discriminator's
    # once that kept six layers (ONNX Runtime, one SIGHAN sentence: 3.7 vs 3.9 ms).
    generator_layers: int | None = None
    # Train the generator alone: the discriminator and the embeddings it shares with the
    # generator stay as they are (the discriminator is not even run) — a cheaper step, for
    # reshaping the generator on a CPU without moving detection.
    freeze_discriminator: bool = False
    save_every: int = 200
    # Batch widths where the step has static shapes (a GPU, or --compile): each batch is padded
    # to the first of these that holds its longest sentence, so a compiled step (a CUDA graph)
    # is made once per width, not once per batch. Not on an eager CPU step: at batch 64 of the
    # broad training sets (the longest row of a batch: 101 positions on average) they would add 13 % of
    # positions, each costing CPU time. Widths past --max-length are cut to it; 0 turns it off.
    length_buckets: list[int] = field(default_factory=lambda: [32, 64, 96, 128])


def scored_logits(generator, input_ids: torch.Tensor, attention_mask: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """An ElectraForMaskedLM's logits at the flat positions `index` only: the vocabulary head
    (the largest matmul of a step) skips every other position."""
    hidden = generator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    hidden = hidden.reshape(-1, hidden.shape[-1])[index]
    return generator.generator_lm_head(generator.generator_predictions(hidden))


class CorrectionModel(nn.Module):
    """Generator + discriminator whose forward is the fine-tuning objective (one DDP call).

    `static_shapes` (a GPU, or a compiled step): the generator's head runs at every position of
    the batch, the unscored ones weighted 0, and nothing is read back to the host, so a step of
    a given width is one fixed graph; off (a CPU), exactly the scored positions are computed."""

    def __init__(self, discriminator, generator, cfg: FinetuneConfig, special_ids: list[int], mask_token_id: int,
                 static_shapes: bool = False) -> None:
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.cfg = cfg
        # A buffer: a tensor built from a list each step is a blocking copy to a GPU.
        self.register_buffer("special_ids", torch.tensor(special_ids), persistent=False)
        self.mask_token_id = mask_token_id
        self.static_shapes = static_shapes

    def forward(self, source: torch.Tensor, target: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, dict]:
        active = attention_mask.bool()
        wrong = (source != target) & active
        frozen = self.cfg.freeze_discriminator  # then the discriminator is not run at all
        disc_logits = disc_loss = None
        if not frozen:
            disc_logits = self.discriminator(input_ids=source, attention_mask=attention_mask).logits
            bce = F.binary_cross_entropy_with_logits(disc_logits.float(), wrong.float(), reduction="none")
            disc_loss = masked_mean(bce, active)

        ordinary = active & ~torch.isin(source, self.special_ids)
        extra = ordinary & (torch.rand(source.shape, device=source.device) < self.cfg.extra_mask_prob)
        if self.cfg.generator_input == "source":
            masked, scored = extra, ordinary
        else:
            masked = scored = wrong | extra
        gen_input = source.masked_fill(masked, self.mask_token_id)
        index, valid = select_positions(scored, source.numel() if self.static_shapes else None)
        logits = scored_logits(self.generator, gen_input, attention_mask, index)
        targets, at_errors = target.reshape(-1)[index], wrong.reshape(-1)[index] & valid
        token_loss = F.cross_entropy(logits.float(), targets, reduction="none")
        weights = torch.where(at_errors, self.cfg.error_weight, 1.0) * valid
        gen_loss = (token_loss * weights).sum() / weights.sum().clamp_min(1.0)
        loss = gen_loss if frozen else gen_loss + self.cfg.disc_weight * disc_loss
        return loss, self._statistics(gen_loss, logits, targets, at_errors, valid, disc_logits, disc_loss, wrong, active)

    @torch.no_grad()
    def _statistics(self, gen_loss, logits, targets, at_errors, valid, disc_logits, disc_loss, wrong, active) -> dict:
        """The step's statistics as 0-d tensors (read by the loop once per log interval)."""
        correct = (logits.argmax(-1) == targets).float()
        stats = {
            "gen_loss": gen_loss.detach(),
            "gen_acc_errors": masked_mean(correct, at_errors),
            "gen_acc_other": masked_mean(correct, valid & ~at_errors),
            "tokens": active.sum(),
        }
        if disc_logits is not None:
            predicted = (disc_logits > 0) & active
            true_positive = (predicted & wrong).sum()
            stats.update(disc_loss=disc_loss.detach(),
                         det_precision=true_positive / predicted.sum().clamp_min(1),
                         det_recall=true_positive / wrong.sum().clamp_min(1))
        return stats


def encode_pairs(pairs: list[tuple[str, str]], tokenizer: CharTokenizer, max_length: int) -> tuple[list[list[int]], list[list[int]], int]:
    """Aligned (source ids, target ids) with [CLS]/[SEP]; pairs whose encodings differ in length
    are skipped (counted). Long sentences are cut into windows so no error is lost."""
    sources, targets, skipped = [], [], 0
    body = max_length - 2
    for source, target in pairs:
        src, tgt = tokenizer.encode(source).ids, tokenizer.encode(target).ids
        if len(src) != len(tgt) or not src:
            skipped += 1
            continue
        for start in range(0, len(src), body):
            sources.append(tokenizer.with_special_tokens(src[start : start + body]))
            targets.append(tokenizer.with_special_tokens(tgt[start : start + body]))
    return sources, targets, skipped


def split_dev(pairs: list[tuple[str, str]], share: float, seed: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, dev): a seeded random `share` of the pairs held out for calibration."""
    indices = list(range(len(pairs)))
    random.Random(seed).shuffle(indices)
    cut = int(len(pairs) * share)
    held = set(indices[:cut])
    return [p for i, p in enumerate(pairs) if i not in held], [p for i, p in enumerate(pairs) if i in held]


def load_training_pairs(cfg: FinetuneConfig, output: Path, log) -> list[tuple[str, str]]:
    """Every training pair; a share of the `dev_from` files is held out and written to dev.tsv."""
    from ..splits import load_pairs
    from .synth import write_pairs

    pairs: list[tuple[str, str]] = []
    dev: list[tuple[str, str]] = []
    dev_files = {str(Path(p)) for p in cfg.dev_from}
    held_out: set[str] = set()
    for spec in cfg.train:  # a file named twice is seen twice (oversampling); its dev share once
        loaded = load_pairs(spec)
        if str(Path(spec)) in dev_files:
            loaded, held = split_dev(loaded, cfg.dev_share, cfg.seed if cfg.dev_seed is None else cfg.dev_seed)
            if str(Path(spec)) not in held_out:
                dev.extend(held)
                held_out.add(str(Path(spec)))
        log(f"{spec}: {len(loaded)} training pairs")
        pairs.extend(loaded)
    if dev:
        count = write_pairs(output / "dev.tsv", dev)
        log(f"dev split for calibration: {count} pairs -> {output / 'dev.tsv'}")
    if not pairs:
        raise ValueError("no training pairs: pass --train FILE…")
    return pairs


def bucket_widths(buckets: list[int], max_length: int) -> list[int]:
    """The batch widths in use: the configured ones cut to `max_length`, which is always one of
    them (no sentence is longer); [] when bucketing is off (`--length-buckets 0`)."""
    kept = sorted({min(w, max_length) for w in buckets if w > 0})
    return sorted(set(kept) | {max_length}) if kept else []


class BatchMaker:
    """(source, target, attention mask) CPU tensors of the given rows, padded to the longest
    sentence or, with `buckets`, to the first bucket width that holds it."""

    def __init__(self, sources: list[list[int]], targets: list[list[int]], pad_id: int, buckets: list[int]) -> None:
        self.sources, self.targets, self.pad_id, self.buckets = sources, targets, pad_id, buckets

    def width(self, longest: int) -> int:
        return next((w for w in self.buckets if w >= longest), longest)

    def __call__(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        width = self.width(max(len(self.sources[i]) for i in rows))
        # Filled in numpy: a torch tensor per row cost 512 small copies a step (--profile-steps).
        src = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        tgt = src.copy()
        for r, i in enumerate(rows):
            src[r, : len(self.sources[i])] = self.sources[i]
            tgt[r, : len(self.targets[i])] = self.targets[i]
        src_t, tgt_t = torch.from_numpy(src), torch.from_numpy(tgt)
        return src_t, tgt_t, (src_t != self.pad_id).long()


def step_flops_per_token(cfg: FinetuneConfig, discriminator, generator, max_length: int) -> float:
    """Model FLOPs a token of a step (pretrain.flops), attention counted over --max-length positions
    (an upper bound: batches are as wide as their longest sentence)."""
    from ..pretrain.flops import finetune_flops_per_token

    scored = 1.0 if cfg.generator_input == "source" else cfg.extra_mask_prob
    return finetune_flops_per_token(discriminator.config, generator.config, max_length, scored,
                                    discriminator=not cfg.freeze_discriminator)


def train(cfg: FinetuneConfig) -> Path:
    from transformers import AutoTokenizer

    from ..pretrain.flops import bf16_peak_tflops
    from ..pretrain.modeling import generator_from_discriminator, keep_layers, load_pair, set_attention

    accelerator, output = setup_run(cfg)
    log = accelerator.print
    check_generator_input(cfg.generator_input)
    discriminator, generator, tokenizer_dir = load_pair(cfg.init)
    if cfg.generator_from_discriminator:
        if generator.config.hidden_size == discriminator.config.hidden_size:
            log("generator already has the discriminator's width: --generator-from-discriminator keeps it")
        else:
            generator = generator_from_discriminator(discriminator, generator)
            log(f"generator: the discriminator's encoder, {generator.config.hidden_size} wide")
    if cfg.discriminator_layers is not None:
        kept = keep_layers(discriminator, cfg.discriminator_layers)
        log(f"discriminator: layers {kept} of the initial model")
    if cfg.generator_layers is not None:
        kept = keep_layers(generator, cfg.generator_layers)
        log(f"generator: layers {kept} of the initial model")
    if cfg.freeze_discriminator:  # its parameters include the word embeddings the generator shares
        discriminator.requires_grad_(False)
        log("discriminator frozen: the generator trains alone")
    setattr(generator.config, GENERATOR_INPUT_KEY, cfg.generator_input)  # saved with it: how to feed it
    set_attention((discriminator, generator), accelerator.device.type, accelerator.mixed_precision == "bf16")
    tokenizer = CharTokenizer(AutoTokenizer.from_pretrained(tokenizer_dir))
    max_length = min(cfg.max_length, discriminator.config.max_position_embeddings)

    with accelerator.main_process_first():
        pairs = load_training_pairs(cfg, output, log if accelerator.is_main_process else (lambda *_: None))
    sources, targets, skipped = encode_pairs(pairs, tokenizer, max_length)
    errors = sum(int(np.sum(np.asarray(s) != np.asarray(t))) for s, t in zip(sources, targets, strict=True))
    log(f"{len(sources)} training sequences ({skipped} pairs skipped for length mismatch), {errors} wrong characters")

    special_ids = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]
    static = accelerator.device.type == "cuda" or cfg.compile  # see CorrectionModel and length_buckets
    model = CorrectionModel(discriminator, generator, cfg, special_ids, tokenizer.mask_token_id, static_shapes=static)
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay)
    scheduler = linear_schedule(optimizer, cfg.warmup_steps, cfg.max_steps)
    order = BatchOrder(len(sources), cfg.batch_size, accelerator.num_processes, accelerator.process_index, cfg.seed)
    step = resume_step(cfg, accelerator, model, optimizer, scheduler, order, output)
    buckets = bucket_widths(cfg.length_buckets, max_length) if static else []
    model = compile_model(model, cfg, accelerator.device.type, static=bool(buckets))
    model, optimizer = accelerator.prepare(model, optimizer)
    if accelerator.is_main_process:
        (output / "finetune_config.json").write_text(json.dumps(asdict(cfg), indent=1))

    make_batch = BatchMaker(sources, targets, tokenizer.pad_token_id, buckets)
    run_loop(cfg, accelerator, model, optimizer, scheduler, BatchPrefetcher(make_batch, order, accelerator.device),
             order, output, step, desc="finetune", flops_per_token=step_flops_per_token(cfg, discriminator, generator, max_length),
             peak_tflops=cfg.peak_tflops or bf16_peak_tflops(accelerator.device))
    save_final(accelerator, model, output, tokenizer_dir)
    return output
