"""Corrected rows -> files, and the count of what was written.

Two ways, chosen by `--output`:
* a file name ending in .jsonl/.json/.ndjson, .parquet/.pq or .txt: one local file, written by the
  driver in line order (Ray keeps the blocks' order: `preserve_order`), to a temporary file renamed
  over it at the end, so an interrupted run leaves an old file as it was; .txt holds the targets
  only, one per line (a row with an error: its source), like the CLI's output;
* anything else: a directory (local, or any filesystem pyarrow knows: s3://, gs://, hdfs://) of
  part files written by the tasks in parallel, in no order: each row carries its `line` (and
  `path`). A part is named after its first row, so a retried task writes the same file again.

JSON lines keep non-ASCII characters as they are: {"line", ("path"), the record's other fields,
"source", "target", "edits", "error"}.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq

from ..outputs import atomic_output
from .reading import filesystem

FILE_SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
                 ".txt": "text"}
DIRECTORY_FORMATS = ("jsonl", "parquet")
SHOWN_ERRORS = 5


@dataclass
class Tally:
    """Rows written, rows with an error, and the first few errors as 'FILE:LINE: why'."""

    lines: int = 0
    errors: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, lines: int, errors: int, examples: Iterable[str]) -> None:
        self.lines += lines
        self.errors += errors
        self.examples += list(examples)[: SHOWN_ERRORS - len(self.examples)]

    def add_table(self, table: pa.Table) -> None:
        self.add(len(table), len(table) - table.column("error").null_count, error_examples(table))


def error_examples(table: pa.Table) -> list[str]:
    """The block's first few errors, as 'PATH:LINE: why' (LINE alone for one input file)."""
    errors = table.column("error").to_pylist()
    rows = [i for i, error in enumerate(errors) if error is not None][:SHOWN_ERRORS]
    lines = table.column("line").to_pylist()
    paths = table.column("path").to_pylist() if "path" in table.column_names else None
    return [f"{paths[i] + ':' if paths else 'line '}{lines[i]}: {errors[i]}" for i in rows]


def output_file_format(output: str) -> str | None:
    """The format of a one-file output by its suffix; None for a directory."""
    return FILE_SUFFIXES.get(PurePosixPath(output).suffix.lower())


def json_lines(table: pa.Table) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in table.to_pylist())


def text_lines(table: pa.Table) -> str:
    targets, sources = table.column("target").to_pylist(), table.column("source").to_pylist()
    return "".join((target if target is not None else source or "") + "\n" for target, source in zip(targets, sources,
                                                                                                    strict=True))


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A block in the schema of the first (one Parquet file has one schema): a column missing here
    null, a null-typed one cast; a column the first block lacked is an error."""
    if table.schema.equals(schema):
        return table
    extra = [name for name in table.column_names if name not in schema.names]
    if extra:
        raise ValueError(f"column(s) {', '.join(extra)} first seen after the first block: one Parquet file needs "
                         "one schema; write JSONL, or a directory of Parquet parts")
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def write_file(blocks: Iterable[pa.Table], output: str, fmt: str) -> Tally:
    """The blocks, in the order given, into one local file (replaced only once all is written:
    `outputs.atomic_output`)."""
    tally = Tally()
    if fmt == "parquet":
        with atomic_output(output, "wb") as out:
            writer = None
            try:
                for table in blocks:
                    writer = writer or pq.ParquetWriter(out, table.schema)
                    writer.write_table(conform(table, writer.schema))
                    tally.add_table(table)
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:  # no rows at all: a file with the columns a text input gives
                pq.write_table(pa.table({"line": pa.array([], pa.int64())}), out)
    else:
        with atomic_output(output, "w", encoding="utf-8", newline="\n") as out:
            for table in blocks:
                out.write(text_lines(table) if fmt == "text" else json_lines(table))
                tally.add_table(table)
    return tally


def part_name(table: pa.Table, fmt: str) -> str:
    """part-[PATHHASH-]LINE.EXT after the block's first row: the same for a retried block."""
    line = table.column("line")[0].as_py()
    prefix = ""
    if "path" in table.column_names:
        prefix = hashlib.sha1(table.column("path")[0].as_py().encode()).hexdigest()[:10] + "-"
    return f"part-{prefix}{line:012d}.{fmt}"


def write_part(table: pa.Table, directory: str, fmt: str) -> pa.Table:
    """`map_batches` on the corrected blocks: write one part file; a one-row summary of it."""
    summary = {"file": pa.array([], pa.string()), "lines": pa.array([], pa.int64()),
               "errors": pa.array([], pa.int64()), "examples": pa.array([], pa.list_(pa.string()))}
    if len(table) == 0:
        return pa.table(summary)
    fs, inner = filesystem(directory)
    fs.create_dir(inner, recursive=True)
    name = part_name(table, fmt)
    if fmt == "parquet":
        pq.write_table(table, f"{inner}/{name}", filesystem=fs)
    else:
        with fs.open_output_stream(f"{inner}/{name}") as out:
            out.write(json_lines(table).encode("utf-8"))
    return pa.table({"file": [name], "lines": [len(table)], "errors": [len(table) - table.column("error").null_count],
                     "examples": [error_examples(table)]}, schema=pa.table(summary).schema)
