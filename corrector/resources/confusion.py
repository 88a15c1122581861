"""Confusion sets: which characters are easily mistaken for which, by sound and by shape.

Built by this project's own code from PyPI data, never from downloaded confusion lists:

* pinyin from `pypinyin`, tones ignored: a character's usual reading and every reading it has in
  pypinyin's phrase dictionary; a reading no phrase uses (逐 dí, 有 wèi, 以 sì, 机 wēi — 1,622 of
  the model's 6,672 characters have one) would tie common characters to others nobody types
  for them (逐 -> 的 at confidence 0.85 on clean text). Two characters are
  *same pinyin* when they share a syllable (因/音, 坐/座) and *similar pinyin* when they share a
  syllable only after folding the usual fuzzy pairs zh/z ch/c sh/s n/l and an/ang en/eng in/ing
  (因 yin / 应 ying, 是 shi / 四 si);
* shape from the tables shipped in `char_similar` (read as JSON; the package itself is not
  imported): four-corner codes, stroke-order strings and component decompositions. Candidates
  are found by blocking on shared keys (same four-corner code, stroke order equal up to one
  stroke, decomposition equal up to one component, one character being a component of the
  other), ranked by how many keys they share, and capped; beside them each character's
  four-corner code, stroke order and components, for the scorer's graded shape measures of any
  pair (glyphs.py).

Targets are restricted to common characters (those with a frequency in char_similar's table,
about 6,300), so rare characters never become corrections; any character can be a source.
The built tables are cached as JSON under `~/.cache/electra-csc/` (`cache.cache_dir()`: or
`$XDG_CACHE_HOME/electra-csc`, or `$ELECTRA_CSC_CACHE`), keyed by a hash of the build parameters and package versions.

Users can add pairs from a file: one pair per line, `a b` (or `a b c ...`) or `a:bcd`;
blank lines and lines starting with # are ignored. User pairs count in both directions.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..text.tokenization import is_cjk
from .cache import cache_dir
from .glyphs import GlyphSimilarity, glyph_table

BUILD_VERSION = 5  # bump when the build logic changes: old caches are then ignored

SAME_PINYIN, SIMILAR_PINYIN, SIMILAR_SHAPE, USER_PAIR = 1, 2, 4, 8
LEARNED_PAIR = 16  # seen as a real correction in the model's training data (error_pairs.py)
RELATION_NAMES = {SAME_PINYIN: "same_pinyin", SIMILAR_PINYIN: "similar_pinyin", SIMILAR_SHAPE: "similar_shape",
                  USER_PAIR: "user_pair", LEARNED_PAIR: "learned_pair"}

INITIALS = ("zh", "ch", "sh", "b", "p", "m", "f", "d", "t", "n", "l", "g", "k", "h", "j", "q", "x", "r", "z",
            "c", "s", "y", "w")
FUZZY_INITIALS = {"zh": "z", "ch": "c", "sh": "s", "l": "n"}
# Longest suffix first, so "iang" folds as a whole.
FUZZY_FINALS = (("iang", "ian"), ("uang", "uan"), ("ang", "an"), ("eng", "en"), ("ing", "in"))


@dataclass(frozen=True)
class ConfusionConfig:
    max_shape_neighbours: int = 20  # most similar-shape candidates kept per character
    max_block: int = 40  # keys shared by more characters than this are too generic (e.g. 氵+*)
    min_shape_score: float = 1.0  # evidence needed to call two characters similar in shape
    # Every reading pypinyin lists, phrases or not: the release's networks were fine-tuned on
    # synthetic draws made with these sets (the recipe's `finetune synth --all-readings`). The
    # corrector does without them: 18.5 % of a synthetic several-errors part's pairs but 1.0-2.6 %
    # of real errors are related only through such readings (docs/history.md).
    all_readings: bool = False


def kind_of(relation: int) -> str:
    """The `Edit.kind` for a relation bit mask: sound wins over shape."""
    if relation & (SAME_PINYIN | SIMILAR_PINYIN):
        return "pinyin"
    if relation & SIMILAR_SHAPE:
        return "shape"
    return "other"


@functools.cache  # ~400 syllables, looked up 8,600 times while a ConfusionSet indexes its readings
def fuzzy_syllable(syllable: str) -> str:
    """Fold a toneless syllable onto its fuzzy class: zhang -> zan, ling -> nin."""
    initial = next((i for i in INITIALS if syllable.startswith(i)), "")
    final = syllable[len(initial):]
    initial = FUZZY_INITIALS.get(initial, initial)
    for long, short in FUZZY_FINALS:
        if final.endswith(long):
            final = final[: -len(long)] + short
            break
    return initial + final


def _char_similar_tables() -> dict[str, dict]:
    spec = importlib.util.find_spec("char_similar")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the char-similar package is required for shape confusion sets (pip install char-similar)")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    names = ("frequency", "fourangle", "order", "stroke", "component")
    return {name: json.loads((data / f"char_{name}.dict").read_text(encoding="utf-8")) for name in names}


def _shape_keys(char: str, tables: dict[str, dict]) -> list[tuple]:
    """Blocking keys: characters sharing a key are shape-neighbour candidates (key, weight)."""
    keys: list[tuple] = []
    corners = tables["fourangle"].get(char)
    if corners:
        keys.append(("corners", corners[:4], 1.0))
        keys.append(("corners5", corners, 0.5))
    order = tables["order"].get(char)
    if order and len(order) >= 4:  # short stroke orders collide by chance
        keys.append(("order", order, 1.0))
        for i in range(len(order)):  # equal up to one stroke
            keys.append(("order~", order[:i] + "*" + order[i + 1:], 0.5))
    parts = tables["stroke"].get(char)
    if parts and len(parts) >= 2:
        radical = tables["component"].get(char)
        for i in range(len(parts)):  # equal up to one component: 清/请/情
            rest = parts[:i] + parts[i + 1:]
            # Sharing only the radical (座/庞) is weak evidence; sharing the rest (清/请) is strong.
            weight = 0.5 if rest == [radical] else 1.0
            keys.append(("parts~", tuple(parts[:i]) + ("*",) + tuple(parts[i + 1:]), weight))
    return keys


def _phrase_readings() -> dict[str, set[str]]:
    """Each character's toneless readings in pypinyin's phrase dictionary."""
    from pypinyin.constants import PHRASES_DICT
    from pypinyin.contrib.tone_convert import to_normal

    found: dict[str, set[str]] = defaultdict(set)
    for phrase, readings in PHRASES_DICT.items():
        if len(phrase) == len(readings):
            for char, options in zip(phrase, readings, strict=True):
                found[char].update(to_normal(option) for option in options)
    return found


def _build(config: ConfusionConfig) -> dict:
    from pypinyin import Style, pinyin

    tables = _char_similar_tables()
    chars = sorted(c for c in tables["fourangle"].keys() | tables["frequency"].keys() if is_cjk(c))
    common = sorted(c for c, f in tables["frequency"].items() if f and f > 0 and is_cjk(c))
    common_set = set(common)

    in_phrases = _phrase_readings()
    readings = {}
    for char in chars:
        every = [s for s in pinyin(char, style=Style.NORMAL, heteronym=True)[0] if s.isalpha()]
        syllables = sorted({s for s in every if config.all_readings or s == every[0] or s in in_phrases.get(char, ())})
        if syllables:
            readings[char] = syllables

    # Shape: block the common characters by key, then score every source against its blocks.
    blocks: dict[tuple, list[str]] = defaultdict(list)
    for char in common:
        for kind, value, _ in _shape_keys(char, tables):
            blocks[(kind, value)].append(char)
    containers: dict[str, set[str]] = defaultdict(set)  # 坐 <-> 座: one is a component of the other
    for char in common:
        parts = tables["stroke"].get(char) or []
        if len(parts) == 2:
            for part in parts:
                if part != char and part in common_set:
                    containers[part].add(char)
                    containers[char].add(part)
    strokes = tables["order"]
    shape: dict[str, str] = {}
    for char in chars:
        scores: dict[str, float] = defaultdict(float)
        for kind, value, weight in _shape_keys(char, tables):
            block = blocks.get((kind, value), ())
            if len(block) > config.max_block:
                continue
            for other in block:
                scores[other] += weight
        for other in containers.get(char, ()):
            scores[other] += 1.5
        scores.pop(char, None)
        n = len(strokes.get(char, ""))
        ranked = sorted(
            ((s - 0.1 * abs(len(strokes.get(o, "")) - n), o) for o, s in scores.items() if s >= config.min_shape_score),
            key=lambda item: (-item[0], item[1]),
        )
        if ranked:
            shape[char] = "".join(o for _, o in ranked[: config.max_shape_neighbours])
    # The scores are symmetric but the cap is not: 仁 lists 人, while 人 keeps only its
    # 20 closest neighbours. That is intended; a rare neighbour is a poor correction.
    return {"version": BUILD_VERSION, "common": "".join(common), "pinyin": readings, "shape": shape,
            "glyphs": glyph_table(tables, chars)}


def load_tables(config: ConfusionConfig | None = None, use_cache: bool = True) -> dict:
    """The built tables, from the cache when present (building and caching them otherwise)."""
    config = config or ConfusionConfig()
    versions = [importlib.metadata.version(p) for p in ("pypinyin", "char-similar")]
    # Distinct names, so that building one kind never removes the other's cache file.
    name = f"confusion-{'all-readings-' if config.all_readings else ''}v{BUILD_VERSION}"
    return cached_json(name, [BUILD_VERSION, versions, config.__dict__],
                       lambda: _build(config), use_cache=use_cache)


def cached_json(name: str, key: object, build: Callable[[], object], use_cache: bool = True):
    """`build()`'s JSON-able result, cached as `cache_dir()/NAME-HASH.json` where HASH is a hash
    of `key` (build parameters and package versions); cache files of other keys are removed."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{digest}.json"
    if use_cache and path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass  # a truncated cache file: rebuild it
    value = build()
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
            tmp.replace(path)  # atomic: concurrent builders never see half a file
            for old in path.parent.glob(f"{name}-*.json"):  # built with other parameters or versions
                if old != path:
                    old.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only home directory must not stop the corrector
    return value


def read_pairs(path: str | Path) -> list[tuple[str, str]]:
    """User confusion pairs from a file: `a b`, `a b c`, or `a:bcd` per line."""
    pairs: list[tuple[str, str]] = []
    text = Path(path).read_text(encoding="utf-8-sig")
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if ":" in line:
            source, _, rest = line.partition(":")
            targets = "".join(rest.split())
        else:
            source, _, rest = line.partition(" ") if " " in line else line.partition("\t")
            targets = "".join(rest.split())
        source = source.strip()
        if len(source) != 1 or not targets:
            raise ValueError(f"{path}:{lineno}: expected 'a b' or 'a:bcd' (single characters), got {raw!r}")
        pairs.extend((source, target) for target in targets if target != source)
    return pairs


class ConfusionSet:
    """`relations(char)` -> {candidate: relation bits}; built once, looked up lazily."""

    def __init__(self, tables: dict | None = None, user_pairs: list[tuple[str, str]] = ()) -> None:
        tables = tables or load_tables()
        self.common = set(tables["common"])
        self.readings: dict[str, list[str]] = tables["pinyin"]
        self.shape: dict[str, str] = tables["shape"]
        # Graded shape measures of any pair (glyphs.py); None for tables built without them.
        self.glyphs = GlyphSimilarity(tables["glyphs"]) if "glyphs" in tables else None
        self.by_syllable: dict[str, set[str]] = defaultdict(set)
        self.by_fuzzy: dict[str, set[str]] = defaultdict(set)
        for char, syllables in self.readings.items():
            if char in self.common:
                for syllable in syllables:
                    self.by_syllable[syllable].add(char)
                    self.by_fuzzy[fuzzy_syllable(syllable)].add(char)
        self.user: dict[str, set[str]] = defaultdict(set)
        for a, b in user_pairs:
            self.user[a].add(b)
            self.user[b].add(a)
        self._memo: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def build(cls, confusion_file: str | Path | None = None, use_cache: bool = True,
              all_readings: bool = False) -> ConfusionSet:
        pairs = read_pairs(confusion_file) if confusion_file else []
        return cls(load_tables(ConfusionConfig(all_readings=all_readings), use_cache=use_cache), pairs)

    def pinyin(self, char: str) -> list[str]:
        return self.readings.get(char, [])

    def relations(self, char: str) -> dict[str, int]:
        """Every confusable character for `char` with its relation bits (SAME_PINYIN | ...)."""
        memo = self._memo.get(char)
        if memo is not None:
            return memo
        found: dict[str, int] = defaultdict(int)
        syllables = self.readings.get(char, [])
        for syllable in syllables:
            for other in self.by_syllable.get(syllable, ()):
                found[other] |= SAME_PINYIN
        for key in {fuzzy_syllable(s) for s in syllables}:
            for other in self.by_fuzzy.get(key, ()):
                if not found.get(other, 0) & SAME_PINYIN:
                    found[other] |= SIMILAR_PINYIN
        for other in self.shape.get(char, ""):
            found[other] |= SIMILAR_SHAPE
        for other in self.user.get(char, ()):
            found[other] |= USER_PAIR
        found.pop(char, None)
        result = dict(found)
        with self._lock:
            self._memo[char] = result
        return result

    def relation(self, source: str, target: str) -> int:
        return self.relations(source).get(target, 0)
