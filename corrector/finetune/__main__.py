"""`python -m corrector.finetune {broad,synth,train,pairs,prior,calibrate,heldout,require,ship}` — spelling-correction fine-tuning.

Examples:
    python -m corrector.finetune broad --output runs/broad
    python -m corrector.finetune synth --corpus ../shared/data/corpus --output runs/synth.tsv --size 50000
    python -m corrector.finetune train --init runs/pretrain --output runs/finetune \\
        --train runs/synth.tsv ../shared/data/csc/sighan/train2015.tsv … --dev-from ../shared/data/csc/sighan/train2015.tsv …
    python -m corrector.finetune pairs --train ../shared/data/csc/sighan/train2015.tsv … \
        --exclude runs/finetune/dev.tsv --output runs/finetune
    python -m corrector.finetune prior --model runs/finetune --train ../shared/data/csc/sighan/train2015.tsv … \
        --exclude runs/finetune/dev.tsv --corpus ../shared/data/corpus
    python -m corrector.finetune calibrate --model runs/finetune --dev runs/finetune/dev.tsv
    python -m corrector.finetune calibrate --model runs/model --dev runs/broad/dev.tsv --broad runs/broad
    python -m corrector.finetune heldout --model runs/finetune --dev runs/finetune/dev.tsv --splits 8 --json ho.json
    python -m corrector.finetune ship --model runs/finetune --output data/model
    python -m corrector.finetune require --model data/model --pair 少先队员因该为老人让坐 少先队员应该为老人让座
"""

from __future__ import annotations

import argparse
import random
import sys

from ..runtime.models import GENERATOR_INPUTS
from ..training import add_config_arguments, config_from_args, subcommand_parser
from .operating import MAX_CLEAN_FPR, MAX_DOMAIN_FPR
from .synth import KINDS, SynthConfig
from .train import FinetuneConfig

CORRECT_SIDES_HELP = ("add the correct side of every dev pair with errors as an error-free sentence (default: on; "
                      "the tests and text in use are half error-free or more, a dev split carved from SIGHAN's "
                      "training sets is not)")
HELP = {
    "train": "training data files (TSV label/source/target, source/target, JSON/JSONL, SIGHAN pairs)",
    "init": "pre-trained model directory (discriminator/ + generator/) or hub discriminator id",
    "output": "output directory: checkpoints/, metrics.jsonl, dev.tsv, the fine-tuned model",
    "dev_from": "training files that give up --dev-share of their pairs to the calibration dev set",
    "dev_share": "share of each --dev-from file held out as dev",
    "dev_seed": "seed of the dev split (default: --seed); keep it when a continued fine-tune takes another --seed "
                "for a new data order",
    "max_length": "longest sequence incl. [CLS]/[SEP]; longer sentences are split into windows",
    "batch_size": "sentences per process per micro-step",
    "generator_input": "what the generator reads: 'source' (the text as written; it predicts every character) "
                       "or 'masked' (errors masked; it predicts those)",
    "extra_mask_prob": "share of characters also masked for the generator",
    "disc_weight": "λ: weight of the detection loss",
    "error_weight": "weight of the generator loss at wrong characters relative to the others (1: plain mean)",
    "generator_from_discriminator": "start the generator from the discriminator's encoder (full width) instead of "
                                    "the narrower pre-training generator",
    "discriminator_layers": "start from this many of the initial discriminator's layers, evenly spaced from first to "
                            "last (fewer: faster; more: each layer repeated in place, 0 0 1 1 2 2; default: all)",
    "generator_layers": "start from this many of the initial generator's layers, evenly spaced, repeated when more "
                        "(default: all)",
    "freeze_discriminator": "train the generator alone: the discriminator and the shared embeddings stay as they are",
    "seed": "random seed (data order, masking; the dev split too unless --dev-seed)",
    "length_buckets": "batch widths a GPU or --compile step pads to (the first that holds the longest sentence), so "
                      "compiled graphs are reused; 0: pad to the longest (default: 32 64 96 128)",
}


BROAD_HELP = ("a `finetune broad` folder: choose by the macro F1 of its error parts with at most --max-clean-fpr of "
              "its clean parts' sentences changed (pooled) and at most --max-domain-fpr of each clean part's, and "
              "report each part")
MAX_FPR_HELP = ("the share of the clean parts' sentences, pooled over all of them, the operating point may change "
                "(default: %(default)s)")
MAX_DOMAIN_FPR_HELP = ("the share of each clean part's own sentences (clean, clean_<domain>) the operating point may "
                       "change (default: %(default)s); when no threshold meets both ceilings, the one that overshoots "
                       "least")


def _add_broad_options(parser: argparse.ArgumentParser, broad_help: str) -> None:
    """--broad, --max-clean-fpr and --max-domain-fpr, which calibrate and heldout share."""
    parser.add_argument("--broad", default=None, metavar="DIR", help=broad_help)
    parser.add_argument("--max-clean-fpr", type=float, default=MAX_CLEAN_FPR, help=MAX_FPR_HELP)
    parser.add_argument("--max-domain-fpr", type=float, default=MAX_DOMAIN_FPR, help=MAX_DOMAIN_FPR_HELP)


def margin_value(text: str) -> float | None:
    """A --margin-grid or --context-flag-rates entry: a number, or 'off' (no such flags)."""
    return None if text.lower() == "off" else float(text)


def _add_synth_command(commands) -> None:
    synth = commands.add_parser("synth", help="make synthetic error/correct pairs from clean text")
    synth.add_argument("--corpus", nargs="+", required=True, help="clean text files or directories")
    synth.add_argument("--output", required=True, help="TSV to write (label<TAB>source<TAB>target)")
    synth.add_argument("--size", type=int, default=50000, help="sentences to sample (default: 50000)")
    synth.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    synth.add_argument("--error-free", type=float, default=0.3, help="share of sentences left error-free (default: 0.3)")
    synth.add_argument("--kind-weights", type=float, nargs=len(KINDS), metavar="W",
                       help=f"weights of the substitution kinds {' '.join(KINDS)} (default: "
                            f"{' '.join(map(str, SynthConfig.kind_weights))}, the first release's pairs)")
    synth.add_argument("--vocab", help="model/tokenizer dir: only characters of its vocabulary become substitutes")
    synth.add_argument("--error-model", nargs="+", default=[], metavar="PAIRS",
                       help="real error pairs: which characters writers replace by which (kind real_pair) and how "
                            "many errors a sentence has (0-4); prints generated vs real statistics")
    synth.add_argument("--fuzzy-pinyin", action="store_true",
                       help="homophone words also by near pinyin (zh/z, ch/c, sh/s, l/n, ang/an, eng/en, ing/in)")
    synth.add_argument("--exclude", nargs="+", default=[], metavar="DEV",
                       help="leave out corpus sentences that share an 8-character run with these pairs' correct sides")
    synth.add_argument("--all-readings", action="store_true",
                       help="same and similar pinyin through every reading pypinyin lists, also those no phrase uses "
                            "(逐 dí, 有 wèi): the release's networks were trained on such draws")


def _add_broad_command(commands) -> None:
    broad = commands.add_parser("broad", help="cut the broad dev set (one part per error source + clean text) "
                                             "and the training remainders from the shared data")
    broad.add_argument("--shared", default=None, help="shared data folder (default: $CSC_SHARED_DATA or ../shared/data)")
    broad.add_argument("--output", required=True, help="folder for dev/, dev.tsv, train/, corpus/, corpus_domains/, parts.json")
    broad.add_argument("--seed", type=int, default=42, help="split seed (default: 42, the release's dev split)")


def _add_train_command(commands) -> None:
    train = commands.add_parser("train", help="fine-tune discriminator (detection) + generator (correction)")
    add_config_arguments(train, FinetuneConfig, HELP, required=("train",))


def _add_pairs_command(commands) -> None:
    pairs = commands.add_parser("pairs", help="count real corrections (a -> b, and per written bigram) of training pairs into MODEL/error_pairs.json")
    pairs.add_argument("--train", nargs="+", required=True,
                       help="human-made CSC training files (SIGHAN/ECSpell train; not synthetic data, whose "
                            "errors only echo the confusion sets)")
    pairs.add_argument("--exclude", nargs="*", default=[],
                       help="data sets whose pairs are left out (the calibration dev split)")
    pairs.add_argument("--shared-span", type=int, default=0,
                       help="also leave out every training pair whose correct side shares a run of this many "
                            "characters with an --exclude sentence, e.g. 8 (default: 0, the exact pairs only: "
                            "on this project's dev split the pairs' evidence was worth more than their leak)")
    pairs.add_argument("--output", required=True, help="model directory (or .json path) to write error_pairs.json to")


def _add_prior_command(commands) -> None:
    prior = commands.add_parser("prior", help="fit the scorer's prior network on the training pairs out of fold "
                                              "(n-gram LM and error pairs counted without each fold); run calibrate after")
    prior.add_argument("--model", required=True, help="fine-tuned model directory with ngram.safetensors and error_pairs.json")
    prior.add_argument("--train", nargs="+", required=True, help="the real training pairs the model's tables count")
    prior.add_argument("--exclude", nargs="+", required=True, help="the calibration dev split (left out with its overlaps)")
    prior.add_argument("--corpus", nargs="+", required=True, help="the corpus the model's n-gram LM was counted from")
    prior.add_argument("--folds", type=int, default=2, help="folds of the training pairs (default: 2)")
    prior.add_argument("--shared-span", type=int, default=8,
                       help="pairs sharing a run of this many characters go to one fold (default: 8)")
    prior.add_argument("--order", type=int, default=None, help="n-gram order (default: the model's LM's)")
    prior.add_argument("--pairs-weight", type=int, default=3, help="times each correct side is counted (default: 3)")
    prior.add_argument("--hidden", type=int, default=16, help="hidden units of the prior network (default: 16)")
    prior.add_argument("--seed", type=int, default=0, help="fold shuffle and network initialisation (default: 0)")
    prior.add_argument("--batch-size", type=int, default=32, help="sentences per correction batch while scoring candidates (default: 32)")


def _add_calibrate_command(commands) -> None:
    cal = commands.add_parser("calibrate", help="fit scorer weights and thresholds on dev; writes MODEL/scorer.json")
    cal.add_argument("--model", required=True, help="fine-tuned model directory")
    cal.add_argument("--dev", required=True, help="dev set carved from training data (e.g. OUTPUT/dev.tsv of train)")
    cal.add_argument("--batch-size", type=int, default=32, help="sentences per correction batch on dev (default: 32)")
    cal.add_argument("--detection-grid", type=float, nargs="+", default=None,
                     help="detection thresholds to try (default: 0 0.005 0.01 0.02 0.05 0.1 0.3)")
    cal.add_argument("--margin-grid", nargs="+", default=None, type=margin_value,
                     help="generator flag margins to try with each detection threshold, 'off' for none "
                          "(default: off 2 1 0 -0.5; a 'source' generator only)")
    cal.add_argument("--flag-lm-weights", type=float, nargs="+", default=None,
                     help="weights of the n-gram LM's evidence in the generator flag score to try with each "
                          "margin, 0 for the margin alone (default: 0 0.5; a model with an n-gram LM only)")
    cal.add_argument("--context-flag-rates", nargs="+", default=None, type=margin_value,
                     help="context flag rates to try with each setting, 'off' for none (default: off 0.5; a model "
                          "whose error_pairs.json has context counts only)")
    cal.add_argument("--hidden", type=int, default=16,
                     help="hidden units of the scorer network; 0 fits the linear scorer (default: 16)")
    cal.add_argument("--seed", type=int, default=0,
                     help="initialisation of the scorer network (default: 0); its held-out dev F1 moves by ~0.015 "
                          "with the seed alone")
    cal.add_argument("--members", type=int, default=5,
                     help="scorer networks fitted from seeds SEED, SEED+1, ... and averaged into one (default: 5)")
    cal.add_argument("--fit-detection-threshold", type=float, default=None,
                     help="detection threshold of the candidates the scorer is fitted on (default: the grid's lowest), "
                          "so that one setting can be refitted alone on the same candidates as a full grid")
    cal.add_argument("--generator-input", choices=GENERATOR_INPUTS, default=None,
                     help="feed the generator this way (default: as fine-tuning trained it); recorded in scorer.json")
    cal.add_argument("--word-candidates", action="store_true",
                     help="also propose dictionary words that sound like a written span (homophones.py) and fit the "
                          "scorer on them; the corrector then proposes them with this scorer")
    cal.add_argument("--word-flag-gain", type=_gain_or_off, default=8.0, metavar="NATS|off",
                     help="with --word-candidates: also examine the characters of a homophone word that gains more "
                          "than this in the n-gram LM, whatever the other flag rules say (default: 8; off: none)")
    cal.add_argument("--correct-sides", action=argparse.BooleanOptionalAction, default=True,
                     help=CORRECT_SIDES_HELP)
    cal.add_argument("--acceptor", action="store_true",
                     help="also fit an acceptor over each position's winner (acceptor.py; LightGBM) and sweep every "
                          "edit threshold out of fold (finetune/crossfit.py); `heldout` then does the same")
    _add_broad_options(cal, BROAD_HELP)


def _add_heldout_command(commands) -> None:
    held = commands.add_parser("heldout", help="held-out dev F1 of a calibrated model over random half splits of dev, "
                                               "both ways (scorer refitted on one half, scored on the other)")
    held.add_argument("--model", required=True, help="calibrated model directory (its scorer.json gives the settings)")
    held.add_argument("--dev", required=True, help="the dev split the model was calibrated on")
    held.add_argument("--splits", type=int, default=8, help="random half splits, each used both ways (default: 8)")
    held.add_argument("--first-split", type=int, default=0,
                      help="seed of the first split (default: 0): splits FIRST .. FIRST+SPLITS-1")
    held.add_argument("--members", type=int, default=5, help="scorer networks averaged per fit (default: 5)")
    held.add_argument("--fit-detection-threshold", type=float, default=0.01,
                      help="detection threshold of the candidates the scorer is fitted on (default: 0.01)")
    held.add_argument("--batch-size", type=int, default=32, help="sentences per correction batch on dev (default: 32)")
    held.add_argument("--correct-sides", action=argparse.BooleanOptionalAction, default=True,
                      help=CORRECT_SIDES_HELP + "; each goes with its pair")
    held.add_argument("--twins-of", nargs="+", default=[], metavar="TRAIN",
                      help="the training sets: also score each half on its sentences whose correct side shares no "
                           "8-character run with a training pair's (the networks have not seen them)")
    held.add_argument("--part", nargs="+", action="append", default=[], metavar=("NAME", "TRAIN"),
                      help="NAME TRAIN...: also score each half on its dev pairs drawn from these training sets "
                           "(and their correct sides), e.g. --part sighan <SIGHAN's training sets>; repeatable")
    _add_broad_options(held, BROAD_HELP + " (adds its parts to --part)")
    held.add_argument("--json", default=None, help="write every half's figures to this JSON file")


def _add_require_command(commands) -> None:
    req = commands.add_parser("require", help="set a calibrated model's edit threshold so that it makes the given "
                                              "corrections, among thresholds near-equal on dev; rewrites scorer.json")
    req.add_argument("--model", required=True, help="calibrated model directory (e.g. the release, after its tables)")
    req.add_argument("--pair", nargs=2, action="append", required=True, metavar=("SOURCE", "TARGET"),
                     help="a correction the model must make (repeatable)")
    req.add_argument("--tolerance", type=float, default=None,
                     help="dev correction F1 the required corrections may cost (default: 0.002)")


def _add_ship_command(commands) -> None:
    ship = commands.add_parser("ship", help="write the release layout: fp16 weights, tokenizer, scorer.json, ngram; no checkpoints")
    ship.add_argument("--model", required=True, help="fine-tuned (and calibrated) model directory")
    ship.add_argument("--output", required=True, help="release directory (e.g. data/model)")
    ship.add_argument("--fp32", action="store_true", help="keep fp32 weights (default: fp16, half the size)")


def build_parser() -> argparse.ArgumentParser:
    adders = (_add_broad_command, _add_synth_command, _add_train_command, _add_pairs_command, _add_prior_command,
              _add_calibrate_command, _add_heldout_command, _add_require_command, _add_ship_command)
    return subcommand_parser("python -m corrector.finetune", __doc__, adders)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def run_prior(args: argparse.Namespace) -> int:
    from .prior import fit_prior_network

    fit_prior_network(args.model, args.train, args.exclude, args.corpus, folds=args.folds,
                      shared_span=args.shared_span, order=args.order, pairs_weight=args.pairs_weight,
                      hidden=args.hidden, seed=args.seed, batch_size=args.batch_size)
    return 0


def run_require(args: argparse.Namespace) -> int:
    from .calibrate import require

    require(args.model, [tuple(pair) for pair in args.pair],
            **({"tolerance": args.tolerance} if args.tolerance is not None else {}))
    return 0


def run_train(args: argparse.Namespace) -> int:
    from .train import train as run_training

    run_training(config_from_args(FinetuneConfig, args))
    return 0


def _gain_or_off(value: str) -> float | None:
    return None if value == "off" else float(value)


def run_calibrate(args: argparse.Namespace) -> int:
    from .calibrate import calibrate
    from .operating import read_clean_parts, read_parts

    grids = {name: value for name, value in (("detection_grid", args.detection_grid),
                                              ("margin_grid", args.margin_grid),
                                              ("lm_weight_grid", args.flag_lm_weights),
                                              ("context_rate_grid", args.context_flag_rates)) if value}
    calibrate(args.model, args.dev, batch_size=args.batch_size, hidden=args.hidden, seed=args.seed,
              members=args.members, fit_detection_threshold=args.fit_detection_threshold,
              generator_input=args.generator_input, word_candidates=args.word_candidates,
              word_flag_gain=args.word_flag_gain,
              correct_sides=args.correct_sides, parts=read_parts(args.broad) if args.broad else None,
              max_clean_fpr=args.max_clean_fpr, clean=read_clean_parts(args.broad) if args.broad else None,
              max_domain_fpr=args.max_domain_fpr, acceptor=args.acceptor, **grids)
    return 0


def run_heldout(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict
    from pathlib import Path

    from ..evaluation.ceiling import mean_shares, pooled, shares_text
    from .calibrate import held_out_splits
    from .operating import read_clean_parts, read_parts

    if args.splits < 1:
        raise ValueError(f"--splits must be at least 1, got {args.splits}")
    if any(len(part) < 2 for part in args.part):
        raise ValueError("--part takes a name and at least one training set")
    parts = {part[0]: part[1:] for part in args.part}
    broad = read_parts(args.broad) if args.broad else {}
    scores = held_out_splits(args.model, args.dev, range(args.first_split, args.first_split + args.splits),
                             batch_size=args.batch_size, fit_detection_threshold=args.fit_detection_threshold,
                             members=args.members, correct_sides=args.correct_sides, twins_of=args.twins_of,
                             parts={**parts, **broad}, max_clean_fpr=args.max_clean_fpr if broad else None,
                             clean=read_clean_parts(args.broad) if broad else None, max_domain_fpr=args.max_domain_fpr)
    one = sum(s.one_pass for s in scores) / len(scores)
    two = sum(s.two_passes for s in scores) / len(scores)
    from ..pipeline import CorrectorConfig

    # "two_passes" (the JSON keys, kept for continuity): as the corrector runs by default.
    default = f"{CorrectorConfig().passes} passes"
    print(f"held-out dev correction F1 over {len(scores)} halves: one pass {one:.4f}, {default} {two:.4f}")
    report = {"model": args.model, "dev": args.dev, "one_pass": round(one, 4), "two_passes": round(two, 4),
              "subsets": {}}
    for name in dict.fromkeys(name for s in scores for name in s.subsets):  # the parts, then "new", as scored
        present = [s.subsets[name] for s in scores if name in s.subsets]
        report["subsets"][name] = {key: round(sum(f[key] for f in present) / len(present), 4)
                                   for key in ("one_pass", "two_passes")} | {"halves": len(present)}
        what = "the sentences without a training twin" if name == "new" else f"the dev pairs from {name}"
        print(f"on {what}, over {len(present)} halves: one pass {report['subsets'][name]['one_pass']:.4f}, "
              f"{default} {report['subsets'][name]['two_passes']:.4f}")
    if broad:
        report["macro"] = {key: round(sum(s.macro[key] for s in scores) / len(scores), 4) for key in scores[0].macro}
        print(f"macro F1 of the broad dev's parts over {len(scores)} halves: one pass {report['macro']['one_pass']:.4f}, "
              f"{default} {report['macro']['two_passes']:.4f}; clean sentences changed: "
              f"{report['macro']['clean_fpr_one_pass']:.4f}, {report['macro']['clean_fpr_two_passes']:.4f}")
        report["clean_fpr"] = _pooled_clean_rates(scores, args.max_clean_fpr, args.max_domain_fpr, default)
    ceilings = pooled([s.ceiling for s in scores if s.ceiling])
    if ceilings:  # where the other halves' errors are lost (evaluation/ceiling.py), their counts pooled
        report["ceiling"] = {name: r.to_dict() for name, r in ceilings.items()}
        shown = "; ".join(f"{name} {shares_text(r.to_dict())}" for name, r in ceilings.items() if r.errors)
        print(f"candidate ceiling over {len(scores)} halves' errors (%, flagged / coverage / ceiling / recall, "
              f"{default}): {shown}")
        if broad:
            report["ceiling_macro"] = mean_shares([ceilings[name] for name in broad if name in ceilings])
            print(f"candidate ceiling, macro over the broad dev's parts: {shares_text(report['ceiling_macro'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({**report, "halves": [asdict(s) for s in scores]}, indent=1) + "\n",
                                   encoding="utf-8")
    return 0


def _pooled_clean_rates(scores, max_clean_fpr: float, max_domain_fpr: float, default: str) -> dict:
    """Each clean part's share of sentences changed and all of theirs (pooled), from the halves'
    counts (`HalfScore.clean`), printed; what --json records. From counts, not a mean of the
    halves' rates: a domain's 300 dev sentences split unevenly between the halves."""
    ways = ("one_pass", "two_passes")
    counts: dict[str, dict[str, list[int]]] = {}  # part -> way -> [false positives, error-free sentences]
    for score in scores:
        for way, parts in (score.clean or {}).items():
            for name, (changed, sentences) in parts.items():
                total = counts.setdefault(name, {w: [0, 0] for w in ways})[way]
                total[0] += changed
                total[1] += sentences

    def rates(parts: list[str]) -> dict:
        out = {}
        for way in ways:
            changed, sentences = (sum(counts[name][way][k] for name in parts) for k in (0, 1))
            out[way] = round(changed / sentences, 4) if sentences else None
        out["sentences"] = sum(counts[name]["one_pass"][1] for name in parts)
        return out

    report = {"max_clean_fpr": max_clean_fpr, "max_domain_fpr": max_domain_fpr, "pooled": rates(list(counts)),
              "parts": {name: rates([name]) for name in counts}}

    def shown(figures: dict) -> str:
        return "/".join("n/a" if figures[way] is None else f"{100 * figures[way]:.2f}" for way in ways)

    print(f"clean sentences changed over {len(scores)} halves (%, one pass/{default}; at most {100 * max_clean_fpr:g} "
          f"pooled, {100 * max_domain_fpr:g} each): pooled {shown(report['pooled'])}; "
          + "; ".join(f"{name} {shown(figures)}" for name, figures in report["parts"].items()))
    return report


def run_ship(args: argparse.Namespace) -> int:
    """Weights are stored in fp16 (every loader of this project reads them back as fp32; inference
    results move by ~1e-4), the rest is copied: the release is what a user downloads."""
    import shutil
    from pathlib import Path

    import torch

    from ..pretrain.modeling import load_pair
    from ..resources.error_pairs import FILENAME as ERROR_PAIRS_FILE
    from ..resources.ngram import FILENAME as NGRAM_FILE
    from ..resources.particles import FILENAME as PARTICLES_FILE
    from ..runtime.models import SCORER_FILE, save_pair

    source, target = Path(args.model), Path(args.output)
    discriminator, generator, tokenizer_dir = load_pair(str(source))
    for half in ("discriminator", "generator"):
        shutil.rmtree(target / half, ignore_errors=True)  # no stale shards from an earlier release
    save_pair(discriminator, generator, str(target), tokenizer_dir, dtype=None if args.fp32 else torch.float16)
    for name in (SCORER_FILE, NGRAM_FILE, ERROR_PAIRS_FILE, PARTICLES_FILE):
        if (source / name).exists():
            shutil.copy2(source / name, target / name)
        else:
            print(f"warning: {source / name} is missing; the release has none", file=sys.stderr)
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    print(f"shipped {source} -> {target} ({size / 1e6:.1f} MB)")
    return 0


def run_pairs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..resources.error_pairs import FILENAME, ErrorPairs
    from ..splits import HeldOut

    held_out = HeldOut(args.exclude, args.shared_span)
    table, overlapping = ErrorPairs.count_training(args.train, held_out)
    output = Path(args.output)
    if output.suffix != ".json":
        output.mkdir(parents=True, exist_ok=True)
        output = output / FILENAME
    table.save(output)
    print(f"{table.sentences} sentences ({len(held_out.pairs)} excluded pairs, {overlapping} overlapping them) "
          f"-> {len(table)} error pairs, "
          f"{sum(table.char_counts.values())} characters -> {output}")
    return 0


def run_synth(args: argparse.Namespace) -> int:
    from ..resources.confusion import ConfusionSet
    from ..splits import HeldOut, load_pairs
    from .synth import ErrorModel, ErrorSynthesizer, iter_sentences, reservoir_sample, write_pairs

    rest = 1.0 - args.error_free
    config = SynthConfig(error_counts=(args.error_free, rest * 0.64, rest * 0.24, rest * 0.12), seed=args.seed,
                         fuzzy_pinyin=args.fuzzy_pinyin)
    if args.kind_weights:
        config.kind_weights = tuple(args.kind_weights)
    real = [pair for spec in args.error_model for pair in load_pairs(spec)]
    error_model = ErrorModel.count(real) if real else None
    if error_model:
        config.error_counts = error_model.error_counts(args.error_free)
    allowed = None
    if args.vocab:
        from transformers import AutoTokenizer

        from ..text.tokenization import is_cjk

        vocab = AutoTokenizer.from_pretrained(args.vocab).get_vocab()
        allowed = sorted((t for t in vocab if is_cjk(t)), key=vocab.__getitem__)  # our vocabularies are frequency-ordered
    confusion = ConfusionSet.build(all_readings=args.all_readings)
    synthesizer = ErrorSynthesizer(confusion, allowed=allowed, config=config, error_model=error_model)
    held_out = HeldOut(args.exclude)
    usable = (s for s in iter_sentences(args.corpus, synthesizer.usable) if not held_out.overlaps(s))
    sentences = reservoir_sample(usable, args.size, random.Random(args.seed))
    if not sentences:
        raise ValueError(f"no usable sentences in {args.corpus}")
    pairs = [(synthesizer.corrupt(s), s) for s in sentences]
    count = write_pairs(args.output, pairs)
    stats = synthesizer.stats
    print(f"{count} pairs -> {args.output}: {stats.with_errors} with errors "
          f"({stats.with_errors / max(1, stats.sentences):.1%}), substitutions {stats.substitutions}")
    if real:
        print_statistics(pairs, real, confusion)
    return 0


def print_statistics(generated: list[tuple[str, str]], real: list[tuple[str, str]], confusion) -> None:
    """Generated vs real pairs side by side (`synth.describe_pairs`)."""
    from .synth import describe_pairs

    ours, theirs = describe_pairs(generated, confusion), describe_pairs(real, confusion)
    print(f"{'statistic':<22}{'generated':>10}{'real':>10}")
    for key in ours:
        print(f"{key:<22}{ours[key]:>10}{theirs[key]:>10}" if key == "sentences"
              else f"{key:<22}{ours[key]:>10.3f}{theirs[key]:>10.3f}")


def run_broad(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..datasets import data_root
    from ..resources.confusion import ConfusionSet
    from . import broad
    from .synth import ErrorModel, ErrorSynthesizer

    shared = Path(args.shared) if args.shared else data_root()
    output = Path(args.output)
    # The multi part's errors: every kind, as real writers make them (the real pairs' error model,
    # counted from SIGHAN's training remainders so no dev pair is read), 2-4 a sentence.
    real = [pair for name in ("train2013", "train2014", "train2015")
            for pair in broad.split_dev(broad.load_pairs(shared / "csc" / "sighan" / f"{name}.tsv"), 0.08, args.seed)[0]]
    config = SynthConfig(error_counts=(0, 0, 0.5, 0.3, 0.2), kind_weights=(0.3, 0.1, 0.15, 0.02, 0.2, 0.15, 0.08),
                         fuzzy_pinyin=True, seed=args.seed)
    synthesizer = ErrorSynthesizer(ConfusionSet.build(), config=config, error_model=ErrorModel.count(real))
    dev = broad.build(shared, synthesizer, seed=args.seed)
    kept, dropped = broad.write_corpus_without(shared / "corpus", output / "corpus", dev.held_sentences)
    domains = broad.write_domains_without(shared / "corpus_domains", output / "corpus_domains", dev.held_sentences)
    summary = broad.write(dev, output, {"corpus": {"lines_kept": kept, "lines_dropped": dropped},
                                        "corpus_domains": {"lines_kept": domains[0], "lines_dropped": domains[1]}})
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    return 0


COMMANDS = {"broad": run_broad, "synth": run_synth, "train": run_train, "pairs": run_pairs, "prior": run_prior, "calibrate": run_calibrate,
            "heldout": run_heldout, "require": run_require, "ship": run_ship}


if __name__ == "__main__":
    sys.exit(main())
