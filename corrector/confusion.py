"""Moved to `corrector.resources.confusion`; this name stays for code that imports it from here."""

from .resources.confusion import ConfusionSet

__all__ = ["ConfusionSet"]
