"""Error pairs: which character people actually wrote for which, counted from real CSC data.

Confusion sets say what *could* be confused (same sound, similar shape); they are large and flat
(因 has ~90 same- or similar-pinyin neighbours). Real errors are far more concentrated: in the
SIGHAN and ECSpell training sets the same few hundred pairs (的/地/得, 在/再, 做/作, 因/应 …) make
up most corrections, and about 70% of the error pairs of the SIGHAN-15 test set occur in the
training sets. So the model carries a table counted from its own fine-tuning data — a statistic
of the training pairs, like the weights, never the sentences themselves:

    pair_counts[a][b]   how often a written `a` was corrected to `b`
    char_counts[a]      how often `a` occurs in the training sources at all (correct or not)

and, since schema version 2, the same counts in context — a written character with its left or
right neighbour, as it was written:

    context_counts["L" + xa][b]  how often an `a` written after `x` was corrected to `b`
    context_counts["R" + ax][b]  the same for an `a` written before `x`
    bigram_counts[xa]            how often the bigram `xa` occurs in the training sources at all

(因该 -> 应该 is a far surer thing than 因 -> 应: 因 is mostly right, 因该 never is.) Only
bigrams that were part of a correction are kept, so the table stays small.

It gives the scorer four features, the candidate step one more source of candidates and the
pipeline one more way to flag characters:

    pair_log_count  log(1 + count(a -> b))
    pair_log_rate   log((count(a -> b) + 0.1) / (count(a) + 1)): how often an `a` is a mistake
                    for `b`; very negative for a frequent character never seen mis-written as b
    ctx_log_count   log(1 + count) of the correction a -> b in the written context, the side
                    (left or right bigram) where it was seen more often relative to the bigram
    ctx_log_rate    log((that count + 0.1) / (occurrences of that bigram + 1)); log(0.1) where
                    neither bigram was ever part of a correction

Built with `python -m corrector.finetune pairs` (the dev split used for calibration is excluded,
so the calibrated weights do not trust the table more than it deserves) and stored as
`error_pairs.json` in the model directory. `--shared-span 8` also leaves out the training pairs
that share an 8-character run with a dev sentence (SIGHAN's years repeat sentences: 1,097 such
pairs gave 49 of the 1,090 dev errors their own correction in context); measured on the dev
sentences that have no such twin, that table did slightly worse (held-out F1 0.4631 vs 0.4697),
so the default keeps them.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..splits import HeldOut, training_pairs
from ..text.tokenization import is_cjk

FILENAME = "error_pairs.json"
SCHEMA_VERSION = 2  # 2: context counts; version 1 files (no contexts) still load
RATE_SMOOTHING = 0.1  # pseudo-count of a pair: an unseen pair of a rare character is not impossible


class ErrorPairs:
    """Counts of character corrections (a -> b) and of source characters, from training pairs."""

    def __init__(self, pair_counts: dict[str, dict[str, int]], char_counts: dict[str, int],
                 sentences: int = 0, sources: list[str] | None = None,
                 context_counts: dict[str, dict[str, int]] | None = None,
                 bigram_counts: dict[str, int] | None = None, copy: bool = True) -> None:
        """`copy=False` keeps the dictionaries given (`load`'s own, fresh ones: copying the
        shipped table's 56,265 context entries cost ~0.03 s of start-up)."""
        if copy:
            pair_counts = {a: dict(targets) for a, targets in pair_counts.items()}
            context_counts = {key: dict(targets) for key, targets in (context_counts or {}).items()}
            char_counts, bigram_counts = dict(char_counts), dict(bigram_counts or {})
        self.pair_counts = pair_counts
        self.char_counts = char_counts
        self.sentences = sentences
        self.sources = list(sources or [])
        self.context_counts = context_counts or {}
        self.bigram_counts = bigram_counts or {}

    def _best(self, key: str) -> tuple[int, float] | None:
        """A context key's count of its most frequent correction and that count's rate over the
        bigram's occurrences — what `context_flag` reads. Per key, not as one table of all keys:
        the table took ~0.1 s to build, in every process's first correction (2 cores)."""
        targets = self.context_counts.get(key)
        if not targets:
            return None
        count = max(targets.values())
        return count, count / (self.bigram_counts.get(key[1:], 0) + 1)

    @classmethod
    def count(cls, pairs: Iterable[tuple[str, str]], sources: list[str] | None = None) -> ErrorPairs:
        """From (source, target) sentence pairs of equal length; other pairs are skipped."""
        pair_counts: dict[str, Counter] = defaultdict(Counter)
        context_counts: dict[str, Counter] = defaultdict(Counter)
        char_counts: Counter = Counter()
        all_bigrams: Counter = Counter()
        sentences = 0
        for source, target in pairs:
            if len(source) != len(target):
                continue
            sentences += 1
            all_bigrams.update(source[i:i + 2] for i in range(len(source) - 1))
            for i, (a, b) in enumerate(zip(source, target, strict=True)):
                if not is_cjk(a):
                    continue
                char_counts[a] += 1
                if a != b and is_cjk(b):
                    pair_counts[a][b] += 1
                    for key in context_keys(source, i):
                        context_counts[key][b] += 1
        bigram_counts = {key[1:]: all_bigrams[key[1:]] for key in context_counts}
        return cls({a: dict(c) for a, c in pair_counts.items()}, dict(char_counts), sentences, sources,
                   {key: dict(c) for key, c in context_counts.items()}, bigram_counts)

    @classmethod
    def count_training(cls, train: Sequence[str | Path], held_out: HeldOut) -> tuple[ErrorPairs, int]:
        """The table of the data sets `train` (what `finetune pairs` counts) without the pairs
        `held_out` leaves out, and how many pairs overlapping them were left out with them."""
        pairs, overlapping = training_pairs(train, held_out)
        if not pairs:
            raise ValueError(f"no usable training pairs in {list(map(str, train))}")
        return cls.count(pairs, sources=[Path(p).name for p in dict.fromkeys(map(str, train))]), overlapping

    def targets(self, source: str) -> dict[str, int]:
        """{b: count} of every correction of `source` seen in training."""
        return self.pair_counts.get(source, {})

    def features(self, source: str, target: str) -> tuple[float, float]:
        """(pair_log_count, pair_log_rate) of writing `target` where `source` stands."""
        count = np.array([self.pair_counts.get(source, {}).get(target, 0)], dtype=np.float64)
        log_count, log_rate = pair_features(count, np.array([self.char_counts.get(source, 0)], dtype=np.float64))
        return float(log_count[0]), float(log_rate[0])

    def context_count(self, text: str, offset: int, target: str) -> tuple[int, int]:
        """(count, bigram occurrences) of correcting text[offset] to `target` in its written
        context: of the left and right bigrams, the one with the higher rate; (0, 0) if neither."""
        return self._best_context(self._contexts(text, offset), target)

    def context_count_array(self, sites: Sequence[tuple[str, int]], site_of: Sequence[int],
                            targets: Sequence[str]) -> np.ndarray:
        """(N, 2) float array: `context_count` of `targets[k]` at `sites[site_of[k]]` (text, offset),
        each site's context looked up once."""
        contexts = [self._contexts(text, offset) for text, offset in sites]
        out = np.zeros((len(targets), 2), dtype=np.float64)
        for k, (n, target) in enumerate(zip(site_of, targets, strict=True)):
            if contexts[n]:
                out[k] = self._best_context(contexts[n], target)
        return out

    def _contexts(self, text: str, offset: int) -> list[tuple[dict[str, int], int]]:
        """(corrections, bigram occurrences) of each context key of text[offset] in the table."""
        return [(self.context_counts[key], self.bigram_counts.get(key[1:], 0))
                for key in context_keys(text, offset) if key in self.context_counts]

    @staticmethod
    def _best_context(contexts: list[tuple[dict[str, int], int]], target: str) -> tuple[int, int]:
        best = (0, 0)
        for corrections, seen in contexts:
            count = corrections.get(target, 0)
            if count and (best[0] == 0 or count / (seen + 1) > best[0] / (best[1] + 1)):
                best = (count, seen)
        return best

    def context_flag(self, text: str, offset: int, min_count: int, min_rate: float) -> bool:
        """Whether text[offset], in its written context, was corrected in training at least
        `min_count` times and in at least `min_rate` of that bigram's occurrences."""
        for key in context_keys(text, offset):
            best = self._best(key)
            if best is not None and best[0] >= min_count and best[1] >= min_rate:
                return True
        return False

    def __len__(self) -> int:
        return sum(len(t) for t in self.pair_counts.values())

    def save(self, path: str | Path) -> None:
        data = {
            "version": SCHEMA_VERSION,
            "sentences": self.sentences,
            "sources": self.sources,
            "pair_counts": {a: dict(sorted(t.items(), key=lambda kv: -kv[1])) for a, t in sorted(self.pair_counts.items())},
            "char_counts": dict(sorted(self.char_counts.items())),
            "context_counts": {key: dict(sorted(t.items(), key=lambda kv: -kv[1]))
                               for key, t in sorted(self.context_counts.items())},
            "bigram_counts": dict(sorted(self.bigram_counts.items())),
        }
        Path(path).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ErrorPairs:
        """The table of an error_pairs.json, its parsed form read from the user cache
        (resources/cache.py, keyed by the file's bytes) after the first load: the shipped 1.9 MB
        file took 0.07-0.12 s of json.loads in every process's start-up, the cached tables
        0.04-0.07 s of marshal.loads (2 cores)."""
        from .cache import cached_tables, key_digest

        raw = Path(path).read_bytes()

        def build() -> tuple:
            data = json.loads(raw.decode("utf-8"))
            if data.get("version") not in (1, SCHEMA_VERSION):
                raise ValueError(f"{path}: unsupported error-pairs version {data.get('version')!r}")
            return (data["pair_counts"], data["char_counts"], data.get("sentences", 0), data.get("sources") or [],
                    data.get("context_counts") or {}, data.get("bigram_counts") or {})

        def valid(tables: object) -> bool:
            return isinstance(tables, tuple) and len(tables) == 6 and isinstance(tables[0], dict)

        return cls(*cached_tables("error-pairs", key_digest(SCHEMA_VERSION, raw), build, valid, keep=2), copy=False)


def context_keys(text: str, offset: int) -> list[str]:
    """The context keys of the character at `offset`: "L" + the bigram ending there, "R" + the
    one starting there (where that neighbour is a Chinese character)."""
    keys = []
    if offset > 0 and is_cjk(text[offset - 1]):
        keys.append("L" + text[offset - 1:offset + 1])
    if offset + 1 < len(text) and is_cjk(text[offset + 1]):
        keys.append("R" + text[offset:offset + 2])
    return keys


def pair_features(pair_counts: np.ndarray, source_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pair_log_count, pair_log_rate) for arrays of pair counts and their source characters' counts;
    the same formula gives (ctx_log_count, ctx_log_rate) from context counts and bigram occurrences."""
    return np.log1p(pair_counts), np.log((pair_counts + RATE_SMOOTHING) / (source_counts + 1))
