"""Error pairs counted from training data: counts, features, storage, CLI, and use in the pipeline."""

from __future__ import annotations

import math
import shutil

import pytest

from corrector.resources.error_pairs import FILENAME, ErrorPairs

PAIRS = [
    ("他因该来。", "他应该来。"),
    ("我因该去。", "我应该去。"),
    ("因为下雨。", "因为下雨。"),
    ("请让坐。", "请让座。"),
    ("长度不同", "长度不同了"),  # skipped: not the same length
    ("A因B", "A应B"),
]


@pytest.fixture()
def table() -> ErrorPairs:
    return ErrorPairs.count(PAIRS)


def test_counts_corrections_and_characters(table):
    assert table.sentences == 5
    assert table.targets("因") == {"应": 3}
    assert table.targets("坐") == {"座": 1}
    assert table.targets("下") == {}
    assert table.char_counts["因"] == 4  # three mistakes and one correct 因为
    assert "A" not in table.char_counts  # only CJK characters count
    assert len(table) == 2


def test_features_rank_frequent_mistakes_first(table):
    count, rate = table.features("因", "应")
    assert count == pytest.approx(math.log1p(3))
    assert rate == pytest.approx(math.log((3 + 0.1) / (4 + 1)))
    unseen_count, unseen_rate = table.features("因", "音")
    assert unseen_count == 0 and unseen_rate < rate
    # A never-seen source character has no evidence either way: a milder rate than a seen one
    # that was never mis-written as the target.
    assert table.features("鑫", "金")[1] > unseen_rate


def test_save_load_round_trip(table, tmp_path):
    path = tmp_path / FILENAME
    table.save(path)
    loaded = ErrorPairs.load(path)
    assert loaded.pair_counts == table.pair_counts and loaded.char_counts == table.char_counts
    assert loaded.features("因", "应") == table.features("因", "应")
    path.write_text('{"version": 99}', encoding="utf-8")
    with pytest.raises(ValueError, match="version"):
        ErrorPairs.load(path)


def test_cli_excludes_the_dev_split_and_counts_duplicates_once(tmp_path):
    from corrector.finetune.__main__ import main

    train = tmp_path / "train.tsv"
    train.write_text("".join(f"1\t{s}\t{t}\n" for s, t in PAIRS[:4]), encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("1\t请让坐。\t请让座。\n", encoding="utf-8")
    out = tmp_path / "model"
    assert main(["pairs", "--train", str(train), str(train), "--exclude", str(dev), "--output", str(out)]) == 0
    loaded = ErrorPairs.load(out / FILENAME)
    assert loaded.targets("因") == {"应": 2}  # the file named twice is counted once
    assert loaded.targets("坐") == {}  # the dev pair is left out
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    assert main(["pairs", "--train", str(empty), "--output", str(out)]) == 2


def test_cli_leaves_out_training_sentences_that_overlap_the_dev_split(tmp_path, capsys):
    """The same correct sentence with another error written into it is the dev sentence's answer:
    left out with --shared-span 8, kept by default (the exact dev pairs only)."""
    from corrector.finetune.__main__ import main

    train = tmp_path / "train.tsv"
    train.write_text("1\t我们明天一起去公园三步吧。\t我们明天一起去公园散步吧。\n"  # shares 明天一起去公园散步吧 with dev
                     "1\t他因该来。\t他应该来。\n", encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("1\t我门明天一起去公园散步吧。\t我们明天一起去公园散步吧。\n", encoding="utf-8")
    out = tmp_path / "model"
    assert main(["pairs", "--train", str(train), "--exclude", str(dev), "--shared-span", "8", "--output", str(out)]) == 0
    assert "1 overlapping them" in capsys.readouterr().out
    loaded = ErrorPairs.load(out / FILENAME)
    assert loaded.targets("三") == {} and loaded.targets("因") == {"应": 1}
    assert main(["pairs", "--train", str(train), "--exclude", str(dev), "--output", str(out)]) == 0
    assert ErrorPairs.load(out / FILENAME).targets("三") == {"散": 1}


def test_learned_pairs_become_candidates_and_features(tiny_model_dir, tmp_path):
    """A learned pair with no sound/shape relation is proposed and scored by its count."""
    from corrector import Corrector
    from corrector.resources.confusion import LEARNED_PAIR

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    # 张 -> 李 is in no confusion set (unrelated sound and shape); learned, it is a candidate.
    ErrorPairs.count([("张三", "李三")] * 3 + [("张开", "张开")]).save(model / FILENAME)
    scorer = {"weights": {"bias": -3.0, "pair_log_count": 3.0}, "threshold": 0.5, "detection_threshold": 0.0}
    corrector = Corrector(str(model), scorer=scorer)
    assert corrector.bundle.error_pairs is not None
    ids, bits, counts = corrector.vocab_confusion("张")
    tok = corrector.bundle.tokenizer
    learned = {tok.token(i): c for i, b, c in zip(ids.tolist(), bits.tolist(), counts.tolist(), strict=True)
               if b & LEARNED_PAIR}
    assert learned == {"李": 3}
    scored = [c for c in corrector.score_candidates(["张三在上海工作"]) if c.position == 0 and c.target == "李"]
    assert scored and scored[0].features["pair_log_count"] == pytest.approx(math.log1p(3))
    result = corrector.correct("张三在上海工作")
    assert result.target.startswith("李三")


def test_context_counts_say_where_a_character_is_a_mistake(table):
    # 因 was corrected to 应 three times, twice before 该; 因为 occurs but was never wrong.
    assert table.context_counts["R因该"] == {"应": 2}
    assert table.context_counts["L他因"] == {"应": 1}
    assert table.bigram_counts["因该"] == 2
    assert "R因为" not in table.context_counts
    assert table.context_count("你因该走", 1, "应") == (2, 2)  # the right bigram: rate 2/3 beats 他因's 1/2
    assert table.context_count("因为下雨", 0, "应") == (0, 0)
    assert table.context_count("你因该走", 1, "音") == (0, 0)
    assert table.context_flag("你因该走", 1, min_count=2, min_rate=0.5)
    assert not table.context_flag("你因该走", 1, min_count=3, min_rate=0.5)
    assert not table.context_flag("因为下雨", 0, min_count=1, min_rate=0.0)
    assert not table.context_flag("A因B", 1, min_count=1, min_rate=0.0)  # no Chinese neighbour: no context


def test_context_counts_round_trip_and_version_1_files_still_load(table, tmp_path):
    import json

    path = tmp_path / FILENAME
    table.save(path)
    loaded = ErrorPairs.load(path)
    assert loaded.context_counts == table.context_counts and loaded.bigram_counts == table.bigram_counts
    assert loaded.context_flag("你因该走", 1, 2, 0.5)
    data = json.loads(path.read_text(encoding="utf-8"))
    old = {key: data[key] for key in ("sentences", "sources", "pair_counts", "char_counts")} | {"version": 1}
    path.write_text(json.dumps(old, ensure_ascii=False), encoding="utf-8")
    loaded = ErrorPairs.load(path)
    assert loaded.targets("因") == {"应": 3} and loaded.context_counts == {}
    assert loaded.context_count("你因该走", 1, "应") == (0, 0)


def test_context_flags_examine_what_the_detector_leaves(tiny_model_dir, tmp_path):
    """With a context flag rate, a character whose written bigram was a mistake in training is
    examined even where the discriminator flags nothing, and scored by its context count."""
    from corrector import Corrector

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    ErrorPairs.count([("他因该来", "他应该来")] * 3 + [("因为下雨", "因为下雨")]).save(model / FILENAME)
    scorer = {"weights": {"bias": -3.0, "ctx_log_count": 3.0}, "threshold": 0.5, "detection_threshold": 1.0}
    assert Corrector(str(model), scorer=scorer).correct("我因该去").target == "我因该去"  # nothing examined
    flagged = Corrector(str(model), scorer={**scorer, "context_flag_rate": 0.5})
    result = flagged.correct("我因该去")
    assert result.target == "我应该去"
    assert [(e.position, e.source, e.target) for e in result.edits] == [(1, "因", "应")]
    scored = {c.target: c.features for c in flagged.score_candidates(["我因该去"]) if c.position == 1}
    assert scored["应"]["ctx_log_count"] == pytest.approx(math.log1p(3))
    assert all(f["ctx_log_count"] == 0 for target, f in scored.items() if target != "应")
    assert flagged.correct("因为下雨").target == "因为下雨"  # 因为 was never a mistake: not examined
    assert Corrector(str(model), scorer={**scorer, "context_flag_rate": 0.9}).correct("我因该去").target == "我因该去"


def test_flag_rules_skip_characters_the_discriminator_is_sure_of(tiny_model_dir, tmp_path, monkeypatch):
    """In correction the generator, context and particle rules read only characters with
    P(replaced) of at least RULE_FLAG_MIN_PROB: above every probability, the context flag of 因该
    is not raised. Calibration's candidates still hold what the rules flag below it."""
    from corrector import Corrector, detection

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    ErrorPairs.count([("他因该来", "他应该来")] * 3).save(model / FILENAME)
    scorer = {"weights": {"bias": -3.0, "ctx_log_count": 3.0}, "threshold": 0.5, "detection_threshold": 1.0,
              "context_flag_rate": 0.5}
    assert Corrector(str(model), scorer=scorer).correct("我因该去").target == "我应该去"
    monkeypatch.setattr(detection, "RULE_FLAG_MIN_PROB", 1.01)
    corrector = Corrector(str(model), scorer=scorer)
    assert corrector.correct("我因该去").target == "我因该去"
    assert "应" in {c.target for c in corrector.score_candidates(["我因该去"]) if c.position == 1}


def test_context_count_array_matches_one_at_a_time(table):
    sites = [("你因该走", 1), ("因为下雨", 0), ("他因该来", 1)]
    site_of, targets = [0, 0, 1, 2, 2], ["应", "音", "应", "应", "英"]
    expected = [table.context_count(*sites[n], target) for n, target in zip(site_of, targets, strict=True)]
    assert table.context_count_array(sites, site_of, targets).tolist() == [list(map(float, e)) for e in expected]
    assert table.context_count_array(sites, [], []).shape == (0, 2)


def test_a_second_load_reads_the_parsed_table_from_the_user_cache(table, tmp_path, monkeypatch):
    monkeypatch.setenv("ELECTRA_CSC_CACHE", str(tmp_path / "cache"))
    path = tmp_path / FILENAME
    table.save(path)
    first = ErrorPairs.load(path)
    entries = list((tmp_path / "cache").glob("error-pairs-*.bin"))
    assert len(entries) == 1
    second = ErrorPairs.load(path)
    for loaded in (first, second):
        assert (loaded.pair_counts, loaded.char_counts, loaded.context_counts, loaded.bigram_counts) == (
            table.pair_counts, table.char_counts, table.context_counts, table.bigram_counts)
        assert loaded.context_flag("他因该来", 1, 1, 0.1) == table.context_flag("他因该来", 1, 1, 0.1)
    entries[0].write_bytes(b"not a cache entry")  # corrupt: rebuilt from the file
    assert ErrorPairs.load(path).pair_counts == table.pair_counts
    ErrorPairs.count([("张三", "李三")]).save(path)  # another table: another key, never the stale entry
    assert ErrorPairs.load(path).pair_counts == {"张": {"李": 1}}
