"""`scripts/gpu/lease.sh prepare`'s synthetic draw: the recipe's shape (scripts/synth_draw.sh),
drawn from the text asked for. Run with `PY=echo`, so the command line is printed, not run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def draw_command(tmp_path: Path, **env: str) -> str:
    """The `finetune synth` line prepare runs (tokens and real pairs already there, so only the draw is left)."""
    inputs, broad = tmp_path / "in", tmp_path / "broad"
    (inputs / "ft").mkdir(parents=True)
    (inputs / "tokens.npy.xz").touch()
    (inputs / "ft" / "train.tar.xz").touch()
    (broad / "train").mkdir(parents=True)
    (broad / "train" / "pairs.tsv").touch()
    result = subprocess.run(["bash", "scripts/gpu/lease.sh", "prepare"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "IN": str(inputs), "PY": "echo", "BROAD": str(broad), **env})
    lines = [line for line in result.stdout.splitlines() if "corrector.finetune synth" in line]
    assert len(lines) == 1, result.stdout + result.stderr
    return lines[0]


def recipe_flags() -> str:
    return subprocess.run(["bash", "-c", 'source scripts/synth_draw.sh && echo "${SYNTH_DRAW_FLAGS[@]}"'], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_lease_draws_all_the_text_in_the_recipes_shape(tmp_path: Path):
    line = draw_command(tmp_path)
    broad = tmp_path / "broad"
    assert f"--corpus {broad}/corpus {broad}/corpus_domains --output" in line
    assert recipe_flags() in line and "--all-readings" in line
    assert f"--exclude {broad}/dev.tsv" in line and f"--error-model {broad}/train/pairs.tsv" in line


def test_synth_corpus_sets_the_text_of_the_draw(tmp_path: Path):
    line = draw_command(tmp_path, SYNTH_CORPUS="some/corpus")
    assert "--corpus some/corpus --output" in line
    assert recipe_flags() in line
