"""The correction pipeline: detect -> propose -> score -> protect -> stitch.

Per batch of chunks (texts are split into chunks and sorted by length to limit padding):

1. one discriminator pass: P(replaced) per character; editable CJK positions above
   `detection_threshold` are flagged; when the scorer sets a `generator_flag_margin` (and the
   generator reads the text as written), the generator's pass of step 2 runs over the whole
   batch first and also flags the characters where it prefers a confusable character to the
   written one by more than that margin, read from its confusion set's 30-110 rows of the output layer
   (the discriminator misses errors the generator sees: `_generator_flags`); a scorer with a
   `generator_flag_lm_weight` adds that weight times the n-gram LM's best gain over the confusion
   set to the margin first (`_with_lm_evidence`); a scorer with a `context_flag_rate` also flags
   the characters that, with a neighbour as written, were corrected at least that often in the
   model's training data (`ErrorPairs.context_flag`: 因该 is a mistake wherever it is written);
2. one generator pass over the batch as written ("source" input, a generator fine-tuned to
   correct) or with every flagged position masked ("masked" input): top-k candidates plus
   confusion-set candidates (candidates.py), each with its gain under the model's character
   n-gram LM (ngram.py) when it has one, capped per position;
3. features per candidate and a first ranking with the scorer (scoring.py), the recheck
   feature imputed;
4. when the scorer reads `recheck_prob` (the shipped one does not: measured on dev it added
   nothing once the n-gram and error-pair evidence was in), one batched discriminator pass over
   the flagged sentences with the top `recheck_top` candidates written in (rank r of every
   flagged position in variant r): does the discriminator still think something is wrong there?
5. the best candidate per position is accepted when its confidence >= `threshold`; then at most
   `max_edits_per_sentence` edits per chunk, the most confident ones.

A text in traditional script goes through all of this in simplified form, one character for
one, and its accepted edits are written back in traditional script (script.py).

Edits are applied by offset to the original string, so everything that is not a corrected
character — ASCII, digits, URLs, emoji, punctuation, full-width forms, spaces, newlines — is
returned byte-for-byte.

Batches run in parallel on a small pool of worker threads (`CorrectorConfig.workers`), each
with its own share of torch's intra-op threads. On 2 CPU cores two batches with one thread each
beat one batch with two threads: a sentence-length forward pass parallelises poorly, and the
candidate and scoring stages (numpy, Python) run on one core anyway. Measured on SIGHAN-15 with
the shipped model at batch 32: 1.1-1.4x the sentences/s (fp32, bf16, int8; docs/history.md, Speed).
A call's texts are split among the workers only from `MIN_SPLIT_ITEMS` texts per worker (with
the encoders in ONNX Runtime, from 2 texts: `MIN_SPLIT_ITEMS_ONNX`); a call that makes one batch
(fewer texts, a single sentence) runs in the calling thread instead, with no hand-off to a worker
(on the process's torch threads: with the lean int8 encoder one sentence takes the same time on
one thread as on two).

A `Corrector` holds only read-only state once built (model in eval mode, scorer weights,
confusion tables whose lazily filled memo tables are lock-protected), so one instance may serve
many threads at once.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import math
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import RUNTIMES
from .candidates import (
    CandidateConfig,
    Candidates,
    GeneratorPass,
    GeneratorView,
    VocabConfusion,
    cjk_bias,
    generator_log_probs,
    output_layer,
    propose,
    reads_positions,
)
from .confusion import SAME_PINYIN, SIMILAR_PINYIN, SIMILAR_SHAPE, USER_PAIR, ConfusionSet, kind_of
from .detection import detect, make_batch
from .error_pairs import pair_features
from .homophones import HomophoneWords, WordConfig, propose_words, whole_words, word_confidence
from .models import ModelBundle, check_generator_input, load_model
from .particles import PARTICLE_INDEX
from .protection import (
    WordFrequency,
    address_offsets,
    proper_noun_offsets,
    read_whitelist,
    whitelisted_offsets,
)
from .quantization import int8_copy
from .result import Edit, Result
from .scoring import FEATURE_INDEX, FEATURES, Scorer
from .script import OFF, ScriptConverter
from .segmentation import Chunk, sentence_spans, split_text
from .tokenization import is_cjk

DEFAULT_MAX_EDITS = 4
# A call's texts are split among the batch workers only from this many per worker. Measured with
# the lean int8 encoder (median ms per call, SIGHAN-15 sentences, three runs): 4 texts 32-34 in
# one batch vs 40-42 split in two, 8 texts 53-59 vs 57-61, 16 texts 104-117 vs 94-99. (With
# transformers' encoder, whose per-op Python held the GIL longer, splitting lost up to 16 texts.)
MIN_SPLIT_ITEMS = 8
# The same with the encoders in ONNX Runtime, which runs one sentence at a time and releases the
# GIL while it does, so a batch saves nothing in the networks and two workers overlap well:
# split from 2 texts. Measured (median ms per call, calling thread on one torch thread as in the
# service, five runs): 2 texts 18.5 split vs 23.0 not, 4 texts 27.6 vs 32.6, 8 texts 49.4 vs 55.7.
MIN_SPLIT_ITEMS_ONNX = 1
# Generator flags with n-gram evidence (Scorer.generator_flag_lm_weight) read the LM only where
# the generator's margin is above this. On the dev split (session 24) -3 read 3,647 of the 33,991
# characters the discriminator and the margin leave, holding 126 of their 237 errors. Session 29,
# the shipped scorer's setting: -5 examines 192 more dev characters holding 29 more errors (烦脑,
# 端装, 图鸦: written words the generator copies but the LM finds far less likely than a confusable
# one) at ~2 % of the candidate search's time, and held-out dev F1 rose 0.5236 -> 0.5356 (two
# passes; 8 of 8 halves better); -8 adds 23 characters for 6 errors more.
FLAG_LM_FLOOR = -5.0
# Context flags (Scorer.context_flag_rate) need a correction seen at least this often: one
# learner's slip in one training sentence flags too much ordinary text.
CONTEXT_FLAG_MIN_COUNT = 2
# Features stored as 0/1 (relation bits and flags).
BINARY = frozenset({"gen_top1", "same_pinyin", "similar_pinyin", "similar_shape", "user_pair", "proper_noun"})


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
    generator_groups: int = 1  # "masked" input: generator passes, flagged positions masked in index % K groups
    recheck_top: int = 2  # candidates per position re-checked by the discriminator
    recheck_context: int = 16  # characters each side of the changes that the recheck re-reads
    max_edits_per_sentence: int = DEFAULT_MAX_EDITS
    # 2: texts that got edits are corrected once more, only at the edited characters and their
    # neighbours, which now read corrected context ("方再" -> "方在" -> "放在"); see `_recorrect`.
    # Held-out dev F1 0.5189 vs 0.5052 for one pass (better in 8 of 8 halves, session 28); a text
    # with edits costs about twice as much (SIGHAN-15 at batch 32: 277.4 vs 333.9 sentences/s).
    # 1: one pass, as the service runs by default (latency).
    passes: int = 2
    veto_proper_nouns: bool = False  # True: never edit inside a proper noun (default: penalise)
    proper_noun_hmm: bool = False  # let jieba's HMM find unknown names (also tags typos as names)
    # Batches run in parallel on this many threads, torch's threads shared among them (None: 2 on
    # CPU when torch has >= 2 threads, else 1 = every batch in the calling thread). A call that
    # makes one batch (under MIN_SPLIT_ITEMS texts per worker, a single sentence) runs in the
    # calling thread either way, on the process's torch threads (one SIGHAN sentence, lean int8
    # encoder: p50 18.8-19.0 ms on one thread or two; before it, 18 on two vs 23 on one).
    workers: int | None = None
    # Traditional-script texts are read in simplified script and their corrections written back
    # in this OpenCC variant ("tw" Taiwan, "hk" Hong Kong, "t" OpenCC's standard forms; script.py);
    # None or "off": every text goes to the model as written.
    traditional: str | None = "tw"


@dataclass
class ScoredCandidate:
    """One candidate correction with its features, before acceptance (for calibration)."""

    text_index: int  # which input text
    position: int  # 0-based offset in that text
    source: str
    target: str
    features: dict[str, float]
    confidence: float
    rechecked: bool  # recheck_prob is measured (else imputed as detect_prob)
    best: bool  # the highest-confidence candidate at its position
    # A character of a word candidate (homophones.py): its word, as "offset of the word's first
    # change:the word's new characters" (unique within the text); "" for a single character.
    word: str = ""


@dataclass
class _Item:
    """One chunk of one input text, encoded."""

    text_index: int
    chunk: Chunk
    ids: list[int]
    offsets: list[int]  # original-text offset of each model position
    editable: list[bool]


def lm_margin(position: np.ndarray, gain: np.ndarray, floor: float = -20.0, target: np.ndarray | None = None,
              rival: np.ndarray | None = None) -> np.ndarray:
    """Per candidate: its n-gram gain minus the best gain among the other candidates at the same
    position (`floor` when it is alone there).

    Measured on dev (scorer network refitted on one half, scored on the other, mean of both
    ways): correction F1 0.365 -> 0.379 with this feature. A gain alone says "better than the
    original"; many true corrections have a modest gain but win their position clearly, while
    many false alarms are one of several characters the LM likes about as well.

    With `target` and `rival` (a mask), only the rivals count as "the other candidates", and a
    candidate is never compared with a rival writing its own target: a word candidate's
    character (homophones.py) gets the margin of the single candidate it repeats.
    """
    if len(position) == 0:
        return np.zeros(0)
    if rival is None:
        rival, target = np.ones(len(position), dtype=bool), np.arange(len(position))
    size = int(position.max()) + 1
    best = np.full(size, -np.inf)
    np.maximum.at(best, position[rival], gain[rival])
    # The leader of each position (its first rival with the best gain) and the runner-up.
    is_best = rival & (gain >= best[position])
    best_index = np.flatnonzero(is_best)
    _, first = np.unique(position[best_index], return_index=True)
    leader = np.full(size, -1)
    leader[position[best_index[first]]] = best_index[first]
    others = np.where(rival, gain.astype(np.float64), -np.inf)
    others[leader[leader >= 0]] = -np.inf
    second = np.full(size, -np.inf)
    np.maximum.at(second, position, others)
    lead = leader[position]
    same_as_leader = (lead >= 0) & (target[np.maximum(lead, 0)] == target)
    other_best = np.where(same_as_leader, second[position], best[position])
    return gain - np.maximum(other_best, floor)


def winners(position: np.ndarray, group: np.ndarray, score: np.ndarray) -> list[int]:
    """The candidates accepted before the threshold: per position the best-scoring one, where a
    word candidate (group >= 0, its members sharing one score) wins only as a whole — when it
    beats every single candidate at each of its positions, best words first, no position twice.
    Candidates scored -inf never win."""
    single = np.flatnonzero((group < 0) & (score > -np.inf))
    order = single[np.lexsort((-score[single], position[single]))]
    leaders = order[np.r_[True, position[order][1:] != position[order][:-1]]] if len(order) else order
    members = np.flatnonzero((group >= 0) & (score > -np.inf))
    if len(members) == 0:  # the default path (no word candidates): each position's leader
        return sorted(leaders.tolist())
    best_single = dict(zip(position[leaders].tolist(), leaders.tolist(), strict=True))
    taken: dict[int, list[int]] = {}  # position -> the accepted word's members
    by_group: dict[int, list[int]] = {}
    for k in members.tolist():
        by_group.setdefault(int(group[k]), []).append(k)
    for ks in sorted(by_group.values(), key=lambda ks: (-score[ks[0]], ks[0])):
        spots = [int(position[k]) for k in ks]
        if any(n in taken for n in spots):
            continue
        if all(n not in best_single or score[ks[0]] > score[best_single[n]] for n in spots):
            for n in spots:
                taken[n] = ks
    chosen = [k for n, k in best_single.items() if n not in taken]
    for ks in {id(ks): ks for ks in taken.values()}.values():
        chosen.extend(ks)
    return sorted(chosen)


_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    # A forked child has none of its parent's threads: a pool inherited from the parent would take
    # work and never run it. The child starts its own on first use.
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


def batch_pool(workers: int, threads_per_worker: int) -> ThreadPoolExecutor:
    """The process-wide pool of `workers` batch threads, each running torch with
    `threads_per_worker` intra-op threads. Shared by every Corrector of the process, so two
    correctors (or two service requests) do not oversubscribe the cores."""
    key = (workers, threads_per_worker)
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = _start_pool(workers, threads_per_worker)
        return _POOLS[key]


def _start_pool(workers: int, threads_per_worker: int) -> ThreadPoolExecutor:
    def limit_threads() -> None:
        # torch initialises a thread's intra-op thread count lazily from the process default on
        # its first parallel op; do that first, or it would later undo the setting below.
        torch.get_num_threads()
        torch.set_num_threads(threads_per_worker)

    pool = ThreadPoolExecutor(workers, thread_name_prefix="corrector-batch", initializer=limit_threads)
    previous = torch.get_num_threads()
    # Start every worker now (each blocks until all have started) ...
    started = threading.Barrier(workers + 1)
    waits = [pool.submit(started.wait) for _ in range(workers)]
    started.wait()
    for wait in waits:
        wait.result()
    # ... then restore the process default that set_num_threads changed with the workers' own.
    torch.set_num_threads(previous)
    return pool


def check_runtime(runtime: str) -> str:
    """`runtime` if it is one of RUNTIMES, else a ValueError naming them."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    return runtime


def quantized(bundle: ModelBundle, runtime: str = "auto") -> ModelBundle:
    """A copy of the bundle whose networks run int8 matmuls (quantization.py: int8 weights per
    output channel; CPU only), their encoders in ONNX Runtime ("onnxruntime", onnx_encoder.py) or
    torch ("torch"; "auto": ONNX Runtime where installed). The shared bundle is not touched (the
    service and evaluator may hold it too)."""
    runtime = check_runtime(runtime)
    return dataclasses.replace(bundle, discriminator=int8_copy(bundle.discriminator, runtime),
                               generator=int8_copy(bundle.generator, runtime))


class Corrector:
    """Chinese spelling corrector. `threshold` is the minimum confidence (0-1) of an edit.

    Precision: on CPU the networks run int8 matmuls by default (`quantize=None`; quantization.py),
    ~2x the sentences/s of fp32 at the same F1 (1.4-1.6x in torch; README, Benchmarks), their
    encoders in ONNX Runtime where it is installed (`runtime="auto"`; onnx_encoder.py: one
    sentence per run, so a text gets exactly the same result alone or in any batch; one sentence
    ~0.7x the time of the torch int8 encoder). `runtime="torch"` runs the int8 encoders in torch (lean_encoder.py), where
    each token is quantized on its own, so a text gets the same corrections alone or in any batch
    but its confidences can move by a few 1e-3 with the padding of its batch (fp32 attention
    rounding, amplified by the int8 rounding after it). `quantize=False` runs fp32, where
    `correct_batch` gives exactly what `correct` gives; `bf16=True` runs bf16 autocast instead
    (GPUs, CPUs with AVX512-BF16/AMX).
    """

    def __init__(
        self,
        model: str | ModelBundle | None = None,
        device: str = "cpu",
        threshold: float | None = None,
        detection_threshold: float | None = None,
        whitelist: Iterable[str] | Path = (),
        confusion_file: str | Path | None = None,
        max_edits_per_sentence: int = DEFAULT_MAX_EDITS,
        batch_size: int = 32,
        scorer: Scorer | dict | None = None,
        confusion: ConfusionSet | None = None,
        config: CorrectorConfig | None = None,
        quantize: bool | None = None,
        bf16: bool = False,
        runtime: str = "auto",
    ) -> None:
        self.bundle = model if isinstance(model, ModelBundle) else load_model(model, device=device)
        already_int8 = self.bundle.precision == "int8"  # e.g. another Corrector's bundle
        if quantize is None:  # the default: int8 on CPU, unless bf16 networks were asked for
            quantize = already_int8 or (self.bundle.device.type == "cpu" and not bf16)
        if check_runtime(runtime) == "onnxruntime" and not quantize:
            raise ValueError("runtime='onnxruntime' runs int8 networks: not with quantize=False, bf16 or a GPU")
        if quantize and not already_int8:
            self.bundle = quantized(self.bundle, runtime)
        elif not quantize and already_int8:
            raise ValueError("quantize=False, but the model bundle given already runs int8 networks")
        elif already_int8 and runtime != "auto" and self.bundle.runtime != runtime:
            raise ValueError(f"runtime={runtime!r}, but the model bundle given already runs {self.bundle.runtime}")
        if bf16 != self.bundle.bf16:  # a copy: the shared bundle keeps its own setting
            self.bundle = dataclasses.replace(self.bundle, bf16=bf16)
        self.config = config or CorrectorConfig(batch_size=batch_size, max_edits_per_sentence=max_edits_per_sentence)
        if isinstance(scorer, Scorer):
            scorer = scorer.to_config()  # a private copy: the overrides below must not leak
        self.scorer = Scorer.from_config(scorer if scorer is not None else self.bundle.scorer_config)
        if threshold is not None:
            self.scorer.threshold = float(threshold)
        if detection_threshold is not None:
            self.scorer.detection_threshold = float(detection_threshold)
        if isinstance(whitelist, Path):
            whitelist = read_whitelist(whitelist)
        elif isinstance(whitelist, str):
            whitelist = [whitelist]  # one term, not its characters
        self.whitelist = [t for t in whitelist if t]
        if confusion is not None and confusion_file is not None:
            raise ValueError("pass either confusion or confusion_file, not both")
        self.confusion = confusion or ConfusionSet.build(confusion_file)
        self.vocab_confusion = VocabConfusion(self.confusion, self.bundle)
        self.cjk_bias = cjk_bias(self.bundle)
        self._output_layer: tuple[torch.Tensor, torch.Tensor] | None = None  # the generator's, read lazily
        if self.bundle.ngram is not None:  # vocabulary id -> n-gram LM id, for candidate arrays
            tok = self.bundle.tokenizer
            self.vocab_to_lm = self.bundle.ngram.ids([tok.token(i) for i in range(tok.vocab_size)])
        self.words = WordFrequency()
        word_candidates = self.config.word_candidates
        if word_candidates is None:
            word_candidates = self.scorer.uses("word_gain")
        self.homophones = None
        if word_candidates and self.bundle.ngram is not None:  # a word is judged by the n-gram LM
            self.homophones = HomophoneWords.build(self.confusion, self.config.words.min_freq)
        traditional = self.config.traditional
        self.script = ScriptConverter(traditional) if traditional not in (None, OFF) else None
        self.generator_input = check_generator_input(self.config.generator_input or self.bundle.generator_input)
        self.max_positions = max(1, min(self.config.max_positions, self.bundle.max_length))
        workers = self.config.workers
        if workers is None:
            workers = 2 if self.bundle.device.type == "cpu" and torch.get_num_threads() >= 2 else 1
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if self.config.passes not in (1, 2):
            raise ValueError(f"passes must be 1 or 2, got {self.config.passes}")
        self.workers = workers
        self._threads_per_worker = max(1, torch.get_num_threads() // workers)
        self._min_split_items = MIN_SPLIT_ITEMS_ONNX if self.runtime == "onnxruntime" else MIN_SPLIT_ITEMS
        if workers > 1:
            batch_pool(workers, self._threads_per_worker)  # started now, not during the first call

    def with_passes(self, passes: int) -> Corrector:
        """This corrector with `passes` correction passes (`CorrectorConfig.passes`): a shallow
        copy sharing the networks, tables and scorer, so that the original — which another thread
        may be using — keeps its own setting."""
        if passes not in (1, 2):
            raise ValueError(f"passes must be 1 or 2, got {passes}")
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

    @property
    def rechecking(self) -> bool:
        """The recheck pass runs only when configured and the scorer reads its result."""
        return self.config.recheck_top > 0 and self.scorer.uses("recheck_prob")

    # ---- public API -------------------------------------------------------------------------

    def correct(self, text: str, threshold: float | None = None) -> Result:
        return self.correct_batch([text], threshold=threshold)[0]

    def correct_batch(
        self, texts: Sequence[str], batch_size: int | None = None, threshold: float | None = None
    ) -> list[Result]:
        """Correct many texts; `threshold` overrides the minimum edit confidence for this call."""
        threshold = self.scorer.threshold if threshold is None else float(threshold)
        results = self._correct_once(texts, batch_size, threshold)
        if self.config.passes > 1:
            results = self._recorrect(texts, results, batch_size, threshold)
        return results

    def _correct_once(self, texts: Sequence[str], batch_size: int | None, threshold: float,
                      only: Sequence[set[int]] | None = None) -> list[Result]:
        """One correction pass. With `only` (the second pass) just those offsets may change, and
        every one of them is examined whether or not a flag rule picks it: they are the few
        characters beside an edit, where errors cluster (宅舞 for 债务), and a neighbour that was
        still wrong when the flags were computed often is not flagged (sessions 33-34, dev split,
        48 held-out halves: two-pass F1 +0.003, 31 halves better, none worse)."""
        model_texts = self._model_texts(texts)
        edits: list[list[Edit]] = [[] for _ in texts]
        examine_all = -math.inf if only is not None else None  # a detection threshold every position passes
        for item, accepted in self._run(model_texts, batch_size, threshold, calibrate=False, originals=texts,
                                        only=only, detection_threshold=examine_all):
            edits[item.text_index].extend(accepted)  # as written: traditional ones already written back
        return [Result.applying(text, found) for text, found in zip(texts, edits, strict=True)]

    def _recorrect(self, texts: Sequence[str], results: list[Result], batch_size: int | None,
                   threshold: float) -> list[Result]:
        """The second pass: every text that got edits is corrected again as corrected, but only at
        its edited characters and their two neighbours, each of them examined (`_correct_once`). A
        correction changes what its neighbours read (the n-gram LM, the words, the networks'
        context), so an error next to one, or a first-pass edit that chose the wrong character,
        can be fixed now. Why only there
        (session 28, dev split, shipped model): of the second pass's edits anywhere, those at or
        next to a first-pass edit were right 16 times in 22, the others 4 times in 14. A position
        the second pass writes back to its original character is no edit at all."""
        changed = [i for i, result in enumerate(results) if result.edits]
        if not changed:
            return results
        near = [{p for e in results[i].edits for p in (e.position - 1, e.position, e.position + 1)} for i in changed]
        again = self._correct_once([results[i].target for i in changed], batch_size, threshold, only=near)
        results = list(results)
        for i, second in zip(changed, again, strict=True):
            if second.edits:
                results[i] = self._merged(texts[i], results[i].edits, second.edits)
        return results

    def _merged(self, text: str, first: list[Edit], second: list[Edit]) -> Result:
        """The edits of two passes as edits of `text`: a character changed twice keeps the second
        pass's target and confidence, its relation taken from the original character; then the
        max-edits guard over the whole text."""
        by_position = {e.position: e for e in first}
        for e in second:
            source = text[e.position]
            if e.target == source:
                by_position.pop(e.position, None)  # written back: no edit
            else:
                kind = kind_of(self.confusion.relation(source, e.target)) if e.position in by_position else e.kind
                by_position[e.position] = dataclasses.replace(e, source=source, kind=kind)
        whole = Chunk(0, len(text), 0, len(text))
        return Result.applying(text, self._limit_edits(text, whole, list(by_position.values())))

    def score_candidates(
        self, texts: Sequence[str], batch_size: int | None = None, detection_threshold: float | None = None
    ) -> list[ScoredCandidate]:
        """Every candidate the pipeline scores for these texts, with its feature vector.

        For calibration: label a candidate 1 when `target` is the gold character at `position`
        and fit with `Scorer.fit([c.features for c in cands], labels)`. Unlike correction, the
        top `recheck_top` candidates of every position are rechecked whatever their score, so
        `recheck_prob` is measured for the candidates that matter however the weights are set.
        A lower `detection_threshold` here yields candidates for positions the detector is
        unsure about too. A traditional-script text is scored as the model reads it: `source` and
        `target` are then simplified characters.
        """
        out: list[ScoredCandidate] = []
        for _, scored in self._run(self._model_texts(texts), batch_size, self.scorer.threshold, calibrate=True,
                                   detection_threshold=detection_threshold, originals=texts):
            out.extend(scored)
        return out

    # ---- the pipeline -----------------------------------------------------------------------

    def _model_texts(self, texts: Sequence[str]) -> list[str]:
        """The texts as the model reads them: traditional ones in simplified script (script.py)."""
        if self.script is None:
            return list(texts)
        return [self.script.model_text(text) if isinstance(text, str) else text for text in texts]

    def _items(self, texts: Sequence[str], originals: Sequence[str] | None = None,
               only: Sequence[set[int]] | None = None) -> list[_Item]:
        """`texts` as the model reads them; `originals` as written, where they differ (a
        whitelisted term matches in either form); `only[t]`: the offsets of text t that may
        change (None: all)."""
        tok = self.bundle.tokenizer
        items = []
        for t, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{t}] is {type(text).__name__}, expected str")
            if not any(is_cjk(ch) for ch in text):
                continue
            frozen = whitelisted_offsets(text, self.whitelist) | address_offsets(text)
            if originals is not None and originals[t] != text:
                frozen |= whitelisted_offsets(originals[t], self.whitelist)
            for chunk in split_text(text, self.max_positions, self.config.overlap):
                enc = tok.encode(text[chunk.start:chunk.end])
                offsets = [chunk.start + o for o in enc.offsets]
                editable = [
                    is_cjk(text[o]) and o not in frozen and chunk.own_start <= o < chunk.own_end
                    and (only is None or o in only[t]) for o in offsets
                ]
                if any(editable):
                    items.append(_Item(t, chunk, enc.ids, offsets, editable))
        return items

    def _run(self, texts, batch_size, threshold, calibrate, detection_threshold=None, originals=None, only=None):
        """Yield (item, accepted edits) or, when calibrating, (item, scored candidates)."""
        batch_size = max(1, batch_size or self.config.batch_size)
        det_threshold = self.scorer.detection_threshold if detection_threshold is None else detection_threshold
        items = self._items(texts, originals, only)
        items.sort(key=lambda it: len(it.ids), reverse=True)  # similar lengths share a batch
        if self.workers > 1 and len(items) >= self.workers * self._min_split_items:
            # Split so that every worker gets a share (32: 2 x 16). With the torch encoders fewer
            # texts stay one batch: two threads running small passes mostly wait for each other's
            # Python and small ops (ONNX Runtime releases the GIL for its passes: split from 2).
            batch_size = max(1, min(batch_size, math.ceil(len(items) / self.workers)))
        groups = [items[first:first + batch_size] for first in range(0, len(items), batch_size)]
        if self.workers == 1 or len(groups) <= 1:
            for group in groups:
                yield from self._run_batch(texts, group, threshold, det_threshold, calibrate, originals)
            return
        pool = batch_pool(self.workers, self._threads_per_worker)  # per call: a forked child starts its own
        jobs = [pool.submit(lambda group: list(self._run_batch(texts, group, threshold, det_threshold, calibrate,
                                                                originals)), group)
                for group in groups]
        try:
            for job in jobs:
                yield from job.result()
        finally:
            for job in jobs:  # an error (or a caller that stops early): drop what has not started
                job.cancel()

    def _run_batch(self, texts, group: list[_Item], threshold: float, det_threshold: float, calibrate: bool,
                   originals=None):
        bundle, tok = self.bundle, self.bundle.tokenizer
        batch = make_batch([it.ids for it in group], bundle)
        probs = detect(bundle, batch)  # (B, L)
        editable = torch.zeros_like(probs, dtype=torch.bool)
        for row, it in enumerate(group):
            editable[row, : len(it.editable)] = torch.tensor(it.editable)
        flagged = (probs > det_threshold) & editable
        generator_pass = None
        if self._flags_by_generator:
            generator_pass = GeneratorPass(bundle, batch.input_ids, batch.attention_mask)
            flagged |= self._generator_flags(texts, group, batch, generator_pass, editable & ~flagged)
        if self.scorer.context_flag_rate is not None and bundle.error_pairs is not None:
            flagged |= self._context_flags(texts, group, editable & ~flagged)
        if self.scorer.particle_flag_gain is not None and bundle.particles is not None:
            flagged |= self._particle_flags(texts, group, editable & ~flagged)
        rows_t, index_t = flagged.nonzero(as_tuple=True)
        if len(rows_t) == 0:
            return
        rows, index = rows_t.tolist(), index_t.tolist()
        offsets = [group[r].offsets[i] for r, i in zip(rows, index, strict=True)]
        site_texts = [texts[group[r].text_index] for r in rows]
        source_chars = [text[o] for text, o in zip(site_texts, offsets, strict=True)]
        if generator_pass is not None:
            log_probs = generator_pass.log_probs(rows_t, index_t)
        else:
            log_probs = generator_log_probs(bundle, batch, rows_t, index_t, groups=self.config.generator_groups,
                                            mask=self.generator_input == "masked")
        source_ids = batch.input_ids[rows_t.to(batch.input_ids.device), (index_t + 1).to(batch.input_ids.device)].cpu()
        sites = list(zip(site_texts, offsets, strict=True))  # (text, offset) of each flagged position
        lm_gains = None
        if bundle.ngram is not None:

            def lm_gains(position: np.ndarray, target_ids: np.ndarray) -> np.ndarray:
                """One vectorised n-gram pass for every candidate of the batch."""
                return bundle.ngram.site_gains(sites, position, self.vocab_to_lm[target_ids])

        view = GeneratorView.of(log_probs, source_ids, self.cjk_bias, self.config.candidates.top_k + 1)
        cands = propose(view, source_ids, source_chars, self.vocab_confusion, self.config.candidates, lm_gains=lm_gains)
        if self.homophones is not None:
            cands = cands.extended(self._word_candidates(texts, group, rows, offsets, view, lm_gains))

        # Per flagged position: protection and the features every candidate there shares.
        nouns: dict[int, set[int]] = {}
        for row in set(rows):
            it = group[row]
            chunk_text = texts[it.text_index][it.chunk.start:it.chunk.end]
            nouns[row] = {it.chunk.start + o for o in proper_noun_offsets(chunk_text, hmm=self.config.proper_noun_hmm)}
        in_noun = np.array([o in nouns[r] for r, o in zip(rows, offsets, strict=True)])
        if self.config.veto_proper_nouns:
            cands = whole_words(cands.select(~in_noun[cands.position]))
        if len(cands) == 0:
            return
        contexts = [self.words.context(text, o) for text, o in zip(site_texts, offsets, strict=True)]
        orig_word = np.array([self.words.score(context, char) for context, char in zip(contexts, source_chars, strict=True)])
        targets = [tok.token(t) for t in cands.target_id.tolist()]
        cand_word = np.array([self.words.score(contexts[n], target)
                              for n, target in zip(cands.position.tolist(), targets, strict=True)])
        cand_word = np.maximum(cand_word, cands.word_freq)  # a word candidate's character makes that word
        source_counts = context = None
        if bundle.error_pairs is not None:
            source_counts = np.array([bundle.error_pairs.char_counts.get(char, 0) for char in source_chars], dtype=np.float64)
            if bundle.error_pairs.context_counts:
                context = bundle.error_pairs.context_count_array(sites, cands.position.tolist(), targets)
        particle_gain = None
        if bundle.particles is not None:
            particle_gain = bundle.particles.candidate_gains(sites, cands.position.tolist(), targets)
        detect_prob = probs[rows_t, index_t].numpy().astype(np.float64)
        unigrams = None
        if bundle.ngram is not None:
            source_lm = self.vocab_to_lm[source_ids.numpy().astype(np.int64)]
            unigrams = (bundle.ngram.log_unigram(source_lm), bundle.ngram.log_unigram(self.vocab_to_lm[cands.target_id]))
        x = self._features(cands, detect_prob, in_noun, orig_word, cand_word, source_counts, context, particle_gain,
                           unigrams)
        recheck = self._select_for_recheck(cands, x, threshold, calibrate)
        rechecked = torch.zeros(len(cands), dtype=torch.bool)
        if recheck:
            ks = list(recheck)
            x[ks, FEATURE_INDEX["recheck_prob"]] = self._recheck(
                group, [(rows[cands.position[k]], index[cands.position[k]], int(cands.target_id[k]), recheck[k]) for k in ks])
            rechecked[ks] = True
        confidence = word_confidence(cands.group, self.scorer.confidence(x))

        # Best candidate per position (among the rechecked ones when rechecking is on).
        ranked = confidence.clone().double()
        if self.rechecking:
            ranked[~rechecked] = float("-inf")
        best = winners(cands.position, cands.group, ranked.numpy())
        if calibrate:
            won = set(best)
            by_item: dict[int, list[ScoredCandidate]] = {}
            features = self.scorer.with_prior(x).tolist()  # the prior's logit as the scorer reads it
            word_keys: dict[int, str] = {}  # group -> "offset of its first change:its new characters"
            for k in np.flatnonzero(cands.group >= 0).tolist():
                n, g = int(cands.position[k]), int(cands.group[k])
                word_keys[g] = word_keys[g] + targets[k] if g in word_keys else f"{offsets[n]}:{targets[k]}"
            for k in range(len(cands)):
                n = int(cands.position[k])
                by_item.setdefault(rows[n], []).append(ScoredCandidate(
                    text_index=group[rows[n]].text_index,
                    position=offsets[n],
                    source=source_chars[n],
                    target=targets[k],
                    features=dict(zip(FEATURES, features[k], strict=True)),
                    confidence=float(confidence[k]),
                    rechecked=bool(rechecked[k]),
                    best=k in won,
                    word=word_keys.get(int(cands.group[k]), ""),
                ))
            for row, scored in by_item.items():
                yield group[row], scored
            return

        accepted: dict[int, list[Edit]] = {}
        for k in best:
            if float(confidence[k]) < threshold:
                continue
            n = int(cands.position[k])
            accepted.setdefault(rows[n], []).append(Edit(
                position=offsets[n],
                source=source_chars[n],
                target=targets[k],
                confidence=round(float(confidence[k]), 4),
                kind=kind_of(int(cands.relation[k])),
            ))
        for row, edits in accepted.items():
            it = group[row]
            yield it, self._guarded_edits(texts, originals, it, edits)

    @property
    def _flags_by_generator(self) -> bool:
        """Whether the generator's confusion margin flags characters too: the scorer asks for it,
        and the generator reads the sentence as written with a head that can be read per position."""
        return (self.scorer.generator_flag_margin is not None and self.generator_input == "source"
                and reads_positions(self.bundle.generator))

    def _generator_flags(self, texts, group: list[_Item], batch, generator_pass: GeneratorPass,
                         candidates: torch.Tensor) -> torch.Tensor:
        """(B, L) bool: the `candidates` characters (editable, not flagged by the discriminator) at
        which the generator prefers a confusable character to the written one by more than the
        scorer's `generator_flag_margin`. Why (session 23, dev split): of the 292 dev errors the
        discriminator leaves below 0.02, the 169 correct characters with the largest margins hold
        58, the 169 with the highest detection probability 8."""
        rows_t, index_t = candidates.nonzero(as_tuple=True)
        flags = torch.zeros_like(candidates)
        if len(rows_t) == 0:
            return flags
        written_ids = batch.input_ids[rows_t, index_t + 1].cpu()
        sets = [self.vocab_confusion(texts[group[r].text_index][group[r].offsets[i]])[0]
                for r, i in zip(rows_t.tolist(), index_t.tolist(), strict=True)]
        if self._output_layer is None:
            self._output_layer = output_layer(self.bundle.generator)  # once; a benign race at worst
        margins = generator_pass.confusion_margins(rows_t, index_t, written_ids, sets, self._output_layer)
        weight = self.scorer.generator_flag_lm_weight
        if weight and self.bundle.ngram is not None:
            margins = self._with_lm_evidence(texts, group, rows_t, index_t, sets, margins, weight)
        chosen = margins > self.scorer.generator_flag_margin
        flags[rows_t[chosen], index_t[chosen]] = True
        return flags

    def _context_flags(self, texts, group: list[_Item], candidates: torch.Tensor) -> torch.Tensor:
        """(B, L) bool: the `candidates` characters whose written left or right bigram was corrected
        in training at the scorer's `context_flag_rate` or more (`ErrorPairs.context_flag`)."""
        flags = torch.zeros_like(candidates)
        table, rate = self.bundle.error_pairs, self.scorer.context_flag_rate
        for row, index in candidates.nonzero().tolist():
            it = group[row]
            if table.context_flag(texts[it.text_index], it.offsets[index], CONTEXT_FLAG_MIN_COUNT, rate):
                flags[row, index] = True
        return flags

    def _particle_flags(self, texts, group: list[_Item], candidates: torch.Tensor) -> torch.Tensor:
        """(B, L) bool: the `candidates` characters that are particles (的/地/得) where the model's
        particle classifier gives another particle more than the scorer's `particle_flag_gain`
        over the written one (particles.py). Why: of the dev split's 67 particle errors the other
        flag rules left most of those the corrector missed unexamined or unsure."""
        flags = torch.zeros_like(candidates)
        cells, sites = [], []
        for row, index in candidates.nonzero().tolist():
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

    def _with_lm_evidence(self, texts, group: list[_Item], rows_t: torch.Tensor, index_t: torch.Tensor,
                          sets: list[np.ndarray], margins: torch.Tensor, weight: float) -> torch.Tensor:
        """The flag scores: each generator margin plus `weight` x the n-gram LM's best gain over the
        character's confusion set, where the margin is above FLAG_LM_FLOOR (-inf elsewhere: the
        LM pass costs like a flagged position's candidates, and below the floor it finds little)."""
        scores = torch.full_like(margins, float("-inf"))
        near = np.flatnonzero((margins > FLAG_LM_FLOOR).numpy() & (np.array([len(ids) for ids in sets]) > 0))
        if len(near) == 0:
            return scores
        rows, index = rows_t[near].tolist(), index_t[near].tolist()
        sites = [(texts[group[r].text_index], group[r].offsets[i]) for r, i in zip(rows, index, strict=True)]
        gains = self.bundle.ngram.replacement_gains(sites, [self.vocab_to_lm[sets[n]] for n in near])
        best = np.array([site.max() for site in gains])
        at = torch.from_numpy(near)
        scores[at] = margins[at] + weight * torch.from_numpy(best).to(margins.dtype)
        return scores

    def _word_candidates(self, texts, group: list[_Item], rows: list[int], offsets: list[int],
                         view: GeneratorView, lm_gains) -> Candidates:
        """Word candidates (homophones.py) over the batch's flagged positions n = 0..N-1, which
        sit at `offsets[n]` of the text of chunk `group[rows[n]]`."""
        flagged: list[dict[int, int]] = [{} for _ in group]
        for n, (row, offset) in enumerate(zip(rows, offsets, strict=True)):
            flagged[row][offset] = n
        tok, error_pairs = self.bundle.tokenizer, self.bundle.error_pairs
        return propose_words(
            self.homophones,
            [(texts[it.text_index], it.chunk.start, it.chunk.end) for it in group],
            flagged,
            view.allowed,
            view.source,
            view.top_ids[:, 0],
            tok.vocab.get,
            self.confusion.relation,
            (lambda old, new: error_pairs.targets(old).get(new, 0)) if error_pairs is not None else (lambda old, new: 0),
            self.bundle.ngram,
            lm_gains,
            self.config.words,
        )

    def _guarded_edits(self, texts, originals, item: _Item, edits: list[Edit]) -> list[Edit]:
        """A chunk's accepted edits as edits of the text as written, then the max-edits guard.
        In a traditional text they are written back in its script here (`ScriptConverter.restore`
        over the chunk's span: a long document is not converted once per chunk), so a
        "correction" that only changes the script is dropped before the guard counts it and
        cannot take a real one's place."""
        text = texts[item.text_index]
        if self.script is not None and originals is not None and originals[item.text_index] != text:
            start, end = item.chunk.start, item.chunk.end
            local = [dataclasses.replace(e, position=e.position - start) for e in edits]
            written = self.script.restore(originals[item.text_index][start:end], text[start:end], local)
            edits = [dataclasses.replace(e, position=e.position + start) for e in written]
        return self._limit_edits(text, item.chunk, edits)

    def _limit_edits(self, text: str, chunk: Chunk, edits: list[Edit]) -> list[Edit]:
        """Max-edits guard: the most confident `max_edits_per_sentence` edits of each sentence.

        Many "errors" in one sentence usually mean unfamiliar text (classical Chinese, a domain
        the model never saw), not a careless writer. A chunk may hold several sentences; text
        without sentence punctuation counts as one sentence per chunk.
        """
        limit = self.config.max_edits_per_sentence
        ends = [end for _, end in sentence_spans(text, chunk.start, chunk.end)]
        by_sentence: dict[int, list[Edit]] = {}
        for edit in edits:
            by_sentence.setdefault(bisect.bisect_right(ends, edit.position), []).append(edit)
        kept = []
        for group in by_sentence.values():
            kept.extend(sorted(group, key=lambda e: (-e.confidence, e.position))[:limit])
        return kept

    @staticmethod
    def _features(cands: Candidates, detect_prob: np.ndarray, in_noun: np.ndarray, orig_word: np.ndarray,
                  cand_word: np.ndarray, source_counts: np.ndarray | None,
                  context: np.ndarray | None = None, particle_gain: np.ndarray | None = None,
                  unigrams: tuple[np.ndarray, np.ndarray] | None = None) -> torch.Tensor:
        """The (N, len(FEATURES)) feature matrix; per-position inputs are indexed by position;
        `context`: (N, 2) context count and bigram occurrences per candidate (or None);
        `particle_gain`: the particle classifier's gain per candidate (or None); `unigrams`: the
        n-gram LM's log P_1 of each position's written character and of each candidate (or None)."""
        n = cands.position
        lm_gain = np.clip(cands.lm_gain, -20.0, 20.0)
        relation = cands.relation
        if source_counts is not None:
            pair_log_count, pair_log_rate = pair_features(cands.pair_count, source_counts[n])
        else:
            pair_log_count = pair_log_rate = np.zeros(len(cands))
        if context is not None:
            ctx_log_count, ctx_log_rate = pair_features(context[:, 0], context[:, 1])
        else:
            ctx_log_count = ctx_log_rate = np.zeros(len(cands))
        columns = {
            "bias": np.ones(len(cands)),
            "gen_logprob": np.maximum(cands.gen_logprob, -20.0),
            "orig_logprob": np.maximum(cands.orig_logprob, -20.0),
            "gen_top1": cands.top1,
            "detect_prob": detect_prob[n],
            "recheck_prob": detect_prob[n],  # imputed until measured
            "same_pinyin": relation & SAME_PINYIN,
            "similar_pinyin": relation & SIMILAR_PINYIN,
            "similar_shape": relation & SIMILAR_SHAPE,
            "user_pair": relation & USER_PAIR,
            "cand_word": cand_word,
            "orig_word": orig_word[n],
            "proper_noun": in_noun[n],
            "lm_gain": lm_gain,
            "lm_gain_unrelated": np.where(relation != 0, 0.0, lm_gain),
            "pair_log_count": pair_log_count,
            "pair_log_rate": pair_log_rate,
            "lm_margin": lm_margin(n, lm_gain, target=cands.target_id, rival=cands.group < 0),
            "word_gain": np.where(cands.group >= 0, np.clip(cands.word_gain, -20.0, 20.0), 0.0),
            "word_size": cands.word_size,
            "ctx_log_count": ctx_log_count,
            "ctx_log_rate": ctx_log_rate,
            "particle_gain": np.zeros(len(cands)) if particle_gain is None else np.clip(particle_gain, -20.0, 20.0),
            # How common the written character and the candidate are: a rare character in common
            # words (玥 in 条玥, 樏 in 日积月樏) is more often a slip than a common one.
            "source_unigram": np.zeros(len(cands)) if unigrams is None else unigrams[0][n],
            "target_unigram": np.zeros(len(cands)) if unigrams is None else unigrams[1],
            "prior": np.zeros(len(cands)),  # the scorer fills it from the others (Scorer.with_prior)
        }
        matrix = np.stack([(columns[name] != 0) if name in BINARY else columns[name] for name in FEATURES], axis=1)
        return torch.from_numpy(matrix.astype(np.float32))

    def _select_for_recheck(
        self, cands: Candidates, features: torch.Tensor, threshold: float, calibrate: bool
    ) -> dict[int, int]:
        """{candidate index: rank at its position} for the top `recheck_top` that could still win.

        Two prunings (skipped when calibrating): a candidate whose best possible score
        (`Scorer.bound_without_recheck`) is below the threshold cannot be accepted; and one
        trailing the position's leader by more than the recheck's reach cannot overtake it, since
        at one position both share detect_prob. Exact for the linear score (reach |w_recheck|).
        """
        if not self.rechecking:
            return {}
        pre, bound = self.scorer.logits(features), self.scorer.bound_without_recheck(features)
        min_logit = torch.logit(torch.tensor(min(max(threshold, 1e-6), 1 - 1e-6))).item()
        reach = self.scorer.recheck_reach(features)
        by_position: dict[int, list[int]] = {}
        for k, n in enumerate(cands.position.tolist()):
            if calibrate or float(bound[k]) >= min_logit:
                by_position.setdefault(n, []).append(k)
        chosen = {}
        for ks in by_position.values():
            ks.sort(key=lambda k: -float(pre[k]))
            leader = float(pre[ks[0]])
            ks = [k for k in ks[: self.config.recheck_top] if calibrate or float(pre[k]) >= leader - reach]
            chosen.update({k: rank for rank, k in enumerate(ks)})
        return chosen

    def _recheck(self, group: list[_Item], cands: list[tuple[int, int, int, int]]) -> torch.Tensor:
        """Discriminator P(replaced) at each candidate's position once it is written there;
        `cands` are (row, index, target id, rank) tuples.

        One sequence per (sentence, rank): the rank-r candidates of all flagged positions of a
        sentence are written in together. That is what the corrected sentence would look like,
        and it costs `recheck_top` passes per flagged sentence instead of one per candidate.
        """
        variants: dict[tuple[int, int], list[int]] = {}
        span: dict[tuple[int, int], tuple[int, int]] = {}  # changed indices: (first, last)
        for row, index, target_id, rank in cands:
            key = (row, rank)
            seq = variants.setdefault(key, list(group[row].ids))
            seq[index] = target_id
            first, last = span.get(key, (index, index))
            span[key] = (min(first, index), max(last, index))
        # Only `recheck_context` characters around the changes are re-read: the verdict on a
        # character rests on its neighbourhood, and long chunks would otherwise cost a full pass.
        context = self.config.recheck_context
        start = {key: max(0, span[key][0] - context) for key in variants}
        windows = {key: variants[key][start[key]: span[key][1] + context + 1] for key in variants}
        keys = sorted(windows, key=lambda key: -len(windows[key]))  # similar lengths together
        slot = {key: i for i, key in enumerate(keys)}
        probs = torch.zeros(len(keys), max(len(w) for w in windows.values()))
        step = 128  # bounds memory when a batch has very many flagged sentences
        for first in range(0, len(keys), step):
            sub = make_batch([windows[key] for key in keys[first:first + step]], self.bundle)
            p = detect(self.bundle, sub)
            probs[first:first + step, : p.shape[1]] = p
        return torch.tensor([
            float(probs[slot[(row, rank)], index - start[(row, rank)]]) for row, index, _, rank in cands
        ])
