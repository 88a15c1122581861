"""的 / 地 / 得: which structural particle a position needs, read from the words around it.

Why a model of its own: the three particles are the most frequent real errors of learners' text
(in SIGHAN-14's training pairs 的→地, 的→得, 得→的 and 得→地 are 9.5 % of all corrections, in
SIGHAN-15's 6 %), and the rest of the pipeline sees them poorly. The choice is grammatical, not
lexical: 地 after an adverbial before a verb (认真地学习), 得 after a verb or adjective before its
complement (跑得很快), 的 elsewhere — so it hangs on the *word* and its part of speech on either
side, which a character trigram sees only when the two neighbours happen to be frequent, and
which the ELECTRA pair, trained on 的-heavy text, barely separates (of the dev split's 67 particle
errors the corrector fixed 31).

Model: a three-way logistic regression over hashed sparse features of the context — the
neighbouring 1-3 characters on each side, and the jieba word and part-of-speech tag that end just
before and start just after the position (each side segmented on its own, so the features do not
depend on which particle is written there), and a few conjunctions of those. It is fitted on
every 的/地/得 of clean text (the release's: `corpus` + `corpus_domains`, 5.2 M particles; from
`corpus` alone, 0.53 M, the broad dev's dde part held out 82.3 against 83.6), so it needs no labelled errors,
plus the correct sides of the real training pairs counted `PAIRS_WEIGHT` times:
they follow the convention the corrector is judged by (SIGHAN's gold writes 非常地惊讶 and
一间一间地关闭, where the corpus's reviews write 的; on the dev split's particles the
pairs x10 separate the errors better: 37-38 of 67 errors at a gain above 1 for 40-41 of 1,872
correct particles, against 32 for 51 from the corpus alone). Stored as one safetensors file
(`particles.safetensors`) in the model directory: a (buckets, 3) weight table and a bias.

The scorer reads it as the feature `particle_gain` (log P(candidate) - log P(written) where both
are particles), and the pipeline flags a written particle the model finds unlikely enough.
"""

from __future__ import annotations

import functools
import warnings
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..text.protection import ensure_jieba

FILENAME = "particles.safetensors"
PARTICLES = "的地得"
PARTICLE_INDEX = {ch: i for i, ch in enumerate(PARTICLES)}
PAIRS_WEIGHT = 10  # times each correct side of the training pairs is counted (see above)
WINDOW = 8  # characters of context each side handed to jieba; a word rarely reaches further
DEFAULT_BUCKETS = 1 << 20


def _stable_hash(feature: str, buckets: int) -> int:
    # crc32, not hash(): Python salts str hashes per process, and the table must outlive one.
    return zlib.crc32(feature.encode("utf-8")) % buckets


@functools.lru_cache(maxsize=8192)
def _edge_word(text: str, last: bool) -> tuple[str, str]:
    """(word, POS tag) of jieba's segmentation that ends `text` (last=True) or starts it.
    Cached: a particle the flags examined is read again for its candidates' features, and again
    in the second pass, and jieba is the classifier's whole cost."""
    if not text:
        return "^" if last else "$", "B"
    words = ensure_jieba().posseg.lcut(text, HMM=False)
    pair = words[-1] if last else words[0]
    return pair.word, pair.flag


def context_features(text: str, offset: int) -> list[str]:
    """The named features of position `offset` of `text` (the character there is not read)."""
    left, right = text[max(0, offset - WINDOW):offset], text[offset + 1:offset + 1 + WINDOW]
    left_word, left_pos = _edge_word(left, last=True)
    right_word, right_pos = _edge_word(right, last=False)
    l1, l2, l3 = left[-1:] or "^", left[-2:], left[-3:]
    r1, r2, r3 = right[:1] or "$", right[:2], right[:3]
    return [
        "bias",
        f"l1={l1}", f"l2={l2}", f"l3={l3}", f"r1={r1}", f"r2={r2}", f"r3={r3}", f"l1r1={l1}|{r1}",
        f"lw={left_word}", f"lp={left_pos}", f"rw={right_word}", f"rp={right_pos}",
        f"lp_rp={left_pos}|{right_pos}", f"lw_rp={left_word}|{right_pos}", f"lp_rw={left_pos}|{right_word}",
        f"lw_rw={left_word}|{right_word}", f"lp_r1={left_pos}|{r1}", f"l1_rp={l1}|{right_pos}",
    ]


def particle_sites(text: str) -> list[int]:
    """Offsets of the particles written in `text`."""
    return [i for i, ch in enumerate(text) if ch in PARTICLE_INDEX]


@dataclass
class ParticleModel:
    weights: np.ndarray  # (buckets, 3) float32, columns in PARTICLES order
    bias: np.ndarray  # (3,) float32

    @property
    def buckets(self) -> int:
        return int(self.weights.shape[0])

    def feature_ids(self, text: str, offset: int) -> list[int]:
        return [_stable_hash(f, self.buckets) for f in context_features(text, offset)]

    def log_probs(self, sites: Sequence[tuple[str, int]]) -> np.ndarray:
        """(N, 3) log P(的, 地, 得 | context) at each (text, offset)."""
        out = np.zeros((len(sites), len(PARTICLES)), dtype=np.float64)
        for n, (text, offset) in enumerate(sites):
            logits = self.bias.astype(np.float64) + self.weights[self.feature_ids(text, offset)].sum(axis=0)
            out[n] = logits - np.logaddexp.reduce(logits)
        return out

    def best_other_gain(self, sites: Sequence[tuple[str, int]]) -> np.ndarray:
        """(N,) how much more log-probability the likeliest other particle gets than the one
        written at each (text, offset), which must hold a particle."""
        log_probs = self.log_probs(sites)
        written = np.array([PARTICLE_INDEX[text[offset]] for text, offset in sites], dtype=np.int64)
        rows = np.arange(len(sites))
        others = log_probs.copy()
        others[rows, written] = -np.inf
        return others.max(axis=1) - log_probs[rows, written]

    def candidate_gains(self, sites: Sequence[tuple[str, int]], site_of: Sequence[int],
                        targets: Sequence[str]) -> np.ndarray:
        """(N,) log P(target) - log P(written) for candidates `targets[k]` at `sites[site_of[k]]`;
        0 unless both the written character and the candidate are particles."""
        gains = np.zeros(len(targets), dtype=np.float64)
        wanted = [k for k, (n, target) in enumerate(zip(site_of, targets, strict=True))
                  if target in PARTICLE_INDEX and sites[n][0][sites[n][1]] in PARTICLE_INDEX]
        if not wanted:
            return gains
        needed = sorted({site_of[k] for k in wanted})
        log_probs = dict(zip(needed, self.log_probs([sites[n] for n in needed]), strict=True))
        for k in wanted:
            text, offset = sites[site_of[k]]
            row = log_probs[site_of[k]]
            gains[k] = row[PARTICLE_INDEX[targets[k]]] - row[PARTICLE_INDEX[text[offset]]]
        return gains

    def save(self, path: str | Path) -> None:
        from safetensors.numpy import save_file

        save_file({"weights": self.weights.astype(np.float16), "bias": self.bias.astype(np.float32)}, str(path),
                  metadata={"format": "corrector.particles/1", "particles": PARTICLES, "window": str(WINDOW)})

    @classmethod
    def load(cls, path: str | Path) -> ParticleModel:
        from safetensors import safe_open

        with safe_open(str(path), "np") as f:
            meta = f.metadata() or {}
            if meta.get("format") != "corrector.particles/1":
                raise ValueError(f"{path}: not a particle model (format {meta.get('format')!r})")
            return cls(f.get_tensor("weights").astype(np.float32), f.get_tensor("bias").astype(np.float32))


def training_sites(lines: Iterable[str]) -> Iterator[tuple[str, int, int]]:
    """(text, offset, label) for every particle of clean text."""
    for line in lines:
        text = line.strip()
        for offset in particle_sites(text):
            yield text, offset, PARTICLE_INDEX[text[offset]]


def featurize(sites: Iterable[tuple[str, int, int]], buckets: int = DEFAULT_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """(feature ids (N, F), labels (N,)) of (text, offset, label) sites; N may be 0."""
    ids: list[list[int]] = []
    labels: list[int] = []
    for text, offset, label in sites:
        ids.append([_stable_hash(f, buckets) for f in context_features(text, offset)])
        labels.append(label)
    width = len(context_features("", 0))
    return np.array(ids, dtype=np.int64).reshape(-1, width), np.array(labels, dtype=np.int64)


def fit_with_pairs(corpus: tuple[np.ndarray, np.ndarray], sides: Sequence[str], pairs_weight: int = PAIRS_WEIGHT,
                   **options) -> ParticleModel:
    """The classifier of the corpus's particles (`featurize`d once, so that `finetune prior` can
    fit one per fold cheaply) and of the particles of `sides`, the correct sides of real training
    pairs, each counted `pairs_weight` times."""
    ids, labels = corpus
    side_ids, side_labels = featurize(training_sites(sides), buckets=options.get("buckets", DEFAULT_BUCKETS))
    ids = np.concatenate([ids, *[side_ids] * pairs_weight])
    labels = np.concatenate([labels, *[side_labels] * pairs_weight])
    return fit(ids, labels, **options)


def fit(ids: np.ndarray, labels: np.ndarray, buckets: int = DEFAULT_BUCKETS, epochs: int = 2, batch_size: int = 512,
        lr: float = 0.05, l2: float = 1e-6, seed: int = 0, log=print) -> ParticleModel:
    """A multinomial logistic regression over hashed feature ids (`featurize`), fitted with
    Adagrad (sparse rows: each step touches only the features its batch holds)."""
    import torch

    if not len(labels):
        raise ValueError("no particle in the training text")
    x, y = torch.from_numpy(ids), torch.from_numpy(labels)
    counts = np.bincount(labels, minlength=len(PARTICLES))
    log(f"{len(labels)} particles (的 {counts[0]}, 地 {counts[1]}, 得 {counts[2]}), {ids.shape[1]} features each")
    torch.manual_seed(seed)
    table = torch.nn.EmbeddingBag(buckets, len(PARTICLES), mode="sum", sparse=True)
    torch.nn.init.zeros_(table.weight)
    bias = torch.nn.Parameter(torch.tensor(np.log((counts + 1) / (counts.sum() + 3)), dtype=torch.float32))
    optimizer = torch.optim.Adagrad([table.weight, bias], lr=lr)
    for epoch in range(epochs):
        order = torch.randperm(len(y))
        total = 0.0
        for start in range(0, len(y), batch_size):
            batch = order[start:start + batch_size]
            rows = table(x[batch])
            loss = torch.nn.functional.cross_entropy(rows + bias, y[batch])
            if l2:  # on the rows this batch read: a sparse stand-in for weight decay
                loss = loss + l2 * rows.pow(2).sum()
            optimizer.zero_grad()
            loss.backward()
            with warnings.catch_warnings():  # torch's notice that it skips checking sparse gradients
                warnings.filterwarnings("ignore", message="Sparse invariant checks")
                optimizer.step()
            total += loss.item() * len(batch)
        log(f"epoch {epoch + 1}: loss {total / len(y):.4f}")
    return ParticleModel(table.weight.detach().numpy().astype(np.float32), bias.detach().numpy().astype(np.float32))
