"""End-to-end checks with the model this project ships in data/model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import shared_path

from corrector.runtime.models import DEFAULT_MODEL_DIR

pytestmark = pytest.mark.skipif(
    not (DEFAULT_MODEL_DIR / "discriminator" / "model.safetensors").exists(),
    reason=f"the shipped model is not in {DEFAULT_MODEL_DIR}",
)


@pytest.fixture(scope="module")
def corrector(shipped_corrector):
    return shipped_corrector


def test_model_directory_is_complete_and_calibrated():
    for name in ("discriminator/config.json", "discriminator/model.safetensors", "generator/config.json",
                 "generator/model.safetensors", "vocab.txt", "tokenizer.json", "scorer.json", "ngram.safetensors",
                 "error_pairs.json", "particles.safetensors", "README.md"):
        assert (DEFAULT_MODEL_DIR / name).exists(), name
    scorer = json.loads((DEFAULT_MODEL_DIR / "scorer.json").read_text(encoding="utf-8"))
    assert "calibration" in scorer and scorer["calibration"]["dev"].endswith("dev.tsv")
    size = sum(p.stat().st_size for p in DEFAULT_MODEL_DIR.rglob("*") if p.is_file())
    assert size < 60 * 1024 * 1024


def test_corrects_the_classic_example(corrector):
    result = corrector.correct("少先队员因该为老人让坐")
    assert result.target == "少先队员应该为老人让座"
    assert [(e.position, e.source, e.target) for e in result.edits] == [(4, "因", "应"), (10, "坐", "座")]


def test_corrects_a_particle_by_its_grammar(corrector):
    # 得 between a verb and its complement: the particle classifier's flags and `particle_gain`.
    result = corrector.correct("我跑的很快。")
    assert result.target == "我跑得很快。"
    scored = {c.target: c.features for c in corrector.score_candidates(["我跑的很快。"]) if c.position == 2}
    assert scored["得"]["particle_gain"] > 1.0


def test_error_free_news_sentence_is_unchanged(corrector):
    # A sentence of the kind the news corpus is made of (Xinwen Lianbo style).
    sentence = "国务院总理主持召开国务院常务会议，部署进一步做好稳就业工作。"
    assert corrector.correct(sentence).target == sentence


def test_sentence_of_the_news_corpus_is_unchanged(corrector):
    """The first full sentence (ending in 。, ≥ 20 characters) of the People's Daily text."""
    path = shared_path("corpus", "news_rmrb_199801.txt")
    with open(path, encoding="utf-8") as handle:
        sentence = next(part + "。" for line in handle for part in line.strip().split("。")[:-1] if len(part) >= 19)
    assert corrector.correct(sentence).target == sentence


def test_cli_with_default_model():
    done = subprocess.run([sys.executable, "-m", "corrector", "--json", "少先队员因该为老人让坐"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    output = json.loads(done.stdout.splitlines()[0])
    assert output["source"] == "少先队员因该为老人让坐"
    assert output["target"] == "少先队员应该为老人让座"
    for edit in output["edits"]:
        assert output["source"][edit["position"]] == edit["source"]
        assert output["target"][edit["position"]] == edit["target"]


def test_traditional_text_is_corrected_in_traditional_script(corrector):
    result = corrector.correct("我們今天去學校上課，老師說因該要認真學習。")
    assert result.target == "我們今天去學校上課，老師說應該要認真學習。"
    assert [(e.position, e.source, e.target) for e in result.edits] == [(13, "因", "應")]


def test_second_pass_fixes_what_a_first_correction_reveals(corrector):
    from corrector.pipeline import Corrector, CorrectorConfig

    one_pass = Corrector(corrector.bundle, config=CorrectorConfig(passes=1))
    # "烤师": the first pass writes 考 (but 考师 is no word yet); the second reads 考 and writes 试.
    assert one_pass.correct("明天要烤师，我很紧张。").target == "明天要考师，我很紧张。"
    fixed = corrector.correct("明天要烤师，我很紧张。")
    assert fixed.target == "明天要考试，我很紧张。"
    assert [(e.position, e.source, e.target) for e in fixed.edits] == [(3, "烤", "考"), (4, "师", "试")]
    # A first-pass edit that the second pass replaces keeps the original character as its source.
    fixed = corrector.correct("我每天都打工车去公司。")
    assert fixed.target == "我每天都搭公车去公司。"
    assert [(e.source, e.target) for e in fixed.edits] == [("打", "搭"), ("工", "公")]
