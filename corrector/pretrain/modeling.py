"""ELECTRA generator + discriminator pair with shared embeddings.

The discriminator is `ElectraForPreTraining`, the generator `ElectraForMaskedLM`; both are stock
Hugging Face classes so every checkpoint loads with plain `from_pretrained`. Following the ELECTRA
paper, the generator is a fraction of the discriminator's width (same depth) and the two share
their token, position and token-type embeddings (the embedding size is the same for both; the
generator projects it to its own hidden size).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining


@dataclass
class ElectraSize:
    """Discriminator shape; the generator takes `generator_size` of its width and heads."""

    num_layers: int = 12
    hidden_size: int = 256
    num_heads: int = 4
    intermediate_size: int = 1024
    embedding_size: int = 128
    max_position_embeddings: int = 512
    generator_size: float = 0.25


PRESETS: dict[str, ElectraSize] = {
    # For tests: builds and trains in seconds on a CPU.
    "tiny": ElectraSize(num_layers=2, hidden_size=64, num_heads=2, intermediate_size=128,
                        embedding_size=32, max_position_embeddings=256, generator_size=0.5),
    # ELECTRA-small (Clark et al. 2020): 12 x 256, embeddings 128.
    "small": ElectraSize(),
    # What two CPU cores can pre-train in about an hour: half the depth of ELECTRA-small.
    "mini": ElectraSize(num_layers=6, max_position_embeddings=256),
    # The shipped pair's shape (data/model: LTP-tiny's 3 x 256 encoder, a full-width generator).
    "shipped": ElectraSize(num_layers=3, generator_size=1.0),
    # BERT-base size (ELECTRA-base: 12 x 768, embeddings 768, generator 1/3 width), the shape a
    # GPU step is measured at for MFU (`pretrain bench --preset base`).
    "base": ElectraSize(num_layers=12, hidden_size=768, num_heads=12, intermediate_size=3072,
                        embedding_size=768, generator_size=1 / 3),
}
# Vocabulary a preset is benchmarked with: the shipped pair's own (data/model/vocab.txt), else
# BERT-Chinese's 21,128 entries.
PRESET_VOCAB_SIZE = {"shipped": 6884}
DEFAULT_VOCAB_SIZE = 21128


def electra_configs(size: ElectraSize, vocab_size: int, pad_token_id: int = 0) -> tuple[ElectraConfig, ElectraConfig]:
    """(discriminator config, generator config) for a size."""
    common = dict(
        vocab_size=vocab_size,
        embedding_size=size.embedding_size,
        num_hidden_layers=size.num_layers,
        max_position_embeddings=size.max_position_embeddings,
        pad_token_id=pad_token_id,
    )
    disc = ElectraConfig(
        hidden_size=size.hidden_size,
        num_attention_heads=size.num_heads,
        intermediate_size=size.intermediate_size,
        **common,
    )
    gen_heads = max(1, round(size.num_heads * size.generator_size))
    gen_hidden = gen_heads * (size.hidden_size // size.num_heads)
    gen = ElectraConfig(
        hidden_size=gen_hidden,
        num_attention_heads=gen_heads,
        intermediate_size=max(4, round(size.intermediate_size * gen_hidden / size.hidden_size)),
        **common,
    )
    return disc, gen


def tie_embeddings(discriminator: ElectraForPreTraining, generator: ElectraForMaskedLM) -> None:
    """Make the generator use the discriminator's embedding modules (one set of weights)."""
    generator.electra.embeddings.word_embeddings = discriminator.electra.embeddings.word_embeddings
    generator.electra.embeddings.position_embeddings = discriminator.electra.embeddings.position_embeddings
    generator.electra.embeddings.token_type_embeddings = discriminator.electra.embeddings.token_type_embeddings
    # The generator's output layer is already tied to its (now shared) input embeddings.
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight


@torch.no_grad()
def generator_from_discriminator(discriminator: ElectraForPreTraining, generator: ElectraForMaskedLM) -> ElectraForMaskedLM:
    """A full-width generator whose encoder starts as a copy of the discriminator's, for CSC
    fine-tuning (`finetune train --generator-from-discriminator`).

    Why: in CSC the generator is the corrector (BERT-CSC: it reads the text as written and
    predicts every character), and ELECTRA's discriminator is the network that learned the
    better representations — its ¼–½-width generator is a pre-training device, and downstream
    tasks fine-tune the discriminator (Clark et al. 2020). The new generator keeps the
    discriminator's shape and encoder weights, the prediction head's LayerNorm and output bias
    of `generator` (both live in the shared embedding space), and a fresh hidden→embedding
    projection; its embeddings are tied to the discriminator's as in pre-training. How it
    compared with the ½-width generator is in the model card (data/model/README.md, "What
    limits it")."""
    if discriminator.config.embedding_size != generator.config.embedding_size:
        raise ValueError("the generator's prediction head must share the discriminator's embedding size "
                         f"({generator.config.embedding_size} vs {discriminator.config.embedding_size})")
    config = type(discriminator.config).from_dict(discriminator.config.to_dict())
    config.architectures = ["ElectraForMaskedLM"]
    wide = ElectraForMaskedLM(config)
    wide.electra.load_state_dict(discriminator.electra.state_dict())
    wide.generator_predictions.LayerNorm.load_state_dict(generator.generator_predictions.LayerNorm.state_dict())
    wide.generator_lm_head.bias.copy_(generator.generator_lm_head.bias)
    tie_embeddings(discriminator, wide)
    return wide.to(device=discriminator.device, dtype=discriminator.dtype)


def keep_layers(model: ElectraForPreTraining | ElectraForMaskedLM, layers: int) -> list[int]:
    """Set `model`'s encoder in place to `layers` of its layers, evenly spaced from the first to
    the last; returns their indices. Fewer layers: DistilBERT's initialisation of a shallower
    student. More: each layer repeated in place (3 -> 6: 0 0 1 1 2 2), a deeper network that
    starts from what the shallow one knows (progressive stacking, Gong et al. 2019). A repeat is a
    copy whose attention and feed-forward output projections start at zero, so its residual
    branches add nothing at first: the shipped discriminator grown 3 -> 6 this way keeps AP .42-.78
    on the broad dev's parts before any training (plain copies: .21-.57; the 3 layers: .65-.91).

    Why: on two CPU cores the discriminator's pass is the largest single cost of a correction
    (README, Benchmarks), so a shallower one, fine-tuned from the deep one's layers
    (`finetune train --discriminator-layers`), is the lever for speed; the 3-layer LTP-tiny pair
    leaves room the other way (docs/gpu.md, "Profiled")."""
    blocks = model.electra.encoder.layer
    if layers < 1:
        raise ValueError(f"cannot keep {layers} of {len(blocks)} layers")
    kept = [len(blocks) - 1] if layers == 1 else [round(i * (len(blocks) - 1) / (layers - 1)) for i in range(layers)]
    chosen = []
    for n, i in enumerate(kept):  # `kept` never decreases: a repeat follows its original
        block = blocks[i]
        if n and kept[n - 1] == i:
            block = copy.deepcopy(block)
            with torch.no_grad():
                for projection in (block.attention.output.dense, block.output.dense):
                    projection.weight.zero_()
                    projection.bias.zero_()
        chosen.append(block)
    model.electra.encoder.layer = nn.ModuleList(chosen)
    model.config.num_hidden_layers = layers
    return kept


def build_pair(size: ElectraSize, vocab_size: int, pad_token_id: int = 0) -> tuple[ElectraForPreTraining, ElectraForMaskedLM]:
    disc_config, gen_config = electra_configs(size, vocab_size, pad_token_id)
    discriminator = ElectraForPreTraining(disc_config)
    generator = ElectraForMaskedLM(gen_config)
    tie_embeddings(discriminator, generator)
    return discriminator, generator


def attention_implementation(device_type: str, bf16: bool) -> str:
    """Attention kernel for training: SDPA's fused kernels on GPUs and for fp32 on CPUs. For bf16
    on CPUs HF's matmul ("eager") attention, which at 128 positions and 64-wide heads made a
    pre-training step 13% faster than SDPA's CPU flash kernel (`python -m corrector.pretrain
    bench`: 1,531 vs 1,356 tok/s at 1 thread; in fp32 SDPA was 15% faster)."""
    return "eager" if device_type == "cpu" and bf16 else "sdpa"


def set_attention(models, device_type: str, bf16: bool) -> None:
    for model in models:
        model.config._attn_implementation = attention_implementation(device_type, bf16)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())


def load_pair(path_or_id: str) -> tuple[ElectraForPreTraining, ElectraForMaskedLM, str]:
    """(discriminator, generator, tokenizer dir) of an existing model, embeddings re-tied where
    they were tied when saved (separately saved halves load as equal copies), SDPA attention.
    Halves with different embeddings (a discriminator and a generator from two fine-tunes, as the
    release pairs them) stay as they are: tying would overwrite the generator's."""
    from ..runtime.models import load_halves, resolve_model_paths

    paths = resolve_model_paths(path_or_id)
    discriminator, generator = load_halves(paths)
    ours = discriminator.electra.embeddings.word_embeddings.weight
    theirs = generator.electra.embeddings.word_embeddings.weight
    if ours.shape == theirs.shape and torch.equal(ours, theirs):
        tie_embeddings(discriminator, generator)
    return discriminator, generator, paths.tokenizer
