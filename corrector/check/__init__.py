"""`python -m corrector check PATH...`: Chinese spelling in files, reported like a linter's.

    python -m corrector check docs README.md            # report: path:line:col: 因该 → 应该 (pinyin, 0.96)
    python -m corrector check --fix docs                # correct in place
    python -m corrector check --diff docs               # show the corrections as a unified diff
    python -m corrector check --format sarif . > csc.sarif

Formats read (files.py): Markdown (markdown.py), plain text, reStructuredText and SubRip
(documents.py), Word .docx (word.py); encodings: UTF-8 with or without BOM, UTF-16/32 with BOM,
GBK/GB18030 and others charset-normalizer recognises (encodings.py). Only prose is read: code,
addresses, markup, front matter, subtitle timings never reach the corrector (documents.py).
Findings: report.py; --fix and --diff: fix.py; settings (`[tool.corrector]` or .corrector.toml,
flags over them): config.py.

Exit status: 0 nothing found; 1 findings (also when --fix corrected them all, so that a
pre-commit hook fails and the changes get looked at); 2 a usage or configuration error, a file
that could not be read, decoded or fixed (reported, left untouched; the other files are still
checked), the model not loadable, or the extra's packages missing.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .. import __version__
from ..cli_io import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED
from .config import ConfigError, Settings, load_settings
from .documents import Segment, rst_segments, srt_segments, text_segments
from .encodings import BinaryFile, DecodeProblem, Encoding, detect, numbered, read_text
from .engine import check_segments
from .files import Target, collect
from .fix import FixProblem, docx_diff, fix_docx, fix_text_file, text_diff
from .report import FORMATS, Finding, Reporter

if TYPE_CHECKING:
    from ..pipeline import Corrector
    from ..resources.confusion import ConfusionSet
    from ..result import Result
    from .engine import BatchCorrector

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
REQUIRED = {"markdown_it": "markdown-it-py", "mdit_py_plugins": "mdit-py-plugins",
            "charset_normalizer": "charset-normalizer", "docx": "python-docx"}

EPILOG = """\
config: [tool.corrector] in pyproject.toml or .corrector.toml (found upward from the current
  directory, else from the first path): threshold, include, exclude, whitelist, confusion, model.
  Flags given override the config's values.
ignore: <!-- corrector: ignore --> (Markdown) or .. corrector: ignore (reST) skips the next block.
exit status: 0 clean; 1 findings (also after --fix); 2 usage, config, read, decode or fix errors."""


class ModelError(Exception):
    """The model could not be loaded: nothing can be checked."""


def say(message: str) -> None:
    if sys.stderr is not None:
        print(message, file=sys.stderr, flush=True)


def probability(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 <= number <= 1:
        raise argparse.ArgumentTypeError(f"{value} is outside [0, 1]")
    return number


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m corrector check", epilog=EPILOG,
                                     description="Check Chinese spelling in .md, .txt, .rst, .srt and .docx files",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files, and folders searched recursively")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fix", action="store_true", help="correct the files in place (atomically)")
    mode.add_argument("--diff", action="store_true", help="print the corrections as a unified diff, write nothing")
    parser.add_argument("--format", choices=FORMATS, default="text", help="report format (default: text)")
    parser.add_argument("--threshold", type=probability, help="minimum confidence (0-1) of a reported correction")
    parser.add_argument("--include", action="append", metavar="GLOB", help="only check matching files in folders")
    parser.add_argument("--exclude", action="append", metavar="GLOB", help="never check matching files or folders")
    parser.add_argument("--whitelist", metavar="FILE", help="terms never changed, one per line")
    parser.add_argument("--confusion", metavar="FILE", help="extra confusion pairs: 'a b' or 'a:bcd' per line")
    parser.add_argument("--model", help="model directory or hub id (default: $CORRECTOR_MODEL or data/model)")
    config = parser.add_mutually_exclusive_group()
    config.add_argument("--config", metavar="FILE", help="read settings from this file only")
    config.add_argument("--no-config", action="store_true", help="read no config file")
    return parser.parse_args(argv)


def missing_packages() -> list[str]:
    """The check extra's packages that cannot be imported."""
    import importlib

    missing = []
    for module, package in REQUIRED.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    return missing


def settings_for(args: argparse.Namespace) -> Settings:
    """The config file's settings with the flags given over them."""
    settings = Settings(root=Path.cwd()) if args.no_config else load_settings(args.config, args.paths)
    for option in ("whitelist", "confusion"):
        if (value := getattr(args, option)) is not None:
            if not Path(value).is_file():
                raise ConfigError(f"--{option} {value}: no such file")
            setattr(settings, option, Path(value))
    for option in ("threshold", "include", "exclude", "model"):
        if (value := getattr(args, option)) is not None:
            setattr(settings, option, value)
    return settings


class LazyCorrector:
    """The Corrector of the settings, loaded when the first Chinese text needs it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.corrector = None

    def load(self) -> Corrector:
        from ..pipeline import Corrector
        from ..runtime.models import disable_loading_bars

        disable_loading_bars()
        settings, confusion = self.settings, None
        if isinstance(settings.confusion, list):
            confusion = user_confusion(settings.confusion)
        try:
            return Corrector(settings.model, threshold=settings.threshold, whitelist=settings.whitelist,
                             confusion=confusion,
                             confusion_file=settings.confusion if not isinstance(settings.confusion, list) else None)
        except (OSError, ValueError, RuntimeError) as err:
            raise ModelError(f"cannot load the model: {err}") from err

    def correct_batch(self, texts: list[str]) -> list[Result]:
        if self.corrector is None:
            self.corrector = self.load()
        return self.corrector.correct_batch(texts)


def user_confusion(entries: list[str]) -> ConfusionSet:
    """A ConfusionSet with the config's pairs, read exactly as a --confusion file's lines."""
    import tempfile

    from ..resources.confusion import ConfusionSet, read_pairs

    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "confusion.txt"
        file.write_text("\n".join(entries) + "\n", encoding="utf-8")
        try:
            pairs = read_pairs(file)
        except ValueError as err:
            raise ConfigError(f"confusion: {str(err).split(': ', 1)[-1]}") from None
    return ConfusionSet(user_pairs=pairs)


def text_document(target: Target, encoding: Encoding) -> Iterable[Segment]:
    """The segments of a text file: plain text a line at a time, the others parsed whole."""
    if target.format == "text":
        return text_segments(numbered(target.path, encoding))
    text = read_text(target.path, encoding)
    if target.format == "markdown":
        from .markdown import markdown_segments

        return markdown_segments(text)
    return rst_segments(text) if target.format == "rst" else srt_segments(text)


def check_text(target: Target, corrector: BatchCorrector, args: argparse.Namespace, out: TextIO) -> list[Finding]:
    """Check (and fix, or diff) one text file; raises BinaryFile, DecodeProblem, FixProblem, OSError."""
    path, name = target.path, str(target.path)
    encoding = detect(path)
    segments = text_document(target, encoding)
    findings = check_segments(segments, corrector, name)
    if findings and args.fix:
        fix_text_file(path, encoding, findings)
    elif findings and args.diff:
        out.write(text_diff(path, encoding, findings, name))
    return findings


def check_docx(target: Target, corrector: BatchCorrector, args: argparse.Namespace, out: TextIO) -> list[Finding]:
    """Check (and fix, or diff) one .docx file."""
    from .word import docx_document, docx_texts

    try:
        document, segments = docx_document(target.path)
    except (zipfile.BadZipFile, KeyError, ValueError) as err:
        raise DecodeProblem(f"not a readable .docx file ({type(err).__name__}: {err})") from None
    findings = check_segments(segments, corrector, str(target.path))
    if findings and args.fix:
        fix_docx(document, target.path, findings)
    elif findings and args.diff:
        out.write(docx_diff(str(target.path), docx_texts(segments), findings))
    return findings


def check_files(targets: list[Target], corrector: BatchCorrector, args: argparse.Namespace,
                reporter: Reporter, out: TextIO) -> int:
    """Check each file; the exit status so far (EXIT_ERROR where a file failed)."""
    status = EXIT_CLEAN
    for target in targets:
        try:
            check = check_docx if target.format == "docx" else check_text
            findings = check(target, corrector, args, out)
        except BinaryFile as err:
            say(f"{target.path}: skipped, binary ({err})")
            continue
        except (DecodeProblem, FixProblem, UnicodeError) as err:
            say(f"{target.path}: error: {err}")
            status = EXIT_ERROR
            continue
        except OSError as err:
            say(f"{target.path}: error: {err.strerror or err}")
            status = EXIT_ERROR
            continue
        if findings:
            status = max(status, EXIT_FINDINGS)
            if not args.diff:
                reporter.add(findings)
    return status


def main(argv: list[str] | None = None, *, corrector: BatchCorrector | None = None) -> int:
    """Run the checker; `corrector` replaces the model (tests). The exit status: that of `run`,
    130 on Ctrl-C (a file being fixed is left as it was: fix.py writes through a temporary
    file), 141 when the reader of the report went away (`| head`), quietly."""
    try:
        return run(parse_args(argv), corrector)
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_BROKEN_PIPE


def run(args: argparse.Namespace, corrector: BatchCorrector | None) -> int:
    """Settings, files, checks, report: the exit status (module docstring)."""
    if missing := missing_packages():
        say(f"error: `check` needs {', '.join(missing)}: pip install 'electra-csc[check]'")
        return EXIT_ERROR
    try:
        settings = settings_for(args)
    except ConfigError as err:
        say(f"error: {err}")
        return EXIT_ERROR
    targets, notes, errors = collect(args.paths, settings)
    for message in notes:
        say(message)
    for message in errors:
        say(f"error: {message}")
    out = sys.stdout
    reporter = Reporter(args.format, out, __version__)
    try:
        status = check_files(targets, corrector or LazyCorrector(settings), args, reporter, out)
    except (ModelError, ConfigError) as err:
        say(f"error: {err}")
        return EXIT_ERROR
    if not args.diff:
        reporter.finish()
    if args.format == "text" and reporter.findings and not args.diff:
        fixed = sum(f.fixed for f in reporter.findings)
        say(f"{len(reporter.findings)} finding(s) in {len({f.path for f in reporter.findings})} file(s)"
            + (f", {fixed} fixed" if args.fix else ""))
    return EXIT_ERROR if errors else status
