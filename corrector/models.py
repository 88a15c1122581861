"""Moved to `corrector.runtime.models`; this name stays for code that imports it from here."""

from .runtime.models import DEFAULT_MODEL_DIR, ModelBundle, default_model_path, load_model

__all__ = ["DEFAULT_MODEL_DIR", "ModelBundle", "default_model_path", "load_model"]
