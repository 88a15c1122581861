"""Chinese spelling correction with an ELECTRA discriminator, generator and scorer.

    from corrector import Corrector, CorrectorConfig, Result, Edit
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .runtime import RUNTIMES

__version__ = "0.1.0"
__all__ = ["RUNTIMES", "Corrector", "CorrectorConfig", "Edit", "Result", "__version__", "load_model"]

if TYPE_CHECKING:
    from .pipeline import Corrector, CorrectorConfig
    from .result import Edit, Result
    from .runtime.models import load_model

# Exported lazily (PEP 562): `import corrector.result` must not pay for importing torch and
# transformers — the service's light tests and the evaluator's readers rely on that.
_EXPORTS = {"Corrector": ".pipeline", "CorrectorConfig": ".pipeline", "load_model": ".runtime.models",
            "Edit": ".result", "Result": ".result"}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
