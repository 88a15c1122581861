"""Moved to `corrector.runtime.processes`; this name stays for code that imports it from here."""

from .runtime.processes import CorrectorSpec, ProcessCorrector, WorkerCrashedError

__all__ = ["CorrectorSpec", "ProcessCorrector", "WorkerCrashedError"]
