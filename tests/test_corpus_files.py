"""Corpus files as the tables and synthetic data read them: plain and xz-compressed text."""

from __future__ import annotations

import lzma
from pathlib import Path

from corrector.pretrain.corpus import CorpusStats, iter_lines, list_corpus_files


def test_xz_text_files_are_found_and_read_like_plain_ones(tmp_path: Path):
    (tmp_path / "a.txt").write_text("今天天气很好。\n\n", encoding="utf-8")
    with lzma.open(tmp_path / "b.txt.xz", "wb") as handle:
        handle.write("少先队员应该为老人让座。\n".encode() + b"\xff\n")
    (tmp_path / "c.bin.xz").write_bytes(lzma.compress(b"not text"))
    files = list_corpus_files([tmp_path])
    assert [f.name for f in files] == ["a.txt", "b.txt.xz"]
    stats = CorpusStats()
    assert list(iter_lines(files, stats)) == ["今天天气很好。", "少先队员应该为老人让座。"]
    assert (stats.files, stats.empty, stats.bad_encoding) == (2, 1, 1)
