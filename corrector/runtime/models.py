"""The one loader for correction models, shared by the CLI, service, evaluator and training.

A model is a discriminator (ElectraForPreTraining, or a 2-class token-classification head) and
a generator (ElectraForMaskedLM) with a BERT-style vocabulary. Accepted layouts:

* a directory `DIR/` with `DIR/discriminator/` and `DIR/generator/` (each `config.json` +
  `model.safetensors`), tokenizer files in `DIR/` (or in `DIR/discriminator/`), and optionally
  `DIR/scorer.json` with fitted scorer weights and thresholds and `DIR/ngram.safetensors`, a
  character n-gram LM counted by `python -m corrector.pretrain ngram`, and
  `DIR/error_pairs.json`, correction counts from the fine-tuning data (error_pairs.py), and
  `DIR/particles.safetensors`, the 的/地/得 model (particles.py) — what this project ships;
* a discriminator given directly, local directory or hub id, whose name contains
  `discriminator`; the generator is the same name with `generator` (the layout of
  `hfl/chinese-electra-180g-small-discriminator` / `...-generator`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..resources.error_pairs import FILENAME as ERROR_PAIRS_FILE
from ..resources.error_pairs import ErrorPairs
from ..resources.ngram import FILENAME as NGRAM_FILE
from ..resources.ngram import NgramLM
from ..resources.particles import FILENAME as PARTICLES_FILE
from ..resources.particles import ParticleModel
from ..text.tokenization import CharTokenizer, read_vocab_tokenizer
from . import RUNTIMES
from .allocator import retain_freed_memory
from .onnx_encoder import onnx_runtime_available
from .onnx_networks import OnnxNetwork, onnx_copy, read_onnx_network

if TYPE_CHECKING:
    import torch
    from transformers import ElectraForMaskedLM, PreTrainedModel

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL_DIR = PROJECT_ROOT / "data" / "model"
MODEL_ENV_VAR = "CORRECTOR_MODEL"
SCORER_FILE = "scorer.json"
# What the generator sees at the positions it proposes characters for (see runtime/passes.py):
# "masked" — [MASK], as in pre-training; "source" — the character as written, the BERT-CSC way
# (the fine-tuned generator then maps a sentence with errors to the corrected one).
GENERATOR_INPUTS = ("masked", "source")
GENERATOR_INPUT_KEY = "csc_generator_input"  # in generator/config.json, set by fine-tuning


def write_scorer_config(model_dir: str | Path, config: dict) -> Path:
    """Write `config` as the model directory's scorer.json (what `load_model` reads back)."""
    path = Path(model_dir) / SCORER_FILE
    path.write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def default_model_path() -> str:
    """`$CORRECTOR_MODEL` if set, else the model shipped under `data/model`."""
    return os.environ.get(MODEL_ENV_VAR) or str(DEFAULT_MODEL_DIR)


def locate_model(path_or_id: str) -> str:
    """`path_or_id`, or - when it is a relative path that does not exist from here but does
    from the project root, such as the documented `data/model` in a script run from another
    directory - that directory under the project root."""
    path = Path(path_or_id)
    if not path.is_absolute() and not path.exists() and (PROJECT_ROOT / path).is_dir():
        return str(PROJECT_ROOT / path)
    return path_or_id


@dataclass
class ModelPaths:
    discriminator: str
    generator: str
    tokenizer: str
    scorer: str | None  # path of scorer.json, if the model has one
    ngram: str | None = None  # path of ngram.safetensors, if the model has one
    error_pairs: str | None = None  # path of error_pairs.json, if the model has one
    particles: str | None = None  # path of particles.safetensors, if the model has one


def resolve_model_paths(path_or_id: str) -> ModelPaths:
    """Work out where the discriminator, generator and tokenizer of a model live."""
    root = Path(path_or_id)
    if root.is_dir() and (root / "discriminator").is_dir():
        disc, gen = root / "discriminator", root / "generator"
        if not gen.is_dir():
            raise FileNotFoundError(f"model directory {root} has discriminator/ but no generator/")
        tokenizer = root if (root / "vocab.txt").exists() or (root / "tokenizer.json").exists() else disc
        scorer, ngram, pairs, particles = (root / SCORER_FILE, root / NGRAM_FILE, root / ERROR_PAIRS_FILE,
                                           root / PARTICLES_FILE)
        return ModelPaths(str(disc), str(gen), str(tokenizer), str(scorer) if scorer.exists() else None,
                          str(ngram) if ngram.exists() else None, str(pairs) if pairs.exists() else None,
                          str(particles) if particles.exists() else None)
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
        f"{path_or_id!r} is no model directory (there is none at {root.absolute()}), and as a hub id it does "
        "not say which is the discriminator: pass a model directory, or the discriminator's hub id "
        "(e.g. hfl/chinese-electra-180g-small-discriminator)"
    )


@dataclass
class ModelBundle:
    """A loaded discriminator + generator pair, in eval mode on one device."""

    name: str
    tokenizer: CharTokenizer
    # transformers' networks (`load_model`), int8 copies of them or of electra.py's (runtime
    # "torch"), or ONNX Runtime networks (onnx_networks.py, the CPU default); the pipeline reads
    # either through `discriminator_network()` / `generator_network()`.
    discriminator: Any
    generator: Any
    device: str  # torch's name of it: "cpu", "cuda", "cuda:1"
    scorer_config: dict = field(default_factory=dict)
    ngram: NgramLM | None = None  # feature `lm_gain` is 0 without one
    error_pairs: ErrorPairs | None = None  # features `pair_log_*` are 0 without one
    particles: ParticleModel | None = None  # feature `particle_gain` is 0 without one
    bf16: bool = False  # run the network passes under bf16 autocast (`autocast()`)

    def __post_init__(self) -> None:
        self.device = str(self.device)

    @property
    def device_type(self) -> str:
        """"cpu" or "cuda" (the device without its index)."""
        return self.device.split(":")[0]

    @property
    def generator_input(self) -> str:
        """How the corrector feeds the generator: what scorer.json was calibrated with, else what
        fine-tuning trained it for (generator config), else "masked" (a pre-trained generator)."""
        mode = self.scorer_config.get("generator_input") or getattr(self.generator.config, GENERATOR_INPUT_KEY, None)
        return check_generator_input(mode or "masked")

    @property
    def precision(self) -> str:
        """How the network passes run: "int8" (ONNX Runtime networks, or an `int8_copy` of the
        torch networks, quantization.py), "bf16" (autocast) or "fp32"."""
        if isinstance(self.discriminator, OnnxNetwork):
            return "int8"
        from .int8 import is_int8

        return "int8" if is_int8(self.discriminator) else "bf16" if self.bf16 else "fp32"

    @property
    def runtime(self) -> str:
        """What runs the networks' encoders: "onnxruntime" (onnx_networks.py) or "torch"."""
        return "onnxruntime" if isinstance(self.discriminator, OnnxNetwork) else "torch"

    @property
    def max_length(self) -> int:
        """Longest input in characters, leaving room for [CLS] and [SEP]."""
        positions = min(
            self.discriminator.config.max_position_embeddings, self.generator.config.max_position_embeddings
        )
        return positions - 2

    def autocast(self):
        """The context every torch network pass runs in: bf16 autocast when `bf16` is set (weights
        stay fp32; matmuls in bf16, ~1.7x faster at batch 32 on CPUs with AVX512-BF16/AMX)."""
        import torch

        return torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16)

    def discriminator_network(self):
        """The discriminator as the pipeline calls it (`replaced_probability`, numpy in and out)."""
        if isinstance(self.discriminator, OnnxNetwork):
            return self.discriminator
        from .torch_networks import TorchDiscriminator

        return TorchDiscriminator(self, self.discriminator)

    def generator_network(self):
        """The generator as the pipeline calls it (`encode`, `states`, `logits`, `output_layer`)."""
        if isinstance(self.generator, OnnxNetwork):
            return self.generator
        from .torch_networks import TorchGenerator

        return TorchGenerator(self, self.generator)

    def replaced_probability(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        """P(token was replaced) per position, shape (batch, length), float32."""
        return self.discriminator_network().replaced_probability(np.asarray(input_ids), attention_mask)


def check_generator_input(mode: str) -> str:
    if mode not in GENERATOR_INPUTS:
        raise ValueError(f"generator input {mode!r} is not one of {', '.join(GENERATOR_INPUTS)}")
    return mode


# Set by `disable_loading_bars`: transformers' weight-loading bars are switched off whenever
# `load_model` imports it.
_quiet_loading = False


def disable_loading_bars() -> None:
    """No progress bars while transformers loads weights (they would clutter the CLI's output and
    the worker processes' logs). Does not import transformers (~3 s), which the int8 path
    (`load_int8_model`) never needs: `_transformers` switches them off if it is imported later."""
    global _quiet_loading
    _quiet_loading = True
    if "transformers" in sys.modules:
        _transformers()


TORCH_INSTALL = "pip install torch==2.13.0 transformers (or the package's [torch] extra)"


def require_torch(purpose: str):
    """torch, or a RuntimeError saying that `purpose` needs it. The ONNX Runtime networks of a
    model directory in the shipped layout run without it; fp32, bf16, GPUs, `runtime="torch"`,
    hub ids and training do not."""
    try:
        import torch
    except ImportError as err:
        raise RuntimeError(f"{purpose} needs torch, which is not installed: {TORCH_INSTALL}") from err
    from .threads import apply_to_torch

    apply_to_torch()  # a --threads given before torch was imported
    return torch


def _transformers():
    """The transformers package, imported on first use: training, hub ids and the networks the
    int8 path cannot read need it; a corrector built from a shipped model directory does not."""
    require_torch("loading a model with transformers")
    try:
        import transformers
    except ImportError as err:
        raise RuntimeError(f"loading a model with transformers needs it, and it is not installed: {TORCH_INSTALL}") from err

    if _quiet_loading:
        transformers.utils.logging.disable_progress_bar()
    return transformers


def load_discriminator(path: str, **kwargs) -> PreTrainedModel:
    """`kwargs` go to `from_pretrained` (e.g. `dtype`)."""
    transformers = _transformers()
    config = transformers.AutoConfig.from_pretrained(path)
    architectures = config.architectures or ["ElectraForPreTraining"]
    if any("TokenClassification" in arch for arch in architectures):
        return transformers.AutoModelForTokenClassification.from_pretrained(path, **kwargs)
    return transformers.ElectraForPreTraining.from_pretrained(path, **kwargs)


def load_halves(paths: ModelPaths) -> tuple[PreTrainedModel, ElectraForMaskedLM]:
    """Discriminator and generator in fp32 whatever the stored precision (the shipped model
    stores fp16 to halve its size; transformers would otherwise keep the file's dtype)."""
    import torch

    discriminator = load_discriminator(paths.discriminator, dtype=torch.float32)
    generator = _transformers().ElectraForMaskedLM.from_pretrained(paths.generator, dtype=torch.float32)
    return discriminator, generator


def load_model(path_or_id: str | None = None, device: str | torch.device = "cpu") -> ModelBundle:
    """Load a model once; every caller (CLI, service, evaluator) goes through here: transformers'
    networks in fp32 (training and evaluation use them as such; `prepare_bundle` builds a
    Corrector's int8 networks without them where it can).

    Also sets the process's malloc to keep freed memory (`allocator.retain_freed_memory`): every
    batch allocates the same activations again, and on CPU that made batched correction ~25%
    faster (104 vs 84 sentences/s at batch 32)."""
    torch = require_torch(f"loading {path_or_id or 'the model'} as torch networks (fp32, bf16, GPUs, hub ids, "
                          "another layout, no onnxruntime)")
    retain_freed_memory()
    path_or_id = locate_model(str(path_or_id or default_model_path()))
    paths = resolve_model_paths(path_or_id)
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was requested but CUDA is not available")
    hf_tokenizer = _transformers().AutoTokenizer.from_pretrained(paths.tokenizer)
    discriminator, generator = load_halves(paths)
    discriminator, generator = discriminator.to(device).eval(), generator.to(device).eval()
    return _bundle(path_or_id, paths, CharTokenizer(hf_tokenizer), discriminator, generator, device)


def load_int8_model(path_or_id: str | None = None, runtime: str = "auto") -> ModelBundle | None:
    """What `quantized(load_model(path_or_id), runtime)` gives, built without transformers: the
    tokenizer from the directory's vocabulary, the networks from their files — as ONNX Runtime
    networks without torch ("onnxruntime", or "auto" where onnxruntime is installed;
    onnx_networks.py), or read by electra.py and made int8 by `int8_copy` ("torch"). For a local
    model directory in the shipped layout (`DIR/discriminator/`, `DIR/generator/`) whose
    networks and tokenizer those readers accept; None for anything else (hub ids, other
    architectures), which `load_model` loads.

    Why: transformers' import is ~3 s and torch's 1.7 s of what was a ~6.6 s one-sentence CLI
    call on 2 cores, and the int8 networks run neither's code (benchmarks/startup.py)."""
    check_runtime(runtime)
    retain_freed_memory()
    path_or_id = locate_model(str(path_or_id or default_model_path()))
    root = Path(path_or_id)
    if not ((root / "discriminator").is_dir() and (root / "generator").is_dir()):
        return None
    paths = resolve_model_paths(path_or_id)
    vocab = read_vocab_tokenizer(paths.tokenizer)
    if vocab is None:
        return None
    if runtime != "torch" and onnx_runtime_available():
        discriminator = read_onnx_network(paths.discriminator)
        generator = read_onnx_network(paths.generator) if discriminator is not None else None
        if _is_pair(discriminator, generator):
            return _bundle(path_or_id, paths, CharTokenizer(vocab), discriminator, generator, "cpu")
        if runtime == "onnxruntime":
            return None  # transformers loads it; `quantized` then says whether ORT can run it
    require_torch("runtime='torch'" if runtime == "torch" else "running the int8 networks without onnxruntime")
    from .electra import read_network
    from .quantization import int8_copy

    discriminator = read_network(paths.discriminator)
    generator = read_network(paths.generator) if discriminator is not None else None
    if not _is_pair(discriminator, generator):
        return None
    return _bundle(path_or_id, paths, CharTokenizer(vocab), int8_copy(discriminator, "torch"),
                   int8_copy(generator, "torch"), "cpu")


def _is_pair(discriminator, generator) -> bool:
    """Both networks read, a discriminator and a generator of the shipped architectures."""
    return (discriminator is not None and generator is not None
            and discriminator.config.architectures == ["ElectraForPreTraining"]
            and generator.config.architectures == ["ElectraForMaskedLM"])


def _bundle(path_or_id: str, paths: ModelPaths, tokenizer: CharTokenizer, discriminator: Any, generator: Any,
            device: str | torch.device) -> ModelBundle:
    """The bundle of loaded networks, with the directory's scorer.json and resources."""
    scorer_config: dict = {}
    if paths.scorer:
        scorer_config = json.loads(Path(paths.scorer).read_text(encoding="utf-8"))
    return ModelBundle(
        name=path_or_id,
        tokenizer=tokenizer,
        discriminator=discriminator,
        generator=generator,
        device=device,
        scorer_config=scorer_config,
        ngram=NgramLM.load(paths.ngram) if paths.ngram else None,
        error_pairs=ErrorPairs.load(paths.error_pairs) if paths.error_pairs else None,
        particles=ParticleModel.load(paths.particles) if paths.particles else None,
    )


def check_runtime(runtime: str) -> str:
    """`runtime` if it is one of RUNTIMES, else a ValueError naming them."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    return runtime


def quantized(bundle: ModelBundle, runtime: str = "auto") -> ModelBundle:
    """A copy of the bundle whose networks run int8 matmuls (quantization.py: int8 weights per
    output channel; CPU only): ONNX Runtime networks ("onnxruntime", onnx_networks.py) or torch
    int8 copies ("torch"); "auto": ONNX Runtime where installed and the networks qualify. The
    shared bundle is not touched (the service and evaluator may hold it too)."""
    runtime = check_runtime(runtime)
    if bundle.device_type != "cpu":
        raise ValueError("int8 quantization is for CPU inference")
    if runtime != "torch":
        discriminator, generator = onnx_copy(bundle.discriminator), onnx_copy(bundle.generator)
        if discriminator is not None and generator is not None:
            return dataclasses.replace(bundle, discriminator=discriminator, generator=generator)
        if runtime == "onnxruntime":
            if not onnx_runtime_available():
                raise ValueError("the ONNX networks need onnxruntime and onnx (pip install onnxruntime onnx)")
            raise ValueError(f"{type(bundle.discriminator).__name__} / {type(bundle.generator).__name__}: "
                             "no encoder-only gelu ELECTRA pair the ONNX encoder can run")
    from .quantization import int8_copy

    return dataclasses.replace(bundle, discriminator=int8_copy(bundle.discriminator, "torch"),
                               generator=int8_copy(bundle.generator, "torch"))


def prepare_bundle(model: str | ModelBundle | None = None, device: str = "cpu", quantize: bool | None = None,
                   bf16: bool = False, runtime: str = "auto") -> ModelBundle:
    """The model a Corrector runs: loaded (`model` a path or hub id, or None for the default) or
    given, then int8 (`quantize`; None: int8 on CPU unless bf16 was asked for) with its encoders
    in `runtime`, or bf16 autocast. A bundle given is never changed: a copy is."""
    bundle = None
    if not isinstance(model, ModelBundle) and str(device).split(":")[0] == "cpu" and not bf16 and quantize is not False:
        bundle = load_int8_model(model, runtime)  # None where it cannot: then transformers loads it
    if bundle is None:
        bundle = model if isinstance(model, ModelBundle) else load_model(model, device=device)
    already_int8 = bundle.precision == "int8"  # e.g. another Corrector's bundle
    if quantize is None:  # the default: int8 on CPU, unless bf16 networks were asked for
        quantize = already_int8 or (bundle.device_type == "cpu" and not bf16)
    if check_runtime(runtime) == "onnxruntime" and not quantize:
        raise ValueError("runtime='onnxruntime' runs int8 networks: not with quantize=False, bf16 or a GPU")
    if quantize and not already_int8:
        bundle = quantized(bundle, runtime)
    elif not quantize and already_int8:
        raise ValueError("quantize=False, but the model bundle given already runs int8 networks")
    elif already_int8 and runtime != "auto" and bundle.runtime != runtime:
        raise ValueError(f"runtime={runtime!r}, but the model bundle given already runs {bundle.runtime}")
    if bf16 != bundle.bf16:  # a copy: the shared bundle keeps its own setting
        bundle = dataclasses.replace(bundle, bf16=bf16)
    return bundle


def save_pair(discriminator: PreTrainedModel, generator: ElectraForMaskedLM, output_dir: str,
              tokenizer_dir: str | None = None, dtype: torch.dtype | None = None) -> None:
    """Write `OUT/discriminator/`, `OUT/generator/` (safetensors) and copy tokenizer files to `OUT/`:
    the layout `load_model` reads (training, `finetune ship`).
    `dtype` (e.g. torch.float16 for shipping) converts copies; the models passed in are untouched."""
    import torch

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, model in (("discriminator", discriminator), ("generator", generator)):
        with torch.no_grad():
            if dtype is not None:
                model = copy.deepcopy(model).to(dtype)
            model.save_pretrained(out / name, safe_serialization=True)
    if tokenizer_dir is not None and Path(tokenizer_dir).resolve() != out.resolve():
        for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            src = Path(tokenizer_dir) / name
            if src.exists():
                shutil.copy2(src, out / name)
