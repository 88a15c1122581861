"""Reference system: the fine-tuned generator read alone, as a BERT-CSC corrector.

BERT-CSC (Hong et al. 2019) corrects by one masked-LM pass over the text as written: every
character becomes the model's most likely character there. This is that reading of our
generator — no discriminator, no confusion sets, no scorer: a character is replaced when the
generator's top CJK character differs from it; `confidence` is the generator's probability of
that character (so the evaluator's `--threshold` / `--sweep` trade recall for precision). It shows
how much of the corrector's work the generator alone does, and how well a generator fine-tuned
with `--generator-input source` has learned to correct (model card, "What limits it"). A
generator fed "masked" in fine-tuning mostly copies here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..candidates import cjk_bias
from ..result import Edit, Result
from ..runtime.models import ModelBundle, load_model
from ..runtime.passes import generator_log_probs, make_batch
from ..text.segmentation import split_text
from ..text.tokenization import is_cjk


class GeneratorCorrector:
    """Same `correct` / `correct_batch` API as `Corrector`."""

    def __init__(self, model: str | ModelBundle | None = None, device: str = "cpu", max_positions: int = 128) -> None:
        self.bundle = model if isinstance(model, ModelBundle) else load_model(model, device=device)
        self.max_positions = max(1, min(max_positions, self.bundle.max_length))
        self.cjk_bias = cjk_bias(self.bundle)  # only CJK characters are proposed, as in the corrector

    def correct(self, text: str, threshold: float | None = None) -> Result:
        return self.correct_batch([text], threshold=threshold)[0]

    def correct_batch(self, texts: Sequence[str], batch_size: int | None = None,
                      threshold: float | None = None) -> list[Result]:
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"text is {type(text).__name__}, expected str")
        # Every chunk of every text, then generator passes over `batch_size` chunks at a time.
        chunks = [(k, chunk) for k, text in enumerate(texts) for chunk in split_text(text, self.max_positions, overlap=16)]
        edits: list[list[Edit]] = [[] for _ in texts]
        size = max(1, batch_size or 32)
        for start in range(0, len(chunks), size):
            part = chunks[start : start + size]
            encodings = [self.bundle.tokenizer.encode(texts[k][c.start : c.end]) for k, c in part]
            for (k, chunk), encoding, found in zip(part, encodings, self._read(encodings), strict=True):
                for i, (target, confidence) in found.items():
                    offset = chunk.start + encoding.offsets[i]
                    source = texts[k][offset]
                    if chunk.own_start <= offset < chunk.own_end and is_cjk(source) and target != source:
                        if threshold is None or confidence >= threshold:
                            edits[k].append(Edit(offset, source, target, round(confidence, 4)))
        return [Result.applying(text, found) for text, found in zip(texts, edits, strict=True)]

    def _read(self, encodings) -> list[dict[int, tuple[str, float]]]:
        """Per chunk: {token index: (the generator's top CJK character, its probability)} where
        that character differs from the token there."""
        bundle = self.bundle
        batch = make_batch([list(e.ids) for e in encodings], bundle)
        rows = np.repeat(np.arange(len(encodings)), [len(e.ids) for e in encodings])
        index = np.concatenate([np.arange(len(e.ids)) for e in encodings]) if len(rows) else rows
        log_probs = generator_log_probs(bundle, batch, rows, index, mask=False) if len(rows) else None
        out: list[dict[int, tuple[str, float]]] = [{} for _ in encodings]
        if log_probs is None:
            return out
        best_ids = (log_probs + self.cjk_bias).argmax(-1)  # the top CJK id (-inf elsewhere)
        best = np.exp(log_probs[np.arange(len(rows)), best_ids])
        for n, (row, i) in enumerate(zip(rows.tolist(), index.tolist(), strict=True)):
            if best_ids[n] != encodings[row].ids[i]:
                out[row][i] = (bundle.tokenizer.token(int(best_ids[n])), float(best[n]))
        return out
