"""Chunking long text: every character owned by exactly one chunk, sizes within the limit."""

from __future__ import annotations

import random

import pytest

from corrector.text.segmentation import count_positions, sentence_spans, sentence_units, split_text


def owned(text: str, chunks) -> list[int]:
    return [i for c in chunks for i in range(c.own_start, c.own_end) if not text[i].isspace()]


def check(text: str, max_positions: int, overlap: int = 16):
    chunks = split_text(text, max_positions, overlap)
    for c in chunks:
        assert 0 <= c.start <= c.own_start < c.own_end <= c.end <= len(text)
        assert count_positions(text, c.start, c.end) <= max_positions
        assert "\n" not in text[c.start:c.end]  # lines never share a chunk
    positions = owned(text, chunks)
    assert positions == sorted(positions)  # in order, no position twice ...
    assert positions == [i for i, ch in enumerate(text) if not ch.isspace()]  # ... none missing
    return chunks


def test_short_text_is_one_chunk():
    text = "少先队员因该为老人让坐。他说：“好。”"
    chunks = check(text, 128)
    assert [(c.start, c.end) for c in chunks] == [(0, len(text))]


def test_sentences_packed_up_to_the_limit():
    text = "今天天气很好。" * 10  # 7 positions per sentence
    chunks = check(text, 20)
    assert all(text[c.start:c.end].endswith("。") for c in chunks)
    assert [count_positions(text, c.start, c.end) for c in chunks] == [14, 14, 14, 14, 14]


def test_closing_quotes_stay_with_their_sentence():
    text = "他说：“我很高兴。”然后走了。"
    chunks = check(text, 10)
    assert text[chunks[0].start:chunks[0].end] == "他说：“我很高兴。”"


def test_long_sentence_splits_at_commas():
    text = "，".join(["我们一起去公园散步"] * 12) + "。"
    chunks = check(text, 30)
    assert len(chunks) > 1 and all(c.own_start == c.start and c.own_end == c.end for c in chunks)
    assert all(text[c.end - 1] in "，。" for c in chunks)


@pytest.mark.parametrize("max_positions,overlap", [(16, 4), (50, 16), (254, 16), (7, 16)])
def test_text_without_punctuation_uses_overlapping_windows(max_positions, overlap):
    rng = random.Random(max_positions)
    text = "".join(rng.choice("少先队员应该为老人让座 ") for _ in range(1000))
    chunks = check(text, max_positions, overlap)
    assert len(chunks) > 1
    assert any(c.start < c.own_start for c in chunks)  # the windows really overlap
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.own_end == b.own_start and b.start < a.end


def test_newlines_and_spaces():
    text = "第一行。\n\n  第二行，有空格 和\t制表符。\r\n第三行\n"
    chunks = check(text, 128)
    assert [text[c.start:c.end].strip() for c in chunks] == ["第一行。", "第二行，有空格 和\t制表符。", "第三行"]


def test_whitespace_only_and_empty():
    assert split_text("", 10) == []
    assert split_text(" \n\t\n", 10) == []


def test_sentence_spans():
    text = "甲。乙！\n丙"
    assert sentence_spans(text) == [(0, 2), (2, 5), (5, 6)]  # the newline ends 乙！
    assert sentence_spans(text, 2, 4) == [(2, 4)]


def test_sentence_units_are_the_sentences_of_each_chunk():
    # Punctuated text: its sentences, whatever the packing into chunks.
    text = "甲乙。丙丁！戊己"
    assert sentence_units(text, 4, 0) == sentence_spans(text) == [(0, 3), (3, 6), (6, 8)]
    # Text without sentence punctuation counts once per chunk (the part it owns), not as one
    # sentence: the max-edits guard and the second pass then read it as the first pass did.
    text = "我们因该" * 100
    units = sentence_units(text, 128, 16)
    assert len(units) == len(split_text(text, 128, 16)) > 3
    assert units[0][0] == 0 and units[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(units, units[1:], strict=False))
    assert max(count_positions(text, *unit) for unit in units) <= 128


def test_rejects_nonpositive_size():
    with pytest.raises(ValueError):
        split_text("文本", 0)
