"""Character n-gram language model: counted from a corpus, stored as sorted packed keys.

Why a count model beside the ELECTRA generator: a masked LM needs tens of millions of training
tokens before its distribution is better than counting, while counts over the same ~17 M
characters give a sharp local model in a minute. In CSC almost every error is a confusable
character that breaks a local word ("因该", "让坐"), which is exactly what local counts see. The
scorer uses the LM's verdict on each candidate as one feature (`lm_gain`) beside the generator's.

Model: interpolated absolute discounting (the core of Kneser-Ney, without continuation counts),

    P_1(w)   = (c(w) + 1) / (N + V)
    P_k(w|h) = (max(c(hw) - D, 0) + D · n(h) · P_{k-1}(w|h')) / c(h)      where c(h) > 0
             = P_{k-1}(w|h')                                              otherwise

with c(h) the total and n(h) the number of distinct stored continuations of history h, so the
model stays normalised after rare n-grams are pruned.

Storage: every character with at least `min_count` occurrences gets an id (0 = text boundary,
1 = any other character); an n-gram is its ids packed into one uint64 (`bits` per id), so each
order is two arrays — sorted keys and their counts — looked up with `np.searchsorted`, for a
whole batch of queries at once. One safetensors file holds them, the character table rides in
its metadata.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BOUNDARY, UNKNOWN = 0, 1
FILENAME = "ngram.safetensors"
FORMAT = "corrector.ngram/2"  # /2: keys over 32 bits stored as low and high parts


@dataclass
class NgramLM:
    chars: list[str]  # id -> character; ids 0 and 1 are the boundary and the unknown character
    keys: list[np.ndarray]  # keys[k-1]: sorted packed k-grams (uint64)
    counts: list[np.ndarray]  # counts[k-1]: their counts (uint32)
    discount: float = 0.75
    _index: dict[str, int] = field(init=False, repr=False)
    _histories: list[tuple[np.ndarray, np.ndarray]] = field(init=False, repr=False)
    _key_history: list[np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.counts) or not self.keys:
            raise ValueError("an n-gram model needs keys and counts for orders 1..N")
        if self.order * self.bits > 64:
            raise ValueError(f"order {self.order} x {self.bits} bits per character does not fit in 64 bits")
        self._index = {ch: i for i, ch in enumerate(self.chars) if i > UNKNOWN}
        unigram = np.zeros(len(self.chars), dtype=np.float64)
        unigram[self.keys[0].astype(np.int64)] = self.counts[0]
        self._log_unigram = np.log((unigram + 1.0) / (unigram.sum() + len(self.chars)))
        self._log_unseen = float(np.log(1.0 / (unigram.sum() + len(self.chars))))
        # Per order k >= 2: each history's (k-1 ids) continuation total and distinct count, and for
        # every stored k-gram the index of its history (the histories themselves are never searched).
        self._histories, self._key_history = [], []
        for keys, counts in zip(self.keys[1:], self.counts[1:], strict=True):
            history = keys >> np.uint64(self.bits)
            first = np.r_[True, history[1:] != history[:-1]] if len(history) else np.zeros(0, bool)
            starts = np.flatnonzero(first)
            totals = np.add.reduceat(counts.astype(np.float64), starts) if len(starts) else np.zeros(0)
            distinct = np.diff(np.r_[starts, len(history)])
            self._histories.append((totals, distinct.astype(np.float64)))
            self._key_history.append((np.cumsum(first, dtype=np.int64) - 1).astype(np.int32))

    @property
    def order(self) -> int:
        return len(self.keys)

    @property
    def bits(self) -> int:
        return bits_per_id(len(self.chars))

    def ids(self, chars: Iterable[str]) -> np.ndarray:
        """The LM id of each character of a string or list (UNKNOWN for anything else, such as
        a multi-character token)."""
        return np.array([self._index.get(ch, UNKNOWN) for ch in chars], dtype=np.uint64)

    def log_unigram(self, ids: np.ndarray) -> np.ndarray:
        """log P_1 of each id (nats); a character outside the table (UNKNOWN) counts as unseen,
        not as the sum of every rare character the unknown id stands for."""
        ids = np.asarray(ids, dtype=np.int64)
        return np.where(ids == UNKNOWN, self._log_unseen, self._log_unigram[ids])

    def _pack(self, grams: np.ndarray) -> np.ndarray:
        packed = np.zeros(len(grams), dtype=np.uint64)
        for column in range(grams.shape[1]):
            packed = (packed << np.uint64(self.bits)) | grams[:, column]
        return packed

    def log_prob(self, grams: np.ndarray) -> np.ndarray:
        """log P(last id | the ids before it) for each row of `grams` (M, order), in nats.

        Per order the packed k-grams are sorted once, so the binary search walks the millions of
        stored keys in order (~2.5x faster than unsorted lookups for the corrector's batches). One
        search per order: the stored k-grams that share a query's history are one run of the
        sorted keys, and the query's place lies in it or just after it, so the key at that place
        or the one before tells whether the history was seen, and which it is (a second search,
        among the histories, was a fifth of the corrector's n-gram time)."""
        grams = np.asarray(grams, dtype=np.uint64)
        prob = np.exp(self._log_unigram[grams[:, -1].astype(np.int64)])
        for k in range(2, self.order + 1):
            totals, distinct = self._histories[k - 2]
            keys, counts = self.keys[k - 1], self.counts[k - 1]
            if len(keys) == 0:
                continue
            full = self._pack(grams[:, -k:])
            order = np.argsort(full)
            full = full[order]
            history = full >> np.uint64(self.bits)
            place = np.searchsorted(keys, full)
            right = np.minimum(place, len(keys) - 1)  # the key at the place, or the last one
            left = np.maximum(place - 1, 0)
            at_right = (place < len(keys)) & ((keys[right] >> np.uint64(self.bits)) == history)
            seen = at_right | ((place > 0) & ((keys[left] >> np.uint64(self.bits)) == history))
            at = self._key_history[k - 2][np.where(at_right, right, left)]
            count = np.where(keys[right] == full, counts[right], 0).astype(np.float64)
            total = np.where(seen, totals[at], 1.0)
            lower = prob[order]
            interpolated = (np.maximum(count - self.discount, 0.0) + self.discount * distinct[at] * lower) / total
            prob[order] = np.where(seen, interpolated, lower)
        return np.log(prob)

    def replacement_gains(self, sites: Sequence[tuple[str, int]],
                          options: Sequence[Sequence[str] | np.ndarray]) -> list[np.ndarray]:
        """For each site (text, position) and its candidate characters (strings, or arrays of
        this LM's ids): log P(text with the candidate at position) - log P(text), in nats, one
        array per site."""
        sizes = np.array([len(chars) for chars in options], dtype=np.int64)
        targets = [chars if isinstance(chars, np.ndarray) else self.ids(chars) for chars in options]
        flat = self.site_gains(sites, np.repeat(np.arange(len(sites)), sizes),
                               np.concatenate(targets) if targets else np.zeros(0, np.uint64))
        return np.split(flat, np.cumsum(sizes)[:-1]) if len(sizes) else []

    def site_gains(self, sites: Sequence[tuple[str, int]], site_of: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The flat form: the gain of writing `targets[k]` (this LM's ids) at `sites[site_of[k]]`.

        Only the `order` n-grams ending at position .. position+order-1 change, so only those are
        scored; the text's start and end are boundaries (the end is an event when in reach).
        The context of a site is encoded once and shared by all its candidates.
        """
        n = self.order
        width = 2 * n - 1  # n-1 left context, the target, n-1 right context (with the end boundary)
        context = np.full((len(sites), width), BOUNDARY, dtype=np.uint64)
        events = np.empty(len(sites), dtype=np.int64)
        for s, (text, position) in enumerate(sites):
            left = self.ids(text[max(0, position - n + 1):position])
            right = self.ids(text[position + 1:position + n])
            context[s, n - 1 - len(left):n - 1] = left
            context[s, n - 1] = self._index.get(text[position], UNKNOWN)
            context[s, n:n + len(right)] = right  # then BOUNDARY: the end of the text
            events[s] = 1 + len(right) + (1 if position + n > len(text) else 0)
        site_of = np.asarray(site_of, dtype=np.int64)
        rows = np.concatenate([context, context[site_of]])  # each site as is, then every candidate
        rows[len(sites):, n - 1] = np.asarray(targets, dtype=np.uint64)
        totals = self._row_totals(rows, np.concatenate([events, events[site_of]]))
        return totals[len(sites):] - totals[site_of]

    def span_gains(self, sites: Sequence[tuple[str, int]], words: Sequence[str]) -> np.ndarray:
        """log P(text with `words[k]` written over the text from `start` on) - log P(text) for
        each site (text, start) — a whole word changed at once, in nats. As in `site_gains`,
        only the n-grams ending inside the span or up to `order` - 1 characters after it count;
        a span shared by several words is scored as written once, each text converted once.

        The rows are gathered with numpy from each text's ids padded with boundaries: every
        column outside the word is the text's id at the same offset (the word replaces as many
        characters as it has). Word flags score ~50 words per sentence (a Python row-by-row fill
        was a third of this method's time)."""
        n = self.order
        if not words:
            return np.zeros(0)
        texts: dict[int, int] = {}  # id(text) -> its row in `padded`
        text_ids: list[np.ndarray] = []
        spans: dict[tuple[int, int, int], int] = {}  # (text, start, length) -> its row as written
        written: list[tuple[int, int, int]] = []  # (text row, start, length)
        own = np.empty(len(words), dtype=np.int64)
        word_text = np.empty(len(words), dtype=np.int64)
        word_start = np.empty(len(words), dtype=np.int64)
        for k, ((text, start), word) in enumerate(zip(sites, words, strict=True)):
            t = texts.get(id(text))
            if t is None:
                t = texts[id(text)] = len(text_ids)
                text_ids.append(self.ids(text))
            key = (t, start, len(word))
            if key not in spans:
                spans[key] = len(written)
                written.append(key)
            own[k], word_text[k], word_start[k] = spans[key], t, start
        lengths = np.array([len(word) for word in words], dtype=np.int64)
        longest = int(lengths.max())
        width = 2 * (n - 1) + longest
        padded = np.full((len(text_ids), n - 1 + max(len(ids) for ids in text_ids) + width), BOUNDARY, dtype=np.uint64)
        for t, ids in enumerate(text_ids):
            padded[t, n - 1:n - 1 + len(ids)] = ids  # text offset p at column p + n - 1
        span = np.array(written, dtype=np.int64).reshape(-1, 3)
        row_text = np.concatenate([span[:, 0], word_text])
        row_start = np.concatenate([span[:, 1], word_start])
        row_length = np.concatenate([span[:, 2], lengths])
        column = np.arange(width)
        # Column j of a row is the text's offset start - (n - 1) + j: padded column start + j.
        rows = padded[row_text[:, None], row_start[:, None] + column[None, :]]
        rows[column[None, :] >= (2 * (n - 1) + row_length)[:, None]] = BOUNDARY  # past the right context
        middle = np.full((len(words), longest), BOUNDARY, dtype=np.uint64)
        chars = self.ids("".join(words))
        middle[np.repeat(np.arange(len(words)), lengths), np.arange(len(chars)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = chars
        inside = np.arange(longest)[None, :] < lengths[:, None]
        word_rows = rows[len(written):]
        word_rows[:, n - 1:n - 1 + longest] = np.where(inside, middle, word_rows[:, n - 1:n - 1 + longest])
        text_length = np.array([len(ids) for ids in text_ids], dtype=np.int64)[row_text]
        end = row_start + row_length
        right = np.clip(text_length - end, 0, n - 1)
        events = row_length + right + (end + n - 1 > text_length)
        totals = self._row_totals(rows, events)
        return totals[len(written):] - totals[own]

    def _row_totals(self, rows: np.ndarray, events: np.ndarray) -> np.ndarray:
        """Per row of ids (n - 1 ids of left context first): the summed log-probability of its
        first `events[row]` n-grams, i.e. those ending at the changed span or in reach after it."""
        n = self.order
        grams = np.lib.stride_tricks.sliding_window_view(rows, n, axis=1).reshape(-1, n)
        logp = self.log_prob(grams).reshape(len(rows), rows.shape[1] - n + 1)
        logp[np.arange(rows.shape[1] - n + 1)[None, :] >= events[:, None]] = 0.0
        return logp.sum(1)

    # ---- building and storage --------------------------------------------------------------

    @classmethod
    def count_with_pairs(cls, lines: list[str], correct_sides: list[str], pairs_weight: int = 3,
                         **count_options) -> NgramLM:
        """What `pretrain ngram --pairs` counts: the corpus `lines` and, `pairs_weight` times, the
        training pairs' correct sentences — in-domain text (learners' essays, law, medicine) that a
        news-heavy corpus has too little of."""
        if pairs_weight < 1:
            raise ValueError(f"pairs_weight must be at least 1, got {pairs_weight}")
        return cls.count(lines + correct_sides * pairs_weight, **count_options)

    @classmethod
    def count(cls, lines: Iterable[str], order: int = 4, min_char_count: int = 2, min_count: int = 2,
              discount: float = 0.75) -> NgramLM:
        """Count a model from text lines (each line is bounded by the boundary id). n-grams of
        order >= 3 seen fewer than `min_count` times are pruned (they carry little and most of
        the size)."""
        lines = [line for line in lines if line]
        if not lines:
            raise ValueError("no text to count an n-gram model from")
        char_counts = Counter()
        for line in lines:
            char_counts.update(line)
        chars = ["<s>", "<unk>"] + sorted(ch for ch, c in char_counts.items() if c >= min_char_count)
        index = {ch: i for i, ch in enumerate(chars) if i > UNKNOWN}
        stream = np.fromiter(
            (i for line in lines for i in (*(index.get(ch, UNKNOWN) for ch in line), BOUNDARY)),
            dtype=np.uint64,
        )
        stream = np.r_[np.uint64(BOUNDARY), stream]
        bits = bits_per_id(len(chars))
        if order * bits > 64:
            raise ValueError(f"order {order} needs {order * bits} bits with {len(chars)} characters; lower --order")
        keys, counts = [], []
        for k in range(1, order + 1):
            packed = np.zeros(len(stream) - k + 1, dtype=np.uint64)
            for j in range(k):
                packed = (packed << np.uint64(bits)) | stream[j:len(stream) - k + 1 + j]
            unique, freq = np.unique(packed, return_counts=True)
            if k >= 3 and min_count > 1:
                keep = freq >= min_count
                unique, freq = unique[keep], freq[keep]
            keys.append(unique)
            counts.append(freq.astype(np.uint32))
        return cls(chars=chars, keys=keys, counts=counts, discount=discount)

    def save(self, directory: str | Path) -> Path:
        from safetensors.numpy import save_file

        path = Path(directory) / FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {}
        for k, (keys, counts) in enumerate(zip(self.keys, self.counts, strict=True), start=1):
            if len(keys) and int(keys.max()) > np.iinfo(np.uint32).max:
                # Trigram keys take 39 bits with 7,355 characters: stored as 32 low bits plus the
                # narrowed high ones (5 bytes a key instead of 8: the release's table 36 -> 29 MB).
                tensors[f"keys_{k}"] = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
                tensors[f"keys_{k}_high"] = _narrow(keys >> np.uint64(32), np.uint8)
            else:
                tensors[f"keys_{k}"] = _narrow(keys)  # bigram keys fit 32 bits, most counts 16
            tensors[f"counts_{k}"] = _narrow(counts)
        metadata = {"chars": json.dumps(self.chars, ensure_ascii=False), "discount": str(self.discount),
                    "order": str(self.order), "format": FORMAT}
        save_file(tensors, str(path), metadata=metadata)
        return path

    @classmethod
    def load(cls, path: str | Path) -> NgramLM:
        from safetensors import safe_open

        path = Path(path)
        if path.is_dir():
            path = path / FILENAME
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
            if metadata.get("format") not in (FORMAT, "corrector.ngram/1"):  # /1: keys whole, still read
                raise ValueError(f"{path} is not a corrector n-gram model")
            order = int(metadata["order"])
            names = set(handle.keys())
            keys = []
            for k in range(1, order + 1):
                key = handle.get_tensor(f"keys_{k}").astype(np.uint64)
                if f"keys_{k}_high" in names:
                    key |= handle.get_tensor(f"keys_{k}_high").astype(np.uint64) << np.uint64(32)
                keys.append(key)
            counts = [handle.get_tensor(f"counts_{k}").astype(np.uint32) for k in range(1, order + 1)]
        return cls(chars=json.loads(metadata["chars"]), keys=keys, counts=counts, discount=float(metadata["discount"]))


def bits_per_id(table_size: int) -> int:
    """Bits one character id takes in a packed n-gram key."""
    return max(1, (table_size - 1).bit_length())


_UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)


def _narrow(values: np.ndarray, smallest: type = np.uint16) -> np.ndarray:
    """The same unsigned integers in the smallest dtype (from `smallest` up) that holds them (storage only)."""
    top = int(values.max()) if len(values) else 0
    return values.astype(next(t for t in _UNSIGNED[_UNSIGNED.index(smallest):] if top <= np.iinfo(t).max))
