"""Guards against over-correction: user whitelist, proper nouns, word plausibility.

* Whitelist: every occurrence of a user term is frozen; no character inside it is changed.
* Proper nouns: positions inside person/place/organisation/other proper names found by
  `jieba.posseg` (tags nr, nrfg, nrt, ns, nt, nz) get the `proper_noun` scorer feature, whose
  negative weight lowers the confidence of edits there; `veto_proper_nouns` forbids them
  outright. Single-character tokens do not count (jieba tags many lone characters ns/nr), and
  by default the dictionary alone is used (HMM off): the HMM happily tags a typo such as 坤难
  as a place name, which would protect exactly the errors we want to fix.
* Addresses: every character of a URL or e-mail address is frozen, so Chinese inside one (a path,
  an internationalised domain: https://example.com/因该, test@因该.com) is kept as written.
* Word plausibility: the log-frequency of the most frequent jieba dictionary word (2-4 chars)
  covering a position, for the original character and for a candidate.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

PROPER_NOUN_TAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "nz"})

_init_lock = threading.Lock()
_initialized = False
_tables_key: str | None = None  # the cache key of the jieba tables we loaded (None: jieba set itself up)


def jieba_tables_key() -> str | None:
    """A key that changes with jieba's dictionary (and version), for caches of what is derived
    from it (resources/idioms.py); None where jieba loaded its dictionary itself."""
    ensure_jieba()
    return _tables_key


def ensure_jieba() -> ModuleType:
    """jieba, its dictionary loaded once, quietly, before any thread uses it (and jieba.posseg)."""
    global _initialized
    import jieba

    if not _initialized:
        with _init_lock:
            if not _initialized:
                jieba.setLogLevel(logging.WARNING)
                _load_dictionaries(jieba)
                _initialized = True
    return jieba


def _load_dictionaries(jieba: ModuleType) -> None:
    """jieba's prefix dictionary (`jieba.dt.FREQ`, `total`) and jieba.posseg's word-tag table,
    from one cache file of ours (resources/cache.py) keyed by the dictionary file's hash.

    Why: jieba reads its own cache with `marshal.load` from the file object, 0.7 s on 2 cores
    (`marshal.loads` of the same bytes: 0.3 s), and `import jieba.posseg` parses dict.txt line
    by line into its word-tag table at every start (~0.3-0.6 s); together ~1 s of a one-sentence
    CLI call. Read from our cache: ~0.35 s. The result is what jieba builds itself (tested). Where
    someone else has set jieba up already (another dictionary, posseg imported), jieba does it."""
    import importlib
    import io
    import sys

    from ..resources.cache import cached_tables, key_digest

    if jieba.dt.initialized or "jieba.posseg" in sys.modules:
        jieba.initialize()
        importlib.import_module("jieba.posseg")
        return
    with jieba.dt.get_dict_file() as handle:
        dictionary = handle.read()

    def build() -> tuple[dict, int, dict]:
        jieba.initialize()
        posseg = importlib.import_module("jieba.posseg")
        freq, word_tags = jieba.dt.FREQ, posseg.dt.word_tag_tab
        # Written with the tag table's words as the very strings of the prefix dictionary and its
        # tags interned, marshal stores each once and reads them back shared: 0.30 s instead of
        # 0.51 s (the same tables, lookups unchanged).
        words = {word: word for word in freq}
        return freq, jieba.dt.total, {words.get(word, word): sys.intern(tag) for word, tag in word_tags.items()}

    def valid(tables: object) -> bool:
        return (isinstance(tables, tuple) and len(tables) == 3 and isinstance(tables[0], dict)
                and isinstance(tables[1], int) and isinstance(tables[2], dict))

    global _tables_key
    version = getattr(jieba, "__version__", "")
    key = key_digest(version, dictionary)
    freq, total, word_tags = cached_tables("jieba-tables", key, build, valid)
    _tables_key = key
    if "jieba.posseg" in sys.modules:  # built just now
        return
    with jieba.dt.lock:
        jieba.dt.FREQ, jieba.dt.total, jieba.dt.initialized = freq, total, True
    # `import jieba.posseg` builds its tagger over jieba.dt, reading the dictionary file for the
    # word-tag table: it reads an empty file instead, and gets the table from the cache.
    jieba.dt.get_dict_file = lambda: io.BytesIO(b"")
    try:
        posseg = importlib.import_module("jieba.posseg")
    finally:
        del jieba.dt.get_dict_file  # the instance attribute: the class's method again
    posseg.dt.word_tag_tab = word_tags


def read_whitelist(path: str | Path) -> list[str]:
    """One term per line; blank lines and # comments ignored."""
    lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def whitelisted_offsets(text: str, terms: Iterable[str]) -> set[int]:
    """Offsets of every character of every occurrence of every term in text."""
    frozen: set[int] = set()
    for term in terms:
        if not term:
            continue
        start = text.find(term)
        while start >= 0:
            frozen.update(range(start, start + len(term)))
            start = text.find(term, start + 1)
    return frozen


# A URL runs from its scheme (or "www.") to the first space, quote, bracket or Chinese punctuation
# mark; an e-mail address is ASCII before the @ (Chinese right before it is prose, 联系test@…)
# and a domain of any script that ends in a Latin top-level domain.
ADDRESS = re.compile(
    r"(?:(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://|(?<![a-z0-9.])www\.)[^\s<>\"'，。！？；：、（）《》【】「」“”‘’]+"
    r"|[a-z0-9._%+-]+@(?:[\w-]+\.)+[a-z]{2,}",
    re.IGNORECASE,
)


def address_offsets(text: str) -> set[int]:
    """Offsets of every character of every URL and e-mail address in text."""
    return {i for match in ADDRESS.finditer(text) for i in range(match.start(), match.end())}


def proper_noun_offsets(text: str, hmm: bool = False) -> set[int]:
    """Offsets in text covered by multi-character proper-noun tokens."""
    covered: set[int] = set()
    index = 0
    for pair in ensure_jieba().posseg.cut(text, HMM=hmm):
        word, flag = pair.word, pair.flag
        if flag in PROPER_NOUN_TAGS and len(word) >= 2:
            covered.update(range(index, index + len(word)))
        index += len(word)
    return covered


class WordFrequency:
    """log10(1 + frequency) of the best dictionary word covering a position (jieba.dt.FREQ)."""

    def __init__(self, min_len: int = 2, max_len: int = 4) -> None:
        self.freq = ensure_jieba().dt.FREQ  # read-only after initialisation
        self.min_len, self.max_len = min_len, max_len

    def context(self, text: str, position: int) -> list[tuple[str, list[str]]]:
        """The windows of 2-4 characters covering text[position], computed once per position and
        shared by all of its candidates (`score`): per left piece (0-3 characters), the right
        pieces that extend it, shortest first."""
        left = text[max(0, position - self.max_len + 1):position]
        right = text[position + 1:position + self.max_len]
        return [(left[len(left) - a:] if a else "", [right[:b] for b in range(1, min(len(right), self.max_len - 1 - a) + 1)])
                for a in range(len(left) + 1)]

    def score(self, context: list[tuple[str, list[str]]], char: str) -> float:
        """log10(1 + frequency) of the most frequent word made by `char` in that context.

        jieba's FREQ holds every prefix of every word (count 0 when the prefix is no word
        itself), so a window whose left part + `char` is not in it, or that one character more
        on the right takes out of it, cannot start a word: the search stops there. Same result
        as looking up every window, at about a third of the lookups."""
        freq, best = self.freq, 0
        for left, rights in context:
            stem = left + char
            found = freq.get(stem)
            if found is None:
                continue
            if len(stem) >= self.min_len:
                best = max(best, found)
            for right in rights:
                found = freq.get(stem + right)
                if found is None:
                    break
                best = max(best, found)
        return math.log10(1 + best)
