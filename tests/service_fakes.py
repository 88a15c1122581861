"""Stand-ins for the corrector that cost time like the real one, for the fairness and recovery
tests. In a module of their own (not a test module) so that spawned correction processes can
import them by name."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from test_service import FakeCorrector

from corrector.result import Result
from corrector.runtime.processes import CorrectorSpec


class CostlyCorrector(FakeCorrector):
    """FakeCorrector whose calls take `s_per_char` per character, as the real one roughly does
    (shipped model: ~0.17 ms a character on one core). Records the characters it corrected."""

    def __init__(self, s_per_char: float = 0.0001, fail_on: str | None = None) -> None:
        super().__init__(fail_on=fail_on)
        self.s_per_char = s_per_char
        self.chars = 0
        self._count_lock = threading.Lock()

    def correct_batch(self, texts: list[str], threshold: float | None = None) -> list[Result]:
        chars = sum(len(t) for t in texts)
        time.sleep(self.s_per_char * chars)
        with self._count_lock:
            self.chars += chars
        return super().correct_batch(texts, threshold)


class _SlowProcessCorrector(FakeCorrector):
    """What a SlowSpec builds in a correction process: `delay_s` a call, and the attributes the
    process reports when ready."""

    name = "slow-fake"
    precision = "fp32"
    runtime = "fake"
    threshold = 0.5

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s=delay_s)

    @property
    def bundle(self):
        return self


@dataclass
class SlowSpec(CorrectorSpec):
    """A CorrectorSpec whose processes build a `_SlowProcessCorrector` instead of a model."""

    delay_s: float = 0.5
    warmup: str | None = None
    # Seconds a process takes to build its corrector: a replacement is not ready at once (a real
    # one loads a model; these processes no longer import torch, which used to take ~1.7 s).
    build_s: float = 0.0

    def build(self):
        time.sleep(self.build_s)
        return _SlowProcessCorrector(self.delay_s)
