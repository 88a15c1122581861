"""Character-level tokenization with exact alignment to the original string.

Spelling correction edits single characters, so every non-space character of the input is one
model position and `offsets[i]` is the index of position i in the original text. We never run a
WordPiece tokenizer over raw text: sub-word merges of ASCII words and digits are what shift
alignment in other correctors (pycorrector issue #457). Whitespace gets no position at all and is
therefore kept byte-for-byte; so is everything else, because corrections are only ever applied to
CJK positions by offset.

The same mapping is used for pre-training, fine-tuning and inference, so a model never sees a
different segmentation from the one it was trained on. It works with any BERT-style vocabulary
(our own `vocab.txt` or hub checkpoints such as hfl/chinese-electra-180g-*).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask")  # in SPECIAL_TOKENS' order: BERT's defaults
BERT_TOKENIZERS = (None, "BertTokenizer", "BertTokenizerFast", "ElectraTokenizer", "ElectraTokenizerFast")


def is_cjk(char: str) -> bool:
    """True for a CJK ideograph: the only characters the corrector may change."""
    if len(char) != 1:
        return False
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK Unified Ideographs
        or 0x3400 <= cp <= 0x4DBF  # Extension A
        or 0x20000 <= cp <= 0x2A6DF  # Extension B
        or 0x2A700 <= cp <= 0x2EBEF  # Extensions C-F
        or 0xF900 <= cp <= 0xFAFF  # Compatibility Ideographs
        or 0x2F800 <= cp <= 0x2FA1F  # Compatibility Supplement
    )


def normalize_char(char: str) -> str:
    """A character's fallback lookup form: full-width ASCII folded to half-width (NFKC)."""
    folded = unicodedata.normalize("NFKC", char)
    return folded if len(folded) == 1 else char


@dataclass(frozen=True)
class CharEncoding:
    """Model input ids for one text and where each position came from."""

    ids: list[int]
    offsets: list[int]  # offsets[i]: index in the original text of model position i


class CharTokenizer:
    """One id per non-space character, over the vocabulary of a Hugging Face tokenizer (or of a
    `VocabTokenizer`, the same read without transformers)."""

    def __init__(self, hf_tokenizer) -> None:
        self.hf_tokenizer = hf_tokenizer
        self.vocab: dict[str, int] = dict(hf_tokenizer.get_vocab())
        self.id_to_token: dict[int, str] = {i: t for t, i in self.vocab.items()}
        self.pad_token_id = hf_tokenizer.pad_token_id
        self.unk_token_id = hf_tokenizer.unk_token_id
        self.cls_token_id = hf_tokenizer.cls_token_id
        self.sep_token_id = hf_tokenizer.sep_token_id
        self.mask_token_id = hf_tokenizer.mask_token_id
        self.vocab_size = len(hf_tokenizer)
        self._cache: dict[str, int] = {}
        # Ids that stand for exactly one CJK character: the only legal correction targets.
        self.cjk_ids = sorted(i for t, i in self.vocab.items() if is_cjk(t))

    def char_id(self, char: str) -> int:
        cached = self._cache.get(char)
        if cached is not None:
            return cached
        # Exact character first (keeps Chinese punctuation such as ，！ distinct), then its
        # half-width form (Ａ -> A), then lower case for uncased hub vocabularies.
        token_id = self.vocab.get(char)
        if token_id is None:
            folded = normalize_char(char)
            token_id = self.vocab.get(folded)
            if token_id is None:
                token_id = self.vocab.get(folded.lower(), self.unk_token_id)
        self._cache[char] = token_id
        return token_id

    def token(self, token_id: int) -> str:
        return self.id_to_token.get(token_id, "")

    def encode(self, text: str) -> CharEncoding:
        """Ids and offsets for every non-space character (no [CLS]/[SEP])."""
        ids: list[int] = []
        offsets: list[int] = []
        for index, char in enumerate(text):
            if char.isspace():
                continue
            ids.append(self.char_id(char))
            offsets.append(index)
        return CharEncoding(ids=ids, offsets=offsets)

    def with_special_tokens(self, ids: list[int]) -> list[int]:
        return [self.cls_token_id, *ids, self.sep_token_id]


class VocabTokenizer:
    """What `CharTokenizer` reads of a Hugging Face tokenizer (vocabulary, special token ids,
    size), read by `read_vocab_tokenizer` from a model directory without transformers, whose
    import costs seconds (runtime/electra.py)."""

    def __init__(self, vocab: dict[str, int], special: dict[str, str]) -> None:
        self.vocab = vocab
        for name in SPECIAL_NAMES:
            setattr(self, f"{name}_token_id", vocab[special[name]])

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)


def read_vocab_lines(path: str | Path) -> list[str]:
    """The tokens of a vocab.txt, one a line, its line number its id — split on "\n" only, as
    transformers reads it (`str.splitlines` would also cut at \x1c, \x85, \u2028 ...)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline
    return lines


def read_vocab_tokenizer(directory: str | Path) -> VocabTokenizer | None:
    """The BERT-style tokenizer of a model directory as transformers would load it: the
    vocabulary of tokenizer.json (WordPiece), else of vocab.txt (one token a line, its line
    number its id), and the special tokens of tokenizer_config.json / special_tokens_map.json.
    None for anything else (another tokenizer class, added tokens outside the vocabulary,
    extra special tokens): the caller then asks transformers."""
    directory = Path(directory)
    special = dict(zip(SPECIAL_NAMES, SPECIAL_TOKENS, strict=True))
    config: dict = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = directory / name
        if path.is_file():
            config.update(json.loads(path.read_text(encoding="utf-8")))
    if config.get("tokenizer_class") not in BERT_TOKENIZERS or config.get("additional_special_tokens") \
            or config.get("extra_special_tokens"):
        return None
    for name in SPECIAL_NAMES:
        token = config.get(f"{name}_token", special[name])
        if isinstance(token, dict):  # a serialised AddedToken
            token = token.get("content")
        if not isinstance(token, str):
            return None
        special[name] = token
    if (directory / "tokenizer.json").is_file():
        spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
            return None
        vocab = dict(model["vocab"])
        if any(vocab.get(added.get("content")) != added.get("id") for added in spec.get("added_tokens") or []):
            return None  # a token added beyond the vocabulary: transformers' length and ids differ
    elif (directory / "vocab.txt").is_file():
        lines = read_vocab_lines(directory / "vocab.txt")
        vocab = {token: index for index, token in enumerate(lines)}
        if len(vocab) != len(lines):
            return None  # a token twice: transformers' slow and fast tokenizers disagree on such files
    else:
        return None
    if any(token not in vocab for token in special.values()):
        return None
    return VocabTokenizer(vocab, special)
