"""Chinese spelling correction with an ELECTRA discriminator, generator and scorer."""

__version__ = "0.1.0"

from .models import load_model  # noqa: E402
from .pipeline import Corrector  # noqa: E402
from .result import Edit, Result  # noqa: E402

__all__ = ["Corrector", "Edit", "Result", "__version__", "load_model"]
