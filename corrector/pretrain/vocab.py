"""Character-level vocabulary: CJK characters by corpus frequency plus a fixed non-CJK base.

Written as a BERT vocabulary (`vocab.txt` + `tokenizer.json` + configs) so that
`transformers.AutoTokenizer` / `BertTokenizerFast` loads it; the corrector and the trainers map
text to ids one character at a time through `corrector.tokenization.CharTokenizer`.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ..text.tokenization import SPECIAL_TOKENS, is_cjk

# Punctuation and symbols common in Chinese text; kept as their own tokens (not folded).
CHINESE_PUNCTUATION = "，。、；：？！“”‘’（）《》〈〉【】「」『』—…·～￥％〇"
# ASCII printable characters (letters kept in both cases: the tokenizer is cased).
ASCII_BASE = string.digits + string.ascii_letters + string.punctuation


def count_characters(lines: Iterable[str]) -> Counter:
    counts: Counter = Counter()
    for line in lines:
        counts.update(ch for ch in line if not ch.isspace())
    return counts


def build_vocab(counts: Counter, min_count: int = 2, max_size: int | None = None) -> list[str]:
    """Special tokens, the ASCII/punctuation base, then CJK and other characters by frequency."""
    tokens: list[str] = list(SPECIAL_TOKENS)
    seen = set(tokens)
    for char in ASCII_BASE + CHINESE_PUNCTUATION:
        if char not in seen:
            tokens.append(char)
            seen.add(char)
    # Non-CJK characters (other symbols, kana, Greek...) need a higher count to earn a slot.
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    for char, count in ranked:
        if char in seen:
            continue
        needed = min_count if is_cjk(char) else max(min_count, 20)
        if count < needed:
            continue
        if max_size is not None and len(tokens) >= max_size:
            break
        tokens.append(char)
        seen.add(char)
    return tokens


def write_tokenizer(tokens: list[str], output_dir: str | Path, model_max_length: int = 512) -> None:
    """Save a BertTokenizerFast over `tokens` (cased, Chinese chars split) to `output_dir`."""
    from transformers import BertTokenizerFast

    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    vocab_file = output / "vocab.txt"
    vocab_file.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(
        vocab={token: index for index, token in enumerate(tokens)},
        do_lower_case=False,
        tokenize_chinese_chars=True,
        strip_accents=False,
        model_max_length=model_max_length,
    )
    tokenizer.save_pretrained(str(output))
