"""The command line's input and output streams (`python -m corrector`, `__main__.py`).

Input: `LineReader` reads a binary stream one bounded physical read at a time (`READ_BYTES`) and
yields `Piece`s: a line that fits in `WINDOW_CHARS` characters is one piece; a longer one (a whole
document on one line, /dev/zero) is cut into consecutive windows of at most `WINDOW_CHARS`
characters, after the last sentence end in the window (the marks the corrector's own chunking cuts
at, text/segmentation.py), else after a clause mark, else hard at the window's size. Memory is that
of one window and one read, whatever the line's length. Lines are decoded incrementally, so a
character split between two reads is not taken for invalid UTF-8; from the first invalid byte on,
the rest of its line passes through as raw bytes (the whole line, for a line of one window).

Output: `Output` makes a failed write name its stream (`WriteError`), and `output_stream` opens
`--output` through `outputs.atomic_output` where it is a regular file (or not there yet), directly
where it is a device, FIFO or /dev/stdout (a rename cannot replace those).
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, NamedTuple, TextIO, TypeVar

from .outputs import atomic_output
from .text.segmentation import CLAUSE_END, CLOSERS, SENTENCE_END

# Exit statuses every command line of the package shares, the shell's 128 + signal: interrupted
# (Ctrl-C, SIGINT 2) and the reader of the output gone (SIGPIPE 13, `| head`). What 1 and 2 mean
# is each tool's own (bad lines, findings, failed rows; a fatal error).
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141

BOM = b"\xef\xbb\xbf"
READ_BYTES = 1 << 16  # one physical read: at most 64 KiB, however long the line
WINDOW_CHARS = 1 << 14  # most characters of a line handed to the corrector as one text (~48 KiB of CJK)
StrOrBytes = TypeVar("StrOrBytes", str, bytes)
T = TypeVar("T")


class CliError(Exception):
    """A failure the command line reports in one line (exit status 2), without a traceback."""


class WriteError(CliError):
    def __init__(self, name: str, error: OSError) -> None:
        super().__init__(f"cannot write {name}: {error.strerror or error}")
        # A reader that stops early (`| head`) is no failure: the CLI then ends quietly.
        self.broken_pipe = isinstance(error, BrokenPipeError) or error.errno == errno.EPIPE


class ReadError(CliError):
    def __init__(self, name: str, error: OSError) -> None:
        super().__init__(f"cannot read {name}: {error.strerror or error}")


class Piece(NamedTuple):
    """A line, or one window of a long line."""

    line: int  # 1-based line number
    offset: int  # characters of the line before this piece
    text: str | bytes  # bytes: the line is not valid UTF-8 (from here on), passed through as read
    error: str | None  # the UTF-8 error, on the line's first bytes piece only
    ending: str | None  # the line's ending ("\r\n", "\n", "" at the end of input); None: more follows

    @property
    def whole(self) -> bool:
        """The piece is its whole line."""
        return self.offset == 0 and self.ending is not None


def cut_point(text: str, limit: int) -> int:
    """Where to end a window of at most `limit` characters of `text`: after the last sentence end
    before `limit` (with the closing quotes after it), else after the last clause mark, else at
    `limit`: windows then cut where the corrector's chunking would cut anyway."""
    for marks in (SENTENCE_END, CLAUSE_END):
        end = max(text.rfind(mark, 0, limit) for mark in marks) + 1
        if end:
            while end < limit and (text[end] in marks or text[end] in CLOSERS):
                end += 1
            return end
    return limit


def _split_ending(line: StrOrBytes) -> tuple[StrOrBytes, str]:
    """A line without its ending, and the ending."""
    for ending in ("\r\n", "\n"):
        if line.endswith(ending if isinstance(line, str) else ending.encode()):
            return line[:len(line) - len(ending)], ending
    return line, ""


class LineReader:
    """The pieces of a binary stream's lines (see the module docstring); `bom` tells whether the
    stream began with a UTF-8 byte order mark (not part of any piece)."""

    def __init__(self, handle: BinaryIO, name: str) -> None:
        self.handle = handle
        self.name = name
        self.bom = False
        self.read_bytes = READ_BYTES  # read here, not as default arguments: tests shrink them
        self.window = WINDOW_CHARS

    def _read(self) -> bytes:
        try:
            return self.handle.readline(self.read_bytes)
        except OSError as err:
            raise ReadError(self.name, err) from None

    def _ends_line(self, raw: bytes) -> bool:
        """Whether a read ends its line: readline(n) returns fewer than n bytes without a newline
        only at the end of input."""
        return raw.endswith(b"\n") or len(raw) < self.read_bytes

    def __iter__(self) -> Iterator[Piece]:
        number = 0
        while raw := self._read():
            number += 1
            yield from self._line(number, raw)

    def _line(self, number: int, raw: bytes) -> Iterator[Piece]:
        """The pieces of the line that starts with `raw` (reading the rest of it)."""
        final = self._ends_line(raw)  # before the BOM goes: it is no end of input
        if number == 1 and raw.startswith(BOM):
            self.bom = True
            raw = raw[len(BOM):]
        decoder = codecs.getincrementaldecoder("utf-8")()
        pending, offset, seen = "", 0, 0  # decoded text not yet yielded; characters and bytes before it
        while True:
            buffered = len(decoder.getstate()[0])  # bytes of a character split by the last read
            try:
                pending += decoder.decode(raw, final)
            except UnicodeDecodeError as err:
                column = seen - buffered + err.start + 1  # in the line's bytes, as a whole-line decode counts
                error = (f"{self.name}:{number}: not valid UTF-8 "
                         f"(byte 0x{err.object[err.start]:02x} at column {column})")
                # UTF-8 decodes to one text only: encoding the decoded part gives back its bytes.
                yield from self._pass_through(number, offset, pending.encode() + bytes(err.object), final, error)
                return
            seen += len(raw)
            if final:
                pending, ending = _split_ending(pending)
            while len(pending) > self.window:  # without `final` the line's last character stays: a CR of a CRLF
                cut = cut_point(pending, self.window)
                yield Piece(number, offset, pending[:cut], None, None)
                offset += cut
                pending = pending[cut:]
            if final:
                yield Piece(number, offset, pending, None, ending)
                return
            raw = self._read()
            final = self._ends_line(raw)

    def _pass_through(self, number: int, offset: int, data: bytes, final: bool, error: str) -> Iterator[Piece]:
        """The rest of a line that is not UTF-8, as raw bytes, one read at a time."""
        while not final:
            yield Piece(number, offset, data, error, None)
            error = None  # reported once per line
            data = self._read()
            final = self._ends_line(data)
        body, ending = _split_ending(data)
        yield Piece(number, offset, body, error, ending)


def blocks(pieces: Iterable[T], max_pieces: int, max_chars: int) -> Iterator[list[T]]:
    """`pieces` (anything with a `text`: the CLI's `Piece`s, the file checker's segments) in lists
    of at most `max_pieces`, or as many as make `max_chars` characters: one correct_batch call
    each, so the memory of a block is bounded however long its lines."""
    block: list[T] = []
    chars = 0
    for piece in pieces:
        block.append(piece)
        chars += len(piece.text)
        if len(block) >= max_pieces or chars >= max_chars:
            yield block
            block, chars = [], 0
    if block:
        yield block


class Output:
    """A text stream for the results: text, raw bytes (lines passed through), and write errors
    raised as `WriteError` naming the stream."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream = stream
        self.name = name

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
        except OSError as err:
            raise WriteError(self.name, err) from None

    def write_bytes(self, data: bytes) -> None:
        """`data` as it is (a line that is not UTF-8 passes through)."""
        binary = getattr(self.stream, "buffer", None)
        if binary is None:  # e.g. io.StringIO
            self.write(data.decode("utf-8", "replace"))
            return
        try:
            self.stream.flush()
            binary.write(data)
        except OSError as err:
            raise WriteError(self.name, err) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as err:
            raise WriteError(self.name, err) from None


def written_in_place(path: str) -> bool:
    """Whether `path` is written in place: a device, FIFO or socket, or a name for a descriptor
    (/dev/stdout, /dev/fd/N, /proc/self/fd/N), which a rename would replace instead of writing
    to (as root even /dev/full)."""
    if os.path.abspath(path).startswith(("/dev/std", "/dev/fd/", "/proc/")):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # not there yet: a new regular file
        return False


@contextmanager
def output_stream(path: str | None) -> Iterator[TextIO]:
    """The text stream for `--output` (stdout for None): atomic for a regular file, so that a
    crash, Ctrl-C or failed write leaves the old file as it was. Errors closing or renaming it
    are `WriteError`s."""
    if path is None:
        yield sys.stdout
        return
    if written_in_place(path):
        try:
            handle = open(path, "w", encoding="utf-8", newline="\n")
        except OSError as err:
            raise WriteError(path, err) from None
        completed = False
        try:
            yield handle
            completed = True
        finally:
            try:
                handle.close()
            except OSError as err:
                if completed:  # otherwise the error in flight is the one to report
                    raise WriteError(path, err) from None
        return
    completed = False
    try:
        with atomic_output(path, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            completed = True
    except OSError as err:
        if not completed:
            raise
        raise WriteError(path, err) from None


def file_problem(option: str, path: str) -> str | None:
    """Why a UTF-8 text file given to `option` (--whitelist, --confusion) cannot be used, naming
    it; found before the model loads. None when it reads and decodes."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        return f"cannot read {option} {path}: {err.strerror or err}"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return f"{option} {path}: not UTF-8 (byte 0x{data[err.start]:02x} at line {line}, column {column})"
    return None


def argument_problem(number: int, text: str) -> str | None:
    """Why text argument `number` (1-based) is not UTF-8: Python hands undecodable argv bytes
    over as lone surrogates (surrogateescape), which no JSON or UTF-8 output can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        char = ord(text[err.start])
        column = len(text[:err.start].encode("utf-8", "surrogateescape")) + 1
        what = f"byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF else f"character U+{char:04X}"
        return f"argument {number}: not valid UTF-8 ({what} at column {column})"
    return None


def argument_bytes(text: str) -> bytes:
    """An argument's bytes as given (undecodable bytes back in place)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no argv decoding makes (passed in-process)
        return text.encode("utf-8", "replace")
