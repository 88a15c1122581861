"""The systems the evaluator can run: anything with `correct_batch(texts, batch_size, threshold)`.

* ``identity``  — returns every sentence unchanged (the floor: zero recall, zero FPR);
* ``classic``   — `corrector.baselines.classic.ClassicCorrector` (pycorrector's former electra corrector);
* ``corrector`` — `corrector.pipeline.Corrector`, this project's corrector (the default);
* ``generator`` — `corrector.baselines.generator_only.GeneratorCorrector`, the generator alone read as a
  BERT-CSC corrector (its top character everywhere), to see what the networks do by themselves.

The model-backed systems are imported only when asked for, so the evaluator (and its tests) work
without them; when several run in one invocation they share one loaded model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corrector.evaluation.runs import System
from corrector.result import Edit, Result

SYSTEM_NAMES = ("identity", "classic", "corrector", "generator")
DEFAULT_SYSTEM = "corrector"


class IdentitySystem:
    """Changes nothing."""

    def correct_batch(
        self, texts: list[str], batch_size: int = 32, threshold: float | None = None
    ) -> list[Result]:
        return [Result.unchanged(text) for text in texts]


class FunctionSystem:
    """Wraps a `str -> str` function (e.g. another toolkit's corrector) as a system.

    Edits are the positions where the output differs from the input, each with confidence 1.0, so
    a threshold sweep over such a system is flat. Outputs of a different length have no edits.
    """

    def __init__(self, function: Callable[[str], str]) -> None:
        self.function = function

    def correct_batch(
        self, texts: list[str], batch_size: int = 32, threshold: float | None = None
    ) -> list[Result]:
        results = []
        for text in texts:
            output = self.function(text)
            edits = []
            if len(output) == len(text):
                edits = [
                    Edit(i, s, t, 1.0) for i, (s, t) in enumerate(zip(text, output, strict=True)) if s != t
                ]
            results.append(Result(text, output, edits))
        return results


@dataclass
class NamedSystem:
    """A system with what the report says about it."""

    name: str
    system: System
    model_path: str | None = None  # None for systems without a model
    model_size_bytes: int | None = None
    info: dict = field(default_factory=dict)

    def describe_model(self) -> dict | None:
        if self.model_path is None:
            return None
        size = self.model_size_bytes
        described = {
            "path": self.model_path,
            "size_bytes": size,
            "size_mb": round(size / 2**20, 2) if size is not None else None,
        }
        precision = getattr(self.system, "precision", None)  # the corrector's: int8 / bf16 / fp32
        if precision is None:
            return described
        return {**described, "precision": precision, "runtime": self.system.runtime}


def model_size_bytes(path: str | os.PathLike | None) -> int | None:
    """Total size of the files of a local model directory (None for hub ids or missing paths)."""
    if path is None:
        return None
    root = Path(path)
    if root.is_file():
        return root.stat().st_size
    if not root.is_dir():
        return None
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def parse_system_names(spec: str) -> list[str]:
    """'identity,classic' → ['identity', 'classic']; unknown names raise ValueError."""
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in SYSTEM_NAMES]
    if unknown or not names:
        raise ValueError(
            f"unknown system {', '.join(unknown) or spec!r}; choose from {', '.join(SYSTEM_NAMES)}"
        )
    return list(dict.fromkeys(names))  # keep order, drop repeats


class SystemFactory:
    """Builds systems by name, loading the model at most once for all of them.

    Thresholds are not fixed here: the evaluator passes them to every `correct_batch` call, so
    one built system serves both the normal run and the threshold-0 sweep run.
    """

    def __init__(self, model: str | None = None, device: str = "cpu", quantize: bool | None = None,
                 runtime: str = "auto", passes: int | None = None) -> None:
        self.model = model
        self.passes = passes  # the corrector's correction passes; None: its default
        self.device = device
        self.quantize = quantize  # the corrector's int8 networks; None: its default (int8 on CPU)
        self.runtime = runtime  # what runs the corrector's int8 encoders; "auto": onnxruntime where installed
        self._bundle = None

    def model_path(self) -> str:
        from corrector.runtime.models import default_model_path

        return str(self.model or default_model_path())

    def bundle(self):
        """The shared `ModelBundle` (loaded on first use)."""
        if self._bundle is None:
            from corrector.runtime.models import load_model

            self._bundle = load_model(self.model_path(), device=self.device)
        return self._bundle

    def build(self, name: str) -> NamedSystem:
        """Raises whatever loading raises (missing model, missing module); the caller reports it."""
        if name == "identity":
            return NamedSystem("identity", IdentitySystem())
        if name == "corrector":
            from corrector.pipeline import Corrector, CorrectorConfig

            config = CorrectorConfig() if self.passes is None else CorrectorConfig(passes=self.passes)
            # From the directory unless another system loaded the torch networks already: the
            # int8 ONNX Runtime networks are then read without torch and transformers (the same
            # arrays, the same results; runtime/onnx_networks.py).
            model = self.model_path() if self._bundle is None else self._bundle
            system = Corrector(model=model, device=self.device, quantize=self.quantize, runtime=self.runtime,
                               config=config)
        elif name == "classic":
            from corrector.baselines.classic import ClassicCorrector

            system = ClassicCorrector(model=self.bundle(), device=self.device)
        elif name == "generator":
            from corrector.baselines.generator_only import GeneratorCorrector

            system = GeneratorCorrector(model=self.bundle(), device=self.device)
        else:
            raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEM_NAMES)}")
        path = self.model_path()
        return NamedSystem(name, system, model_path=path, model_size_bytes=model_size_bytes(path))


def build_systems(
    names: Sequence[str], model: str | None = None, device: str = "cpu", quantize: bool | None = None,
    runtime: str = "auto", passes: int | None = None,
) -> tuple[list[NamedSystem], dict[str, str]]:
    """The systems that could be built, and {name: error message} for those that could not."""
    factory = SystemFactory(model=model, device=device, quantize=quantize, runtime=runtime, passes=passes)
    systems, errors = [], {}
    for name in names:
        try:
            systems.append(factory.build(name))
        except Exception as err:  # noqa: BLE001 - any failure is reported and the others still run
            errors[name] = f"{type(err).__name__}: {err}"
    return systems, errors
