"""Real-text work: the error model and new synthetic kinds, the broad dev, the operating point,
the LTP-tiny warm start and the evaluator's macro average."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from corrector.finetune.broad import realistic_particle_share
from corrector.finetune.synth import (
    KINDS,
    ErrorModel,
    ErrorSynthesizer,
    SynthConfig,
    describe_pairs,
    fuzzy_pinyin,
    write_pairs,
)

SENTENCES = ["他高兴地说我们的作业做得很好。", "少先队员应该为老人让座。", "今天天气很好，我们一起去公园散步。"]
REAL = [("他门的作业做的很好。", "他们的作业做得很好。"), ("少先队员因该为老人让坐。", "少先队员应该为老人让座。"),
        ("我们一起去公圆散步。", "我们一起去公园散步。"), ("今天天气很好。", "今天天气很好。")]


def weights(**chosen: float) -> tuple[float, ...]:
    return tuple(chosen.get(kind, 0.0) for kind in KINDS)


def test_error_model_counts_what_writers_replaced_and_how_many_per_sentence():
    model = ErrorModel.count(REAL)
    assert model.substitutions["们"] == {"门": 1} and model.substitutions["得"] == {"的": 1}
    assert model.errors_per_sentence == {2: 2, 1: 1}
    counts = model.error_counts(error_free=0.4)
    assert len(counts) == 5 and counts[0] == 0.4 and abs(sum(counts) - 1) < 1e-9
    assert counts[2] == pytest.approx(0.6 * 2 / 3)


def test_real_pair_and_particle_kinds_write_what_they_promise(confusion):
    model = ErrorModel.count(REAL * 5)
    real = ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 1), kind_weights=weights(real_pair=1.0)),
                            error_model=model)
    source = real.corrupt("他们的作业")  # only 们 has a real substitute here; the rest fall back to same pinyin
    assert real.stats.substitutions["real_pair"] + real.stats.substitutions["same_pinyin"] == 1
    if real.stats.substitutions["real_pair"]:
        assert source == "他门的作业"
    particle = ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 1), kind_weights=weights(particle=1.0)))
    for sentence in SENTENCES[:1] * 20:
        written = particle.corrupt(sentence)
        changed = [(a, b) for a, b in zip(written, sentence, strict=True) if a != b]
        assert len(changed) == 1 and changed[0][0] in "的地得" and changed[0][1] in "的地得"
    assert particle.stats.substitutions["particle"] == 20
    with pytest.raises(ValueError, match="error model"):
        ErrorSynthesizer(confusion, config=SynthConfig(kind_weights=weights(real_pair=1.0)))


def test_particle_errors_go_the_real_way(confusion):
    """A sentence needing 地 and 得 beside two 的: the error is mostly 的 written for 地/得, as real
    writers make it, not 地/得 written for 的."""
    particle = ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 1), kind_weights=weights(particle=1.0)))
    needed = {"的": 0, "地得": 0}
    for _ in range(400):
        written = particle.corrupt(SENTENCES[0])
        (wrong, right), = [(a, b) for a, b in zip(written, SENTENCES[0], strict=True) if a != b]
        needed["的" if right == "的" else "地得"] += 1
    assert needed["地得"] > 8 * needed["的"] > 0


def test_dde_part_keeps_the_real_share_of_needed_de():
    pairs = [("他高兴的说", "他高兴地说"), ("我们地作业", "我们的作业"), ("我们得作业", "我们的作业"),
             ("跑的很快", "跑得很快"), ("他得书", "他的书"), ("写的好", "写得好")]
    kept = realistic_particle_share(pairs)
    assert kept == [pairs[0], pairs[1], pairs[3], pairs[5]]  # 3 needing 地/得 keep round(3 * 189 / 515) = 1 的
    assert realistic_particle_share(pairs[:1]) == pairs[:1]


def test_fuzzy_pinyin_merges_what_input_methods_forgive(confusion):
    assert fuzzy_pinyin("shang") == "san" and fuzzy_pinyin("ning") == "lin" and fuzzy_pinyin("zhi") == "zi"
    lexicon = {"期间": 100, "其间": 50, "时间": 80, "四件": 60}
    exact = ErrorSynthesizer(confusion, config=SynthConfig(kind_weights=weights(homophone_word=1.0)), lexicon=lexicon)
    fuzzy = ErrorSynthesizer(confusion, config=SynthConfig(kind_weights=weights(homophone_word=1.0), fuzzy_pinyin=True),
                             lexicon=lexicon)
    assert {w for w, _ in exact._homophone_index()[("shi", "jian")]} == {"时间"}
    assert {w for w, _ in fuzzy._homophone_index()[("si", "jian")]} == {"时间", "四件"}  # shi ~ si


def test_old_kind_weights_make_the_same_pairs_as_before(confusion):
    """The two kinds added at the end draw nothing when their weight is 0: the first release's
    synthetic pairs are reproduced draw for draw."""
    config = SynthConfig(seed=3)
    assert config.kind_weights[len(KINDS) - 2:] == (0.0, 0.0)
    first = [ErrorSynthesizer(confusion, config=SynthConfig(seed=3)).corrupt(s) for s in SENTENCES * 10]
    again = [ErrorSynthesizer(confusion, config=SynthConfig(seed=3)).corrupt(s) for s in SENTENCES * 10]
    assert first == again


def test_describe_pairs_sorts_errors_by_kind_and_counts_word_level_ones(confusion):
    row = describe_pairs(REAL, confusion)
    assert row["sentences"] == 4 and row["error_free"] == 0.25
    assert row["errors_2"] == pytest.approx(2 / 3) and row["errors_1"] == pytest.approx(1 / 3)
    assert row["kind_particle"] == pytest.approx(1 / 5)  # 的 for 得, of five wrong characters
    assert row["word_level"] == 0.0
    assert describe_pairs([("其间很好", "期间很好")], confusion)["word_level"] == 0.0
    assert describe_pairs([("其健康", "期间康")], confusion)["word_level"] == 1.0


def fake_shared(root: Path) -> Path:
    """A shared-data folder in miniature: every CSC file broad reads, a corpus per clean domain and
    corpus_domains' files (xz, as shipped) for each domain group, and one wiki file no part reads."""
    import lzma

    from corrector.finetune import broad

    pairs = [(f"第{i}个句子里有错字因该改正。", f"第{i}个句子里有错字应该改正。") for i in range(60)]
    for _, files, _ in broad.REAL_PARTS:
        for name in files:
            (root / "csc" / name).parent.mkdir(parents=True, exist_ok=True)
            write_pairs(root / "csc" / name, pairs + [(f"没有错的第{i}句话。", f"没有错的第{i}句话。") for i in range(20)])
    (root / "corpus").mkdir()
    for _, files, _ in broad.CLEAN_DOMAINS:
        for name in files:
            lines = [f"这是{name[:4]}领域的第{i}句干净的话，他高兴地说得很好。" for i in range(40)]
            (root / "corpus" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "corpus_domains").mkdir()
    for k, prefix in enumerate(DOMAIN_PREFIXES):
        lines = [domain_line(k, i) for i in range(30)]
        with lzma.open(root / "corpus_domains" / f"{prefix}text.txt.xz", "wt", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    return root


# The fake corpus_domains' files: one per prefix of the domain groups, and a wiki file.
DOMAIN_PREFIXES = ("fiction_", "games_", "social_", "law_", "docs_", "edu_", "medical_", "cars_", "wiki_")


def domain_line(k: int, i: int) -> str:
    """Line `i` of fake corpus_domains file `k`: two sentences, each naming its file."""
    return f"第{k}号文件的第{i}行是一句话，我们认真地写好了它。又一句第{k}号文件的话在第{i}行里面。"


def small_quotas(monkeypatch) -> None:
    from corrector.finetune import broad

    monkeypatch.setattr(broad, "CLEAN_DOMAINS", tuple((n, f, 10) for n, f, _ in broad.CLEAN_DOMAINS))
    monkeypatch.setattr(broad, "GENERATED_PER_DOMAIN", 5)
    monkeypatch.setattr(broad, "DOMAIN_CLEAN", 6)
    monkeypatch.setattr(broad, "DOMAIN_SYNTH", 4)


def test_broad_dev_holds_out_every_part_from_training_and_the_corpus(tmp_path: Path, monkeypatch, confusion):
    from corrector.finetune import broad

    small_quotas(monkeypatch)
    shared = fake_shared(tmp_path / "shared")
    synthesizer = ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 0, 1)))
    # A clean sentence read to hold a real error (the encyclopedia's file is the only "wiki" one).
    typo = next(s for s, _ in broad.build(shared, synthesizer).parts["clean"] if "wiki" in s)
    monkeypatch.setattr(broad, "CLEAN_WITH_ERRORS", frozenset({broad.sentence_digest(typo)}))
    dev = broad.build(shared, synthesizer)
    domains = [name for name, _ in broad.DOMAIN_GROUPS]
    assert set(dev.parts) == {"sighan", "ecspell", "wang", "mcsc", "faspell", "dde", "multi", "clean",
                              *(f"synth_{d}" for d in domains), *(f"clean_{d}" for d in domains)}
    assert len(dev.parts["clean"]) == 10 * len(broad.CLEAN_DOMAINS) - 1
    assert (typo, typo) not in dev.parts["clean"] and typo in dev.held_sentences  # left out, still held out
    assert all(s == t for s, t in dev.parts["clean"])
    assert all(s != t for s, t in dev.parts["dde"] + dev.parts["multi"] + dev.parts["synth_law"])
    assert len(dev.parts["sighan"]) == 3 * int(80 * 0.08)  # the release's 8 % of each SIGHAN file
    dev_targets = {t for pairs in dev.parts.values() for _, t in pairs}
    for stem, pairs in dev.train.items():
        assert pairs and not {t for _, t in pairs} & dev_targets, stem
    out = tmp_path / "broad"
    summary = broad.write(dev, out)
    assert summary["parts"]["clean"]["with_errors"] == 0 and (out / "dev.tsv").exists()
    kept, dropped = broad.write_corpus_without(shared / "corpus", out / "corpus", dev.held_sentences)
    assert dropped >= len(dev.held_sentences) and kept > 0
    corpus_text = "".join(p.read_text(encoding="utf-8") for p in (out / "corpus").glob("*.txt"))
    assert not any(sentence in corpus_text for sentence in dev.held_sentences)
    from corrector.finetune.operating import read_clean_parts, read_parts

    parts = read_parts(out)
    assert parts["clean"] == [str(out / "dev" / "clean.tsv")]
    assert parts["clean_law"] == [str(out / "dev" / "clean_law.tsv")] and "synth_law" in parts
    assert read_clean_parts(out) == {"clean", *(f"clean_{d}" for d in domains)}  # never in the macro


def test_domain_parts_come_from_corpus_domains_and_are_held_out_of_its_copy(tmp_path: Path, monkeypatch, confusion):
    """Per domain group a clean and a synthetic part of held-out corpus_domains sentences, their
    kind and domain in parts.json; the copy of corpus_domains (plain text) lacks every line
    holding a dev sentence anywhere, and the parts cut before them are as without them."""
    from corrector.finetune import broad

    small_quotas(monkeypatch)
    shared = fake_shared(tmp_path / "shared")
    law = DOMAIN_PREFIXES.index("law_")
    # The first sentences of 8 law lines, held by corpus lines inside longer sentences: never drawn.
    in_corpus = [domain_line(law, i).split("。")[0] + "。" for i in range(8)]
    with open(shared / "corpus" / "news_rmrb_199801.txt", "a", encoding="utf-8") as handle:
        handle.writelines(f"人民日报说{sentence}\n" for sentence in in_corpus)
    synthesizer = ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 0, 1), seed=1))
    dev = broad.build(shared, synthesizer)
    for name, prefixes in broad.DOMAIN_GROUPS:
        clean, synth = dev.parts[f"clean_{name}"], dev.parts[f"synth_{name}"]
        assert len(clean) == 6 and len(synth) == 4 and all(s == t for s, t in clean) and all(s != t for s, t in synth)
        assert dev.markers[f"synth_{name}"] == {"kind": "errors", "domain": name}
        assert dev.markers[f"clean_{name}"] == {"kind": "clean", "domain": name}
        files = [f"第{DOMAIN_PREFIXES.index(p)}号文件" for p in prefixes]
        assert all(any(f in t for f in files) for _, t in clean + synth), name
        assert not {t for _, t in clean} & {t for _, t in synth}
    drawn = {t for part, pairs in dev.parts.items() if "_" in part for _, t in pairs}
    assert drawn <= dev.held_sentences and not drawn & set(in_corpus)
    assert not any(f"第{DOMAIN_PREFIXES.index('wiki_')}号文件" in t for t in drawn)

    monkeypatch.setattr(broad, "DOMAIN_GROUPS", ())  # the parts cut before the domains' are the same without them
    before = broad.build(shared, ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 0, 1), seed=1)))
    assert before.parts == {part: pairs for part, pairs in dev.parts.items() if part in before.parts}

    out = tmp_path / "broad"
    summary = broad.write(dev, out)
    assert summary["parts"]["synth_games"]["kind"] == "errors" and summary["parts"]["sighan"]["domain"] is None
    assert summary["clean_parts"]["clean_games"] == {"pairs": 6, "with_errors": 0, "file": "dev/clean_games.tsv",
                                                    "kind": "clean", "domain": "games"}
    assert summary["parts"]["clean"]["kind"] == "clean" and "clean" not in summary["clean_parts"]
    lines = (out / "dev.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == sum(len(pairs) for pairs in dev.parts.values())
    kept, dropped = broad.write_domains_without(shared / "corpus_domains", out / "corpus_domains", dev.held_sentences)
    copies = sorted(p.name for p in (out / "corpus_domains").iterdir())
    assert copies == sorted(p.name.removesuffix(".xz") for p in (shared / "corpus_domains").iterdir())
    text = "".join(p.read_text(encoding="utf-8") for p in (out / "corpus_domains").iterdir())
    assert not any(sentence in text for sentence in dev.held_sentences)
    assert dropped >= len(drawn) // 2 and kept + dropped == 30 * 9  # two dev sentences may share a line


def test_a_clean_part_is_topped_up_for_the_sentences_read_to_hold_an_error(tmp_path: Path, monkeypatch, confusion):
    """A domain's clean sentence left out for holding a real error is replaced by one the synth part
    did not read: the part keeps DOMAIN_CLEAN sentences (3 false alarms stay 1 %), the synth part
    and the other domains are as they were, and the sentence left out is still held out."""
    from corrector.finetune import broad

    small_quotas(monkeypatch)
    shared = fake_shared(tmp_path / "shared")

    def build() -> broad.BroadDev:
        return broad.build(shared, ErrorSynthesizer(confusion, config=SynthConfig(error_counts=(0, 0, 1), seed=1)))

    before = build()
    typos = [before.parts["clean_games"][k][0] for k in (0, 3)]
    monkeypatch.setattr(broad, "CLEAN_WITH_ERRORS", frozenset(map(broad.sentence_digest, typos)))
    after = build()
    games = [s for s, _ in after.parts["clean_games"]]
    assert len(games) == broad.DOMAIN_CLEAN and not set(typos) & set(games)
    assert games[:4] == [s for s, _ in before.parts["clean_games"] if s not in typos]
    new = set(games) - {s for s, _ in before.parts["clean_games"]}
    assert len(new) == 2 and not new & {t for pairs in before.parts.values() for _, t in pairs}
    assert set(typos) | new <= after.held_sentences
    assert after.parts["synth_games"] == before.parts["synth_games"]
    assert {p: v for p, v in after.parts.items() if p != "clean_games"} == \
        {p: v for p, v in before.parts.items() if p != "clean_games"}


def test_first_ranked_is_a_seeded_sample_of_distinct_sentences_in_any_order():
    from corrector.finetune.broad import first_ranked

    sentences = [f"第{i}句" for i in range(200)]
    sample = first_ranked(sentences + sentences[:50], 20, seed=1)  # a repeated sentence counts once
    assert len(sample) == len(set(sample)) == 20
    assert sample == first_ranked(sentences[::-1], 20, seed=1) != first_ranked(sentences, 20, seed=2)
    assert first_ranked(sample[::-1], 20, seed=1) == sample  # in rank order, whatever came first
    assert first_ranked(sentences, 200, seed=1)[:20] == sample


def test_sentence_finder_finds_a_sentence_inside_a_longer_one():
    from corrector.finetune.broad import SentenceFinder

    finder = SentenceFinder(["可以责令停业整顿，降低资质等级；", "短句。"])
    assert finder.held_in("处罚款，可以责令停业整顿，降低资质等级；情节严重的") == ["可以责令停业整顿，降低资质等级；"]
    assert finder.held_in("他说短句。") == ["短句。"] and finder.held_in("可以责令停业整顿。") == []


def test_domain_groups_cover_the_shared_corpus_domains():
    """Every corpus_domains file is in a domain group, or is one of the wiki and news files the
    groups leave out (broad.DOMAIN_GROUPS says why)."""
    from conftest import shared_path

    from corrector.finetune.broad import DOMAIN_GROUPS

    prefixes = tuple(p for _, group in DOMAIN_GROUPS for p in group)
    names = [p.name for p in shared_path("corpus_domains").iterdir()]
    assert names and all(n.startswith(prefixes) or n.startswith(("wiki_", "news_")) for n in names)
    assert all(any(n.startswith(group) for n in names) for _, group in DOMAIN_GROUPS)


class Point:
    def __init__(self, threshold: float, f1: float, fpr: float = 0.0) -> None:
        self.threshold, self.f1, self.fpr = threshold, f1, fpr

    def value(self, path: str) -> float:
        return self.fpr if path == "fpr" else self.f1


def test_operating_point_is_the_best_macro_f1_under_the_clean_ceiling():
    from corrector.finetune.operating import choose, choose_all

    curves = {"a": [Point(0.1, 0.9), Point(0.5, 0.8), Point(0.9, 0.2)],
              "b": [Point(0.1, 0.5), Point(0.5, 0.6), Point(0.9, 0.1)],
              "clean": [Point(0.1, 0.0, 0.05), Point(0.5, 0.0, 0.004), Point(0.9, 0.0, 0.0)]}
    point = choose(curves, max_clean_fpr=0.005)
    assert point.threshold == 0.5 and point.macro_f1 == pytest.approx(0.7) and point.clean_fpr == 0.004
    assert choose(curves, max_clean_fpr=0.1).threshold == 0.1  # without the ceiling the best F1 wins
    assert choose({**curves, "clean": [Point(t, 0, 0.5) for t in (0.1, 0.5, 0.9)]}).threshold == 0.9  # fewest changes
    assert [p.threshold for p in choose_all(curves)] == [0.1, 0.5, 0.9]
    with pytest.raises(ValueError, match="at least one part"):
        choose({"clean": curves["clean"]})


def test_calibrate_and_heldout_choose_by_the_parts(tiny_model_dir: Path, tmp_path: Path, capsys):
    import shutil

    from test_finetune import toy_pairs

    from corrector.finetune.__main__ import main
    from corrector.finetune.calibrate import IDIOM_THRESHOLD_FACTOR, SECOND_PASS_THRESHOLD_FACTOR

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    out = tmp_path / "broad"
    (out / "dev").mkdir(parents=True)
    clean = ["今天天气很好，我们去散步。", "北京是中国的首都。", "他说应该没问题。"]
    parts = {"errors": toy_pairs()[:10], "clean": [(t, t) for t in clean]}
    for name, pairs in parts.items():
        write_pairs(out / "dev" / f"{name}.tsv", pairs)
    write_pairs(out / "dev.tsv", [p for pairs in parts.values() for p in pairs])
    (out / "parts.json").write_text(json.dumps({"parts": {n: {"file": f"dev/{n}.tsv"} for n in parts}}), encoding="utf-8")
    base = ["--model", str(model), "--dev", str(out / "dev.tsv"), "--broad", str(out)]
    assert main(["calibrate", *base, "--detection-grid", "0.5", "--margin-grid", "off", "--hidden", "4",
                 "--members", "1", "--max-clean-fpr", "0.01"]) == 0
    scorer = json.loads((model / "scorer.json").read_text(encoding="utf-8"))
    operating = scorer["calibration"]["operating_point"]
    assert operating["max_clean_fpr"] == 0.01 and set(operating["part_f1"]) == {"errors"}
    assert scorer["threshold"] == operating["curve"][[c[0] for c in operating["curve"]].index(scorer["threshold"])][0]
    assert (scorer["idiom_threshold_factor"], scorer["second_pass_threshold_factor"]) == (
        IDIOM_THRESHOLD_FACTOR, SECOND_PASS_THRESHOLD_FACTOR)  # the release's settings, written by calibrate
    assert "dev parts: errors 1" in capsys.readouterr().out
    report = tmp_path / "ho.json"
    assert main(["heldout", *base, "--splits", "1", "--members", "1", "--fit-detection-threshold", "0",
                 "--json", str(report)]) == 0
    assert "macro F1 of the broad dev's parts over 2 halves" in capsys.readouterr().out
    macro = json.loads(report.read_text(encoding="utf-8"))["macro"]
    assert set(macro) == {"one_pass", "two_passes", "clean_fpr_one_pass", "clean_fpr_two_passes"}


def fake_ltp(root: Path, vocab: list[str]) -> Path:
    """An LTP-tiny-shaped folder: `backbone.*` ELECTRA weights over its own vocabulary, a task head."""
    from transformers import ElectraConfig, ElectraModel

    config = ElectraConfig(vocab_size=len(vocab), embedding_size=8, hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=1, intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    state = {f"backbone.{k}": v for k, v in ElectraModel(config).state_dict().items()}
    state["task_heads.cws.classifier.0.weight"] = torch.zeros(2, 64)
    root.mkdir(parents=True)
    torch.save(state, root / "pytorch_model.bin")
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return root


def test_warm_start_cuts_ltp_embeddings_to_our_vocabulary(tiny_model_dir: Path, tmp_path: Path):
    from corrector.pretrain.__main__ import main
    from corrector.pretrain.modeling import load_pair

    ours = (tiny_model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    theirs = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##x", *ours[5:][::-1][: len(ours) // 2]]
    ltp = fake_ltp(tmp_path / "ltp", theirs)
    assert main(["warm-start", "--ltp", str(ltp), "--vocab", str(tiny_model_dir), "--output", str(tmp_path / "pair")]) == 0
    discriminator, generator, _ = load_pair(str(tmp_path / "pair"))
    source = torch.load(ltp / "pytorch_model.bin")["backbone.embeddings.word_embeddings.weight"]
    table = discriminator.electra.embeddings.word_embeddings.weight
    assert table.shape[0] == len(ours) and discriminator.config.num_hidden_layers == 2
    token = theirs[7]
    assert torch.allclose(table[ours.index(token)], source[theirs.index(token)])
    missing = next(i for i, t in enumerate(ours) if t not in theirs)
    assert torch.allclose(table[missing], source.mean(0), atol=1e-6)
    assert generator.electra.encoder.layer[0].attention.self.query.weight.equal(
        discriminator.electra.encoder.layer[0].attention.self.query.weight)
    with pytest.raises(SystemExit):
        main(["warm-start", "--ltp", str(tmp_path), "--vocab", str(tiny_model_dir), "--output", str(tmp_path / "x")])


def test_evaluator_mean_is_the_macro_average_over_sets_with_errors(tmp_path: Path, capsys):
    from evaluate.__main__ import main

    errors, clean = tmp_path / "errors.tsv", tmp_path / "clean.tsv"
    write_pairs(errors, [("因该", "应该"), ("我门", "我们")])
    write_pairs(clean, [("很好", "很好"), ("我们", "我们")])
    assert main([str(errors), str(clean), "--system", "identity", "--no-progress"]) == 0
    summary = capsys.readouterr().out.split("Summary")[1]
    mean = next(line for line in summary.splitlines() if line.startswith("mean"))
    assert "the macro average" in summary
    errors_row = next(line for line in summary.splitlines() if line.startswith("errors"))
    assert mean.split()[2:8] == errors_row.split()[2:8]  # the clean set's 0 F1 is not averaged in


def test_load_pair_keeps_halves_with_different_embeddings_apart(tiny_model_dir: Path, tmp_path: Path):
    """A discriminator and a generator from two fine-tunes (as the release pairs them) load as they
    were saved; halves saved with one shared table are tied again."""
    import shutil

    from corrector.pretrain.modeling import load_pair

    discriminator, generator, _ = load_pair(str(tiny_model_dir))
    assert generator.electra.embeddings.word_embeddings is discriminator.electra.embeddings.word_embeddings
    shutil.copytree(tiny_model_dir, tmp_path / "pair")
    with torch.no_grad():
        generator.electra.embeddings.word_embeddings = torch.nn.Embedding.from_pretrained(
            discriminator.electra.embeddings.word_embeddings.weight + 1.0, freeze=False)
    generator.save_pretrained(tmp_path / "pair" / "generator")
    again_disc, again_gen, _ = load_pair(str(tmp_path / "pair"))
    table = again_gen.electra.embeddings.word_embeddings.weight
    assert torch.allclose(table, again_disc.electra.embeddings.word_embeddings.weight + 1.0)
