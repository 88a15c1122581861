"""The operating point under a pooled clean ceiling and one per clean part (issue #66): the choice
on hand-made sweeps, old single-clean dev folders, the fallback, and the calibrate/heldout wiring."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from corrector.evaluation.metrics import PRF, Scores
from corrector.evaluation.sweep import SweepPoint
from corrector.finetune.operating import (
    MAX_CLEAN_FPR,
    MAX_DOMAIN_FPR,
    OperatingPoint,
    choose,
    choose_all,
    default_clean,
    read_clean_parts,
    read_parts,
)
from corrector.finetune.synth import write_pairs


def errors(threshold: float, tp: int, fp: int, fn: int) -> SweepPoint:
    """An error part's sweep point: sentence correction F1 from these counts."""
    return SweepPoint(threshold, Scores(sentence_correction=PRF(tp, fp, fn)).to_dict())


def clean(threshold: float, changed: int, sentences: int) -> SweepPoint:
    """A clean part's sweep point: `changed` of its `sentences` error-free sentences changed."""
    return SweepPoint(threshold, Scores(sentences=sentences, error_free_sentences=sentences,
                                        false_positives=changed).to_dict())


THRESHOLDS = (0.1, 0.5, 0.9)


def domain_curves() -> dict[str, list[SweepPoint]]:
    """Two error parts whose F1 falls with the threshold, "clean" (200 sentences) and two domains
    (100 each). At 0.5: 2 of 400 clean sentences changed (0.5 % pooled) but 2 of games' 100 (2 %)."""
    return {"a": [errors(0.1, 8, 2, 2), errors(0.5, 6, 1, 4), errors(0.9, 2, 0, 8)],  # F1 0.8, 0.706, 0.333
            "b": [errors(0.1, 6, 4, 4), errors(0.5, 5, 1, 5), errors(0.9, 1, 0, 9)],  # F1 0.6, 0.625, 0.167
            "clean": [clean(0.1, 2, 200), clean(0.5, 0, 200), clean(0.9, 0, 200)],
            "clean_law": [clean(0.1, 1, 100), clean(0.5, 0, 100), clean(0.9, 0, 100)],
            "clean_games": [clean(0.1, 3, 100), clean(0.5, 2, 100), clean(0.9, 1, 100)]}


def test_the_clean_rate_is_pooled_from_counts_and_every_part_has_its_own_ceiling():
    curves = domain_curves()
    points = choose_all(curves)
    assert [p.threshold for p in points] == list(THRESHOLDS)
    at = points[1]
    assert at.clean_fpr == 2 / 400  # counts pooled: the mean of the parts' rates would be 0.67 %
    assert at.clean_part_fpr == {"clean": 0.0, "clean_law": 0.0, "clean_games": 0.02}
    assert at.clean_counts == {"clean": (0, 200), "clean_law": (0, 100), "clean_games": (2, 100)}
    assert set(at.part_f1) == {"a", "b"}  # clean parts are never in the macro
    assert at.macro_f1 == pytest.approx((12 / 17 + 10 / 16) / 2)  # F1 = 2 TP / (2 TP + FP + FN)
    assert points[0].clean_fpr == 6 / 400
    # 0.5 meets the pooled 0.5 % but changes 2 % of games: 0.9 (0.25 % pooled, games 1 %) it is.
    chosen = choose(curves)
    assert (chosen.threshold, chosen.clean_fpr, chosen.clean_part_fpr["clean_games"]) == (0.9, 1 / 400, 0.01)
    assert choose(curves, max_domain_fpr=0.02).threshold == 0.5  # 2 % allowed per part: the better F1
    assert choose(curves, max_clean_fpr=0.02, max_domain_fpr=0.03).threshold == 0.1  # both loose: the best F1
    assert choose(curves, max_clean_fpr=0.004, max_domain_fpr=0.02).threshold == 0.9  # the pooled one binds


def test_the_clean_parts_are_those_named():
    curves = domain_curves()
    assert default_clean(curves) == {"clean", "clean_law", "clean_games"}
    named = choose_all(curves, {"clean", "clean_law", "clean_games"})
    assert named == choose_all(curves)
    only_clean = choose_all(curves, "clean")[1]  # the domain parts then count as error parts (F1 0)
    assert set(only_clean.part_f1) == {"a", "b", "clean_law", "clean_games"} and only_clean.clean_fpr == 0.0
    with pytest.raises(ValueError, match="at least one part"):
        choose({name: curves[name] for name in ("clean", "clean_law")})


def old_choose(curves, max_clean_fpr: float = MAX_CLEAN_FPR):
    """The rule before the per-part ceilings (operating.py as of b0e95bb), for comparison."""
    error_parts = [name for name in curves if name != "clean"]
    points = []
    for k, first in enumerate(curves[error_parts[0]]):
        part_f1 = {name: curves[name][k].value("sentence.correction.f1") for name in error_parts}
        fpr = curves["clean"][k].value("fpr") if "clean" in curves else None
        points.append((first.threshold, sum(part_f1.values()) / len(part_f1), fpr))
    allowed = [p for p in points if p[2] is None or p[2] <= max_clean_fpr]
    if not allowed:
        return min(points, key=lambda p: (p[2], -p[0]))
    return max(allowed, key=lambda p: (round(p[1], 12), -p[0]))


def test_an_old_dev_folder_with_one_clean_part_chooses_as_before(tmp_path: Path):
    """Old folders: parts.json with "clean" among "parts", no kinds, no "clean_parts". Their clean
    set is {"clean"} and every choice is the old one, at any ceiling (one part's rate is the pooled
    rate, so the per-part ceiling adds nothing, even where it is below --max-clean-fpr)."""
    (tmp_path / "parts.json").write_text(json.dumps({"parts": {n: {"pairs": 3, "file": f"dev/{n}.tsv"}
                                                               for n in ("sighan", "multi", "clean")}}))
    assert read_parts(tmp_path) == {n: [str(tmp_path / "dev" / f"{n}.tsv")] for n in ("sighan", "multi", "clean")}
    assert read_clean_parts(tmp_path) == {"clean"} == default_clean(read_parts(tmp_path))
    rng = random.Random(66)
    thresholds = [round(0.05 * i, 2) for i in range(1, 20)]
    for trial in range(200):
        sentences = rng.choice((200, 2193))
        changed = sorted((rng.randrange(0, 40) for _ in thresholds), reverse=True)  # fewer as the threshold rises
        curves = {name: [errors(t, rng.randrange(0, 50), rng.randrange(0, 20), rng.randrange(1, 50)) for t in thresholds]
                  for name in ("sighan", "multi")}
        curves["clean"] = [clean(t, c, sentences) for t, c in zip(thresholds, changed, strict=True)]
        for ceiling in (MAX_CLEAN_FPR, 0.001, 0.02, 0.1):
            point = choose(curves, max_clean_fpr=ceiling)
            assert (point.threshold, point.macro_f1, point.clean_fpr) == old_choose(curves, ceiling), (trial, ceiling)


def test_when_no_threshold_meets_both_ceilings_the_smallest_worst_overshoot_wins():
    """The fallback: the largest of (pooled rate - max_clean_fpr) and (each part's rate -
    max_domain_fpr), smallest; then the lowest pooled rate; then the highest threshold."""
    f1s = [errors(t, 5, 5, 5) for t in (0.2, 0.4, 0.6, 0.8)]
    changed = {"clean": (1, 3, 0, 2), "clean_games": (5, 3, 4, 3)}  # of 100 each
    curves = {"a": f1s, **{name: [clean(t, c, 100) for t, c in zip((0.2, 0.4, 0.6, 0.8), counts, strict=True)]
                           for name, counts in changed.items()}}
    points = choose_all(curves)
    # worst overshoots: 0.2 games 4 points, 0.4 pooled 2.5, 0.6 games 3, 0.8 pooled and games 2.
    assert [round(p.overshoot(MAX_CLEAN_FPR, MAX_DOMAIN_FPR), 6) for p in points] == [0.04, 0.025, 0.03, 0.02]
    assert not any(p.within(MAX_CLEAN_FPR, MAX_DOMAIN_FPR) for p in points)
    assert choose(curves).threshold == 0.8  # not 0.6, the fewest pooled changes (2 %), whose games is at 4 %
    # Equal worst overshoots (games at 3 %): the lower pooled rate, then the higher threshold.
    tie = {"a": f1s[:3], "clean": [clean(0.2, 2, 100), clean(0.4, 1, 100), clean(0.6, 1, 100)],
           "clean_games": [clean(t, 3, 100) for t in (0.2, 0.4, 0.6)]}
    assert choose(tie).threshold == 0.6
    assert choose({**tie, "clean": [clean(t, 1, 100) for t in (0.2, 0.4, 0.6)]}).threshold == 0.6
    assert choose({**tie, "clean": [clean(0.2, 0, 100), clean(0.4, 1, 100), clean(0.6, 1, 100)]}).threshold == 0.2


def test_a_point_without_clean_parts_meets_every_ceiling():
    point = OperatingPoint(0.5, 0.4, None, {"a": 0.4})
    assert point.within(0.0, 0.0) and point.overshoot(0.0, 0.0) == float("-inf")
    assert choose({"a": [errors(0.1, 1, 0, 1), errors(0.5, 2, 0, 0)]}, max_clean_fpr=0.0).threshold == 0.5


def broad_folder(root: Path) -> Path:
    """A `finetune broad` folder as written now: an error part, "clean" among "parts" and one
    domain's clean part under "clean_parts", with their kinds."""
    from test_finetune import toy_pairs

    out = root / "broad"
    (out / "dev").mkdir(parents=True)
    parts = {"errors": toy_pairs()[:10], "clean": [(t, t) for t in ("今天天气很好，我们去散步。", "北京是中国的首都。")],
             "clean_law": [(t, t) for t in ("他说应该没问题。", "少先队员应该为老人让座。", "我们应该去公园散步。")]}
    for name, pairs in parts.items():
        write_pairs(out / "dev" / f"{name}.tsv", pairs)
    write_pairs(out / "dev.tsv", [p for pairs in parts.values() for p in pairs])
    marks = {"errors": ("errors", None), "clean": ("clean", "corpus"), "clean_law": ("clean", "law")}
    entries = {n: {"file": f"dev/{n}.tsv", "kind": kind, "domain": domain} for n, (kind, domain) in marks.items()}
    summary = {"parts": {n: entries[n] for n in ("errors", "clean")}, "clean_parts": {"clean_law": entries["clean_law"]}}
    (out / "parts.json").write_text(json.dumps(summary), encoding="utf-8")
    return out


def test_calibrate_and_heldout_pass_the_clean_parts_and_max_domain_fpr(tiny_model_dir: Path, tmp_path: Path, capsys):
    import shutil

    from corrector.finetune.__main__ import build_parser, main
    from corrector.pipeline import CorrectorConfig

    assert build_parser().parse_args(["heldout", "--model", "m", "--dev", "d"]).max_domain_fpr == MAX_DOMAIN_FPR
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    out = broad_folder(tmp_path)
    assert read_clean_parts(out) == {"clean", "clean_law"} and set(read_parts(out)) == {"errors", "clean", "clean_law"}
    base = ["--model", str(model), "--dev", str(out / "dev.tsv"), "--broad", str(out)]
    assert main(["calibrate", *base, "--detection-grid", "0.5", "--margin-grid", "off", "--hidden", "4",
                 "--members", "1", "--max-clean-fpr", "0.01", "--max-domain-fpr", "0.2"]) == 0
    operating = json.loads((model / "scorer.json").read_text(encoding="utf-8"))["calibration"]["operating_point"]
    assert (operating["max_clean_fpr"], operating["max_domain_fpr"]) == (0.01, 0.2)
    assert set(operating["part_f1"]) == {"errors"} and set(operating["clean_part_fpr"]) == {"clean", "clean_law"}
    assert all(len(entry) == 4 for entry in operating["curve"])  # threshold, macro, pooled, worst part
    assert "dev parts: errors 1" in capsys.readouterr().out
    report = tmp_path / "ho.json"
    assert main(["heldout", *base, "--splits", "1", "--members", "1", "--fit-detection-threshold", "0",
                 "--max-domain-fpr", "0.03", "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    passes = CorrectorConfig().passes
    assert f"clean sentences changed over 2 halves (%, one pass/{passes} passes; at most 0.5 pooled, 3 each)" in printed
    written = json.loads(report.read_text(encoding="utf-8"))
    rates = written["clean_fpr"]
    assert (rates["max_clean_fpr"], rates["max_domain_fpr"]) == (MAX_CLEAN_FPR, 0.03)
    # Over both halves of one split every clean sentence is scored once: 2 + 3 of them.
    assert set(rates["parts"]) == {"clean", "clean_law"} and rates["pooled"]["sentences"] == 5
    assert rates["parts"]["clean_law"]["sentences"] == 3
    halves = written["halves"]
    assert all(set(half["clean"]) == {"one_pass", "two_passes"} for half in halves)
    assert sum(half["clean"]["one_pass"].get("clean_law", [0, 0])[1] for half in halves) == 3


def test_heldout_pools_the_halves_clean_counts(monkeypatch, tmp_path: Path, capsys):
    """Each clean part's rate and the pooled one are counts summed over the halves (not a mean of
    the halves' rates), and `held_out_splits` gets the clean parts and --max-domain-fpr."""
    from corrector.finetune import calibrate
    from corrector.finetune.__main__ import main
    from corrector.finetune.calibrate import HalfScore

    seen = {}

    def halves(*args, **kwargs) -> list[HalfScore]:
        seen.update(kwargs)
        macro = {"one_pass": 0.5, "two_passes": 0.5, "clean_fpr_one_pass": 0.0, "clean_fpr_two_passes": 0.0}
        first = {"one_pass": {"clean": [1, 100], "clean_law": [0, 50]}, "two_passes": {"clean": [1, 100], "clean_law": [1, 50]}}
        second = {"one_pass": {"clean": [0, 100], "clean_law": [2, 50]}, "two_passes": {"clean": [0, 100], "clean_law": [3, 50]}}
        return [HalfScore(0, 0, 0.5, 0.4, 0.5, macro=macro, clean=first),
                HalfScore(0, 1, 0.5, 0.6, 0.7, macro=macro, clean=second)]

    monkeypatch.setattr(calibrate, "held_out_splits", halves)
    out = broad_folder(tmp_path)
    report = tmp_path / "ho.json"
    assert main(["heldout", "--model", "m", "--dev", "d", "--splits", "1", "--broad", str(out),
                 "--max-domain-fpr", "0.015", "--json", str(report)]) == 0
    assert seen["clean"] == {"clean", "clean_law"} and seen["max_domain_fpr"] == 0.015
    assert seen["max_clean_fpr"] == MAX_CLEAN_FPR and set(seen["parts"]) == {"errors", "clean", "clean_law"}
    rates = json.loads(report.read_text(encoding="utf-8"))["clean_fpr"]
    assert rates["parts"]["clean"] == {"one_pass": 0.005, "two_passes": 0.005, "sentences": 200}
    assert rates["parts"]["clean_law"] == {"one_pass": 0.02, "two_passes": 0.04, "sentences": 100}
    assert rates["pooled"] == {"one_pass": 0.01, "two_passes": 0.0167, "sentences": 300}  # 3 and 5 of 300
    assert "pooled 1.00/1.67; clean 0.50/0.50; clean_law 2.00/4.00" in capsys.readouterr().out
