"""The generator read alone as a BERT-CSC corrector (evaluate --system generator)."""

from __future__ import annotations

from pathlib import Path

import torch

from corrector.baselines.generator_only import GeneratorCorrector
from corrector.runtime.models import load_model
from corrector.text.tokenization import is_cjk

# Longer than one 128-position chunk, with ASCII, digits and spaces that must stay as they are.
LONG = "我们在2024年去了北京 看到很多人。" * 12 + "Tom说：今天天气很好！"


def test_generator_top_character_replaces_every_other_cjk_character(tiny_model_dir: Path):
    bundle = load_model(str(tiny_model_dir))
    favourite_id = bundle.tokenizer.cjk_ids[0]
    favourite = bundle.tokenizer.token(favourite_id)
    with torch.no_grad():  # make one character the generator's top choice everywhere
        bundle.generator.generator_lm_head.bias[favourite_id] = 1e4
    result = GeneratorCorrector(bundle).correct(LONG)
    expected = "".join(favourite if is_cjk(ch) else ch for ch in LONG)
    assert result.target == expected
    assert [e.position for e in result.edits] == [i for i, ch in enumerate(LONG) if is_cjk(ch) and ch != favourite]
    assert all(e.source == LONG[e.position] and e.target == favourite and e.confidence > 0.99 for e in result.edits)


def test_threshold_batches_and_chunks_agree(tiny_model_dir: Path):
    system = GeneratorCorrector(str(tiny_model_dir), max_positions=40)  # several chunks per text
    texts = [LONG, "今天天气很好。", "", "ABC 123"]
    batched = system.correct_batch(texts, batch_size=3, threshold=0.0)
    one_by_one = [system.correct(text, threshold=0.0) for text in texts]
    assert [r.to_dict() for r in batched] == [r.to_dict() for r in one_by_one]
    for text, result in zip(texts, batched, strict=True):
        assert len(result.target) == len(text)
        assert all(is_cjk(e.source) and text[e.position] == e.source for e in result.edits)
        assert len({e.position for e in result.edits}) == len(result.edits)  # each character once
    assert batched[2].target == "" and batched[3].target == "ABC 123"
    assert all(r.target == t for r, t in zip(system.correct_batch(texts, threshold=1.01), texts, strict=True))
