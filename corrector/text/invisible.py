"""Invisible characters: a text is corrected as if they were absent, and they stay where written.

Zero-width spaces and joiners, word joiners, a byte-order mark inside text, soft hyphens,
variation selectors, bidi controls (Unicode's Default_Ignorable_Code_Point) draw nothing, but
every reader of the corrector saw them: the tokenizer gives each one a model position, [UNK] in
our vocabulary, and the n-gram LM, jieba's words, the idiom, particle and error-pair tables read
them as characters. So 因 in "\\u200d因\\u200d该\\u200d" stood between unknown tokens and was
"corrected" to 鄞 (confidence 0.84) where 因该 written plainly becomes 应该 (0.93), and
少先队员因\\u200b该为老人让坐 got no edit where the plain sentence gets 因 -> 应 (issue #69).

The corrector therefore reads `Visible.text`, the text without them, and `Visible.restore` maps
its result back: edit positions become offsets into the text as written, and the corrected text
is that text with only the corrected characters changed, every invisible character in place.
Such a character after a corrected one (a variation selector) stays after the new character.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from ..result import Result

# Default_Ignorable_Code_Point (Unicode 15.1, DerivedCoreProperties.txt), unassigned code points
# of its ranges included as the property does: a renderer that does not know one draws nothing.
IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)


def is_invisible(char: str) -> bool:
    """True for a default-ignorable character (ZWSP, ZWJ, soft hyphen, a variation selector ...)."""
    return len(char) == 1 and IGNORABLE.match(char) is not None


@dataclasses.dataclass(frozen=True)
class Visible:
    """A text as the corrector reads it, without its invisible characters, and the way back."""

    original: str
    text: str  # `original` without its invisible characters
    offsets: tuple[int, ...] | None = None  # offsets[i]: index in `original` of text[i]; None: the same text

    @classmethod
    def of(cls, text: str) -> Visible:
        """`text` without its invisible characters. Anything but a str passes through as it is,
        for the chunk stage to refuse with its index."""
        if not isinstance(text, str) or IGNORABLE.search(text) is None:  # nearly every text: no copy
            return cls(text, text)
        offsets = tuple(i for i, char in enumerate(text) if not is_invisible(char))
        return cls(text, "".join(text[i] for i in offsets), offsets)

    def position(self, offset: int) -> int:
        """The offset in the text as written of `text[offset]`."""
        return offset if self.offsets is None else self.offsets[offset]

    def restore(self, result: Result) -> Result:
        """`result`, found in `text`, as a result for the text as written."""
        if self.offsets is None:
            return result
        return Result.applying(self.original, [dataclasses.replace(edit, position=self.position(edit.position))
                                               for edit in result.edits])


def visible_texts(texts: Sequence[str]) -> tuple[list[Visible], list[str]]:
    """Each text's `Visible`, and the texts as the corrector reads them."""
    visible = [Visible.of(text) for text in texts]
    return visible, [v.text for v in visible]
