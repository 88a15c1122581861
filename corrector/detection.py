"""Detect: which characters of a batch are examined (the flag rules).

1. One discriminator pass gives P(replaced) per character; editable CJK positions above the
   detection threshold are flagged.
2. Generator flags (the scorer's `generator_flag_margin`, a generator that reads the text as
   written): the generator's pass of the propose stage runs over the whole batch here already,
   and also flags the characters where it prefers a confusable character to the written one by
   more than that margin, read from its confusion set's 30-110 rows of the output layer. The
   discriminator misses errors the generator sees: of the 292 dev errors it leaves below 0.02,
   the 169 correct characters with the largest margins hold 58, the 169 with the highest
   detection probability 8. With `generator_flag_lm_weight` the margin first gets that weight
   times the n-gram LM's best gain over the confusion set (`FLAG_LM_FLOOR`).
3. Context flags (`context_flag_rate`): the characters that, with a neighbour as written, were
   corrected at least that often in the model's training data (`ErrorPairs.context_flag`: 因该 is
   a mistake wherever it is written).
4. Particle flags (`particle_flag_gain`): a written 的/地/得 where the model's particle classifier
   prefers another particle by more than that gain. Of the dev split's 67 particle errors, the
   other rules left most of those the corrector missed unexamined or unsure.
5. Idiom flags (`idiom_threshold_factor`): a character where a confusable one completes a
   four-character idiom the text breaks (resources/idioms.py).
6. Pair flags (`pair_flag_gain`): a character where one of its corrections in the model's
   training data (`ErrorPairs.targets`) raises the n-gram LM by more than that gain: 彩[卷] ->
   彩券, 我[带]个帽子 -> 戴, which the discriminator and the generator both read as fine. On the
   broad dev at 4 nats they hold 17 of SIGHAN's 91 and 17 of Wang's 65 errors no other rule
   flags, at 1.1 % and 1.7 % of their correct characters.
7. Word flags (`word_flag_gain`, with word candidates): the characters a dictionary word that
   sounds like the written span changes (resources/homophones.py: 有期图形 -> 徒刑, 长尾会 -> 常委会)
   where writing the word raises the n-gram LM by more than that gain. A pinyin input method's
   wrong word is often a word itself: neither the discriminator nor the generator, reading one
   character at a time, finds its characters wrong (ECSpell's tests: 97 of 303 adjacent wrong
   characters unflagged, 16 corrected, against 602 of 847 single ones).

The result is the batch's `Sites`: its flagged positions, what every later stage reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .candidates import VocabConfusion
from .chunking import Item
from .resources.confusion import kind_of
from .resources.homophones import WordConfig
from .resources.idioms import idiom_fixes
from .resources.ngram import UNKNOWN
from .resources.particles import PARTICLE_INDEX
from .runtime.models import ModelBundle
from .runtime.onnx_networks import OutputLayer
from .runtime.passes import Batch, GeneratorPass, output_layer, reads_positions

if TYPE_CHECKING:  # only a type here: scoring imports the feature names, whose module reads Sites
    from .resources.homophones import HomophoneWords
    from .scoring import Scorer

# Generator flags with n-gram evidence (Scorer.generator_flag_lm_weight) read the LM only where
# the generator's margin is above this. On the dev split -3 read 3,647 of the 33,991 characters
# the discriminator and the margin leave, holding 126 of their 237 errors; -5 (the shipped
# setting) examines 192 more dev characters holding 29 more errors (烦脑, 端装, 图鸦: written words
# the generator copies but the LM finds far less likely than a confusable one) at ~2 % of the
# candidate search's time, and held-out dev F1 rose 0.5236 -> 0.5356 (8 of 8 halves better);
# -8 adds 23 characters for 6 errors more.
FLAG_LM_FLOOR = -5.0
# Word flags (Scorer.word_flag_gain) read only the words that change a character the discriminator
# gives at least this: on ECSpell's tests 151 of the 157 misspelt words that read like the written
# span, and 31 % of all such words (clean dev text: 40 %), each scored by the n-gram LM.
WORD_FLAG_MIN_PROB = 0.001
# Context flags (Scorer.context_flag_rate) need a correction seen at least this often: one
# learner's slip in one training sentence flags too much ordinary text.
CONTEXT_FLAG_MIN_COUNT = 2
# In correction, the generator, context and particle flag rules examine only the characters the
# discriminator gives at least this (the idiom and word flags have their own tests). Below it lie
# 73 % of clean dev text's characters and 59 % of SIGHAN-15's, and those rules' flags there were
# hardly ever accepted: at 3e-4 every broad dev part scores exactly the same (one pass and three),
# the six public tests differ by one sentence (SIGHAN-13: one false edit fewer with three passes,
# one correction fewer with one); at 1e-3 the generator's flags move multi +0.3, ECSpell med -0.5.
# Their confusion margins and LM evidence there were ~12 % of a one-pass batch's time. Calibration
# (`score_candidates`) still reads every rule flag: scorers fitted without those 1,665 of 240,816
# dev candidates scored 54.8 against 55.15 held out (macro, --splits 1).
RULE_FLAG_MIN_PROB = 3e-4


def detect(bundle: ModelBundle, batch: Batch) -> np.ndarray:
    """P(replaced) per character, (B, T - 2) float32; padding columns are 0."""
    probs = bundle.replaced_probability(batch.input_ids, batch.attention_mask)[:, 1:-1]
    return probs * batch.attention_mask[:, 2:].astype(probs.dtype)  # zero [SEP] and padding


@dataclass
class Sites:
    """The flagged positions n = 0..N-1 of a batch: row `rows[n]` of the batch, character
    `index[n]` of that row, offset `offsets[n]` in its text."""

    texts: Sequence[str]  # every text of the call, as the model reads them
    group: list[Item]  # the batch's chunks, one per row
    rows_t: np.ndarray  # (N,) int64
    index_t: np.ndarray  # (N,) int64
    detect_prob: np.ndarray  # (N,) float64: discriminator P(replaced)
    source_ids: np.ndarray  # (N,) int64: vocabulary id of the written character
    generator_pass: GeneratorPass | None = None  # the batch's generator pass, when flagging made one
    # The n-gram gains the word flags computed, by (id(text), start, word): the word candidates
    # read them instead of scoring those words again.
    word_gains: dict[tuple[int, int, str], float] = field(default_factory=dict)
    rows: list[int] = field(init=False)
    index: list[int] = field(init=False)
    offsets: list[int] = field(init=False)
    chars: list[str] = field(init=False)  # the written characters

    def __post_init__(self) -> None:
        self.rows, self.index = self.rows_t.tolist(), self.index_t.tolist()
        self.offsets = [self.group[r].offsets[i] for r, i in zip(self.rows, self.index, strict=True)]
        self.chars = [self.texts[self.group[r].text_index][o] for r, o in zip(self.rows, self.offsets, strict=True)]

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def sites(self) -> list[tuple[str, int]]:
        """(text, offset) of each flagged position: what the tables (n-gram LM, error pairs,
        particle classifier) read."""
        return [(self.texts[self.group[r].text_index], o) for r, o in zip(self.rows, self.offsets, strict=True)]


class Detector:
    """The flag rules of one corrector: which of a batch's characters are examined."""

    def __init__(self, bundle: ModelBundle, scorer: Scorer, vocab_confusion: VocabConfusion,
                 vocab_to_lm: np.ndarray | None, generator_input: str,
                 homophones: HomophoneWords | None = None, words: WordConfig | None = None) -> None:
        self.bundle = bundle
        self.scorer = scorer
        self.vocab_confusion = vocab_confusion
        self.vocab_to_lm = vocab_to_lm
        self.generator_input = generator_input
        self.homophones = homophones  # the word candidates' index; None: no word flags
        self.words = words or WordConfig()  # the word candidates' settings, shared by the word flags
        self._output_layer: OutputLayer | None = None  # the generator's, read lazily
        self._pair_targets: dict[str, np.ndarray] = {}  # pair flags: character -> LM ids of its training corrections

    @property
    def flags_by_generator(self) -> bool:
        """Whether the generator's confusion margin flags characters too: the scorer asks for it,
        and the generator reads the sentence as written with a head that can be read per position."""
        return (self.scorer.generator_flag_margin is not None and self.generator_input == "source"
                and reads_positions(self.bundle.generator_network()))

    def flag(self, texts: Sequence[str], group: list[Item], batch: Batch, threshold: float,
             rule_floor: float | None = None) -> Sites | None:
        """The batch's flagged positions (None when there are none): the items' `examined`
        positions, discriminator probability above `threshold`, then each flag rule the scorer
        turns on, over what is still unflagged (the generator, context and particle rules only
        where the probability is at least `rule_floor`; None: RULE_FLAG_MIN_PROB)."""
        bundle, scorer = self.bundle, self.scorer
        probs = detect(bundle, batch)  # (B, L)
        editable = np.zeros(probs.shape, dtype=bool)
        examined = np.zeros_like(editable)
        for row, it in enumerate(group):
            editable[row, : len(it.editable)] = it.editable
            if it.examined is not None:
                examined[row, : len(it.examined)] = it.examined
        flagged = ((probs > threshold) | examined) & editable
        open_to_rules = editable & (probs >= (RULE_FLAG_MIN_PROB if rule_floor is None else rule_floor))
        generator_pass = None
        word_gains: dict[tuple[int, int, str], float] = {}
        if self.flags_by_generator:
            generator_pass = GeneratorPass(bundle, batch.input_ids, batch.attention_mask)
            flagged |= self._generator_flags(texts, group, batch, generator_pass, open_to_rules & ~flagged)
        if scorer.context_flag_rate is not None and bundle.error_pairs is not None:
            flagged |= self._context_flags(texts, group, open_to_rules & ~flagged)
        if scorer.particle_flag_gain is not None and bundle.particles is not None:
            flagged |= self._particle_flags(texts, group, open_to_rules & ~flagged)
        if scorer.pair_flag_gain is not None and bundle.error_pairs is not None and bundle.ngram is not None:
            flagged |= self._pair_flags(texts, group, open_to_rules & ~flagged)
        if scorer.idiom_threshold_factor is not None:
            flagged |= self._idiom_flags(texts, group, editable & ~flagged)
        if scorer.word_flag_gain is not None and self.homophones is not None and bundle.ngram is not None:
            flagged |= self._word_flags(texts, group, editable, editable & (probs >= WORD_FLAG_MIN_PROB), word_gains)
        rows_t, index_t = np.nonzero(flagged)
        if len(rows_t) == 0:
            return None
        source_ids = batch.input_ids[rows_t, index_t + 1]
        return Sites(texts, group, rows_t, index_t, probs[rows_t, index_t].astype(np.float64), source_ids,
                     generator_pass, word_gains)

    def _generator_flags(self, texts, group: list[Item], batch: Batch, generator_pass: GeneratorPass,
                         candidates: np.ndarray) -> np.ndarray:
        """(B, L) bool: the `candidates` characters (editable, not flagged by the discriminator) at
        which the generator prefers a confusable character to the written one by more than the
        scorer's `generator_flag_margin`."""
        rows_t, index_t = np.nonzero(candidates)
        flags = np.zeros_like(candidates)
        if len(rows_t) == 0:
            return flags
        written_ids = batch.input_ids[rows_t, index_t + 1]
        sets = [self.vocab_confusion(texts[group[r].text_index][group[r].offsets[i]])[0]
                for r, i in zip(rows_t.tolist(), index_t.tolist(), strict=True)]
        if self._output_layer is None:
            self._output_layer = output_layer(self.bundle)  # once; a benign race at worst
        margins = generator_pass.confusion_margins(rows_t, index_t, written_ids, sets, self._output_layer)
        weight = self.scorer.generator_flag_lm_weight
        if weight and self.bundle.ngram is not None:
            margins = self.with_lm_evidence(texts, group, rows_t, index_t, sets, margins, weight)
        chosen = margins > self.scorer.generator_flag_margin
        flags[rows_t[chosen], index_t[chosen]] = True
        return flags

    def with_lm_evidence(self, texts, group: list[Item], rows_t: np.ndarray, index_t: np.ndarray,
                         sets: list[np.ndarray], margins: np.ndarray, weight: float) -> np.ndarray:
        """The flag scores: each generator margin plus `weight` x the n-gram LM's best gain over the
        character's confusion set, where the margin is above FLAG_LM_FLOOR (-inf elsewhere: the
        LM pass costs like a flagged position's candidates, and below the floor it finds little)."""
        scores = np.full_like(margins, -np.inf)
        near = np.flatnonzero((margins > FLAG_LM_FLOOR) & (np.array([len(ids) for ids in sets]) > 0))
        if len(near) == 0:
            return scores
        rows, index = rows_t[near].tolist(), index_t[near].tolist()
        sites = [(texts[group[r].text_index], group[r].offsets[i]) for r, i in zip(rows, index, strict=True)]
        gains = self.bundle.ngram.replacement_gains(sites, [self.vocab_to_lm[sets[n]] for n in near])
        best = np.array([site.max() for site in gains])
        scores[near] = margins[near] + weight * best.astype(margins.dtype)
        return scores

    def _context_flags(self, texts, group: list[Item], candidates: np.ndarray) -> np.ndarray:
        """(B, L) bool: the `candidates` characters whose written left or right bigram was corrected
        in training at the scorer's `context_flag_rate` or more (`ErrorPairs.context_flag`)."""
        flags = np.zeros_like(candidates)
        table, rate = self.bundle.error_pairs, self.scorer.context_flag_rate
        for row, index in np.argwhere(candidates).tolist():
            it = group[row]
            if table.context_flag(texts[it.text_index], it.offsets[index], CONTEXT_FLAG_MIN_COUNT, rate):
                flags[row, index] = True
        return flags

    def _particle_flags(self, texts, group: list[Item], candidates: np.ndarray) -> np.ndarray:
        """(B, L) bool: the `candidates` characters that are particles (的/地/得) where the model's
        particle classifier gives another particle more than the scorer's `particle_flag_gain`
        over the written one (particles.py)."""
        flags = np.zeros_like(candidates)
        cells, sites = [], []
        for row, index in np.argwhere(candidates).tolist():
            it = group[row]
            text, offset = texts[it.text_index], it.offsets[index]
            if text[offset] in PARTICLE_INDEX:
                cells.append((row, index))
                sites.append((text, offset))
        if sites:
            gains = self.bundle.particles.best_other_gain(sites)
            for (row, index), gain in zip(cells, gains.tolist(), strict=True):
                flags[row, index] = gain > self.scorer.particle_flag_gain
        return flags

    def _pair_flags(self, texts, group: list[Item], candidates: np.ndarray) -> np.ndarray:
        """(B, L) bool: the `candidates` characters where writing one of the character's training
        corrections (`ErrorPairs.targets`) raises the n-gram LM by more than the scorer's
        `pair_flag_gain` (nats), all of a batch's in one LM pass."""
        flags = np.zeros_like(candidates)
        cells, sites, options = [], [], []
        for row, index in np.argwhere(candidates).tolist():
            it = group[row]
            text, offset = texts[it.text_index], it.offsets[index]
            targets = self._pair_targets.get(text[offset])
            if targets is None:  # once per character: the LM ids of its corrections in training
                targets = self.bundle.ngram.ids(self.bundle.error_pairs.targets(text[offset]))
                targets = self._pair_targets[text[offset]] = targets[targets > UNKNOWN]
            if len(targets):
                cells.append((row, index))
                sites.append((text, offset))
                options.append(targets)
        if sites:
            best = [gains.max() for gains in self.bundle.ngram.replacement_gains(sites, options)]
            for (row, index), gain in zip(cells, best, strict=True):
                flags[row, index] = gain > self.scorer.pair_flag_gain
        return flags

    def _idiom_flags(self, texts, group: list[Item], candidates: np.ndarray) -> np.ndarray:
        """(B, L) bool: the `candidates` characters where a character of the same or a similar
        sound or shape completes a four-character idiom the text breaks (resources/idioms.py;
        on with the scorer's `idiom_threshold_factor`): 一股作气 -> 一鼓作气, whose 股 no other
        rule examines."""
        flags = np.zeros_like(candidates)
        relation = self.vocab_confusion.confusion.relation
        for row, it in enumerate(group):
            text = texts[it.text_index]
            fixes = idiom_fixes(text, it.chunk.start, it.chunk.end)
            if not fixes:
                continue
            for index, offset in enumerate(it.offsets):
                chars = fixes.get(offset)
                if chars and bool(candidates[row, index]) and any(
                        kind_of(relation(text[offset], char)) != "other" for char in chars):
                    flags[row, index] = True
        return flags

    def _word_flags(self, texts, group: list[Item], editable: np.ndarray, suspect: np.ndarray,
                    gains_out: dict[tuple[int, int, str], float]) -> np.ndarray:
        """(B, L) bool: the characters that a dictionary word read like the written span changes
        (at least two, all `editable`, one of them `suspect`) where writing the word raises the
        n-gram LM's log-probability by more than the scorer's `word_flag_gain` (in nats). Every
        gain computed goes into `gains_out` (`Sites.word_gains`)."""
        flags = np.zeros_like(editable)
        found, sites, words = [], [], []
        reach = self.homophones.max_len - 1
        for row, it in enumerate(group):
            suspects = [it.offsets[index] for index in np.flatnonzero(suspect[row, :len(it.offsets)]).tolist()]
            if not suspects:
                continue
            text = texts[it.text_index]
            allowed = {it.offsets[index] for index in np.flatnonzero(editable[row, :len(it.offsets)]).tolist()}
            near = set(suspects)
            # Only the spans within reach of a suspect: windows around them, merged.
            windows: list[list[int]] = []
            for offset in suspects:
                low, high = max(it.chunk.start, offset - reach), min(it.chunk.end, offset + reach + 1)
                if windows and low <= windows[-1][1]:
                    windows[-1][1] = max(windows[-1][1], high)
                else:
                    windows.append([low, high])
            for low, high in windows:
                for match in self.homophones.matches(text, allowed.__contains__, low, high, self.words.most_frequent):
                    if any(text[match.start + j] != char and match.start + j in near for j, char in enumerate(match.word)):
                        found.append((row, match))
                        sites.append((text, match.start))
                        words.append(match.word)
        if words:
            gains = self.bundle.ngram.span_gains(sites, words)
            gains_out.update(zip(((id(text), start, word) for (text, start), word in zip(sites, words, strict=True)),
                                 gains.tolist(), strict=True))
            index_of: dict[int, dict[int, int]] = {}  # row -> offset -> index, for the rows with a flag
            for k in np.flatnonzero(gains > self.scorer.word_flag_gain).tolist():
                row, match = found[k]
                text = sites[k][0]
                if row not in index_of:
                    index_of[row] = {offset: index for index, offset in enumerate(group[row].offsets)}
                for j, char in enumerate(match.word):
                    if text[match.start + j] != char:
                        flags[row, index_of[row][match.start + j]] = True
        return flags
