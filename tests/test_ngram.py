"""The character n-gram LM: counting, normalisation, storage, replacement gains, pipeline use."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from corrector.resources.ngram import BOUNDARY, FILENAME, UNKNOWN, NgramLM

LINES = [
    "少先队员应该为老人让座。",
    "我们应该为老人让座。",
    "他说应该没问题。",
    "应该让座。",
    "他坐下了。",
    "座位在这里。",
] * 3


@pytest.fixture(scope="module")
def lm() -> NgramLM:
    return NgramLM.count(LINES, order=3, min_count=1, min_char_count=1)


def test_counts_match_the_text(lm):
    index = {ch: i for i, ch in enumerate(lm.chars)}
    assert lm.chars[BOUNDARY] == "<s>" and lm.chars[UNKNOWN] == "<unk>"
    text = "".join(LINES)
    unigrams = dict(zip(lm.keys[0].tolist(), lm.counts[0].tolist(), strict=True))
    assert unigrams[index["应"]] == text.count("应") == 12
    bigram = (index["让"] << lm.bits) | index["座"]
    at = np.searchsorted(lm.keys[1], np.uint64(bigram))
    assert lm.counts[1][at] == text.count("让座") == 9
    # Every line is closed by the boundary id; counts of all orders sum to the stream length.
    assert unigrams[BOUNDARY] == len(LINES) + 1
    assert int(lm.counts[0].sum()) == len(text) + len(LINES) + 1


def test_conditional_distributions_sum_to_one(lm):
    index = {ch: i for i, ch in enumerate(lm.chars)}
    every = np.arange(len(lm.chars), dtype=np.uint64)
    for history in (["为", "老"], ["<s>", "应"], ["没", "有"], ["<unk>", "<unk>"]):
        ids = [index.get(ch, BOUNDARY if ch == "<s>" else UNKNOWN) for ch in history]
        grams = np.column_stack([np.full(len(every), i, dtype=np.uint64) for i in ids] + [every])
        assert np.exp(lm.log_prob(grams)).sum() == pytest.approx(1.0, abs=1e-9)


def test_log_prob_is_the_interpolated_formula_for_every_gram(lm):
    """Every (a, b, c) over the table, against the docstring's formula from plain count dicts:
    seen and unseen histories, the first and the last stored keys, ids past them."""
    counts = [dict(zip(keys.tolist(), c.tolist(), strict=True)) for keys, c in zip(lm.keys, lm.counts, strict=True)]
    n_ids = len(lm.chars)
    total_1 = sum(counts[0].values())

    def prob(ids: tuple[int, ...]) -> float:
        if len(ids) == 1:
            return (counts[0].get(ids[0], 0) + 1) / (total_1 + n_ids)
        lower = prob(ids[1:])
        history = 0
        for i in ids[:-1]:
            history = (history << lm.bits) | i
        stored = {key: c for key, c in counts[len(ids) - 1].items() if key >> lm.bits == history}
        if not stored:
            return lower
        key = (history << lm.bits) | ids[-1]
        return (max(stored.get(key, 0) - lm.discount, 0) + lm.discount * len(stored) * lower) / sum(stored.values())

    grams = np.array([(a, b, c) for a in range(n_ids) for b in range(n_ids) for c in range(n_ids)], dtype=np.uint64)
    expected = np.log([prob(tuple(int(i) for i in g)) for g in grams])
    np.testing.assert_allclose(lm.log_prob(grams), expected, rtol=1e-12)


def test_replacement_gain_prefers_the_known_word(lm):
    text = "少先队员因该为老人让坐"
    gains = lm.replacement_gains([(text, 4), (text, 10), (text, 0)], [["应", "让"], ["座", "了"], ["少"]])
    assert gains[0][0] > 0 and gains[0][0] > gains[0][1]  # 应该 is in the corpus, 因该 is not
    assert gains[1][0] > 0 and gains[1][0] > gains[1][1]  # 让座 at the end of a text
    assert gains[2][0] == pytest.approx(0.0)  # writing the same character changes nothing


def test_gain_is_the_difference_of_whole_text_log_probs(lm):
    """Only the n-grams around the position are scored; that must equal the full difference."""
    def total(text: str) -> float:
        ids = [BOUNDARY, BOUNDARY] + list(lm.ids(text)) + [BOUNDARY]
        grams = np.array([ids[i:i + 3] for i in range(len(ids) - 2)], dtype=np.uint64)
        return float(lm.log_prob(grams).sum())

    text = "我们因该为老人让坐吧"
    for position, char in ((2, "应"), (0, "他"), (9, "了"), (8, "座")):
        changed = text[:position] + char + text[position + 1:]
        gain = lm.replacement_gains([(text, position)], [[char]])[0][0]
        assert gain == pytest.approx(total(changed) - total(text), abs=1e-9)


def test_unigram_log_probs_rank_common_over_rare_and_unknown_as_unseen(lm):
    ids = lm.ids("应他员\u9fff")  # 12, 6 and 3 occurrences; the last is not in the table
    logp = lm.log_unigram(ids)
    total = float(lm.counts[0].sum()) + len(lm.chars)
    assert logp[0] == pytest.approx(np.log(13 / total))
    assert logp[0] > logp[1] > logp[2] > logp[3] == pytest.approx(np.log(1 / total))


def test_save_load_round_trip_with_narrow_storage(lm, tmp_path):
    path = lm.save(tmp_path)
    assert path.name == FILENAME
    loaded = NgramLM.load(tmp_path)
    assert loaded.chars == lm.chars and loaded.order == lm.order and loaded.discount == lm.discount
    for a, b in zip(loaded.keys + loaded.counts, lm.keys + lm.counts, strict=True):
        assert np.array_equal(a, b)
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        assert handle.get_tensor("keys_2").dtype == np.uint16  # small ids pack into 16 bits here


def test_keys_over_32_bits_are_stored_in_two_parts_and_old_files_still_load(tmp_path):
    wide = NgramLM.count(LINES + ["".join(chr(0x4E00 + i) for i in range(3000))], order=3, min_count=1, min_char_count=1)
    assert wide.bits * 3 > 32 and int(wide.keys[2].max()) > np.iinfo(np.uint32).max
    path = wide.save(tmp_path / "new")
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(path), framework="numpy") as handle:
        assert handle.get_tensor("keys_3").dtype == np.uint32 and handle.get_tensor("keys_3_high").dtype == np.uint8
        metadata = handle.metadata()
    # A file of the first format (keys whole, uint64) reads back the same.
    tensors = {f"keys_{k}": keys for k, keys in enumerate(wide.keys, start=1)}
    tensors |= {f"counts_{k}": counts for k, counts in enumerate(wide.counts, start=1)}
    (tmp_path / "old").mkdir()
    save_file(tensors, str(tmp_path / "old" / FILENAME), metadata={**metadata, "format": "corrector.ngram/1"})
    for loaded in (NgramLM.load(path), NgramLM.load(tmp_path / "old")):
        for a, b in zip(loaded.keys + loaded.counts, wide.keys + wide.counts, strict=True):
            assert np.array_equal(a, b)


def test_pruning_and_errors():
    pruned = NgramLM.count(LINES + ["独一无二的句子"], order=3, min_count=2, min_char_count=1)
    full = NgramLM.count(LINES + ["独一无二的句子"], order=3, min_count=1, min_char_count=1)
    assert len(pruned.keys[2]) < len(full.keys[2]) and len(pruned.keys[1]) == len(full.keys[1])
    with pytest.raises(ValueError, match="no text"):
        NgramLM.count(["", ""])
    with pytest.raises(ValueError, match="bits"):
        NgramLM.count(["".join(chr(0x4E00 + i) for i in range(300))], order=8, min_char_count=1)


def test_cli_counts_a_corpus(tmp_path):
    from corrector.pretrain.__main__ import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes("\n".join(LINES).encode() + b"\n\xff\xfe bad line\n\n")
    assert main(["ngram", "--corpus", str(corpus), "--output", str(tmp_path / "out"), "--min-char-count", "1"]) == 0
    assert NgramLM.load(tmp_path / "out").order == 3


def test_cli_counts_training_pairs_correct_sides_without_the_dev_split(tmp_path, capsys):
    """--pairs adds the correct side of CSC pairs (weighted), never a sentence of --exclude's pairs
    nor one that shares an 8-character run with them."""
    from corrector.pretrain.__main__ import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("今天天气很好。\n", encoding="utf-8")
    train = tmp_path / "train.tsv"
    train.write_text("1\t他因该来。\t他应该来。\n"
                     "0\t我们明天一起去公园散步吧。\t我们明天一起去公园散步吧。\n"  # shares 明天一起去公园散步 with dev
                     "1\t请让坐。\t请让座。\n"
                     "0\t他应该来。\t他应该来。\n", encoding="utf-8")  # the same correct sentence again
    dev = tmp_path / "dev.tsv"
    dev.write_text("1\t我明天一起去公园散步。\t我明天一起去公园散步。\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["ngram", "--corpus", str(corpus), "--output", str(out), "--min-char-count", "1", "--min-count", "1"]
    assert main([*args, "--pairs", str(train), "--exclude", str(dev), "--pairs-weight", "2"]) == 0
    assert "2 sentences of pairs x 2" in capsys.readouterr().out
    lm = NgramLM.load(out)
    assert "座" in lm.chars and "园" not in lm.chars
    bigrams = dict(zip(lm.keys[1].tolist(), lm.counts[1].tolist(), strict=True))
    assert bigrams[int(lm._pack(lm.ids("应该")[None, :])[0])] == 2  # 他应该来。 counted once, twice over
    with pytest.raises(SystemExit):  # nothing left to count from the pairs: an error, not a silent no-op
        main([*args, "--pairs", str(dev), "--exclude", str(dev)])
    with pytest.raises(SystemExit):
        main([*args, "--pairs", str(train), "--pairs-weight", "0"])
    with pytest.raises(SystemExit):  # --exclude without --pairs would silently exclude nothing
        main([*args, "--exclude", str(dev)])


def test_pipeline_uses_the_lm_to_rank_confusable_candidates(tiny_model_dir, tmp_path):
    """With a random generator, the n-gram LM decides: 因该 -> 应该, 让坐 -> 让座."""
    from corrector import Corrector

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    NgramLM.count(LINES * 5, order=3, min_count=1, min_char_count=1).save(model)
    scorer = {"weights": {"bias": -4.0, "lm_gain": 1.0, "same_pinyin": 1.0}, "threshold": 0.5, "detection_threshold": 0.0}
    corrector = Corrector(str(model), scorer=scorer)
    assert corrector.bundle.ngram is not None
    result = corrector.correct("少先队员因该为老人让坐")
    assert result.target == "少先队员应该为老人让座"
    assert {(e.position, e.source, e.target) for e in result.edits} == {(4, "因", "应"), (10, "坐", "座")}
    scored = corrector.score_candidates(["少先队员因该为老人让坐"])
    best = {c.position: c for c in scored if c.best}
    assert best[4].target == "应" and best[4].features["lm_gain"] > 0
    # How common the written character and the candidate are, from the LM's unigram counts.
    lm = corrector.bundle.ngram
    for c in scored:
        assert c.features["source_unigram"] == pytest.approx(float(lm.log_unigram(lm.ids(c.source))[0]), abs=1e-5)
        assert c.features["target_unigram"] == pytest.approx(float(lm.log_unigram(lm.ids(c.target))[0]), abs=1e-5)
    assert best[10].features["target_unigram"] > best[10].features["source_unigram"]  # 座 is written 12 times, 坐 3
