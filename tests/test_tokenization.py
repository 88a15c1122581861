"""One model position per non-space character, offsets exact for any text."""

from __future__ import annotations

import pytest

from corrector.runtime.models import load_model
from corrector.text.tokenization import is_cjk, normalize_char, read_vocab_lines

MIXED = "我在2024年用iPhone打电话给Tom，他说因该没问题。"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return load_model(str(tiny_model_dir)).tokenizer


@pytest.mark.parametrize("text", [
    MIXED,
    "访问 https://example.com/a?b=1 或 tom@example.com",
    "😀表情👍🏽，家庭👨‍👩‍👧",
    "全角ＡＢＣ１２３，半角abc　全角空格",
    "行一\n行二\r\n\t行三  ",
    "𠀀𪚥扩展字",
    "",
])
def test_offsets_map_back_exactly(tokenizer, text):
    enc = tokenizer.encode(text)
    assert len(enc.ids) == len(enc.offsets) == sum(not ch.isspace() for ch in text)
    assert enc.offsets == [i for i, ch in enumerate(text) if not ch.isspace()]
    for token_id, offset in zip(enc.ids, enc.offsets, strict=True):
        char = text[offset]
        token = tokenizer.token(token_id)
        # Either the character itself, its half-width form, or [UNK] -- never a merged piece.
        assert token in (char, normalize_char(char), normalize_char(char).lower(), "[UNK]")


def test_every_chinese_character_is_one_position(tokenizer):
    enc = tokenizer.encode(MIXED)
    cjk = [i for i, ch in enumerate(MIXED) if is_cjk(ch)]
    assert [o for o in enc.offsets if is_cjk(MIXED[o])] == cjk
    assert tokenizer.token(enc.ids[MIXED.index("因")]) == "因"
    assert [tokenizer.token(enc.ids[enc.offsets.index(i)]) for i in range(2, 6)] == list("2024")


def test_is_cjk():
    assert all(is_cjk(c) for c in "因应坐座𠀀㐀")
    assert not any(is_cjk(c) for c in "Aa1，。😀 Ａ")
    assert not is_cjk("因该")


def test_special_tokens(tokenizer):
    ids = tokenizer.encode("因该").ids
    wrapped = tokenizer.with_special_tokens(ids)
    assert wrapped[0] == tokenizer.cls_token_id and wrapped[-1] == tokenizer.sep_token_id
    assert tokenizer.token(tokenizer.mask_token_id) == "[MASK]"
    assert all(is_cjk(tokenizer.token(i)) for i in tokenizer.cjk_ids)


def test_vocab_lines_split_on_newlines_only(tmp_path):
    # bert-base-chinese's vocabulary (LTP-tiny's) holds "\u2028" and "##\u2028" as tokens:
    # str.splitlines would cut them and shift every later id by one or two.
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n\u2028\n##\u2028\n的\n", encoding="utf-8")
    assert read_vocab_lines(path) == ["[PAD]", "\u2028", "##\u2028", "的"]
