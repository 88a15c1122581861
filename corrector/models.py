"""The one loader for correction models, shared by the CLI, service, evaluator and training.

A model is a discriminator (ElectraForPreTraining, or a 2-class token-classification head) and
a generator (ElectraForMaskedLM) with a BERT-style vocabulary. Accepted layouts:

* a directory `DIR/` with `DIR/discriminator/` and `DIR/generator/` (each `config.json` +
  `model.safetensors`), tokenizer files in `DIR/` (or in `DIR/discriminator/`), and optionally
  `DIR/scorer.json` with fitted scorer weights and thresholds — what this project ships and saves;
* a discriminator given directly, local directory or hub id, whose name contains
  `discriminator`; the generator is the same name with `generator` (the layout of
  `hfl/chinese-electra-180g-small-discriminator` / `...-generator`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer, ElectraForMaskedLM, ElectraForPreTraining, PreTrainedModel

from .tokenization import CharTokenizer

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL_DIR = PROJECT_ROOT / "data" / "model"
MODEL_ENV_VAR = "CORRECTOR_MODEL"
SCORER_FILE = "scorer.json"


def default_model_path() -> str:
    """`$CORRECTOR_MODEL` if set, else the model shipped under `data/model`."""
    return os.environ.get(MODEL_ENV_VAR) or str(DEFAULT_MODEL_DIR)


@dataclass
class ModelPaths:
    discriminator: str
    generator: str
    tokenizer: str
    scorer: str | None  # path of scorer.json, if the model has one


def resolve_model_paths(path_or_id: str) -> ModelPaths:
    """Work out where the discriminator, generator and tokenizer of a model live."""
    root = Path(path_or_id)
    if root.is_dir() and (root / "discriminator").is_dir():
        disc, gen = root / "discriminator", root / "generator"
        if not gen.is_dir():
            raise FileNotFoundError(f"model directory {root} has discriminator/ but no generator/")
        tokenizer = root if (root / "vocab.txt").exists() or (root / "tokenizer.json").exists() else disc
        scorer = root / SCORER_FILE
        return ModelPaths(str(disc), str(gen), str(tokenizer), str(scorer) if scorer.exists() else None)
    if "discriminator" in path_or_id:
        generator = path_or_id.replace("discriminator", "generator")
        scorer = root / SCORER_FILE
        return ModelPaths(path_or_id, generator, path_or_id, str(scorer) if scorer.exists() else None)
    if root.exists() or path_or_id.startswith((".", "/", "~")):
        raise FileNotFoundError(
            f"{path_or_id} is not a model: expected a directory with discriminator/ and generator/ "
            "sub-directories, or a discriminator directory/hub id whose name contains 'discriminator'"
        )
    raise ValueError(
        f"cannot tell discriminator and generator apart in hub id {path_or_id!r}; "
        "pass the discriminator id (e.g. hfl/chinese-electra-180g-small-discriminator)"
    )


@dataclass
class ModelBundle:
    """A loaded discriminator + generator pair, in eval mode on one device."""

    name: str
    tokenizer: CharTokenizer
    discriminator: PreTrainedModel
    generator: ElectraForMaskedLM
    device: torch.device
    scorer_config: dict = field(default_factory=dict)

    @property
    def max_length(self) -> int:
        """Longest input in characters, leaving room for [CLS] and [SEP]."""
        positions = min(
            self.discriminator.config.max_position_embeddings, self.generator.config.max_position_embeddings
        )
        return positions - 2

    @torch.inference_mode()
    def replaced_probability(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """P(token was replaced) per position, shape (batch, length)."""
        logits = self.discriminator(input_ids=input_ids, attention_mask=attention_mask).logits
        if logits.dim() == 3:  # token-classification head: class 1 = wrong character
            return logits.float().softmax(-1)[..., 1]
        return torch.sigmoid(logits.float())


def load_discriminator(path: str, **kwargs) -> PreTrainedModel:
    config = AutoConfig.from_pretrained(path, **kwargs)
    architectures = config.architectures or ["ElectraForPreTraining"]
    if any("TokenClassification" in arch for arch in architectures):
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification.from_pretrained(path, **kwargs)
    return ElectraForPreTraining.from_pretrained(path, **kwargs)


def load_model(path_or_id: str | None = None, device: str | torch.device = "cpu") -> ModelBundle:
    """Load a model once; every caller (CLI, service, evaluator) goes through here."""
    path_or_id = str(path_or_id or default_model_path())
    paths = resolve_model_paths(path_or_id)
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was requested but CUDA is not available")
    hf_tokenizer = AutoTokenizer.from_pretrained(paths.tokenizer)
    discriminator = load_discriminator(paths.discriminator).to(device).eval()
    generator = ElectraForMaskedLM.from_pretrained(paths.generator).to(device).eval()
    scorer_config: dict = {}
    if paths.scorer:
        scorer_config = json.loads(Path(paths.scorer).read_text(encoding="utf-8"))
    return ModelBundle(
        name=path_or_id,
        tokenizer=CharTokenizer(hf_tokenizer),
        discriminator=discriminator,
        generator=generator,
        device=device,
        scorer_config=scorer_config,
    )
