"""Start-up mechanics: the int8 networks read without transformers (runtime/electra.py) and, in
ONNX Runtime, without torch (runtime/onnx_networks.py), the tokenizer read from the vocabulary,
and the user cache (resources/cache.py) of the ONNX graphs and jieba's tables."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corrector.resources import cache
from corrector.runtime import onnx_encoder
from corrector.runtime.electra import read_network
from corrector.runtime.models import DEFAULT_MODEL_DIR, load_int8_model, load_model, prepare_bundle, quantized
from corrector.runtime.network_config import read_config, read_weights
from corrector.text.tokenization import CharTokenizer, read_vocab_tokenizer

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ["少先队员因该为老人让坐。", "我的电恼坏了。", "他说因该没问题"]


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ELECTRA_CSC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _batch(tokenizer: CharTokenizer) -> tuple[np.ndarray, np.ndarray]:
    rows = [tokenizer.with_special_tokens(tokenizer.encode(text).ids) for text in SENTENCES]
    width = max(map(len, rows))
    ids = np.array([row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows], dtype=np.int64)
    return ids, (ids != tokenizer.pad_token_id).astype(np.int64)


@pytest.fixture(scope="module")
def shipped_fp32():
    return load_model(str(DEFAULT_MODEL_DIR))


@pytest.mark.parametrize("runtime", ["torch", "onnxruntime"])
def test_the_lean_load_gives_the_transformers_load_s_outputs_on_the_shipped_model(shipped_fp32, runtime):
    lean, reference = load_int8_model(str(DEFAULT_MODEL_DIR), runtime), quantized(shipped_fp32, runtime)
    assert lean is not None and lean.precision == "int8" and lean.runtime == reference.runtime == runtime
    ids, mask = _batch(reference.tokenizer)
    assert np.array_equal(lean.replaced_probability(ids, mask), reference.replaced_probability(ids, mask))
    network, other = lean.generator_network(), reference.generator_network()
    hidden = network.encode(ids, mask)
    assert np.array_equal(np.asarray(hidden), np.asarray(other.encode(ids, mask)))
    rows, columns = np.nonzero(mask)
    states = network.states(hidden, rows, columns)
    assert np.array_equal(states, other.states(other.encode(ids, mask), rows, columns))
    assert np.array_equal(network.logits(states), other.logits(states))
    assert (lean.generator_input, lean.max_length, lean.scorer_config) == (
        reference.generator_input, reference.max_length, reference.scorer_config)


def test_the_vocabulary_tokenizer_is_transformers_one(shipped_fp32, tmp_path):
    lean = CharTokenizer(read_vocab_tokenizer(DEFAULT_MODEL_DIR))
    reference = shipped_fp32.tokenizer
    for name in ("vocab", "pad_token_id", "unk_token_id", "cls_token_id", "sep_token_id", "mask_token_id",
                 "vocab_size", "cjk_ids"):
        assert getattr(lean, name) == getattr(reference, name), name
    # vocab.txt alone (no tokenizer.json): ids by line, as transformers' BertTokenizer reads it
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(DEFAULT_MODEL_DIR / name, tmp_path / name)
    assert read_vocab_tokenizer(tmp_path).get_vocab() == reference.vocab
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "XLMRobertaTokenizer"}))
    assert read_vocab_tokenizer(tmp_path) is None  # not BERT's: left to transformers


def test_networks_the_lean_reader_does_not_know_are_loaded_by_transformers(tiny_model_dir, tmp_path):
    model = tmp_path / "relu"
    shutil.copytree(tiny_model_dir, model)
    config_path = model / "generator" / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps({**config, "hidden_act": "relu"}), encoding="utf-8")
    assert read_network(model / "generator") is None and read_network(model / "discriminator") is not None
    assert load_int8_model(str(model)) is None
    bundle = prepare_bundle(str(model))  # transformers' networks, then int8
    assert bundle.precision == "int8" and type(bundle.generator).__module__.startswith("transformers")
    assert type(prepare_bundle(str(tiny_model_dir), runtime="torch").generator).__module__ == "corrector.runtime.electra"
    if onnx_encoder.onnx_runtime_available():  # the default: read from the files, no torch module at all
        assert type(prepare_bundle(str(tiny_model_dir)).generator).__module__ == "corrector.runtime.onnx_networks"


@pytest.mark.skipif(not onnx_encoder.onnx_runtime_available(), reason="onnxruntime or onnx is not installed")
def test_a_corrector_from_the_shipped_directory_imports_neither_transformers_nor_torch():
    code = ("import sys; from corrector import Corrector; result = Corrector('data/model').correct('少先队员因该为老人让坐');"
            "print(result.target, 'transformers' in sys.modules, 'torch' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["少先队员应该为老人让座", "False", "False"]


WITHOUT_TORCH = """
import runpy, sys

class Uninstalled:  # as if torch and transformers were not installed (pip install . without [torch])
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Uninstalled)
sys.argv = ["corrector", *sys.argv[1:]]
runpy.run_module("corrector", run_name="__main__", alter_sys=True)
"""


@pytest.mark.skipif(not onnx_encoder.onnx_runtime_available(), reason="onnxruntime or onnx is not installed")
def test_the_cli_corrects_without_torch_installed_and_says_what_needs_it():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)

    done = cli("少先队员因该为老人让坐")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == "少先队员应该为老人让座"
    for option in ("--runtime=torch", "--no-quantize"):
        refused = cli(option, "少先队员因该为老人让坐")
        assert refused.returncode == 2 and "needs torch, which is not installed" in refused.stderr, refused.stderr[-2000:]
        assert "Traceback" not in refused.stderr


def test_threads_set_before_torch_is_imported_reach_it(tiny_model_dir):
    """`--threads` is read before anything imports torch (the ONNX Runtime networks never do):
    the torch networks, when asked for, still run on that many threads."""
    code = ("import sys; from corrector.runtime.threads import set_threads, cpu_threads; set_threads(1); "
            "assert 'torch' not in sys.modules; from corrector import Corrector; "
            f"c = Corrector({str(tiny_model_dir)!r}, runtime='torch'); import torch; "
            "print(torch.get_num_threads(), cpu_threads(), c.workers)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "1", "1"]


def test_numpy_blas_runs_on_one_thread_however_threads_were_set(tiny_model_dir):
    """numpy's BLAS (the int8 heads, the generator's output layer) never spins a thread per core:
    `set_threads(1)` given before numpy is imported reaches it, and a batch run in the calling
    thread (a lone sentence) runs on one BLAS thread in a process left at the BLAS's default."""
    pytest.importorskip("threadpoolctl")
    code = ("import sys; from corrector.runtime.threads import set_threads; assert 'numpy' not in sys.modules; "
            "set_threads(1); from threadpoolctl import threadpool_info; "
            "print([i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OPENBLAS_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[1]"]

    code = ("from threadpoolctl import threadpool_info; from corrector import Corrector; import corrector.pipeline as p; "
            f"c = Corrector({str(tiny_model_dir)!r}); seen = []; score = c._score_batch; "
            "c._score_batch = lambda *a: seen.append([i['num_threads'] for i in threadpool_info() "
            "if i['user_api'] == 'blas']) or score(*a); c.correct('今天天气很好'); "
            "print(seen[0], [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[1]", "[2]"]  # one thread during the batch, the process's own after


def test_the_cache_rebuilds_a_corrupt_entry_and_survives_an_unwritable_directory(cache_home, monkeypatch):
    builds = []

    def build():
        builds.append(1)
        return "value", b"payload"

    assert cache.cached("thing", "k1", build, bytes.decode) == "value"
    assert cache.cached("thing", "k1", build, bytes.decode) == "payload" and len(builds) == 1  # read back
    entry = cache_home / "thing-k1.bin"
    entry.write_bytes(entry.read_bytes()[:-1] + b"X")  # one byte changed: the checksum fails
    assert cache.cached("thing", "k1", build, bytes.decode) == "value" and len(builds) == 2
    assert cache.read_entry(entry) == b"payload"  # rewritten whole
    assert cache.cached("thing", "k2", build, bytes.decode) == "value"  # another key: built, and the old one pruned
    assert sorted(p.name for p in cache_home.iterdir()) == ["thing-k2.bin"]
    monkeypatch.setenv("ELECTRA_CSC_CACHE", str(entry))  # a file where the directory should be
    assert cache.cached("thing", "k3", build, bytes.decode) == "value" and len(builds) == 4


@pytest.mark.skipif(not onnx_encoder.onnx_runtime_available(), reason="onnxruntime or onnx is not installed")
def test_the_onnx_graph_is_cached_per_weights(tiny_model_dir, cache_home, monkeypatch):
    config = read_config(tiny_model_dir / "discriminator")
    weights = {name.removeprefix("electra."): array for name, array in read_weights(tiny_model_dir / "discriminator").items()
               if name.startswith("electra.")}
    built = onnx_encoder.encoder_graph(weights, config)
    assert len(list(cache_home.glob(f"{onnx_encoder.GRAPH_CACHE}-*.bin"))) == 1

    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(onnx_encoder, "build_encoder_graph", no_build)
    assert onnx_encoder.encoder_graph(weights, config) == built  # read from the cache
    weights["encoder.layer.0.output.dense.weight"] = weights["encoder.layer.0.output.dense.weight"] + 1.0  # another model
    with pytest.raises(AssertionError, match="built again"):
        onnx_encoder.encoder_graph(weights, config)


JIEBA_STATE = """
import hashlib, sys
from corrector.text.protection import ensure_jieba
if sys.argv[1] == "plain":
    import jieba, jieba.posseg
    jieba.initialize()
else:
    jieba = ensure_jieba()
tables = repr((sorted(jieba.dt.FREQ.items()), jieba.dt.total, sorted(jieba.posseg.dt.word_tag_tab.items())))
print(hashlib.sha256(tables.encode()).hexdigest(), list(jieba.posseg.lcut("张三在北京大学读书", HMM=False)))
"""


def test_jieba_s_tables_from_the_cache_are_jieba_s_own(cache_home):
    env = {**os.environ, "ELECTRA_CSC_CACHE": str(cache_home),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    states = [subprocess.run([sys.executable, "-c", JIEBA_STATE, mode], env=env, capture_output=True, text=True,
                             timeout=300, check=True).stdout
              for mode in ("plain", "cached", "cached")]  # jieba itself; our cache built; read back
    assert len(list(cache_home.glob("jieba-tables-*.bin"))) == 1
    assert states[0] == states[1] == states[2] and "pair('北京大学', 'nt')" in states[0]
