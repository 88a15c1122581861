"""Idioms: whether a correction completes a four-character set phrase (成语 迫不及待, 惯用语
有限责任) that the text, as written, breaks.

Native writers get idioms wrong one character at a time, by sound (迫不急待, 走头无路, 一视同人),
and the small networks know few of them: on the broad dev the shipped scorer gave such
corrections 0.3-0.7, under its edit threshold of 0.72. The dictionary knows them: jieba tags
~34,600 four-character entries "i" (idiom) or "l" (set phrase).

`Idioms.fixes(text)` gives, per offset, the characters that, written there, turn a
four-character window of the text into such a phrase, where

* the phrase has a dictionary frequency of at least `MIN_FREQ` (jieba's counts: most entries
  have 3, so this keeps the ~3,400 phrases people actually use),
* the window as written is at least `RARITY` times rarer (jieba also lists a few common
  misspellings, 迫不急待 at 3 against 迫不及待 at 303), and
* the written character is not part of a dictionary word reaching outside the window: 也就是所谓
  holds 也就是说 one character away, but 所 belongs to 所谓 (`MIN_WORD_FREQ`).

Every confusable substitution on the broad dev (runs/broad2: seven error parts, 2,200 clean
sentences) that passes these tests: 25 give the gold correction, 7 do not (spelling variants
such as 琳瑯满目, quirks of the gold), 1 is in clean text (三维一体 -> 三位一体, which the scorer
gives 0.055). The pipeline flags such characters (detection.py), keeps the candidate under its
cap (proposal.py) and accepts it from a share of the edit threshold (acceptance.py), all with
`Scorer.idiom_threshold_factor`; threshold sweeps apply the same rule (`passes_threshold`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..text.protection import ensure_jieba, jieba_tables_key
from ..text.tokenization import is_cjk

if TYPE_CHECKING:
    from ..result import Edit

IDIOM_TAGS = frozenset({"i", "l"})
MIN_FREQ = 30
RARITY = 10.0
MIN_WORD_FREQ = 10
SIZE = 4


class Idioms:
    """Four-character dictionary phrases indexed by the three characters that stay when one is
    changed."""

    def __init__(self, phrases: Mapping[str, int], word_freq: Mapping[str, int]) -> None:
        self.freq = {p: f for p, f in phrases.items() if len(p) == SIZE and f >= MIN_FREQ}
        self.word_freq = word_freq
        self._by_rest: dict[tuple[int, str], dict[str, str]] = {}
        for phrase in self.freq:
            for at in range(SIZE):
                self._by_rest.setdefault((at, phrase[:at] + phrase[at + 1:]), {})[phrase[at]] = phrase

    @classmethod
    def from_jieba(cls) -> Idioms:
        """The phrases of jieba's dictionary (tags i and l) of at least MIN_FREQ, from the user
        cache (resources/cache.py) after the first build: picking them from the 350,000-word tag
        table took 0.05 s of every process's first correction."""
        from .cache import cached_tables, key_digest

        jieba = ensure_jieba()
        freq, tags = jieba.dt.FREQ, jieba.posseg.dt.word_tag_tab

        def build() -> dict[str, int]:
            return {w: freq.get(w, 0) for w, tag in tags.items() if tag in IDIOM_TAGS and len(w) == SIZE
                    and freq.get(w, 0) >= MIN_FREQ}

        tables_key = jieba_tables_key()
        if tables_key is None:  # jieba set up by someone else: no key for its dictionary
            return cls(build(), freq)
        key = key_digest(tables_key, sorted(IDIOM_TAGS), SIZE, MIN_FREQ)
        return cls(cached_tables("idioms", key, build, lambda value: isinstance(value, dict)), freq)

    def fixes(self, text: str) -> dict[int, frozenset[str]]:
        """{offset: the characters that, written there, complete a phrase the text breaks}."""
        found: dict[int, set[str]] = {}
        for start in range(len(text) - SIZE + 1):
            window = text[start:start + SIZE]
            if window in self.freq or not all(is_cjk(ch) for ch in window):
                continue
            written_freq = self.word_freq.get(window, 0)
            for at in range(SIZE):
                for char, phrase in self._by_rest.get((at, window[:at] + window[at + 1:]), {}).items():
                    if (char != window[at] and self.freq[phrase] >= RARITY * (written_freq + 1)
                            and not self._in_word_across(text, start + at, start, start + SIZE)):
                        found.setdefault(start + at, set()).add(char)
        return {offset: frozenset(chars) for offset, chars in found.items()}

    def _in_word_across(self, text: str, offset: int, start: int, end: int) -> bool:
        """Whether the character at `offset` is part of a dictionary word (2-4 characters) that
        reaches outside [start, end)."""
        for first in range(max(0, offset - SIZE + 1), offset + 1):
            for last in range(max(offset + 1, first + 2), min(len(text), first + SIZE) + 1):
                if (first < start or last > end) and self.word_freq.get(text[first:last], 0) >= MIN_WORD_FREQ:
                    return True
        return False


_lock = threading.Lock()
_shared: Idioms | None = None


def shared_idioms() -> Idioms:
    """One `Idioms` per process, built on first use."""
    global _shared
    if _shared is None:
        with _lock:
            if _shared is None:
                _shared = Idioms.from_jieba()
    return _shared


def idiom_fixes(text: str, start: int = 0, end: int | None = None) -> dict[int, frozenset[str]]:
    """`Idioms.fixes` of the process's shared table for the offsets in [start, end) of `text`,
    computed on the span those read (their four-character windows, and the words the
    outside-word test looks at: three characters either side) and memoised by that span: the
    flags, the candidates, the acceptance stage and a threshold sweep ask about the same places,
    and a key never holds more than a chunk of a long document."""
    end = len(text) if end is None else end
    first = max(0, start - SIZE + 1)
    found = _span_fixes(text[first:min(len(text), end + SIZE - 1)])
    return {first + at: chars for at, chars in found.items() if start <= first + at < end}


@functools.lru_cache(maxsize=1 << 14)
def _span_fixes(span: str) -> dict[int, frozenset[str]]:
    return shared_idioms().fixes(span)


def completes_idiom(text: str, position: int, target: str, kind: str) -> bool:
    """Whether an edit of `kind` ("pinyin", "shape" or "other": `confusion.kind_of`) writing
    `target` at `position` completes a four-character idiom that `text`, as written, breaks. Only
    a confusion-set correction counts (kind "pinyin" or "shape")."""
    return kind != "other" and target in idiom_fixes(text, position, position + 1).get(position, ())


def passes_threshold(text: str, edit: Edit, threshold: float, idiom_threshold: float | None) -> bool:
    """Whether the corrector makes `edit` of `text` at this edit threshold (and idiom threshold,
    `Scorer.idiom_threshold`): what a threshold-0 run's edits keep when re-filtered at `threshold`
    (evaluation/sweep.py), so that a sweep equals running at each threshold."""
    return edit.confidence >= threshold or (idiom_threshold is not None and edit.confidence >= idiom_threshold
                                            and completes_idiom(text, edit.position, edit.target, edit.kind))
