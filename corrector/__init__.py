"""Chinese spelling correction with an ELECTRA discriminator, generator and scorer.

    from corrector import Corrector, CorrectorConfig, Result, Edit
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports
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


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
