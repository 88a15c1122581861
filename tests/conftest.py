"""Shared fixtures: tiny random models built in seconds, and paths to ../shared data."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("CSC_SHARED_DATA", ROOT.parent / "shared" / "data"))

# A small text covering the characters the tests use (including the usual example sentence).
TINY_TEXT = (
    "少先队员应该为老人让座。少先队员因该为老人让坐。我在2024年用iPhone打电话给Tom，他说应该没问题。"
    "今天天气很好，我们一起去公园散步。他的作业做得很认真。北京是中国的首都。张三和李四在上海工作。"
    "下个星期我跟我朋友打算去法国玩儿。我听说你找到新工作，我很高兴。座位坐下作业做事因为应当"
)


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One torch thread: the 2-core machine is often shared (training, CI), and two OpenMP
    threads spin-wait for each other when a core is taken, which makes small models far slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; the test is skipped with a clear reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path} (set CSC_SHARED_DATA or place ../shared beside the checkout)")
    return path


def build_tiny_model(output_dir: Path, seed: int = 0, text: str = TINY_TEXT) -> Path:
    """A random 2-layer ELECTRA pair with a character vocabulary, in the shipped layout."""
    import torch

    from corrector.pretrain.modeling import PRESETS, build_pair
    from corrector.pretrain.vocab import build_vocab, write_tokenizer
    from corrector.runtime.models import save_pair

    torch.manual_seed(seed)
    tokens = build_vocab(Counter(ch for ch in text if not ch.isspace()), min_count=1)
    write_tokenizer(tokens, output_dir)
    discriminator, generator = build_pair(PRESETS["tiny"], vocab_size=len(tokens))
    save_pair(discriminator, generator, str(output_dir))
    return output_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Path of a tiny random model directory (discriminator/, generator/, tokenizer files)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def trained_model_dir(tmp_path_factory, one_thread) -> Path:
    """The tiny pair fitted to correct 少先队员因该为老人让坐 (test_pipeline.train_tiny), trained once
    per session for every module that needs a model which really corrects."""
    from test_pipeline import train_tiny

    path = tmp_path_factory.getbasetemp() / "trained_tiny"
    if not (path / "generator").exists():
        train_tiny(path)
    return path


@pytest.fixture(scope="session")
def confusion():
    """The confusion sets built from PyPI data, once per session."""
    from corrector.resources.confusion import ConfusionSet

    return ConfusionSet.build()


@pytest.fixture(scope="session")
def shipped_corrector():
    """The default Corrector over the model shipped in data/model, loaded once per session."""
    from corrector import Corrector
    from corrector.runtime.models import DEFAULT_MODEL_DIR

    return Corrector(str(DEFAULT_MODEL_DIR))
