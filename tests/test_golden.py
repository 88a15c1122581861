"""Golden outputs of the shipped model: what `Corrector` returns must not change by refactoring.

Two samples, recorded with the default Corrector (int8, the CPU default; two passes):

* synthetic texts written for this test (mixed script, long, traditional, empty, emoji, …), kept
  here with their outputs and the scored candidates that calibration reads (`score_candidates`);
* every 5th sentence of SIGHAN-15's test set and every 15th of ECSpell's three, read from the
  shared data at test time. Their text is not committed: outputs are keyed by file and line
  index, with a hash of the source (to notice a changed file) and of the corrected text.

Re-record (only when behaviour is meant to change, e.g. a new model):
    CSC_SHARED_DATA=../shared/data python tests/test_golden.py
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "golden.json"
MODEL_DIR = ROOT / "data" / "model"
SHARED = Path(os.environ.get("CSC_SHARED_DATA", ROOT.parent / "shared" / "data"))
# (file under the shared data root, take every n-th line)
SAMPLES = (("csc/sighan/test2015.tsv", 5), ("csc/ecspell/law.test.tsv", 15), ("csc/ecspell/med.test.tsv", 15),
           ("csc/ecspell/odw.test.tsv", 15))
TOLERANCE = 1e-6

SYNTHETIC = [
    "少先队员因该为老人让坐。",
    "",
    "   ",
    "Hello, world! 123 https://example.com/a?b=c",
    "我在2024年用iPhone打电话给Tom，他说因该没问题。",
    "今天天汽很好😀，我们一起去公圆散步🎉。",
    "我們今天去學校上課，老師說因該要認真學習。",
    "這個問題很複雜，我們需要仔細的研究一下，然後再做決定。",
    "他跑的很快，我跟不上他。",
    "我跑的很快。",
    "ＡＢＣ全角字符和，标点。还有\t制表符\n和换行。",
    "北京是中国的首都。张三和李四在上海工作。",
    "下个星期我跟我朋唷打算去法国玩儿，我们在那里住在一个很有名的宾馆，那个宾馆的服务很好，"
    "我们可以在那里吃到很多好吃的东西，也可以去看看法国的风景，我觉得这次旅行一定很有意思。"
    "可是我的朋友说他没有时间，因为他的工作很忙，他的老板不让他请假，所以我只好一个人去了。"
    "到了法国以后我发现那里的人都很热情，他们都愿意帮助我，我在那里交了很多新朋友，我们一起"
    "去了很多地方，看了很多有名的建筑，我还学会了一些简单的法语，这次旅行让我很难忘，我希望"
    "以后还有机会再去法国玩，也希望我的朋友下次能跟我一起去，我们一定会玩得很开心的。" * 2,
    "这是一段没有任何标点符号的很长的中文文本用来测试分块的时候会不会出现问题我们希望它能够被正确地"
    "处理并且结果与以前完全一样因为重构不应该改变任何行为所以这个测试非常重要请大家认真对待每一个细节"
    "如果有任何变化都需要仔细检查原因才能确定是不是一个真正的错误还是一个预期的改变谢谢大家的配合",
    "我的电恼坏了，明天要去修理。他的作业做得很认真，老师表扬了他。",
    "王老师说：“同学们要好好学习，天天向上。”大家都点头。",
    "价格是￥99.9元，折扣后只要８８元！你觉得怎么样？",
    "我门一起去看电影吧，那部电影很好看，我以经看过两次了。",
    "I love 中國菜 and 日本料理，尤其是寿司🍣和拉麵。",
]


def _edits(result) -> list[list]:
    return [[e.position, e.source, e.target, e.confidence, e.kind] for e in result.edits]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _shared_sources() -> list[tuple[str, int, str]]:
    """(file, 0-based line index, source) of the shared sample; a missing file raises FileNotFoundError."""
    rows = []
    for name, step in SAMPLES:
        lines = (SHARED / name).read_text(encoding="utf-8").splitlines()
        rows.extend((name, i, lines[i].split("\t")[1]) for i in range(0, len(lines), step))
    return rows


def _candidates(corrector, texts: list[str]) -> list[list]:
    return [[c.text_index, c.position, c.source, c.target, c.confidence, c.best, c.word]
            for c in corrector.score_candidates(texts)]


def record() -> dict:
    from corrector import Corrector

    corrector = Corrector(str(MODEL_DIR))
    synthetic = corrector.correct_batch(SYNTHETIC)
    shared = _shared_sources()
    outputs = corrector.correct_batch([source for _, _, source in shared])
    return {
        "synthetic": [{"source": text, "target": r.target, "edits": _edits(r)}
                      for text, r in zip(SYNTHETIC, synthetic, strict=True)],
        "synthetic_candidates": _candidates(corrector, SYNTHETIC),
        "shared": [{"file": name, "line": i, "source_sha": _sha(source), "target_sha": _sha(r.target), "edits": _edits(r)}
                   for (name, i, source), r in zip(shared, outputs, strict=True)],
    }


pytestmark = pytest.mark.skipif(not (MODEL_DIR / "discriminator" / "model.safetensors").exists(),
                                reason=f"the shipped model is not in {MODEL_DIR}")


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def corrector(shipped_corrector):
    return shipped_corrector  # the default Corrector over data/model (conftest.py)


def _assert_edits_equal(got: list[list], want: list[list], where: str) -> None:
    assert [e[:3] + e[4:] for e in got] == [e[:3] + e[4:] for e in want], where
    for g, w in zip(got, want, strict=True):
        assert abs(g[3] - w[3]) <= TOLERANCE, f"{where}: confidence {g[3]} != {w[3]}"


def test_synthetic_texts_give_the_recorded_output(corrector, golden):
    assert [g["source"] for g in golden["synthetic"]] == SYNTHETIC
    results = corrector.correct_batch(SYNTHETIC)
    for want, got in zip(golden["synthetic"], results, strict=True):
        assert got.target == want["target"], want["source"]
        _assert_edits_equal(_edits(got), want["edits"], want["source"])


def test_synthetic_texts_give_the_recorded_scored_candidates(corrector, golden):
    got, want = _candidates(corrector, SYNTHETIC), golden["synthetic_candidates"]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:4] + g[5:] == w[:4] + w[5:]
        assert abs(g[4] - w[4]) <= TOLERANCE, f"candidate {w}: confidence {g[4]}"


def test_shared_test_sentences_give_the_recorded_output(corrector, golden):
    try:
        shared = _shared_sources()
    except FileNotFoundError as missing:
        pytest.skip(f"shared data not available ({missing.filename}); set CSC_SHARED_DATA to check the "
                    "SIGHAN-15 / ECSpell part of the golden outputs")
    want = golden["shared"]
    assert [(w["file"], w["line"], w["source_sha"]) for w in want] == [(f, i, _sha(s)) for f, i, s in shared], \
        "the shared test files differ from those the golden outputs were recorded on"
    results = corrector.correct_batch([source for _, _, source in shared])
    for w, got in zip(want, results, strict=True):
        where = f"{w['file']} line {w['line']}"
        assert _sha(got.target) == w["target_sha"], where
        _assert_edits_equal(_edits(got), w["edits"], where)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    FIXTURE.write_text(json.dumps(record(), ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
