"""Command line: `python -m corrector "文本"` or `python -m corrector --input FILE`.

`python -m corrector check PATH...` checks files instead, like a linter (corrector/check/).

Texts given as arguments: the corrected text on one line, then one line per edit
(`  <position>\t<source> -> <target>\t<kind>\t<confidence>`). With --input FILE (or text on
stdin), one text per line, read and written a block of lines at a time: the output has one
corrected line per input line, each with its input line's ending (CRLF, LF, or none on a last line
without one) and a leading byte order mark kept, so the two files stay aligned and differ only
where something was corrected. --json prints one JSON object per input instead: {"source",
"target", "edits"}, one per line.

Memory is bounded whatever the input (cli_io.py): a physical read is at most 64 KiB, and a line
longer than `cli_io.WINDOW_CHARS` (16,384) characters — a whole document on one line — is
corrected in consecutive windows of at most that size, cut after a sentence end (else a clause
mark, else hard), and written out as one line as before. With --json such a line gives one object
per window, {"line", "offset", "source", "target", "edits"}: "offset" is the window's first
character in the line, edit positions count from the line's start, and the windows' sources
joined are the line. Lines up to the window size give one object each, as before.

Lines that are not valid UTF-8 are reported on stderr as FILE:LINE and written out unchanged,
byte for byte (or {"line": N, "error": ...} with --json; in a line longer than a window, from the
window with the bad byte on); the other lines are still corrected. Text arguments that are not
valid UTF-8 likewise: "argument N: ..." on stderr, the bytes as given (or {"argument": N, "error":
...}).

--output is written to a temporary file renamed over it at the end, so an interrupted or failed run
leaves the old file as it was (a device, FIFO or /dev/stdout is written directly), and an output
that is an input (the same name, a symlink or a hard link to it) is refused before anything is
opened.

Exit status: 0 done; 1 done, but some lines or arguments were not valid UTF-8; 2 nothing or not
all written: an option out of range or missing its file name, the model, the input or a
--whitelist/--confusion file unreadable, the output not writable or a write failing (disk full),
stdin or stdout closed; 130 interrupted (Ctrl-C); 141 the reader of the output went away (a closed
pipe, `| head`), quietly, as a tool killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from .cli_io import (
    BOM,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    WINDOW_CHARS,
    CliError,
    LineReader,
    Output,
    Piece,
    ReadError,
    WriteError,
    argument_bytes,
    argument_problem,
    blocks,
    file_problem,
    output_stream,
    written_in_place,
)
from .outputs import check_writable, output_clashes
from .runtime import RUNTIMES
from .runtime.allocator import collector_paused, release_free_memory
from .text.script import CHOICES as TRADITIONAL_CHOICES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from .result import Result

EXIT_OK, EXIT_BAD_LINES, EXIT_FATAL = 0, 1, 2
BLOCK_LINES = 1024  # lines (or windows of long lines) corrected per call: enough for well-filled batches
BLOCK_CHARS = 1 << 17  # ... or as many as make this many characters: a block's memory stays bounded


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


def count(minimum: int) -> Callable[[str], int]:
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


EPILOG = f"""\
long lines: a line longer than {WINDOW_CHARS:,} characters is corrected in windows of at most that
  size, cut after a sentence end (else a clause mark, else hard), and written back as one line;
  with --json, one object per window: {{"line", "offset", "source", "target", "edits"}}, edit
  positions counted from the line's start.
exit status: 0 done; 1 some lines or arguments not valid UTF-8 (passed through, reported);
  2 bad option, unreadable model/input/--whitelist/--confusion, unwritable output or a failed
  write (the old --output file is kept); 130 interrupted; 141 the output pipe was closed."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m corrector", description="Chinese spelling correction (中文拼写纠错)",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*", help="texts to correct (default: read --input or stdin)")
    parser.add_argument("--input", "-i", help="file with one text per line ('-' for stdin)")
    parser.add_argument("--output", "-o",
                        help="write results here instead of stdout ('-'), replacing the file only once all is "
                             "written; never one of the inputs")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per input: source, target, edits (a line longer than "
                             f"{WINDOW_CHARS:,} characters: one per window, with its line and offset)")
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

    def correct_batch(self, texts: list[str]) -> list[Result]:
        from .result import Result

        if not self.load_for(texts):
            return [Result.unchanged(t) for t in texts]
        return self.corrector.correct_batch(texts, batch_size=self.args.batch_size, threshold=self.args.threshold)


def format_result(result: Result, as_json: bool, with_edits: bool) -> str:
    if as_json:
        return json.dumps(result.to_dict(), ensure_ascii=False)
    lines = [result.target]
    if with_edits:
        lines += [f"  {e.position}\t{e.source} -> {e.target}\t{e.kind}\t{e.confidence:.3f}" for e in result.edits]
    return "\n".join(lines)


def say(message: str) -> None:
    """A line on stderr; nothing where stderr is closed (print(file=None) would write to stdout)."""
    if sys.stderr is not None:
        try:
            print(message, file=sys.stderr)
        except (OSError, ValueError):
            pass


def window_json(piece: Piece, result: Result) -> str:
    """One window of a long line: its line, its offset there, and edit positions in the line."""
    data = {"line": piece.line, "offset": piece.offset, **result.to_dict()}
    for edit in data["edits"]:
        edit["position"] += piece.offset
    return json.dumps(data, ensure_ascii=False)


def write_piece(out: Output, piece: Piece, results: Iterator[Result], as_json: bool) -> int:
    """Write one piece (its corrected text, or its bytes as read); EXIT_BAD_LINES where it
    starts a line that is not UTF-8, else EXIT_OK."""
    if isinstance(piece.text, bytes):
        if piece.error is not None:
            say(piece.error)
            if as_json:
                out.write(json.dumps({"line": piece.line, "error": piece.error}, ensure_ascii=False) + "\n")
        if not as_json:
            out.write_bytes(piece.text + (piece.ending or "").encode())
        return EXIT_BAD_LINES if piece.error is not None else EXIT_OK
    result = next(results)
    if not as_json:
        out.write(result.target + (piece.ending or ""))
    elif piece.whole:
        out.write(format_result(result, True, with_edits=False) + "\n")  # JSON lines, whatever the line ends
    elif piece.text:  # a window; an empty one (a line ending just after a window) adds nothing
        out.write(window_json(piece, result) + "\n")
    return EXIT_OK


def run_lines(corrector: LazyCorrector, handle: BinaryIO, name: str, out: TextIO | Output,
              args: argparse.Namespace, total: int | None = None) -> int:
    """Correct the lines of `handle` (windows of long ones, `cli_io.LineReader`) into `out`, a
    block at a time; the exit status."""
    from tqdm import tqdm

    out = out if isinstance(out, Output) else Output(out, "the output")
    reader = LineReader(handle, name)
    status = EXIT_OK
    with tqdm(total=total, unit="line", disable=args.no_progress or sys.stderr is None, file=sys.stderr) as bar:
        loaded = False
        for number, block in enumerate(blocks(reader, BLOCK_LINES, BLOCK_CHARS)):
            good = [piece.text for piece in block if isinstance(piece.text, str)]
            if not loaded and hasattr(corrector, "load_for"):
                # Load the model (seconds) before the bar's clock runs: its rate and time left
                # are the correction's, not the start-up's.
                loaded = corrector.load_for(good)
                if loaded:
                    bar.reset(total)
                    bar.update(block[0].line - 1)  # the lines before this block needed no model
            results = iter(corrector.correct_batch(good))
            if number == 0 and reader.bom and not args.json:
                out.write_bytes(BOM)  # read with the first line; JSON sources hold no BOM
            for piece in block:
                status = max(status, write_piece(out, piece, results, args.json))
            out.flush()
            release_free_memory()  # memory stays bounded over a file of any length (allocator.py)
            bar.update(sum(piece.ending is not None for piece in block))
    return status


def correct_arguments(corrector: LazyCorrector, texts: list[str], out: Output, as_json: bool) -> int:
    """Correct the text arguments into `out`; the exit status. One that is not UTF-8 (its bytes
    come as lone surrogates) is reported and passed through, like a bad line of a file."""
    problems = [argument_problem(number, text) for number, text in enumerate(texts, 1)]
    results = iter(corrector.correct_batch([t for t, problem in zip(texts, problems, strict=True) if problem is None]))
    status = EXIT_OK
    for number, (text, problem) in enumerate(zip(texts, problems, strict=True), 1):
        if problem is None:
            out.write(format_result(next(results), as_json, with_edits=True) + "\n")
            continue
        say(problem)
        status = EXIT_BAD_LINES
        if as_json:
            out.write(json.dumps({"argument": number, "error": problem}) + "\n")
        else:
            out.write_bytes(argument_bytes(text) + b"\n")
    return status


def reads_stdin(args: argparse.Namespace) -> bool:
    return not args.texts and args.input in (None, "-")


def output_path(args: argparse.Namespace) -> str | None:
    """The --output file, or None for stdout."""
    return None if args.output in (None, "-") else args.output


def argument_problems(args: argparse.Namespace) -> list[str]:
    """What makes the run impossible, found before anything is opened or loaded."""
    problems = []
    if args.input == "":
        problems.append("--input needs a file name; use - for stdin")
    if args.output == "":
        problems.append("--output needs a file name; leave it out (or use -) for stdout")
    if args.texts and args.input:
        problems.append("give texts as arguments or --input, not both")
    if problems:
        return problems
    output = output_path(args)
    problems += output_clashes({"--output": output}, [args.input] if args.input else [])
    if output is not None and not problems and not written_in_place(output):
        if (why := check_writable(output)) is not None:
            problems.append(f"cannot write --output {output}: {why}")
    for option, path in (("--whitelist", args.whitelist), ("--confusion", args.confusion)):
        if path and (why := file_problem(option, path)) is not None:
            problems.append(why)
    if output is None and sys.stdout is None:
        problems.append("stdout is closed: give --output FILE")
    if reads_stdin(args) and sys.stdin is None:
        problems.append("stdin is closed: give texts, or --input FILE")
    return problems


def open_input(args: argparse.Namespace) -> tuple[BinaryIO, str, int | None]:
    """The input stream, its name for messages, and its lines where countable (the bar's total)."""
    if reads_stdin(args):
        return sys.stdin.buffer, "<stdin>", None
    path = Path(args.input)
    try:
        total = count_lines(path) if path.is_file() else None  # first: nothing is open if it fails
        return path.open("rb"), args.input, total
    except OSError as err:
        raise ReadError(args.input, err) from None


def run(args: argparse.Namespace) -> int:
    """Check, open, correct, write: main without its handling of Ctrl-C."""
    if problems := argument_problems(args):
        for problem in problems:
            say(f"error: {problem}")
        return EXIT_FATAL
    if reads_stdin(args) and args.input is None and sys.stdin.isatty():
        say("usage: python -m corrector TEXT ... | --input FILE | < FILE (see --help)")
        return EXIT_FATAL
    output = output_path(args)
    corrector = LazyCorrector(args)
    try:
        handle, name, total = (None, "", None) if args.texts else open_input(args)
        owned = handle is not None and not reads_stdin(args)  # stdin is not ours to close
        # The input is open before the output: an unreadable input leaves an old output alone.
        with handle if owned else nullcontext(), output_stream(output) as stream:
            out = Output(stream, output or "<stdout>")
            if args.texts:
                status = correct_arguments(corrector, args.texts, out, args.json)
            else:
                status = run_lines(corrector, handle, name, out, args, total)
            out.flush()
        return status
    except WriteError as err:
        if err.broken_pipe:
            return EXIT_BROKEN_PIPE
        say(f"error: {err}")
        return EXIT_FATAL
    except CliError as err:
        say(f"error: {err}")
        return EXIT_FATAL
    except (OSError, ValueError, RuntimeError) as err:  # model / whitelist / confusion file problems
        say(f"error: {err}")
        return EXIT_FATAL


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check"]:
        from .check import main as check_main

        return check_main(argv[1:])
    try:
        return run(parse_args(argv))
    except KeyboardInterrupt:  # Ctrl-C: --output is left as it was (cli_io.output_stream)
        say("interrupted")
        return EXIT_INTERRUPTED


def exit_now(status: int) -> None:
    """End the process with `status` once its output is flushed, without the interpreter's
    teardown: freeing every object the model and jieba's tables made, and the collections over
    them, took 0.4 s after a one-sentence call (2 cores), against 0.02 s this way. Nothing is
    left to do: the output file is closed, the logs are flushed here, and the batch threads are
    idle. Where flushing fails, `main` has already reported the failed write (a full disk, a closed
    pipe) and what stdout still holds is lost anyway: the interpreter's exit would only try again,
    print a traceback and change the status to 120."""
    import logging

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: the descriptor was closed when Python started
                stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
