"""Script: the networks, the n-gram LM, the confusion sets and jieba know simplified Chinese, so a
text in traditional script goes through the stages in simplified form, one character for one
(text/script.py: offsets unchanged), and its accepted edits are written back in its script.

The mapping both ways of a Corrector's texts: `model_texts` before the chunk stage,
`written_edits` after acceptance, before the max-edits guard counts a chunk's edits.
"""

from __future__ import annotations

from collections.abc import Sequence

from .acceptance import restore_script
from .result import Edit
from .text.script import OFF, ScriptConverter
from .text.segmentation import Chunk


def script_converter(traditional: str | None) -> ScriptConverter | None:
    """The converter for `CorrectorConfig.traditional`; None (for None or "off"): every text is
    read as written."""
    return ScriptConverter(traditional) if traditional not in (None, OFF) else None


def model_texts(script: ScriptConverter | None, texts: Sequence[str]) -> list[str]:
    """The texts as the model reads them: traditional ones in simplified script. Anything else
    passes through, for the chunk stage to refuse by its index."""
    return [script.model_text(text) if script is not None and isinstance(text, str) else text for text in texts]


def written_edits(script: ScriptConverter | None, original: str | None, text: str, chunk: Chunk,
                  edits: list[Edit]) -> list[Edit]:
    """A chunk's accepted edits of `text` (as the model read it) as edits of the text as written,
    `original` (None: `text` itself): a traditional text's written back in its script; in a text
    read as written, none that only changes a character's script."""
    if script is None:
        return edits
    if original is not None and original != text:
        return restore_script(script, original, text, chunk, edits)
    # Read as written: a traditional character's simplified form is no correction.
    return [edit for edit in edits if not script.same_character(edit.source, edit.target)]
