"""Command line: `python -m corrector "文本"` or `python -m corrector --input FILE`.

Texts given as arguments: the corrected text on one line, then one line per edit
(`  <position>\t<source> -> <target>\t<kind>\t<confidence>`). With --input FILE (or text on
stdin), one text per line, read and written a block of lines at a time (a file of any size
needs the memory of one block): the output has one corrected line per input line, each with
its input line's ending (CRLF, LF, or none on a last line without one), so the two files stay
aligned and differ only where something was corrected. --json prints one JSON object per input
instead: {"source", "target", "edits"}, one per line.

Lines that are not valid UTF-8 are reported on stderr as FILE:LINE and written out unchanged,
byte for byte (or {"line": N, "error": ...} with --json); the other lines are still corrected
and the exit status is 1. Exit status 2: the model or the input file could not be read at all,
or an option is out of range (--threshold outside [0, 1], --max-edits below 0, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from .runtime import RUNTIMES
from .runtime.allocator import collector_paused, release_free_memory
from .text.script import CHOICES as TRADITIONAL_CHOICES

EXIT_OK, EXIT_BAD_LINES, EXIT_FATAL = 0, 1, 2
BLOCK_LINES = 1024  # lines corrected per call: enough to sort into well-filled batches


def probability(value: str) -> float:
    """An argparse type: a number in [0, 1], as the library checks it (`scoring.probability`: nan
    and inf refused)."""
    from .scoring import probability as in_range

    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    try:
        return in_range(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value} is outside [0, 1]") from None


def count(minimum: int):
    """An argparse type: a whole number >= `minimum`."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return number

    parse.__name__ = f"whole number >= {minimum}"
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m corrector", description="Chinese spelling correction (中文拼写纠错)")
    parser.add_argument("texts", nargs="*", help="texts to correct (default: read --input or stdin)")
    parser.add_argument("--input", "-i", help="file with one text per line ('-' for stdin)")
    parser.add_argument("--output", "-o", help="write results here instead of stdout")
    parser.add_argument("--json", action="store_true", help="one JSON object per input: source, target, edits")
    parser.add_argument("--model", help="model directory or hub id (default: $CORRECTOR_MODEL or data/model)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument("--threshold", type=probability, help="minimum confidence (0-1) of an edit (default: scorer.json)")
    parser.add_argument("--detection-threshold", type=probability, help="discriminator probability that flags a character")
    parser.add_argument("--batch-size", type=count(1), default=32,
                        help="sentences per correct_batch call (default: 32): larger batches are faster per sentence")
    parser.add_argument("--max-edits", type=count(0), default=None, help="most edits per sentence (default 4)")
    parser.add_argument("--passes", type=int, choices=(1, 2, 3), default=None,
                        help="3 (default, CorrectorConfig.passes): the sentences with edits are corrected again, "
                             "from half the threshold, and those that changed once more; 1: one pass, about half "
                             "the time for such texts")
    parser.add_argument("--whitelist", help="file of terms never to change, one per line")
    parser.add_argument("--confusion", help="file of extra confusion pairs: 'a b' or 'a:bcd' per line")
    parser.add_argument("--traditional", choices=TRADITIONAL_CHOICES, default="tw",
                        help="traditional-script texts are corrected in simplified form and written back in this "
                             "variant: tw (Taiwan, default), hk (Hong Kong), t (OpenCC standard); off: every text as written, "
                             "so traditional text gets simplified corrections (mixed scripts) and more false edits")
    parser.add_argument("--threads", type=count(1), help="torch CPU threads (default: torch's choice; 1 on a busy machine)")
    parser.add_argument("--quantize", action=argparse.BooleanOptionalAction, default=None,
                        help="int8 networks (the default on CPU: ~1.4x faster, same F1); --no-quantize for fp32")
    parser.add_argument("--runtime", choices=RUNTIMES, default="auto",
                        help="what runs the int8 networks' encoders: onnxruntime (~0.7x the time per sentence; "
                             "the default where installed) or torch")
    parser.add_argument("--bf16", action="store_true",
                        help="bf16 autocast for the networks instead (GPUs, CPUs with AVX512-BF16/AMX): faster "
                             "batches than fp32, confidences move by up to a few 1e-2")
    parser.add_argument("--classic", action="store_true", help="use the pycorrector-style baseline instead")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar for files")
    return parser.parse_args(argv)


BOM = b"\xef\xbb\xbf"


def read_lines(handle: BinaryIO, name: str) -> Iterator[tuple[int, str | bytes, str | None, str]]:
    """(line number, text - or its bytes when not UTF-8, error or None, line ending) per line of a
    binary stream, each line decoded on its own as it is read."""
    for number, raw in enumerate(handle, 1):
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM):]
        ending = b"\r\n" if raw.endswith(b"\r\n") else b"\n" if raw.endswith(b"\n") else b""
        raw = raw[:len(raw) - len(ending)]
        try:
            yield number, raw.decode("utf-8"), None, ending.decode()
        except UnicodeDecodeError as err:
            error = f"{name}:{number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})"
            yield number, raw, error, ending.decode()


def count_lines(path: Path) -> int:
    """Lines in a file, for the progress bar (read in 1 MiB chunks)."""
    lines, last = 0, b"\n"
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def build_corrector(args: argparse.Namespace):
    from .runtime.models import disable_loading_bars, load_model
    from .runtime.threads import set_threads

    disable_loading_bars()  # model loading bars would clutter the output
    if args.threads:
        set_threads(args.threads)
    if args.classic:
        from .baselines.classic import ClassicCorrector

        return ClassicCorrector(load_model(args.model, device=args.device), confusion_file=args.confusion)
    from .pipeline import DEFAULT_MAX_EDITS, Corrector, CorrectorConfig

    whitelist = Path(args.whitelist) if args.whitelist else ()
    config = CorrectorConfig(
        batch_size=args.batch_size,
        max_edits_per_sentence=args.max_edits if args.max_edits is not None else DEFAULT_MAX_EDITS,
        traditional=args.traditional,
        **({"passes": args.passes} if args.passes is not None else {}),
    )
    return Corrector(
        args.model,  # loaded by the Corrector: its int8 networks need no transformers (runtime/models.py)
        device=args.device,
        threshold=args.threshold,
        detection_threshold=args.detection_threshold,
        whitelist=whitelist,
        confusion_file=args.confusion,
        config=config,
        quantize=args.quantize,
        bf16=args.bf16,
        runtime=args.runtime,
    )


class LazyCorrector:
    """Loads the model on first use: input without Chinese text needs no model at all."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.corrector = None

    def load_for(self, texts: list[str]) -> bool:
        """Load the model if `texts` need it; whether it is loaded now."""
        from .text.tokenization import is_cjk

        if self.corrector is None and any(is_cjk(ch) for text in texts for ch in text):
            with collector_paused():  # no collections over what start-up loads (allocator.py)
                self.corrector = build_corrector(self.args)
        return self.corrector is not None

    def correct_batch(self, texts: list[str]):
        from .result import Result

        if not self.load_for(texts):
            return [Result.unchanged(t) for t in texts]
        return self.corrector.correct_batch(texts, batch_size=self.args.batch_size, threshold=self.args.threshold)


def format_result(result, as_json: bool, with_edits: bool) -> str:
    if as_json:
        return json.dumps(result.to_dict(), ensure_ascii=False)
    lines = [result.target]
    if with_edits:
        lines += [f"  {e.position}\t{e.source} -> {e.target}\t{e.kind}\t{e.confidence:.3f}" for e in result.edits]
    return "\n".join(lines)


def run_lines(corrector: LazyCorrector, handle: BinaryIO, name: str, out, args: argparse.Namespace,
              total: int | None = None) -> int:
    from tqdm import tqdm

    status = EXIT_OK
    lines = read_lines(handle, name)
    with tqdm(total=total, unit="line", disable=args.no_progress, file=sys.stderr) as bar:
        loaded = False
        while block := list(islice(lines, BLOCK_LINES)):
            good = [text for _, text, error, _ in block if error is None]
            if not loaded and hasattr(corrector, "load_for"):
                # Load the model (seconds) before the bar's clock runs: its rate and time left
                # are the correction's, not the start-up's.
                loaded = corrector.load_for(good)
                if loaded:
                    bar.reset(total)
                    bar.update(block[0][0] - 1)  # the lines before this block needed no model
            results = iter(corrector.correct_batch(good))
            for number, text, error, ending in block:
                if args.json:
                    ending = "\n"  # JSON lines, whatever the input's line ends
                if error is not None:
                    print(error, file=sys.stderr)
                    status = EXIT_BAD_LINES
                    if args.json:
                        out.write(json.dumps({"line": number, "error": error}, ensure_ascii=False) + ending)
                    else:
                        write_bytes(out, text + ending.encode())
                else:
                    out.write(format_result(next(results), args.json, with_edits=False) + ending)
            out.flush()
            release_free_memory()  # memory stays bounded over a file of any length (allocator.py)
            bar.update(len(block))
    return status


def write_bytes(out, data: bytes) -> None:
    """`data` as it is into a text stream's file (a line that is not UTF-8 passes through)."""
    binary = getattr(out, "buffer", None)
    if binary is None:  # e.g. io.StringIO
        out.write(data.decode("utf-8", "replace"))
        return
    out.flush()
    binary.write(data)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    corrector = LazyCorrector(args)
    try:
        out = open(args.output, "w", encoding="utf-8", newline="\n") if args.output else sys.stdout
    except OSError as err:
        print(f"error: cannot write {args.output}: {err.strerror or err}", file=sys.stderr)
        return EXIT_FATAL
    try:
        if args.texts:
            if args.input:
                print("error: give texts as arguments or --input, not both", file=sys.stderr)
                return EXIT_FATAL
            for result in corrector.correct_batch(args.texts):
                out.write(format_result(result, args.json, with_edits=True) + "\n")
            return EXIT_OK
        if not args.input and sys.stdin.isatty():
            print("usage: python -m corrector TEXT ... | --input FILE | < FILE (see --help)", file=sys.stderr)
            return EXIT_FATAL
        if args.input and args.input != "-":
            path = Path(args.input)
            try:
                total = count_lines(path) if path.is_file() else None  # first: nothing is open if it fails
                handle = path.open("rb")
            except OSError as err:
                print(f"error: cannot read {args.input}: {err.strerror or err}", file=sys.stderr)
                return EXIT_FATAL
            with handle:
                return run_lines(corrector, handle, args.input, out, args, total)
        return run_lines(corrector, sys.stdin.buffer, "<stdin>", out, args)
    except (OSError, ValueError, RuntimeError) as err:  # model / whitelist / confusion file problems
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FATAL
    finally:
        if out is not sys.stdout:
            out.close()


def exit_now(status: int) -> None:
    """End the process with `status` once its output is flushed, without the interpreter's
    teardown: freeing every object the model and jieba's tables made, and the collections over
    them, took 0.4 s after a one-sentence call (2 cores), against 0.02 s this way. Nothing is
    left to do: the output file is closed, the logs are flushed here, and the batch threads are
    idle. Where flushing fails (a closed pipe), the normal exit reports it."""
    import logging

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    logging.shutdown()
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
