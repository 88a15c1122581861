"""The corrector: a chain of stages, each in its own module.

    stage       module              what it does
    script      script_mapping.py   traditional-script texts read in simplified form (text/script.py)
    chunk       chunking.py         texts -> chunks of <= max_positions characters, encoded
    detect      detection.py        discriminator pass + flag rules -> the flagged positions (`Sites`)
    propose     proposal.py         generator pass, confusion sets, n-gram gains -> `Candidates`
    featurize   features.py         one feature row per candidate
    score       scoring.py          the scorer's confidence per candidate (scorer.json)
    accept      acceptance.py       the best candidate per position above the threshold, the
                                    max-edits guard, further passes; script_mapping.py writes a
                                    traditional text's edits back in its script before the guard
    stitch      result.py           edits applied by offset to the text as written

Texts are split into chunks and sorted by length (similar lengths share a batch); batches run
on the batch threads (runtime/workers.py). A text in traditional script goes through all of this
in simplified form, one character for one (script_mapping.py), and its accepted edits are written
back in its script. Edits are applied by offset to the original string, so everything that is
not a corrected character — ASCII, digits, URLs, emoji, punctuation, full-width forms, spaces,
newlines — comes back byte for byte; so do invisible characters (zero-width spaces, joiners,
soft hyphens), which no stage reads (text/invisible.py: read without them, edits mapped back).

The settings are `CorrectorConfig` and the constructor's arguments (config.py; its names import
from here too). Three passes by default (`CorrectorConfig.passes`): the sentences that got edits
are corrected once more as corrected, from a lower threshold, their edited characters and
neighbours examined whether flagged or not; those the second pass changed, once more.

A `Corrector` holds only read-only state once built (model in eval mode, scorer weights,
confusion tables whose lazily filled memo tables are lock-protected), so one instance may serve
many threads at once.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .acceptance import (
    accepted_edits,
    edited_sentences,
    limit_edits,
    merge_passes,
    near_edits,
    winners,
)
from .candidates import VocabConfusion, cjk_bias
from .chunking import Item, chunk_texts, text_list
from .config import (
    DEFAULT_MAX_EDITS,
    MAX_PASSES,
    CorrectorConfig,
    scorer_with_overrides,
    whitelist_terms,
)
from .detection import Detector
from .features import Featurizer
from .proposal import Proposer
from .resources.confusion import ConfusionSet
from .resources.homophones import HomophoneWords, whole_words
from .result import Edit, Result
from .runtime.models import ModelBundle, check_generator_input, prepare_bundle
from .runtime.passes import make_batch
from .runtime.workers import MIN_SPLIT_ITEMS, MIN_SPLIT_ITEMS_ONNX, BatchWorkers
from .scored import ScoredBatch, ScoredCandidate, scored_candidates
from .scoring import Scorer, probability
from .script_mapping import model_texts, script_converter, written_edits
from .text.invisible import visible_texts
from .text.protection import WordFrequency
from .text.segmentation import sentence_spans, sentence_units

# With the settings and batch constants once defined here: the CLI, the service, calibration and
# users import them from corrector.pipeline.
__all__ = ["DEFAULT_MAX_EDITS", "MAX_PASSES", "MIN_SPLIT_ITEMS", "MIN_SPLIT_ITEMS_ONNX", "Corrector",
           "CorrectorConfig", "scorer_with_overrides", "whitelist_terms"]


class Corrector:
    """Chinese spelling corrector. `threshold` is the minimum confidence (0-1) of an edit.

    Configuration: `config` (a `CorrectorConfig`); `batch_size` and `max_edits_per_sentence`,
    when given, override its fields. The scorer is the model's (scorer.json) unless `scorer` is
    given; `threshold` and `detection_threshold` override its thresholds.

    Precision: on CPU the networks run int8 matmuls by default (`quantize=None`), ~2x the
    sentences/s of fp32 at the same F1: in ONNX Runtime where it is installed (`runtime="auto"`;
    runtime/onnx_networks.py, no torch: encoders one sentence per run, so a text gets exactly the
    same result alone or in any batch). `runtime="torch"` runs torch int8 copies (quantization.py,
    lean_encoder.py), where each token is quantized on its own, so a text gets the same
    corrections alone or in any batch but its confidences can move by a few 1e-3 with the padding
    of its batch (fp32 attention rounding, amplified by the int8 rounding after it).
    `quantize=False` runs fp32, where `correct_batch` gives exactly what `correct` gives;
    `bf16=True` runs bf16 autocast instead (GPUs, CPUs with AVX512-BF16/AMX).
    """

    def __init__(
        self,
        model: str | ModelBundle | None = None,
        device: str = "cpu",
        threshold: float | None = None,
        detection_threshold: float | None = None,
        whitelist: Iterable[str] | Path = (),
        confusion_file: str | Path | None = None,
        max_edits_per_sentence: int | None = None,
        batch_size: int | None = None,
        scorer: Scorer | dict | None = None,
        confusion: ConfusionSet | None = None,
        config: CorrectorConfig | None = None,
        quantize: bool | None = None,
        bf16: bool = False,
        runtime: str = "auto",
    ) -> None:
        self.bundle = prepare_bundle(model, device, quantize, bf16, runtime)
        overrides = {"batch_size": batch_size, "max_edits_per_sentence": max_edits_per_sentence}
        self.config = dataclasses.replace(config or CorrectorConfig(),
                                          **{name: value for name, value in overrides.items() if value is not None})
        self.scorer = scorer_with_overrides(scorer if scorer is not None else self.bundle.scorer_config, threshold,
                                            detection_threshold)
        self.whitelist = whitelist_terms(whitelist)
        if confusion is not None and confusion_file is not None:
            raise ValueError("pass either confusion or confusion_file, not both")
        self.confusion = confusion or ConfusionSet.build(confusion_file)
        self.script = script_converter(self.config.traditional)
        self.generator_input = check_generator_input(self.config.generator_input or self.bundle.generator_input)
        self.max_positions = max(1, min(self.config.max_positions, self.bundle.max_length))
        self._build_stages()
        self.batch_workers = BatchWorkers.start(self.config.workers, self.bundle.device_type, self.runtime)
        self.workers = self.batch_workers.count

    def _build_stages(self) -> None:
        bundle, tok = self.bundle, self.bundle.tokenizer
        self.vocab_confusion = VocabConfusion(self.confusion, bundle)
        self.cjk_bias = cjk_bias(bundle)
        self.vocab_to_lm = None  # vocabulary id -> n-gram LM id, for candidate arrays
        if bundle.ngram is not None:
            self.vocab_to_lm = bundle.ngram.ids([tok.token(i) for i in range(tok.vocab_size)])
        self.words = WordFrequency()
        word_candidates = self.config.word_candidates
        if word_candidates is None:
            word_candidates = self.scorer.uses("word_gain")
        self.homophones = None
        if word_candidates and bundle.ngram is not None:  # a word is judged by the n-gram LM
            self.homophones = HomophoneWords.build(self.confusion, self.config.words.min_freq)
        self.detector = Detector(bundle, self.scorer, self.vocab_confusion, self.vocab_to_lm, self.generator_input,
                                 self.homophones, self.config.words)
        self.proposer = Proposer(bundle, self.config.candidates, self.vocab_confusion, self.cjk_bias, self.vocab_to_lm,
                                 self.generator_input, self.homophones, self.confusion, self.config.words,
                                 idioms=self.scorer.idiom_threshold_factor is not None)
        self.featurizer = Featurizer(bundle, self.words, self.vocab_to_lm, self.config.proper_noun_hmm,
                                     self.confusion.glyphs)

    def with_passes(self, passes: int) -> Corrector:
        """This corrector with `passes` correction passes (`CorrectorConfig.passes`): a shallow
        copy sharing the networks, tables and scorer, so that the original — which another thread
        may be using — keeps its own setting."""
        other = copy.copy(self)
        other.config = dataclasses.replace(self.config, passes=passes)
        return other

    @property
    def precision(self) -> str:
        """How the networks run: "int8", "bf16" (autocast) or "fp32"."""
        return self.bundle.precision

    @property
    def runtime(self) -> str:
        """What runs the networks' encoders: "onnxruntime" or "torch"."""
        return self.bundle.runtime

    @property
    def threshold(self) -> float:
        return self.scorer.threshold

    # ---- public API -------------------------------------------------------------------------

    def correct(self, text: str, threshold: float | None = None) -> Result:
        return self.correct_batch([text], threshold=threshold)[0]

    def correct_batch(
        self, texts: Iterable[str], batch_size: int | None = None, threshold: float | None = None
    ) -> list[Result]:
        """Correct many texts (any iterable of str); `threshold` overrides the minimum edit
        confidence for this call."""
        visible, texts = visible_texts(text_list(texts))  # read without ZWSP, ZWJ ... (text/invisible.py)
        threshold = self.scorer.threshold if threshold is None else probability(threshold)
        results = self._correct_once(texts, batch_size, threshold)
        changed = range(len(texts))
        for _ in range(self.config.passes - 1):
            if not changed:
                break
            results, changed = self._recorrect(texts, results, batch_size, threshold, changed)
        return [v.restore(result) for v, result in zip(visible, results, strict=True)]

    def score_candidates(
        self, texts: Iterable[str], batch_size: int | None = None, detection_threshold: float | None = None
    ) -> list[ScoredCandidate]:
        """Every candidate the pipeline scores for these texts, with its feature vector (one pass).

        For calibration: label a candidate 1 when `target` is the gold character at `position`
        and fit with `Scorer.fit([c.features for c in cands], labels)`. A lower
        `detection_threshold` here yields candidates for positions the detector is unsure about
        too. A traditional-script text is scored as the model reads it: `source` and `target` are
        then simplified characters. Positions are offsets into the texts as written.
        """
        visible, texts = visible_texts(text_list(texts))
        read = model_texts(self.script, texts)
        threshold = (self.scorer.detection_threshold if detection_threshold is None
                     else probability(detection_threshold, "detection_threshold"))

        def run_batch(group: list[Item]) -> list:
            # Every rule flag, also below RULE_FLAG_MIN_PROB: a scorer learns from those too.
            scored = self._score_batch(read, group, threshold, rule_floor=0.0)
            return [] if scored is None else scored_candidates(scored, self.scorer.with_prior(scored.features))

        return [dataclasses.replace(c, position=visible[c.text_index].position(c.position))
                for _, found in self._run(read, batch_size, run_batch, originals=texts) for c in found]

    # ---- the pipeline -----------------------------------------------------------------------

    def _correct_once(self, texts: Sequence[str], batch_size: int | None, threshold: float,
                      within: Sequence[set[int]] | None = None,
                      examine: Sequence[set[int]] | None = None) -> list[Result]:
        """One correction pass: chunk -> (detect -> propose -> featurize -> score -> accept) per
        batch -> stitch. With `within` (the second pass) only those offsets of each text may
        change. With `examine` (the second pass) those offsets of each text are scored
        whether or not a flag rule picks them: they are the few characters beside an edit, where
        errors cluster (宅舞 for 债务), and a neighbour that was still wrong when the flags were
        computed often is not flagged (dev split, 48 held-out halves: two-pass F1 +0.003, 31
        halves better, none worse)."""
        read = model_texts(self.script, texts)
        detection_threshold = self.scorer.detection_threshold
        idiom_threshold = self.scorer.idiom_threshold(threshold)

        def run_batch(group: list[Item]) -> list[tuple[Item, list[Edit]]]:
            scored = self._score_batch(read, group, detection_threshold)
            if scored is None:
                return []
            return [(group[row], self._guarded_edits(read, texts, group[row], edits))
                    for row, edits in accepted_edits(scored, threshold, idiom_threshold).items()]

        edits: list[list[Edit]] = [[] for _ in texts]
        for item, accepted in self._run(read, batch_size, run_batch, originals=texts, within=within,
                                        examine=examine):
            edits[item.text_index].extend(accepted)  # as written: traditional ones already written back
        return [Result.applying(text, found) for text, found in zip(texts, edits, strict=True)]

    def _score_batch(self, texts: Sequence[str], group: list[Item], detection_threshold: float,
                     rule_floor: float | None = None) -> ScoredBatch | None:
        """detect -> propose -> featurize -> score for one batch of chunks (None: nothing to score)."""
        batch = make_batch([it.ids for it in group], self.bundle)
        sites = self.detector.flag(texts, group, batch, detection_threshold, rule_floor)
        if sites is None:
            return None
        cands = self.proposer(batch, sites)
        in_noun = self.featurizer.in_proper_noun(sites)
        if self.config.veto_proper_nouns:
            cands = whole_words(cands.select(~in_noun[cands.position]))
        if len(cands) == 0:
            return None
        targets = [self.bundle.tokenizer.token(t) for t in cands.target_id.tolist()]
        features = self.featurizer(sites, cands, targets, in_noun)
        confidence = self.scorer.confidence(features, cands.group)
        best = winners(cands.position, cands.group, confidence.astype(np.float64))
        if self.scorer.acceptor is not None:  # a scorer without one skips the row lookup
            confidence = self.scorer.accepted_confidence(features, confidence, cands.position,
                                                         sites.rows_t[cands.position], cands.group, best)
        return ScoredBatch(sites, cands, targets, features, confidence, best)

    def _recorrect(self, texts: Sequence[str], results: list[Result], batch_size: int | None,
                   threshold: float, among: Iterable[int]) -> tuple[list[Result], list[int]]:
        """A further pass over the texts `among` that have edits, and the texts it changed. The
        second pass: the sentences the first pass edited are corrected again as corrected
        — the whole sentence, its flags computed afresh, its edited characters and their two
        neighbours scored whether or not a flag rule picks them — and accepted from the scorer's
        `second_pass_threshold` (calibrate.SECOND_PASS_THRESHOLD_FACTOR x the edit threshold). A
        correction changes what the sentence reads (the n-gram LM, the words, the networks'
        context), so an error next to one, a first-pass edit that chose the wrong character, or an
        error the first pass's wrong context hid can be fixed now; and where one error was found,
        more are likely. A text's other sentences are left as the first pass left them: a
        document's unrelated sentences must not get a lower threshold from one typo (400
        documents of a dev sentence with errors and four clean ones: edits in the clean ones in
        24 over the whole text, 6 so, 7 when those sentences are corrected alone). Broad dev,
        held out (--splits 1), macro F1: beside the edits only 0.4772; the whole text 0.4827;
        from half the threshold 0.5092; in the edited sentences only 0.5067; clean sentences
        changed 0.55 % in all. A position the second pass writes back to its original character
        is no edit. A third pass reads the texts the second changed, the same way."""
        changed = [i for i in among if results[i].edits]
        if not changed:
            return results, []
        # The sentences as the first pass counted them (chunks' sentences); edits change no
        # punctuation, so the text and its correction have the same ones.
        sentences = {i: sentence_units(texts[i], self.max_positions, self.config.overlap) for i in changed}
        again = self._correct_once([results[i].target for i in changed], batch_size,
                                   self.scorer.second_pass_threshold(threshold),
                                   within=[edited_sentences(results[i], sentences[i]) for i in changed],
                                   examine=[near_edits(results[i]) for i in changed])
        results = list(results)
        for i, second in zip(changed, again, strict=True):
            if second.edits:
                results[i] = merge_passes(texts[i], results[i].edits, second.edits, self.confusion.relation,
                                          self.config.max_edits_per_sentence, sentences[i])
        return results, [i for i, second in zip(changed, again, strict=True) if second.edits]

    def _items(self, texts: Sequence[str], originals: Sequence[str] | None = None,
               within: Sequence[set[int]] | None = None, examine: Sequence[set[int]] | None = None) -> list[Item]:
        """The chunk stage (chunking.py) with this corrector's settings."""
        return chunk_texts(texts, self.bundle.tokenizer, self.whitelist, self.max_positions, self.config.overlap,
                           originals, within, examine)

    def _run(self, texts: Sequence[str], batch_size: int | None, run_batch: Callable[[list[Item]], list],
             originals: Sequence[str] | None = None, within: Sequence[set[int]] | None = None,
             examine: Sequence[set[int]] | None = None) -> Iterator:
        """What `run_batch` returns for each batch of the texts' chunks, batch after batch; the
        batches run on the batch threads when there are enough of them."""
        items = self._items(texts, originals, within, examine)
        items.sort(key=lambda it: len(it.ids), reverse=True)  # similar lengths share a batch
        yield from self.batch_workers.run(items, max(1, batch_size or self.config.batch_size), run_batch)

    def _guarded_edits(self, texts: Sequence[str], originals: Sequence[str] | None, item: Item,
                       edits: list[Edit]) -> list[Edit]:
        """A chunk's accepted edits as edits of the text as written (a traditional text's written
        back in its script; in a text read as written, none that only changes a character's
        script), then the max-edits guard."""
        text = texts[item.text_index]
        original = None if originals is None else originals[item.text_index]
        edits = written_edits(self.script, original, text, item.chunk, edits)
        return limit_edits(edits, sentence_spans(text, item.chunk.start, item.chunk.end),
                           self.config.max_edits_per_sentence)
