"""Input files -> blocks of rows, each row numbered by its line in its file.

Rows: `line` (1-based line, or row for Parquet, in its file), `path` (where the input is more than
one file), `source` (the text, or None), `error` (why the row has no text to correct, or None) and,
for JSONL and Parquet, the record's other fields. A file is read by one task, a table of `rows`
rows at a time (Ray Data cuts them into its blocks: corpus.block_bytes), so memory stays bounded
whatever its size, and the reading never fails on a bad row: a line that is not UTF-8, not JSON,
not an object, or whose text is missing or not a string becomes a row with its error, and the
others are read on.

Ray's own readers are not used: `ray.data.read_text` / `read_json` / `read_parquet` number no
rows (and Ray keeps no order unless told to), `read_text` drops empty lines by default, and
`read_json` fails the whole read on one malformed line.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

FORMATS = ("text", "jsonl", "parquet")
CHUNK_BYTES = 1 << 20
# Columns the output defines: a record's own field of one of these names is kept as input_<name>.
RESERVED = ("line", "path", "source", "target", "edits", "error")
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of a local path or URI (s3://, gs://, hdfs://, file://) and the path in it."""
    if "://" not in path:
        return pafs.LocalFileSystem(), os.path.abspath(path)
    return pafs.FileSystem.from_uri(path)


def input_files(paths: Iterable[str]) -> list[str]:
    """The files named, directories replaced by the files under them (sorted; names starting with
    '.' or '_' left out, as Ray's readers do). Raises FileNotFoundError for a path that is not there."""
    files = []
    for path in paths:
        fs, inner = filesystem(path)
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"no such file or directory: {path}")
        if info.type != pafs.FileType.Directory:
            files.append(path)
            continue
        prefix = path[: len(path) - len(inner)] if "://" in path else ""
        found = fs.get_file_info(pafs.FileSelector(inner, recursive=True))
        files += sorted(prefix + i.path for i in found if i.type == pafs.FileType.File
                        and not any(part[:1] in (".", "_") for part in PurePosixPath(i.path).relative_to(inner).parts))
    return files


def guess_format(files: list[str]) -> str:
    """'parquet' or 'jsonl' by the first file's suffix (before a compression suffix), else 'text'."""
    suffixes = PurePosixPath(files[0]).suffixes if files else []
    suffixes = [s for s in suffixes if s not in (".gz", ".bz2", ".zst", ".lz4")]
    return SUFFIXES.get(suffixes[-1].lower(), "text") if suffixes else "text"


def byte_lines(stream: Any) -> Iterator[bytes]:
    """The lines of a binary stream without their endings (LF or CRLF), read 1 MiB at a time; a
    last line without an ending counts, an ending at the very end adds no empty line."""
    rest = b""
    while chunk := stream.read(CHUNK_BYTES):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if rest:
        yield rest[:-1] if rest.endswith(b"\r") else rest


def decoded(raw: bytes) -> tuple[str, str | None]:
    """A line's text and None, or its text with U+FFFD for the bad bytes and why."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as err:
        return raw.decode("utf-8", "replace"), f"not valid UTF-8: {err.reason} at byte {err.start}"


def text_row(raw: bytes) -> dict[str, Any]:
    text, error = decoded(raw)
    return {"source": text, "error": error}


def record_row(raw: bytes, text_field: str) -> dict[str, Any] | None:
    """A JSONL line as a row: its text field as `source`, its other fields kept (renamed where
    they clash with the output's); None for a blank line, which holds no record."""
    line, error = decoded(raw)
    if error is not None:
        return {"source": None, "error": error}
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError as err:
        return {"source": None, "error": f"not valid JSON: {err}"}
    if not isinstance(record, dict):
        return {"source": None, "error": f"not a JSON object but {type(record).__name__}"}
    if text_field not in record:
        text, error = None, f"no {text_field!r} field"
    else:
        text = record.pop(text_field)
        if text is None:
            error = f"{text_field!r} is null"
        elif not isinstance(text, str):
            error, text = f"{text_field!r} is {type(text).__name__}, not a string", None
    row = {(f"input_{key}" if key in RESERVED else key): value for key, value in record.items()}
    return {**row, "source": text, "error": error}


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts whose keys may differ) as a table with every key a column, missing ones null:
    `line` and `path` first, the record's fields, then `source` and `error`."""
    seen = dict.fromkeys(key for row in rows for key in row)
    last = ("source", "error")
    keys = [k for k in ("line", "path") if k in seen] + [k for k in seen if k not in ("line", "path", *last)]
    keys += [k for k in last if k in seen]
    columns = {key: [row.get(key) for row in rows] for key in keys}
    types = {"line": pa.int64(), "path": pa.string(), "source": pa.string(), "error": pa.string()}
    return pa.table({key: pa.array(values, types.get(key)) for key, values in columns.items()})


def line_blocks(path: str, fmt: str, text_field: str, with_path: bool, rows: int) -> Iterator[pa.Table]:
    """The rows of a text or JSONL file, `rows` at a time (gzip and other compressed
    files read as such, by their suffix)."""
    fs, inner = filesystem(path)
    block: list[dict[str, Any]] = []
    with fs.open_input_stream(inner, compression="detect") as stream:
        for number, raw in enumerate(byte_lines(stream), 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            row = text_row(raw) if fmt == "text" else record_row(raw, text_field)
            if row is None:
                continue
            block.append({"line": number, **({"path": path} if with_path else {}), **row})
            if len(block) == rows:
                yield rows_table(block)
                block = []
    if block:
        yield rows_table(block)


def parquet_blocks(path: str, text_field: str, with_path: bool, rows: int) -> Iterator[pa.Table]:
    """The rows of a Parquet file, `rows` at a time: the `text_field` column as
    `source`, the other columns kept; a null text, or a column that is not text, an error."""
    fs, inner = filesystem(path)
    first = 1
    with fs.open_input_file(inner) as handle:
        parquet = pq.ParquetFile(handle)
        if text_field not in parquet.schema_arrow.names:
            raise ValueError(f"{path}: no column {text_field!r} (columns: {', '.join(parquet.schema_arrow.names)})")
        for batch in parquet.iter_batches(batch_size=rows):
            table = pa.Table.from_batches([batch])
            text = table.column(text_field)
            table = table.drop_columns([text_field])
            table = table.rename_columns([f"input_{n}" if n in RESERVED else n for n in table.column_names])
            if pa.types.is_string(text.type) or pa.types.is_large_string(text.type):
                source = text.cast(pa.string()).to_pylist()
                errors = [None if t is not None else f"{text_field!r} is null" for t in source]
            else:
                source, errors = [None] * len(table), [f"{text_field!r} is {text.type}, not a string"] * len(table)
            front = {"line": pa.array(range(first, first + len(table)), pa.int64())}
            if with_path:
                front["path"] = pa.array([path] * len(table), pa.string())
            for position, (name, column) in enumerate(front.items()):
                table = table.add_column(position, name, column)
            table = table.append_column("source", pa.array(source, pa.string()))
            yield table.append_column("error", pa.array(errors, pa.string()))
            first += len(table)


def read_files(batch: pa.Table, fmt: str, text_field: str, with_path: bool, rows: int) -> Iterator[pa.Table]:
    """`map_batches` over a table of file paths (column `file`): the rows of each file, `rows` a block."""
    for path in batch.column("file").to_pylist():
        if fmt == "parquet":
            yield from parquet_blocks(path, text_field, with_path, rows)
        else:
            yield from line_blocks(path, fmt, text_field, with_path, rows)
