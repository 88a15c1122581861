"""Script: traditional-script text is corrected through its simplified form.

The networks, the n-gram LM, the confusion sets and jieba's dictionary all know simplified
Chinese (the pre-training corpus is simplified). Given traditional text as written, the
discriminator sees unfamiliar characters everywhere: measured on the original SIGHAN-15 test
(traditional, Taiwan) with the shipped model, sentence correction F1 16.6 at a false-positive
rate of 18 %, against 37.0 / 14.5 % on the simplified copy of the same sentences.

So a text judged traditional goes to the model converted to simplified, one character for one
character (OpenCC, Apache-2.0: character and phrase tables, e.g. 頭髮 → 头发), which keeps every
offset. Each accepted correction is written back in traditional script by converting the
corrected simplified text (the corrector converts each chunk, before its max-edits guard) and
taking the character at the edit's offset, so a corrected 发 becomes 髮 in 头发 but 發 in 发现;
every other character of the text is returned exactly as the user wrote it. A correction whose
traditional form is the character already there (the simplified model "fixing" a script
difference) is no correction and is dropped.

A text judged simplified goes to the model as written, and a traditional character in it (們 in
我們因该去, 於 in Wikipedia's 活跃於) reads to the model like a typo of its simplified form. Such an
edit only changes the script, which is not a spelling correction: it is dropped too
(`same_character`). Of the broad dev's 3,749 gold edits 3 are such (MCSC and Wang annotators
converted a traditional character), of SIGHAN's and ECSpell's tests none.

A text is judged traditional when converting it to simplified changes more characters than
converting it to traditional does (OpenCC's standard tables). On the SIGHAN-15 test, 1,080 of the
1,100 original sentences are traditional by this rule (15 others are the same in both scripts, 5
differ only in Taiwan's 著); of the 17,818 sentences of the simplified SIGHAN and ECSpell train and
test sets, one is, and it is written in traditional script.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from ..result import Edit

# OpenCC configurations per variant: (to simplified, to traditional). The variant decides how a
# corrected character is written back (为 -> 為 in Taiwan and Hong Kong, 爲 in OpenCC's standard
# form) and which regional forms are read as what (Taiwan's 著 in 看著 is simplified 着).
VARIANTS = {"tw": ("tw2s", "s2tw"), "hk": ("hk2s", "s2hk"), "t": ("t2s", "s2t")}
OFF = "off"  # the setting (CLI, service) that reads every text as written
CHOICES = (*VARIANTS, OFF)


class ScriptConverter:
    """Simplified view of traditional texts for the model, and corrections written back.

    One instance serves any number of threads: OpenCC's converters keep no per-call state
    (checked: 8 threads converting the 1,100 SIGHAN-15 sentences 20 times each got exactly the
    one-thread results). A sentence takes ~6 µs."""

    def __init__(self, variant: str = "tw") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown traditional variant {variant!r}; expected one of {', '.join(VARIANTS)}")
        self.variant = variant
        # The script is judged with OpenCC's standard tables, whatever the variant: a regional
        # form that is also a simplified character (Taiwan's 著 for 着, common in simplified
        # text too: 穿著) must not make a simplified text look traditional. Only standard t2s is
        # loaded here; the others when a text needs them (simplified text never does): each
        # OpenCC table set takes ~25 ms to load, a tenth of the corrector's build.
        self._converters: dict[str, object] = {}
        self._lock = threading.Lock()
        self._converter(VARIANTS["t"][0])

    def _converter(self, config: str):
        converter = self._converters.get(config)
        if converter is None:
            import opencc

            with self._lock:  # one load per table set, whichever thread asks first
                converter = self._converters.get(config)
                if converter is None:
                    converter = self._converters[config] = opencc.OpenCC(config)
        return converter

    def to_simplified(self, text: str) -> str:
        return self._convert(self._converter(VARIANTS[self.variant][0]), text)

    def to_traditional(self, text: str) -> str:
        return self._convert(self._converter(VARIANTS[self.variant][1]), text)

    def model_text(self, text: str) -> str:
        """What the model reads: `text` in simplified script when it is traditional, else `text`."""
        standard_t2s, standard_s2t = VARIANTS["t"]
        changed = _differences(text, self._convert(self._converter(standard_t2s), text))
        if not changed or changed <= _differences(text, self._convert(self._converter(standard_s2t), text)):
            return text  # simplified, or the same in both scripts
        return self.to_simplified(text)

    def same_character(self, source: str, target: str) -> bool:
        """Whether `target` only writes `source` in the other script (們/们, 於/于, 裡/里): the two
        differ and OpenCC's standard tables make them one simplified character."""
        to_simplified = self._converter(VARIANTS["t"][0])
        return source != target and self._convert(to_simplified, source) == self._convert(to_simplified, target)

    def restore(self, text: str, model_text: str, edits: Sequence[Edit]) -> list[Edit]:
        """The edits found in `model_text`, as edits of `text` (the same offsets)."""
        if model_text == text or not edits:
            return list(edits)
        corrected = list(model_text)
        for edit in edits:
            corrected[edit.position] = edit.target
        written = self.to_traditional("".join(corrected))
        restored = []
        for edit in edits:
            target = written[edit.position]
            if target != text[edit.position]:
                restored.append(dataclasses.replace(edit, source=text[edit.position], target=target))
        return restored

    @staticmethod
    def _convert(converter, text: str) -> str:
        """`converter` applied to `text`, one character for one. OpenCC's phrase tables map
        words to words of the same length; should one ever not, or the text not encode (a lone
        surrogate), the characters are converted one by one and kept where that fails too."""
        try:
            converted = converter.convert(text)
        except UnicodeError:
            converted = None
        if converted is not None and len(converted) == len(text):
            return converted
        out = []
        for char in text:
            try:
                one = converter.convert(char)
            except UnicodeError:
                one = char
            out.append(one if len(one) == 1 else char)
        return "".join(out)


def _differences(text: str, converted: str) -> int:
    return sum(a != b for a, b in zip(text, converted, strict=True))
