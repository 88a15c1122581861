"""Command line: `python -m corrector.ray_corpus INPUT ... --output OUT` (docs/ray.md).

Corrects a corpus — text files (one text a line), JSONL (a text field) or Parquet (a text column),
files or directories of them — on a local Ray (the default; --num-cpus) or a cluster (--address),
with --actors actors of --cpus-per-actor CPUs, each holding one Corrector. Prints Ray Data's progress
while it runs, then the lines, the errors and the throughput (lines/s, lines/s per CPU).

Exit status: 0 done; 1 done, but some rows had an error (their `error` column says why; the
first few are printed); 2 nothing written: a bad option, an input missing, ray not installed, or the
run failed; 130 interrupted (Ctrl-C: a one-file output is left as it was).
"""

from __future__ import annotations

import argparse
import sys
import time

from ..__main__ import count, probability
from ..cli_io import EXIT_INTERRUPTED
from ..text.script import CHOICES as TRADITIONAL_CHOICES

try:
    from .corpus import DEFAULT_ROWS_PER_CALL, Plan, correct_corpus
    from .correcting import Settings
    from .reading import FORMATS, guess_format, input_files
    from .writing import DIRECTORY_FORMATS, Tally, output_file_format
except ModuleNotFoundError as missing:  # pyarrow, which ray[data] brings
    sys.exit(f"error: {missing.name} is not installed: pip install 'electra-csc[ray]' (or 'ray[data]')")

EXIT_OK, EXIT_ROW_ERRORS, EXIT_FATAL = 0, 1, 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m corrector.ray_corpus",
                                     description="Correct a corpus on Ray Data (中文拼写纠错, docs/ray.md)")
    parser.add_argument("inputs", nargs="+", help="files or directories (local, or s3://, gs://, hdfs:// ...)")
    parser.add_argument("--output", "-o", required=True,
                        help="OUT.jsonl / OUT.parquet / OUT.txt: one local file in line order; else a directory "
                             "of part files (any filesystem), rows matched back by their line column")
    parser.add_argument("--format", choices=FORMATS, help="input format (default: by suffix; .jsonl/.json, "
                                                           ".parquet, anything else text)")
    parser.add_argument("--text-field", default="text", help="JSONL field or Parquet column of the text (default: text)")
    parser.add_argument("--output-format", choices=DIRECTORY_FORMATS, default="jsonl",
                        help="format of a directory's parts (default: jsonl)")
    parser.add_argument("--model", help="model directory (the same path on every node) or hub id "
                                        "(default: $CORRECTOR_MODEL or data/model)")
    parser.add_argument("--threshold", type=probability, help="minimum confidence (0-1) of an edit (default: scorer.json)")
    parser.add_argument("--batch-size", type=count(1), default=DEFAULT_ROWS_PER_CALL,
                        help=f"rows an actor corrects per call (map_batches; default {DEFAULT_ROWS_PER_CALL})")
    parser.add_argument("--model-batch-size", type=count(1), default=32,
                        help="sentences per network batch in the Corrector (the CLI's --batch-size; default 32)")
    parser.add_argument("--passes", type=int, choices=(1, 2, 3), help="correction passes (default 3)")
    parser.add_argument("--max-edits", type=count(0), help="most edits per sentence (default 4)")
    parser.add_argument("--traditional", choices=TRADITIONAL_CHOICES, default="tw",
                        help="variant traditional-script texts are written back in (as the CLI's; default tw)")
    parser.add_argument("--actors", type=count(1), help="actors, one Corrector each (default: the CPUs Ray "
                                                         "has / --cpus-per-actor)")
    parser.add_argument("--cpus-per-actor", type=count(1), default=1,
                        help="CPUs Ray gives each actor, its batch threads (default 1)")
    parser.add_argument("--retries", type=count(0),
                        help="times a call is sent again when its actor dies, then the run fails (default: "
                             "no limit, Ray Data's)")
    parser.add_argument("--address", help="Ray cluster to join ('auto': the one started on this machine by "
                                          "`ray start`; ray://HOST:10001); default: a local Ray for this run")
    parser.add_argument("--num-cpus", type=count(1), help="CPUs of the local Ray (default: all)")
    parser.add_argument("--no-progress", action="store_true", help="no Ray Data progress bars")
    return parser.parse_args(argv)


def problems(args: argparse.Namespace) -> list[str]:
    """What makes the run impossible, found before Ray starts."""
    found = []
    if args.address and args.num_cpus:
        found.append("--num-cpus sizes a local Ray: a cluster (--address) has its own CPUs")
    if output_file_format(args.output) is not None and "://" in args.output:
        found.append(f"{args.output}: one file is written locally by the driver; give a directory for a URI")
    if args.output in args.inputs:
        found.append(f"--output {args.output} is one of the inputs")
    return found


def summary(tally: Tally, seconds: float, plan: Plan) -> str:
    """The closing lines: lines, errors, throughput overall and per CPU."""
    rate = tally.lines / seconds if seconds > 0 else 0.0
    lines = [f"corrected {tally.lines:,} lines in {seconds:.1f} s on {plan.actors} actor(s) x {plan.cpus_per_actor} "
             f"CPU: {rate:,.0f} lines/s, {rate / plan.cpus:,.0f} lines/s per CPU"]
    if tally.errors:
        lines.append(f"{tally.errors:,} line(s) with an error (column 'error'), e.g.:")
        lines += [f"  {example}" for example in tally.examples]
    return "\n".join(lines)


def start_ray(args: argparse.Namespace) -> bool:
    """Ray initialised as asked (unless it already is, as in a test or a notebook); whether here."""
    import ray

    if ray.is_initialized():
        return False
    options = {"num_cpus": args.num_cpus} if args.address is None else {}
    ray.init(address=args.address, include_dashboard=False, **options)
    return True


def run(args: argparse.Namespace) -> int:
    if found := problems(args):
        for problem in found:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_FATAL
    try:
        import ray
    except ImportError:
        print("error: ray is not installed: pip install 'electra-csc[ray]' (or 'ray[data]')", file=sys.stderr)
        return EXIT_FATAL
    try:
        files = input_files(args.inputs)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FATAL
    if not files:
        print(f"error: no files in {', '.join(args.inputs)}", file=sys.stderr)
        return EXIT_FATAL
    started = start_ray(args)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        plan = Plan(actors=args.actors or max(1, cpus // args.cpus_per_actor), cpus_per_actor=args.cpus_per_actor,
                    rows_per_call=args.batch_size, retries=args.retries)
        settings = Settings(model=args.model, threshold=args.threshold, batch_size=args.model_batch_size,
                            passes=args.passes, max_edits=args.max_edits, traditional=args.traditional,
                            threads=args.cpus_per_actor)
        begun = time.perf_counter()
        tally = correct_corpus(files, args.output, fmt=args.format or guess_format(files), text_field=args.text_field,
                               settings=settings, plan=plan, directory_format=args.output_format,
                               progress=not args.no_progress)
        print(summary(tally, time.perf_counter() - begun, plan), file=sys.stderr)
        return EXIT_ROW_ERRORS if tally.errors else EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a run Ray could not finish (a block failed past its retries, a bad column)
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FATAL
    finally:
        if started:
            ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
