"""The settings a `Corrector` is built from: `CorrectorConfig`, and the constructor's arguments
that become settings — the scorer with its threshold overrides, the whitelist's terms.

Kept apart from pipeline.py so that calibration, the CLI and the service can name and build a
configuration without reading the composition of the stages (all are importable from
`corrector.pipeline` too, where they were first defined).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .candidates import CandidateConfig
from .resources.homophones import WordConfig
from .scoring import Scorer, probability
from .text.invisible import Visible
from .text.protection import read_whitelist

DEFAULT_MAX_EDITS = 4
MAX_PASSES = 3  # CorrectorConfig.passes


@dataclass
class CorrectorConfig:
    max_positions: int = 128  # chunk size in characters (capped by the model's max length)
    overlap: int = 16  # shared characters between hard windows of unpunctuated text
    batch_size: int = 32
    candidates: CandidateConfig = field(default_factory=CandidateConfig)
    # Word candidates (homophones.py): None proposes them when the scorer reads `word_gain` (a
    # scorer fitted without them would score their characters as single ones); calibration
    # turns them on to fit a scorer that does.
    word_candidates: bool | None = None
    words: WordConfig = field(default_factory=WordConfig)
    generator_input: str | None = None  # "masked" / "source"; None: the model's (ModelBundle.generator_input)
    max_edits_per_sentence: int = DEFAULT_MAX_EDITS
    # 3: the sentences that got edits are corrected once more as corrected, from a lower
    # threshold ("方再" -> "方在" -> "放在"), and those the second pass changed once more; see
    # `Corrector._recorrect`. Broad dev held out (--splits 1), macro F1: one pass 0.4670, two
    # 0.5077, three 0.5093 (mcsc +0.8, multi +0.3, no part lower); a text with edits costs about
    # twice as much, the third pass little (it reads only what the second changed). 1: one pass,
    # as the service runs by default (latency).
    passes: int = 3
    veto_proper_nouns: bool = False  # True: never edit inside a proper noun (default: penalise)
    proper_noun_hmm: bool = False  # let jieba's HMM find unknown names (also tags typos as names)
    # Batches run in parallel on this many threads, the CPU threads shared among them (None: 2 on
    # CPU with >= 2 threads, runtime/workers.py, else 1 = every batch in the calling thread). A
    # call that makes one batch (under MIN_SPLIT_ITEMS texts per worker, a single sentence) runs
    # in the calling thread either way, on the process's threads (one SIGHAN sentence, lean int8
    # encoder: p50 18.8-19.0 ms on one thread or two; before it, 18 on two vs 23 on one).
    workers: int | None = None
    # Traditional-script texts are read in simplified script and their corrections written back
    # in this OpenCC variant ("tw" Taiwan, "hk" Hong Kong, "t" OpenCC's standard forms; script.py);
    # None or "off": every text goes to the model as written.
    traditional: str | None = "tw"

    def __post_init__(self) -> None:
        if not 1 <= self.passes <= MAX_PASSES:
            raise ValueError(f"passes must be 1 to {MAX_PASSES}, got {self.passes}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")


def scorer_with_overrides(config: Scorer | dict | None, threshold: float | None,
                          detection_threshold: float | None) -> Scorer:
    """A private Scorer from `config` (a Scorer is copied: the overrides must not leak) with the
    edit and detection thresholds given."""
    scorer = Scorer.from_config(config.to_config() if isinstance(config, Scorer) else config)
    if threshold is not None:
        scorer.threshold = probability(threshold)
    if detection_threshold is not None:
        scorer.detection_threshold = probability(detection_threshold, "detection_threshold")
    return scorer


def whitelist_terms(whitelist: Iterable[str] | Path) -> list[str]:
    """The terms never edited: a file of one term a line, one term, or terms."""
    if isinstance(whitelist, Path):
        whitelist = read_whitelist(whitelist)
    elif isinstance(whitelist, str):
        whitelist = [whitelist]  # one term, not its characters
    return [Visible.of(t).text for t in whitelist if t]  # matched in texts read without invisible characters
