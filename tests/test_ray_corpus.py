"""Correcting a corpus on Ray Data (corrector/ray_correct.py): on a local Ray with two actors the
targets are the CLI's, line for line, and an actor killed mid-run loses no line.

Skipped where ray[data] is not installed (`pip install -e ".[ray]"`, in the dev extra) or where the
shipped model is absent. The corpus is made here from a few hundred sentences; written to a file it
is also the benchmark of docs/ray.md:

    python tests/test_ray_corpus.py /tmp/corpus.txt 10000
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

if __name__ != "__main__":  # the corpus writer below needs no Ray
    pytest.importorskip("ray.data", reason="ray[data] is not installed: pip install -e '.[ray]' (in the dev extra)")

# Sentences of varied content (news, daily life, work, science, sport, food, travel, school,
# health, money, dialogue), correct as written; `corpus_lines` puts errors into some of them.
SENTENCES = [
    "少先队员应该为老人让座。",
    "今天天气很好，我们一起去公园散步。",
    "他们在教室里认真地做作业。",
    "这个问题很难，我不知道怎么办。",
    "他的成绩一直很好，老师经常表扬他。",
    "我很高兴见到你，欢迎来到北京。",
    "下个星期我跟我朋友打算去法国玩儿。",
    "我听说你找到新工作，我很高兴。",
    "北京是中国的首都，也是一座历史悠久的城市。",
    "张三和李四在上海的一家公司工作。",
    "会议将在明天上午九点准时开始，请大家不要迟到。",
    "国家统计局今天发布了上个月的经济数据。",
    "这家餐厅的菜味道不错，价格也很合理。",
    "我们应该保护环境，节约用水用电。",
    "医生建议他多喝水，早点休息。",
    "这部电影讲述了一个感人的故事。",
    "由于天气原因，航班推迟了两个小时。",
    "请把这份文件交给经理签字。",
    "孩子们在操场上快乐地踢足球。",
    "她每天早上六点起床跑步。",
    "科学家发现了一种新的治疗方法。",
    "这座桥已经有一百多年的历史了。",
    "我的电脑坏了，需要送去修理。",
    "银行的利率最近又下调了。",
    "他在比赛中获得了第一名。",
    "妈妈做的饺子特别好吃。",
    "图书馆周末也对外开放。",
    "你能帮我看一下这个句子有没有错误吗？",
    "学生们正在准备期末考试。",
    "这个城市的交通越来越方便了。",
    "我们公司明年计划在南方开设三家分店。",
    "他说话的声音很小，我听不清楚。",
    "春天来了，公园里的花都开了。",
    "这本书的作者是一位著名的历史学家。",
    "请大家注意安全，不要在河边玩耍。",
    "经过多年的努力，他终于实现了自己的梦想。",
    "新产品的销量超出了所有人的预期。",
    "这次旅行让我认识了很多新朋友。",
    "老师耐心地回答了每一个问题。",
    "周末我们去爬山，顺便看看风景。",
    "他把钥匙忘在办公室里了。",
    "我们必须在规定的时间内完成任务。",
    "市民可以通过手机预约挂号。",
    "这家医院的服务态度非常好。",
    "运动员们正在为下个月的比赛做准备。",
    "听说明天会下大雨，记得带伞。",
    "这道题的答案其实很简单。",
    "他对自己的工作非常负责。",
    "我已经三年没有回家过年了。",
    "这个软件可以自动备份你的照片。",
    "我在2024年用iPhone打电话给Tom，他说应该没问题。",
    "价格是199元，包括运费和税费。",
    "第3章介绍了机器学习的基本概念。",
    "请访问https://example.com了解更多信息。",
    "“你明天有空吗？”她问道。",
    "他们的关系一直很好，从来没有吵过架。",
    "这里的冬天很冷，夏天却非常热。",
    "那家商店的东西又便宜又好。",
    "我们要尊重别人的意见。",
    "爷爷每天都会在院子里浇花。",
]

# (right, wrong): a wrong form put in where the right one is found; the shipped model corrects
# most of them back (因该 -> 应该, docs/ray.md's example).
ERRORS = [
    ("应该", "因该"), ("天气", "天汽"), ("公园", "公圆"), ("他们", "他门"), ("作业", "做业"),
    ("知道", "知到"), ("成绩", "成积"), ("高兴", "高心"), ("认真", "认阵"), ("首都", "首读"),
    ("休息", "休习"), ("故事", "故是"), ("经理", "经里"), ("比赛", "比塞"), ("注意", "主意"),
    ("朋友", "朋有"), ("清楚", "青楚"), ("准备", "准被"), ("已经", "以经"), ("非常", "飞常"),
]

EXTRAS = ["", "   ", "Hello, world! 123", "😀🎉", "今天天氣很好，我們一起去公園散步。"]  # blank, ASCII, emoji, traditional


def corpus_lines(count: int, seed: int = 68) -> list[str]:
    """`count` lines: the sentences, alone or two together, about half with one or two errors put
    in, some with a number or a speaker before them, and now and then a blank, ASCII, emoji or
    traditional-script line."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        if rng.random() < 0.02:
            lines.append(rng.choice(EXTRAS))
            continue
        text = rng.choice(SENTENCES)
        if rng.random() < 0.25:
            text += rng.choice(SENTENCES)
        for right, wrong in rng.sample(ERRORS, len(ERRORS)):
            if right in text and rng.random() < 0.5:
                text = text.replace(right, wrong, 1)
        prefix = rng.random()
        if prefix < 0.1:
            text = f"{rng.randint(1, 999)}. {text}"
        elif prefix < 0.2:
            text = f"{rng.choice(['小明', '王老师', '记者', '张经理'])}说：{text}"
        lines.append(text)
    return lines


def write_corpus(path: Path, count: int) -> Path:
    path.write_text("\n".join(corpus_lines(count)) + "\n", encoding="utf-8")
    return path


# --- without Ray: the reading of rows ------------------------------------------------------------


def test_lines_are_read_with_their_endings_off_and_bad_bytes_reported():
    import io

    from corrector.ray_corpus.reading import byte_lines, decoded

    assert list(byte_lines(io.BytesIO(b"a\r\nb\n\nlast"))) == [b"a", b"b", b"", b"last"]
    assert list(byte_lines(io.BytesIO(b"a\n"))) == [b"a"]  # an ending at the end adds no line
    text, error = decoded("好".encode() + b"\xff")
    assert text == "好\ufffd" and "not valid UTF-8" in error


def test_a_bad_jsonl_record_becomes_a_row_with_its_error():
    from corrector.ray_corpus.reading import record_row

    assert record_row(b'{"id": 1, "text": "x", "target": "gold"}', "text") == {
        "id": 1, "input_target": "gold", "source": "x", "error": None}
    assert record_row(b"  ", "text") is None  # a blank line holds no record
    for raw, why in ((b'{"text": 5}', "'text' is int, not a string"), (b'{"id": 2}', "no 'text' field"),
                     (b'{"text": null}', "'text' is null"), (b"[1]", "not a JSON object but list")):
        assert record_row(raw, "text")["error"] == why
    assert record_row(b"{oops", "text")["error"].startswith("not valid JSON")


# --- on a local Ray of 2 CPUs, with the shipped model ----------------------------------------------

CORPUS_LINES = 10_000


def shipped_model_present() -> bool:
    from corrector.runtime.models import DEFAULT_MODEL_DIR

    return (DEFAULT_MODEL_DIR / "discriminator" / "model.safetensors").exists()


needs_model = pytest.mark.skipif(not shipped_model_present(), reason="the shipped model is not in data/model")


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[str], list[str]]:
    """The corpus file, its lines, and the targets `python -m corrector --input FILE` writes for them.

    The CLI reads each distinct line once (3,314 of the 10,000): a line's correction does not
    depend on the lines batched with it (ONNX Runtime encoders, one sentence a run), so its
    targets map back to every copy, at a third of the CLI's time in the suite."""
    folder = tmp_path_factory.mktemp("ray_corpus")
    path = write_corpus(folder / "corpus.txt", CORPUS_LINES)
    lines = path.read_text(encoding="utf-8").splitlines()
    distinct = list(dict.fromkeys(lines))
    cli_input, cli_output = folder / "distinct.txt", folder / "cli.txt"
    cli_input.write_text("\n".join(distinct) + "\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "corrector", "--input", str(cli_input), "--output", str(cli_output),
                    "--no-progress"], check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=600)
    target_of = dict(zip(distinct, cli_output.read_text(encoding="utf-8").splitlines(), strict=True))
    return path, lines, [target_of[line] for line in lines]


@needs_model
def test_ten_thousand_lines_on_two_actors_give_the_cli_targets(local_ray, corpus, tmp_path, capsys):
    from corrector.ray_corpus.__main__ import main

    path, sources, cli_targets = corpus
    output = tmp_path / "corrected.jsonl"
    assert main([str(path), "--output", str(output), "--actors", "2", "--no-progress"]) == 0
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [row["line"] for row in rows] == list(range(1, CORPUS_LINES + 1))  # every line once, in order
    assert [row["source"] for row in rows] == sources
    assert [row["target"] for row in rows] == cli_targets
    assert all(row["error"] is None for row in rows)
    changed = [row for row in rows if row["target"] != row["source"]]
    assert len(changed) > CORPUS_LINES // 5
    assert any("因该" in row["source"] and "应该" in row["target"] for row in changed)
    edit = changed[0]["edits"][0]
    assert set(edit) == {"position", "source", "target", "kind", "confidence"}
    assert changed[0]["source"][edit["position"]] == edit["source"]
    assert "lines/s per CPU" in capsys.readouterr().err


@needs_model
def test_an_actor_killed_mid_run_loses_no_line(local_ray, corpus, tmp_path):
    import pyarrow as pa

    from corrector.ray_corpus import CorpusCorrector, Plan, Settings, correct_corpus

    path, sources, cli_targets = corpus
    short = tmp_path / "short.txt"
    short.write_text("\n".join(sources[:1000]) + "\n", encoding="utf-8")
    marker = tmp_path / "die-once"
    marker.touch()
    where = str(marker)

    class DiesOnce(CorpusCorrector):  # defined here: Ray sends the class itself to the actors
        calls = 0

        def __call__(self, table: pa.Table) -> pa.Table:
            self.calls += 1
            if self.calls == 2:  # mid-run: a block done, others in flight; the first actor here dies
                try:
                    os.remove(where)
                except FileNotFoundError:
                    pass
                else:
                    os._exit(1)
            return super().__call__(table)

    output = tmp_path / "parts"
    tally = correct_corpus([str(short)], str(output), fmt="text", text_field="text", settings=Settings(),
                           plan=Plan(actors=2, rows_per_call=100, retries=3, corrector_class=DiesOnce),
                           progress=False)
    assert not marker.exists()  # an actor did die
    rows = [json.loads(line) for part in sorted(output.glob("part-*.jsonl"))
            for line in part.read_text(encoding="utf-8").splitlines()]
    assert sorted(row["line"] for row in rows) == list(range(1, 1001))  # each line exactly once
    assert (tally.lines, tally.errors) == (1000, 0)
    by_line = {row["line"]: row for row in rows}
    assert [by_line[n]["target"] for n in range(1, 1001)] == cli_targets[:1000]


@needs_model
def test_bad_rows_are_reported_and_the_others_corrected(local_ray, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from corrector.ray_corpus.__main__ import main

    records = tmp_path / "records.jsonl"
    records.write_text("\n".join([
        json.dumps({"id": 1, "body": "少先队员因该为老人让坐。", "target": "gold"}, ensure_ascii=False),
        json.dumps({"id": 2, "body": 5}), "not json", "", json.dumps({"id": 3}),
        json.dumps({"id": 4, "body": ""}), json.dumps({"id": 5, "body": "今天天汽很好"}, ensure_ascii=False),
    ]) + "\n", encoding="utf-8")
    output = tmp_path / "records.out.jsonl"
    assert main([str(records), "-o", str(output), "--text-field", "body", "--no-progress"]) == 1
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [row["line"] for row in rows] == [1, 2, 3, 5, 6, 7]  # line 4 is blank: no record
    assert [row["id"] for row in rows] == [1, 2, None, 3, 4, 5]
    assert rows[0]["input_target"] == "gold" and rows[0]["target"] == "少先队员应该为老人让座。"
    assert [row["error"] is not None for row in rows] == [False, True, True, True, False, False]
    assert rows[4]["target"] == "" and rows[5]["target"] == "今天天气很好"
    assert "3 line(s) with an error" in capsys.readouterr().err

    table = pa.table({"id": ["a", "b", "c"], "text": ["他的成积很好。", None, "我很高心见到你。"]})
    pq.write_table(table, tmp_path / "table.parquet")
    out_dir = tmp_path / "table_out"
    assert main([str(tmp_path / "table.parquet"), "-o", str(out_dir), "--output-format", "parquet",
                 "--no-progress"]) == 1
    result = pa.concat_tables([pq.read_table(p) for p in sorted(out_dir.glob("part-*.parquet"))]).sort_by("line")
    assert result.column("id").to_pylist() == ["a", "b", "c"]
    assert result.column("target").to_pylist() == ["他的成绩很好。", None, "我很高兴见到你。"]
    assert result.column("error").to_pylist() == [None, "'text' is null", None]


if __name__ == "__main__":  # python tests/test_ray_corpus.py FILE [LINES]
    write_corpus(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else CORPUS_LINES)
