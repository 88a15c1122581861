"""Corpus pipeline: stream text files, split into sentences, pack into fixed-length sequences,
tokenize once into a cached memmap so later epochs (and resumed runs) do no tokenization.

Every sequence is `[CLS] chars… [SEP] [PAD]…` of exactly `max_length` ids, packed from
consecutive sentences, with the same one-id-per-character mapping the corrector uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..text.tokenization import CharTokenizer

SENTENCE_END = re.compile(r"(?<=[。！？；!?;…])")
TEXT_SUFFIXES = {".txt", ".text", ".tsv", ".md"}
# xz-compressed text files (../shared/data/corpus_domains: 97 M characters in 90 MB) are read as
# they are: decompressing them to disk would take 300 MB for nothing.
COMPRESSED_SUFFIXES = {".xz"}


def is_text_file(path: Path) -> bool:
    """A corpus file: plain text, or text compressed with xz (`name.txt.xz`)."""
    if path.suffix in COMPRESSED_SUFFIXES:
        return Path(path.stem).suffix in TEXT_SUFFIXES
    return path.suffix in TEXT_SUFFIXES


def open_binary(path: Path):
    """`path` opened for reading bytes, decompressed on the fly where it is xz."""
    if path.suffix in COMPRESSED_SUFFIXES:
        import lzma

        return lzma.open(path, "rb")
    return open(path, "rb")


@dataclass
class CorpusStats:
    files: int = 0
    lines: int = 0
    bad_encoding: int = 0
    empty: int = 0
    sentences: int = 0
    characters: int = 0
    sequences: int = 0
    unknown: int = 0  # characters mapped to [UNK]
    bad_lines: list[str] = field(default_factory=list)  # first few "file:line" with invalid UTF-8

    def summary(self) -> str:
        return (
            f"{self.files} files, {self.lines} lines ({self.bad_encoding} invalid UTF-8 and {self.empty} empty "
            f"skipped), {self.sentences} sentences, {self.characters} characters "
            f"({self.unknown} unknown), {self.sequences} sequences"
        )


def list_corpus_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories (recursively, text files only) and keep a stable order."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and is_text_file(p)))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"corpus path does not exist: {path}")
    if not files:
        raise ValueError(f"no text files found in corpus paths: {[str(p) for p in paths]}")
    return files


def iter_lines(files: list[Path], stats: CorpusStats, halfwidth: bool = False) -> Iterator[str]:
    """Decoded, stripped, non-empty lines; invalid UTF-8 and empty lines are counted and skipped."""
    for path in files:
        stats.files += 1
        with open_binary(path) as handle:
            for number, raw in enumerate(handle, start=1):
                stats.lines += 1
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError:
                    stats.bad_encoding += 1
                    if len(stats.bad_lines) < 10:
                        stats.bad_lines.append(f"{path}:{number}")
                    continue
                if not line:
                    stats.empty += 1
                    continue
                if halfwidth:
                    line = to_halfwidth(line)
                yield line


def to_halfwidth(text: str) -> str:
    """Full-width ASCII forms (Ａ１！) to half-width; Chinese punctuation (，。) is kept."""
    return "".join(unicodedata.normalize("NFKC", ch) if 0xFF01 <= ord(ch) <= 0xFF5E and ch not in "，！？；：（）" else ch for ch in text)


def split_sentences(line: str) -> list[str]:
    return [s for s in SENTENCE_END.split(line) if s.strip()]


def pack_sequences(lines: Iterable[str], tokenizer: CharTokenizer, max_length: int, stats: CorpusStats) -> Iterator[list[int]]:
    """Greedily pack consecutive sentences into `[CLS] … [SEP]` sequences of ≤ max_length ids."""
    body = max_length - 2
    current: list[int] = []
    for line in lines:
        for sentence in split_sentences(line):
            ids = tokenizer.encode(sentence).ids
            if not ids:
                continue
            stats.sentences += 1
            stats.characters += len(ids)
            stats.unknown += sum(1 for i in ids if i == tokenizer.unk_token_id)
            if current and len(current) + len(ids) > body:
                yield tokenizer.with_special_tokens(current)
                current = []
            while len(ids) > body:  # a sentence longer than a window: hard split
                yield tokenizer.with_special_tokens(ids[:body])
                ids = ids[body:]
            current.extend(ids)
    if current:
        yield tokenizer.with_special_tokens(current)


def pack_full_rows(rows: np.ndarray, cls_id: int, sep_id: int, pad_id: int, max_length: int | None = None) -> np.ndarray:
    """Re-cut sentence-packed rows (`[CLS] chars… [SEP] [PAD]…`) into full rows: the characters
    of all rows in order, as one stream cut into `[CLS] max_length-2 characters [SEP]` with no
    padding; the last partial row is dropped. Sentences run on across rows (RoBERTa's
    FULL-SENTENCES packing).

    Why: every position of a step is then real text, and with no padding the model runs without
    an attention mask (SDPA's fused kernels, no mask to build or check) on one fixed shape, the
    shape compiled graphs and CUDA graphs need. The corpus in data/model's vocabulary packed by
    sentences is 241,151 rows of 128 of which 80.0 % are characters; full rows hold the same
    24.7 M characters in 196,050 rows, 19 % fewer steps an epoch."""
    max_length = max_length or rows.shape[1]
    body = max_length - 2
    if body < 1:
        raise ValueError(f"full rows of {max_length} positions have no room for text")
    stream = rows[(rows != cls_id) & (rows != sep_id) & (rows != pad_id)]  # row-major: the text in order
    count = len(stream) // body
    if count == 0:
        raise ValueError(f"{len(stream)} characters do not fill one row of {max_length}")
    packed = np.empty((count, max_length), dtype=rows.dtype)
    packed[:, 0], packed[:, -1] = cls_id, sep_id
    packed[:, 1:-1] = stream[: count * body].reshape(count, body)
    return packed


def corpus_fingerprint(files: list[Path], tokenizer: CharTokenizer, max_length: int, halfwidth: bool) -> str:
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        digest.update(f"{path.resolve()}|{stat.st_size}|{int(stat.st_mtime)}\n".encode())
    vocab = sorted(tokenizer.vocab.items(), key=lambda item: item[1])
    digest.update(json.dumps(vocab, ensure_ascii=False).encode())
    digest.update(f"{max_length}|{halfwidth}|v1".encode())
    return digest.hexdigest()[:16]


def build_token_cache(
    corpus: list[str | Path],
    tokenizer: CharTokenizer,
    cache_dir: str | Path,
    max_length: int = 128,
    halfwidth: bool = False,
    log=print,
) -> np.ndarray:
    """Return the (sequences, max_length) id array, building `cache_dir/<hash>.npy` on first use.

    A corpus given as `.npy` files (a cache written here before, e.g. carried to a GPU machine
    without the raw text) is used as it is: the arrays are checked and stacked, nothing is read
    or tokenized."""
    if corpus and all(Path(p).suffix == ".npy" for p in corpus):
        return load_token_arrays(corpus, tokenizer, max_length, log)
    files = list_corpus_files(corpus)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = corpus_fingerprint(files, tokenizer, max_length, halfwidth)
    cache_file = cache_dir / f"tokens-{key}.npy"
    if cache_file.exists():
        array = np.load(cache_file, mmap_mode="r")
        log(f"token cache: {cache_file} ({array.shape[0]} sequences of {max_length})")
        return array
    dtype = np.uint16 if tokenizer.vocab_size <= np.iinfo(np.uint16).max else np.uint32
    stats = CorpusStats()
    rows = [np.asarray(seq, dtype=dtype) for seq in pack_sequences(iter_lines(files, stats, halfwidth), tokenizer, max_length, stats)]
    stats.sequences = len(rows)
    if not rows:
        raise ValueError(f"corpus is empty after cleaning: {stats.summary()}")
    array = np.full((len(rows), max_length), tokenizer.pad_token_id, dtype=dtype)
    for index, row in enumerate(rows):
        array[index, : len(row)] = row
    tmp = cache_file.with_suffix(".tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, cache_file)  # atomic: a killed run never leaves a half-written cache
    (cache_dir / f"tokens-{key}.json").write_text(json.dumps(asdict(stats), ensure_ascii=False, indent=1))
    log(f"corpus: {stats.summary()}")
    if stats.bad_lines:
        log(f"invalid UTF-8 lines (first {len(stats.bad_lines)}): {', '.join(stats.bad_lines)}")
    return np.load(cache_file, mmap_mode="r")


def load_token_arrays(paths: Iterable[str | Path], tokenizer: CharTokenizer, max_length: int, log=print) -> np.ndarray:
    """Pre-tokenized `(sequences, max_length)` id arrays (`tokens-*.npy` of a token cache), checked
    against the tokenizer and the sequence length they are about to be trained with."""
    arrays = []
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise FileNotFoundError(f"token array does not exist: {path}")
        array = np.load(path, mmap_mode="r")
        if array.ndim != 2 or array.shape[1] != max_length:
            raise ValueError(f"{path}: token array of shape {array.shape}, expected (sequences, {max_length}) for --max-length {max_length}")
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{path}: token ids must be integers, not {array.dtype}")
        if len(array) and int(array.max()) >= tokenizer.vocab_size:
            raise ValueError(f"{path}: token id {int(array.max())} is outside the vocabulary of {tokenizer.vocab_size} "
                             "(was it made with another tokenizer?)")
        arrays.append(array)
    data = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
    if not len(data):
        raise ValueError(f"token arrays are empty: {[str(p) for p in paths]}")
    log(f"token arrays: {len(data)} sequences of {max_length} from {len(arrays)} file(s)")
    return data


def corpus_domain(path: str | Path) -> str:
    """A corpus file's domain: its name up to the first '_' (`corpus_domains` names its files
    <domain>_<source>.txt.xz, the broad corpus copy news_…, tech_…, wiki_…). The same prefixes
    as `finetune.broad.DOMAIN_GROUPS`, which groups only the seven domains the dev has parts for;
    this covers every file of the corpus too."""
    return Path(path).name.split("_", 1)[0].split(".", 1)[0]


def sample_by_domain(corpus: list[str | Path], tokenizer: CharTokenizer, cache_dir: str | Path, rows_per_domain: int,
                     max_length: int = 128, seed: int = 0, log=print) -> np.ndarray:
    """Token rows of every file of `corpus` (each file's own `build_token_cache`), at most
    `rows_per_domain` drawn uniformly from each domain (`corpus_domain`), shuffled together.

    Why: continued pre-training on all the text has to travel to a lent GPU in one 64 MiB carry,
    and 140 M characters of tokens are ~105 MB compressed; novels alone are a third of the text.
    A cap per domain keeps what the networks read close to what users write, within the carry."""
    if rows_per_domain < 1:
        raise ValueError(f"rows_per_domain must be at least 1, got {rows_per_domain}")
    by_domain: dict[str, list[np.ndarray]] = {}
    for path in list_corpus_files(corpus):
        rows = build_token_cache([path], tokenizer, cache_dir, max_length, log=lambda _: None)
        by_domain.setdefault(corpus_domain(path), []).append(np.asarray(rows))
    rng = np.random.default_rng(seed)
    parts = []
    for domain, arrays in sorted(by_domain.items()):
        rows = np.concatenate(arrays)
        if len(rows) > rows_per_domain:
            rows = rows[np.sort(rng.choice(len(rows), rows_per_domain, replace=False))]
        log(f"{domain}: {len(rows)} of {sum(len(a) for a in arrays)} sequences")
        parts.append(rows)
    sample = np.concatenate(parts)
    return sample[rng.permutation(len(sample))]
