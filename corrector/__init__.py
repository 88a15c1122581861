"""Chinese spelling correction with an ELECTRA discriminator, generator and scorer."""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
# What runs the int8 networks' encoders (`Corrector(runtime=...)`, `--runtime` of the CLI, service
# and evaluator): "onnxruntime" (onnx_encoder.py), "torch" (lean_encoder.py), "auto" = ORT where
# installed. Here, not in pipeline.py, so that argument parsers need not import torch.
RUNTIMES = ("auto", "onnxruntime", "torch")
__all__ = ["Corrector", "Edit", "Result", "__version__", "load_model"]

if TYPE_CHECKING:
    from .models import load_model
    from .pipeline import Corrector
    from .result import Edit, Result

# Exported lazily (PEP 562): `import corrector.result` must not pay for importing torch and
# transformers — the service's light tests and the evaluator's readers rely on that.
_EXPORTS = {"Corrector": ".pipeline", "load_model": ".models", "Edit": ".result", "Result": ".result"}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
