"""Error pairs: which character people actually wrote for which, counted from real CSC data.

Confusion sets say what *could* be confused (same sound, similar shape); they are large and flat
(因 has ~90 same- or similar-pinyin neighbours). Real errors are far more concentrated: in the
SIGHAN and ECSpell training sets the same few hundred pairs (的/地/得, 在/再, 做/作, 因/应 …) make
up most corrections, and about 70% of the error pairs of the SIGHAN-15 test set occur in the
training sets. So the model carries a table counted from its own fine-tuning data — a statistic
of the training pairs, like the weights, never the sentences themselves:

    pair_counts[a][b]   how often a written `a` was corrected to `b`
    char_counts[a]      how often `a` occurs in the training sources at all (correct or not)

It gives the scorer two features and the candidate step one more source of candidates:

    pair_log_count  log(1 + count(a -> b))
    pair_log_rate   log((count(a -> b) + 0.1) / (count(a) + 1)): how often an `a` is a mistake
                    for `b`; very negative for a frequent character never seen mis-written as b

Built with `python -m corrector.finetune pairs` (the dev split used for calibration is excluded,
so the calibrated weights do not trust the table more than it deserves) and stored as
`error_pairs.json` in the model directory.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .tokenization import is_cjk

FILENAME = "error_pairs.json"
SCHEMA_VERSION = 1
RATE_SMOOTHING = 0.1  # pseudo-count of a pair: an unseen pair of a rare character is not impossible


class ErrorPairs:
    """Counts of character corrections (a -> b) and of source characters, from training pairs."""

    def __init__(self, pair_counts: dict[str, dict[str, int]], char_counts: dict[str, int],
                 sentences: int = 0, sources: list[str] | None = None) -> None:
        self.pair_counts = {a: dict(targets) for a, targets in pair_counts.items()}
        self.char_counts = dict(char_counts)
        self.sentences = sentences
        self.sources = list(sources or [])

    @classmethod
    def count(cls, pairs: Iterable[tuple[str, str]], sources: list[str] | None = None) -> ErrorPairs:
        """From (source, target) sentence pairs of equal length; other pairs are skipped."""
        pair_counts: dict[str, Counter] = defaultdict(Counter)
        char_counts: Counter = Counter()
        sentences = 0
        for source, target in pairs:
            if len(source) != len(target):
                continue
            sentences += 1
            for a, b in zip(source, target, strict=True):
                if not is_cjk(a):
                    continue
                char_counts[a] += 1
                if a != b and is_cjk(b):
                    pair_counts[a][b] += 1
        return cls({a: dict(c) for a, c in pair_counts.items()}, dict(char_counts), sentences, sources)

    def targets(self, source: str) -> dict[str, int]:
        """{b: count} of every correction of `source` seen in training."""
        return self.pair_counts.get(source, {})

    def features(self, source: str, target: str) -> tuple[float, float]:
        """(pair_log_count, pair_log_rate) of writing `target` where `source` stands."""
        count = np.array([self.pair_counts.get(source, {}).get(target, 0)], dtype=np.float64)
        log_count, log_rate = pair_features(count, np.array([self.char_counts.get(source, 0)], dtype=np.float64))
        return float(log_count[0]), float(log_rate[0])

    def __len__(self) -> int:
        return sum(len(t) for t in self.pair_counts.values())

    def save(self, path: str | Path) -> None:
        data = {
            "version": SCHEMA_VERSION,
            "sentences": self.sentences,
            "sources": self.sources,
            "pair_counts": {a: dict(sorted(t.items(), key=lambda kv: -kv[1])) for a, t in sorted(self.pair_counts.items())},
            "char_counts": dict(sorted(self.char_counts.items())),
        }
        Path(path).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ErrorPairs:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("version") != SCHEMA_VERSION:
            raise ValueError(f"{path}: unsupported error-pairs version {data.get('version')!r}")
        return cls(data["pair_counts"], data["char_counts"], data.get("sentences", 0), data.get("sources"))


def pair_features(pair_counts: np.ndarray, source_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pair_log_count, pair_log_rate) for arrays of pair counts and their source characters' counts."""
    return np.log1p(pair_counts), np.log((pair_counts + RATE_SMOOTHING) / (source_counts + 1))
