"""How a checked text file is encoded, and its lines read back a bounded piece at a time.

`detect` decides once per file: a byte order mark names the encoding (UTF-8, UTF-16, UTF-32); else
the whole file is tried as strict UTF-8 (most files, and the only safe guess for pure ASCII); else
charset-normalizer guesses from the first `SAMPLE_BYTES` and the whole file must then decode
strictly in its guess. GBK and GB2312 are read as GB18030, their superset, so that a correction is
always encodable when written back. A file with NUL bytes and no UTF-16/32 mark is binary.

`pieces` yields a file's text as (text, ending) pairs: a line with its ending ("\\r\\n", "\\n",
"\\r", or "" at the end of the file), or, for a line longer than `WINDOW_CHARS`, consecutive pieces
of it cut where the corrector's chunking would cut (`cli_io.cut_point`) with ending None until the
last. Memory is one read and one window, whatever the file; line numbers and columns count the
same way in the reader, the fixer and the diff, since all three walk these pieces.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..cli_io import READ_BYTES, WINDOW_CHARS, cut_point

SAMPLE_BYTES = 1 << 20  # what charset-normalizer sees of a file that is not UTF-8
SNIFF_BYTES = 8192  # what is looked at for NUL bytes (binary files)
BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
GB_FAMILY = {"gb2312", "gbk", "cp936", "ms936", "gb18030", "euc_cn", "euc-cn", "hz"}
LINE_BREAK = re.compile(r"\r\n|\r|\n")


class DecodeProblem(Exception):
    """A file that cannot be read as text: reported (exit status 2) and never rewritten."""


class BinaryFile(Exception):
    """A file that is not text at all: skipped with a note."""


@dataclass(frozen=True)
class Encoding:
    """A file's codec and the byte order mark it starts with (b"" for none): both are written
    back by --fix, so the file keeps its encoding."""

    codec: str
    bom: bytes = b""

    @property
    def label(self) -> str:
        return self.codec + (" with BOM" if self.bom else "")


def _decodes(path: Path, codec: str, skip: int = 0) -> str | None:
    """Why `path` (after `skip` bytes) is not valid `codec`, or None when all of it decodes."""
    decoder = codecs.getincrementaldecoder(codec)(errors="strict")
    done = skip
    with path.open("rb") as handle:
        handle.seek(skip)
        try:
            while chunk := handle.read(READ_BYTES):
                decoder.decode(chunk)
                done += len(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as err:
            return f"not valid {codec} near byte {done + err.start}"
    return None


def detect(path: Path) -> Encoding:
    """The encoding of the text file `path` (see the module docstring); BinaryFile or
    DecodeProblem where it has none."""
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    for bom, codec in BOMS:
        if head.startswith(bom):
            if (why := _decodes(path, codec, len(bom))) is not None:
                raise DecodeProblem(why)
            return Encoding(codec, bom)
    if b"\0" in head:
        raise BinaryFile("NUL bytes and no UTF-16/32 byte order mark")
    utf8_problem = _decodes(path, "utf-8")
    if utf8_problem is None:
        return Encoding("utf-8")
    codec = _guess(path)
    if codec is None:
        raise DecodeProblem(f"{utf8_problem}, and no other encoding recognised")
    if (why := _decodes(path, codec)) is not None:
        raise DecodeProblem(f"{utf8_problem}; guessed {codec}, but {why}")
    return Encoding(codec)


def _guess(path: Path) -> str | None:
    """charset-normalizer's guess from the file's start, GBK's family read as GB18030."""
    from charset_normalizer import from_bytes

    with path.open("rb") as handle:
        sample = handle.read(SAMPLE_BYTES)
    best = from_bytes(sample).best()
    if best is None:
        return None
    name = codecs.lookup(best.encoding).name
    return "gb18030" if name in GB_FAMILY or best.encoding in GB_FAMILY else name


def pieces(path: Path, encoding: Encoding) -> Iterator[tuple[str, str | None]]:
    """The file's text as (text, ending) pieces (module docstring). A line break split between
    two reads ("\\r" at the end of one) is held back until the next read tells which it is."""
    decoder = codecs.getincrementaldecoder(encoding.codec)(errors="strict")
    pending = ""
    with path.open("rb") as handle:
        handle.seek(len(encoding.bom))
        while True:
            chunk = handle.read(READ_BYTES)
            pending += decoder.decode(chunk, final=not chunk)
            start = 0
            for match in LINE_BREAK.finditer(pending):
                if match.group() == "\r" and match.end() == len(pending) and chunk:
                    break  # maybe the first half of "\r\n"
                yield from _windows(pending[start:match.start()], match.group())
                start = match.end()
            pending = pending[start:]
            if not chunk:
                break
            while len(pending) > WINDOW_CHARS and not LINE_BREAK.search(pending):
                cut = cut_point(pending, WINDOW_CHARS)
                yield pending[:cut], None
                pending = pending[cut:]
    if pending:
        yield from _windows(pending, "")


def _windows(line: str, ending: str) -> Iterator[tuple[str, str | None]]:
    """One line as pieces of at most WINDOW_CHARS characters, the last with the line's ending."""
    while len(line) > WINDOW_CHARS:
        cut = cut_point(line, WINDOW_CHARS)
        yield line[:cut], None
        line = line[cut:]
    yield line, ending


def numbered(path: Path, encoding: Encoding) -> Iterator[tuple[int, int, str, str | None]]:
    """`pieces` with the 1-based line number of each and the column (0-based) where it starts."""
    line, column = 1, 0
    for text, ending in pieces(path, encoding):
        yield line, column, text, ending
        if ending is None:
            column += len(text)
        else:
            line, column = line + 1, 0


def read_text(path: Path, encoding: Encoding) -> str:
    """The whole decoded text, line endings as written (the parsers of whole documents need it)."""
    return "".join(text + (ending or "") for text, ending in pieces(path, encoding))


def round_trips(path: Path, encoding: Encoding) -> bool:
    """Whether decoding the file and encoding it again gives back its very bytes: only then may
    --fix rewrite it, since everything but the corrected characters must stay byte for byte.
    Strict UTF-8 and UTF-16/32 always do; a legacy codec is checked, a read at a time."""
    if encoding.codec.startswith(("utf-8", "utf-16", "utf-32")):
        return True
    decoder = codecs.getincrementaldecoder(encoding.codec)(errors="strict")
    encoder = codecs.getincrementalencoder(encoding.codec)(errors="strict")
    raw, again = hashlib.sha256(), hashlib.sha256()
    with path.open("rb") as handle:
        handle.seek(len(encoding.bom))
        try:
            while chunk := handle.read(READ_BYTES):
                raw.update(chunk)
                again.update(encoder.encode(decoder.decode(chunk)))
            again.update(encoder.encode(decoder.decode(b"", final=True), final=True))
        except UnicodeError:
            return False
    return raw.digest() == again.digest()
