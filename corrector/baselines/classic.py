"""Baseline: the algorithm of pycorrector's former `electra_corrector`, on our models.

Reimplemented from its description, as a reference system for the evaluator and the benchmark:

* a character is flagged when the discriminator's logit is > 0 (P(replaced) > 0.5);
* flagged characters are visited left to right; each gets its own generator forward pass with
  that one character masked (earlier corrections already written into the sentence);
* if the original character is not among the generator's top 5, the first of the top 5 that is
  in the original's confusion set (same/similar pinyin or shape) replaces it.

There is no scorer, no batching and no protection; `confidence` is the generator probability of
the chosen character. Chunking and offsets are the project's own, so outputs are comparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..detection import detect
from ..resources.confusion import ConfusionSet, kind_of
from ..result import Edit, Result
from ..runtime.models import ModelBundle, load_model
from ..runtime.passes import generator_log_probs, make_batch
from ..text.segmentation import split_text
from ..text.tokenization import is_cjk


class ClassicCorrector:
    """Same `correct` / `correct_batch` API as `Corrector`."""

    def __init__(
        self,
        model: str | ModelBundle | None = None,
        device: str = "cpu",
        detection_threshold: float = 0.5,  # logit > 0
        top_k: int = 5,
        confusion_file: str | Path | None = None,
        confusion: ConfusionSet | None = None,
        max_positions: int = 128,
    ) -> None:
        self.bundle = model if isinstance(model, ModelBundle) else load_model(model, device=device)
        self.detection_threshold = detection_threshold
        self.top_k = top_k
        self.confusion = confusion or ConfusionSet.build(confusion_file)
        self.max_positions = max(1, min(max_positions, self.bundle.max_length))

    def correct(self, text: str, threshold: float | None = None) -> Result:
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, expected str")
        edits: list[Edit] = []
        for chunk in split_text(text, self.max_positions, overlap=16):
            edits.extend(self._correct_chunk(text, chunk))
        return Result.applying(text, [e for e in edits if threshold is None or e.confidence >= threshold])

    def correct_batch(
        self, texts: Sequence[str], batch_size: int | None = None, threshold: float | None = None
    ) -> list[Result]:
        return [self.correct(text, threshold=threshold) for text in texts]  # one at a time, as the original

    def _correct_chunk(self, text: str, chunk) -> list[Edit]:
        bundle, tok = self.bundle, self.bundle.tokenizer
        enc = tok.encode(text[chunk.start:chunk.end])
        offsets = [chunk.start + o for o in enc.offsets]
        ids = list(enc.ids)
        batch = make_batch([ids], bundle)
        probs = detect(bundle, batch)[0]
        edits = []
        for i, offset in enumerate(offsets):
            source = text[offset]
            if probs[i] <= self.detection_threshold or not is_cjk(source):
                continue
            if not chunk.own_start <= offset < chunk.own_end:
                continue
            # The generator at position i, [MASK]ed there (later masks see earlier corrections).
            generated = np.exp(generator_log_probs(bundle, make_batch([ids], bundle), np.array([0]), np.array([i]))[0])
            top_ids = np.argsort(-generated, kind="stable")[: self.top_k].tolist()
            if ids[i] in top_ids:
                continue  # the generator agrees with the text
            related = self.confusion.relations(source)
            for prob, token_id in zip(generated[top_ids].tolist(), top_ids, strict=True):
                target = tok.token(token_id)
                if target in related:
                    ids[i] = token_id  # later masks see this correction
                    edits.append(Edit(offset, source, target, round(prob, 4), kind_of(related[target])))
                    break
        return edits
