"""The one reader for spelling-correction data sets, shared by the evaluator, fine-tuning and CLI tools.

Every format becomes a `Dataset`: a list of `Example(source, target)` pairs plus a list of
`Problem`s. Nothing is dropped or repaired silently:

* a line that cannot be parsed is a ``malformed`` problem (with its line number) and yields no example;
  so is a JSON record whose text holds a lone surrogate escape (``"\\ud800"``), which is not text
  and could not be written to any output;
* a file that cannot be read at all (missing, a directory, not a regular file, not UTF-8, a JSON
  list that is invalid, nested too deeply or holds an over-long number) is a `DatasetError`;
* a pair whose source and target differ in length is kept as an example (``same_length`` is
  False) and also reported as a ``length_mismatch`` problem, so each consumer decides what to do —
  the evaluator leaves such pairs out of its position-based metrics, fine-tuning skips them;
* a TSV label that disagrees with the pair (label 0 but source != target, or the reverse) is a
  ``label_mismatch`` warning; the pair itself is the gold standard.

Formats (auto-detected by `detect_format`, or named explicitly):

``tsv``     ``label<TAB>source<TAB>target`` or ``source<TAB>target`` (the label is the number of
            errors in the SIGHAN / ECSpell copies; only whether it is zero is checked).
``json``    a JSON list of objects, or JSON Lines (one object a line); fields
            ``original_text``/``correct_text`` (pycorrector, macro-correct), ``source``/``target``,
            or ``text``/``correction``; an ``id`` field is kept when present.
``sighan``  the original bake-off pair: ``…Input.txt`` with ``(pid=ID)<TAB>sentence`` lines and
            ``…Truth.txt`` with ``ID, 0`` or ``ID, pos, char[, pos, char…]`` (positions 1-based).
            Given as ``INPUT:TRUTH`` or as the input file alone when the truth file sits beside it.
            `write_sighan_truth` writes predictions back in the truth format, so the official
            scoring tool can be run on them.

Relative paths that do not exist are looked up under the shared data root (`data_root`):
``$CSC_SHARED_DATA`` if set, else ``../shared/data`` beside the checkout.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .outputs import atomic_output

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_ROOT_ENV_VAR = "CSC_SHARED_DATA"

FORMATS = ("tsv", "json", "sighan")
ProblemKind = Literal["malformed", "length_mismatch", "label_mismatch", "missing_truth", "missing_input"]

# Field pairs accepted in JSON records, in the order they are tried.
JSON_FIELD_PAIRS = (("original_text", "correct_text"), ("source", "target"), ("text", "correction"))

_PID_LINE = re.compile(r"^\(pid=([^)]*)\)\s*(.*)$")


class DatasetError(Exception):
    """A data set that cannot be read at all (missing file, unknown format, unreadable bytes)."""


@dataclass(frozen=True)
class Example:
    """One gold pair. `line` is the 1-based line number in the file (record number for a JSON list)."""

    source: str
    target: str
    id: str
    line: int
    label: int | None = None  # the TSV label column when there is one

    @property
    def same_length(self) -> bool:
        return len(self.source) == len(self.target)

    @property
    def has_error(self) -> bool:
        return self.source != self.target

    def error_positions(self) -> list[int]:
        """0-based positions where source and target differ; only defined for same-length pairs."""
        if not self.same_length:
            raise ValueError(f"{self.id}: source and target differ in length; positions are undefined")
        return [i for i, (s, t) in enumerate(zip(self.source, self.target, strict=True)) if s != t]


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    line: int  # 1-based line (or record) number; 0 when it concerns the whole file
    message: str
    file: str | None = None  # which file of a SIGHAN pair (None: the data set's only file)

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else ""
        if self.file:
            where = f"{self.file} {where}".strip()
        return f"{where}: {self.message}" if where else self.message


@dataclass
class Dataset:
    name: str  # the file's stem (the input file's stem for a SIGHAN pair)
    path: str  # what was read; "INPUT:TRUTH" for a SIGHAN pair
    format: str
    examples: list[Example] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.examples)

    def problems_of(self, kind: ProblemKind) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]

    @property
    def same_length_examples(self) -> list[Example]:
        return [e for e in self.examples if e.same_length]

    @property
    def length_mismatches(self) -> list[Example]:
        return [e for e in self.examples if not e.same_length]

    def problem_summary(self, first: int = 5) -> dict[str, dict]:
        """{kind: {"count": n, "lines": [first few line numbers]}} for every kind that occurred."""
        summary: dict[str, dict] = {}
        for problem in self.problems:
            entry = summary.setdefault(problem.kind, {"count": 0, "lines": []})
            entry["count"] += 1
            if len(entry["lines"]) < first:
                entry["lines"].append(problem.line)
        return summary

    def describe_problems(self, first: int = 5) -> list[str]:
        """One human-readable line per problem kind: count and the first line numbers."""
        out = []
        for kind, entry in self.problem_summary(first).items():
            more = ", …" if entry["count"] > len(entry["lines"]) else ""
            lines = ", ".join(str(n) for n in entry["lines"])
            out.append(f"{entry['count']} {kind.replace('_', ' ')} (line {lines}{more})")
        return out


# --------------------------------------------------------------------------------------------
# locating files


def data_root() -> Path:
    """Where shared data lives: `$CSC_SHARED_DATA`, else `../shared/data` beside the checkout."""
    env = os.environ.get(DATA_ROOT_ENV_VAR)
    return Path(env) if env else PROJECT_ROOT.parent / "shared" / "data"


def resolve_path(path: str | Path) -> Path:
    """The path as given if it exists, else the same relative path under `data_root()`."""
    path = Path(path).expanduser()
    if path.exists() or path.is_absolute():
        return path
    under_root = data_root() / path
    return under_root if under_root.exists() else path


def find_sighan_truth(input_path: str | Path) -> Path | None:
    """The truth file beside a SIGHAN input file (…Input.txt → …Truth.txt, x.txt → x_Truth.txt)."""
    input_path = Path(input_path)
    name = input_path.name
    candidates = [
        name.replace("Input", "Truth"),
        name.replace("input", "truth"),
        name.replace("INPUT", "TRUTH"),
        f"{input_path.stem}_Truth{input_path.suffix}",
        f"{input_path.stem}_truth{input_path.suffix}",
    ]
    for candidate in candidates:
        truth = input_path.with_name(candidate)
        if candidate != name and truth.exists():
            return truth
    return None


def _split_sighan_spec(spec: str) -> tuple[str, str] | None:
    """'INPUT:TRUTH' → (INPUT, TRUTH); None when the colon is not such a separator."""
    if ":" not in spec or Path(spec).exists():
        return None
    head, _, tail = spec.rpartition(":")
    # Windows drive letters ("C:\…") are not pairs.
    if not head or not tail or (len(head) == 1 and head.isalpha()):
        return None
    return head, tail


def regular_file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a data file, or None for a regular file: a FIFO would block
    the reader and a device such as /dev/zero would be read until memory runs out."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as err:
        return f"{path}: cannot be read ({err.strerror or err})"
    if stat.S_ISDIR(mode):
        return f"{path}: is a directory, not a data file"
    if not stat.S_ISREG(mode):
        return f"{path}: not a regular file (a device, pipe or socket)"
    return None


def _check_regular(path: Path) -> None:
    if problem := regular_file_problem(path):
        raise DatasetError(problem)


def _read_text(path: Path) -> str:
    _check_regular(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise DatasetError(f"{path}: no such file") from err
    except IsADirectoryError as err:
        raise DatasetError(f"{path}: is a directory, not a data file") from err
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    except OSError as err:
        raise DatasetError(f"{path}: cannot be read ({err.strerror})") from err
    return text.removeprefix("\ufeff")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line without its line break), keeping every other character."""
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def detect_format(path: str | Path) -> str:
    """'tsv', 'json' or 'sighan', from the extension and the first non-empty line."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        return "json"
    if not path.is_file():
        return "tsv"  # a directory, FIFO or device: opening it could block; the reader says why
    first = ""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    first = line.removeprefix("\ufeff").strip()
                    break
    except (OSError, UnicodeDecodeError):
        return "tsv"  # let the reader produce the proper error
    if first.startswith("(pid="):
        return "sighan"
    if first.startswith(("{", "[")):
        return "json"
    return "tsv"


# --------------------------------------------------------------------------------------------
# readers


def read_dataset(
    spec: str | Path, format: str | None = None, limit: int | None = None, name: str | None = None
) -> Dataset:
    """Read any supported data set. `spec` is a path, or 'INPUT:TRUTH' for a SIGHAN pair.

    `limit` keeps only the first N examples. Raises `DatasetError` when the data set cannot be
    read at all; line-level trouble is returned in `Dataset.problems` instead.
    """
    if format is not None and format not in FORMATS:
        raise DatasetError(f"{spec}: unknown format {format!r} (expected one of {', '.join(FORMATS)})")
    spec = str(spec)
    pair = _split_sighan_spec(spec)
    if pair is not None:
        if format not in (None, "sighan"):
            raise DatasetError(f"{spec}: an INPUT:TRUTH pair is always the sighan format, not {format}")
        dataset = read_sighan(resolve_path(pair[0]), resolve_path(pair[1]), limit=limit)
    else:
        path = resolve_path(spec)
        if not path.exists():
            raise DatasetError(f"{spec}: no such file (also looked under {data_root()})")
        format = format or detect_format(path)
        if format == "sighan":
            truth = find_sighan_truth(path)
            if truth is None:
                raise DatasetError(
                    f"{path}: SIGHAN input file without a truth file beside it; pass INPUT:TRUTH"
                )
            dataset = read_sighan(path, truth, limit=limit)
        elif format == "json":
            dataset = read_json(path, limit=limit)
        else:
            dataset = read_tsv(path, limit=limit)
    if name:
        dataset.name = name
    return dataset


def dataset_files(spec: str | Path, format: str | None = None) -> list[Path]:
    """The files `read_dataset(spec, format)` reads, resolved the same way (both halves of an
    INPUT:TRUTH pair, the truth file beside a SIGHAN input), whether they exist or not: what an
    output must never overwrite."""
    spec = str(spec)
    pair = _split_sighan_spec(spec)
    if pair is not None:
        return [resolve_path(pair[0]), resolve_path(pair[1])]
    path = resolve_path(spec)
    files = [path]
    if path.is_file() and (format or detect_format(path)) == "sighan":
        truth = find_sighan_truth(path)
        if truth is not None:
            files.append(truth)
    return files


def _check_pair(dataset: Dataset, example: Example) -> None:
    """Record the warnings a well-formed pair can still carry."""
    if not example.same_length:
        dataset.problems.append(
            Problem(
                "length_mismatch",
                example.line,
                f"source has {len(example.source)} characters, target {len(example.target)}",
            )
        )
    if example.label is not None and (example.label != 0) != example.has_error:
        state = "differ" if example.has_error else "are identical"
        dataset.problems.append(
            Problem("label_mismatch", example.line, f"label {example.label} but source and target {state}")
        )


def _add(dataset: Dataset, example: Example) -> None:
    dataset.examples.append(example)
    _check_pair(dataset, example)


def _full(dataset: Dataset, limit: int | None) -> bool:
    """True once `limit` examples have been collected (reading stops there)."""
    return limit is not None and len(dataset.examples) >= limit


def read_tsv(path: str | Path, limit: int | None = None) -> Dataset:
    """``label<TAB>source<TAB>target`` or ``source<TAB>target`` lines (both may be mixed)."""
    path = Path(path)
    dataset = Dataset(name=displayable(path.stem), path=str(path), format="tsv")
    for number, line in _lines(_read_text(path)):
        if _full(dataset, limit):
            break
        if not line.strip():
            continue  # blank lines (including the final newline) carry nothing
        if line.startswith("#") and "\t" not in line:
            continue  # a comment, as pycorrector's files allow
        fields = line.split("\t")
        label: int | None = None
        if len(fields) == 3:
            try:
                label = int(fields[0])
            except ValueError:
                dataset.problems.append(
                    Problem("malformed", number, f"3 columns but the label {fields[0]!r} is not an integer")
                )
                continue
            source, target = fields[1], fields[2]
        elif len(fields) == 2:
            source, target = fields
        else:
            dataset.problems.append(
                Problem("malformed", number, f"expected 2 or 3 tab-separated columns, found {len(fields)}")
            )
            continue
        if not source:
            dataset.problems.append(Problem("malformed", number, "empty source sentence"))
            continue
        _add(dataset, Example(source, target, id=f"{dataset.name}-{number}", line=number, label=label))
    return dataset


@dataclass(frozen=True)
class _Invalid:
    """A JSON Lines line that could not be parsed, and why."""

    reason: str


def describe_json_error(err: ValueError | RecursionError) -> str:
    """Why json.loads failed, in words: hostile input can hit the parser's recursion limit
    ('[' * 100000) or Python's limit on digits in an integer, not only a syntax error."""
    if isinstance(err, json.JSONDecodeError):
        return err.msg
    if isinstance(err, RecursionError):
        return "nested too deeply"
    if "digits" in str(err):
        return "a number with too many digits"
    return str(err)


def _json_records(text: str, path: Path) -> Iterator[tuple[int, object]]:
    """(line or record number, parsed object) for a JSON list or JSON Lines; a line that cannot
    be parsed yields an `_Invalid`. A JSON list that cannot be parsed is a DatasetError."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as err:
            raise DatasetError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from err
        except (ValueError, RecursionError) as err:
            raise DatasetError(f"{path}: invalid JSON: {describe_json_error(err)}") from None
        yield from enumerate(records, start=1)
        return
    for number, line in _lines(text):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as err:
            yield number, _Invalid(describe_json_error(err))
            continue
        yield number, record


def has_lone_surrogate(text: str) -> bool:
    """True when `text` holds a lone UTF-16 surrogate (JSON's "\\ud800" escape decodes to one):
    such a string is not text, and writing it as UTF-8 fails."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def displayable(text: str) -> str:
    """`text` with every surrogate replaced by U+FFFD: a file name that is not UTF-8 arrives with
    surrogate escapes, and a data set's name is printed and written as UTF-8."""
    if not has_lone_surrogate(text):
        return text
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def _json_example(record: object, number: int, stem: str) -> Example | str:
    """The example of one JSON record, or why the record is malformed."""
    if isinstance(record, _Invalid):
        return f"invalid JSON: {record.reason}"
    if not isinstance(record, dict):
        return f"expected an object, found {type(record).__name__}"
    fields = next(((s, t) for s, t in JSON_FIELD_PAIRS if s in record and t in record), None)
    if fields is None:
        wanted = " / ".join(f"{s}+{t}" for s, t in JSON_FIELD_PAIRS)
        return f"record has none of the field pairs {wanted}"
    source, target = record[fields[0]], record[fields[1]]
    if not isinstance(source, str) or not isinstance(target, str) or not source:
        return f"{fields[0]}/{fields[1]} must be non-empty strings"
    record_id = str(record.get("id", f"{stem}-{number}"))
    if any(has_lone_surrogate(text) for text in (source, target, record_id)):
        # Rejected here so that no output (predictions, reports) fails to encode it later.
        return "contains a lone surrogate escape (such as \\ud800), which is not text"
    return Example(source, target, id=record_id, line=number)


def read_json(path: str | Path, limit: int | None = None) -> Dataset:
    """A JSON list of records or JSON Lines, with one of the field pairs in `JSON_FIELD_PAIRS`."""
    path = Path(path)
    dataset = Dataset(name=displayable(path.stem), path=str(path), format="json")
    for number, record in _json_records(_read_text(path), path):
        if _full(dataset, limit):
            break
        example = _json_example(record, number, dataset.name)
        if isinstance(example, str):
            dataset.problems.append(Problem("malformed", number, example))
        else:
            _add(dataset, example)
    return dataset


@dataclass(frozen=True)
class TruthEntry:
    """One sentence of a SIGHAN truth file: 1-based (position, character) corrections."""

    pid: str
    corrections: tuple[tuple[int, str], ...]
    line: int


def parse_truth_line(line: str) -> tuple[str, tuple[tuple[int, str], ...]]:
    """'ID, 0' → (ID, ()); 'ID, 3, 字, 7, 词' → (ID, ((3, '字'), (7, '词'))). Raises ValueError."""
    fields = [f.strip() for f in line.split(",")]
    pid, rest = fields[0], fields[1:]
    if not pid:
        raise ValueError("empty sentence id")
    if rest == ["0"]:
        return pid, ()
    if not rest or len(rest) % 2:
        raise ValueError("expected 'ID, 0' or 'ID, position, character[, position, character…]'")
    corrections = []
    for pos_text, char in zip(rest[::2], rest[1::2], strict=True):
        if not pos_text.isdigit() or int(pos_text) < 1:
            raise ValueError(f"position {pos_text!r} is not a 1-based integer")
        if len(char) != 1:
            raise ValueError(f"correction {char!r} at position {pos_text} is not one character")
        corrections.append((int(pos_text), char))
    return pid, tuple(corrections)


def read_sighan_truth(path: str | Path) -> tuple[dict[str, TruthEntry], list[Problem]]:
    """The entries of a truth file by sentence id, and the lines that could not be parsed.

    The SIGHAN-2013 truth file lists one error a line, so repeated ids are merged.
    """
    path = Path(path)
    entries: dict[str, TruthEntry] = {}
    problems: list[Problem] = []
    for number, line in _lines(_read_text(path)):
        if not line.strip():
            continue
        try:
            pid, corrections = parse_truth_line(line)
        except ValueError as err:
            problems.append(Problem("malformed", number, str(err), file=path.name))
            continue
        if pid in entries:
            merged = tuple(sorted(set(entries[pid].corrections) | set(corrections)))
            entries[pid] = TruthEntry(pid, merged, entries[pid].line)
        else:
            entries[pid] = TruthEntry(pid, corrections, number)
    return entries, problems


def read_sighan(input_path: str | Path, truth_path: str | Path, limit: int | None = None) -> Dataset:
    """The original bake-off pair. Example line numbers refer to the input file; each problem
    names the file its line number refers to."""
    input_path, truth_path = Path(input_path), Path(truth_path)
    dataset = Dataset(name=displayable(input_path.stem), path=f"{input_path}:{truth_path}", format="sighan")
    truth, truth_problems = read_sighan_truth(truth_path)
    dataset.problems.extend(truth_problems)
    seen: set[str] = set()
    for number, line in _lines(_read_text(input_path)):
        if _full(dataset, limit):
            break
        if not line.strip():
            continue
        match = _PID_LINE.match(line.strip())
        if not match or not match.group(2):
            dataset.problems.append(
                Problem("malformed", number, "expected '(pid=ID)<TAB>sentence'", file=input_path.name)
            )
            continue
        pid, source = match.group(1), match.group(2)
        seen.add(pid)
        entry = truth.get(pid)
        if entry is None:
            dataset.problems.append(
                Problem("missing_truth", number, f"sentence {pid} has no line in {truth_path.name}", file=input_path.name)
            )
            continue
        chars = list(source)
        bad = [pos for pos, _ in entry.corrections if pos > len(chars)]
        if bad:
            dataset.problems.append(
                Problem(
                    "malformed",
                    number,
                    f"{truth_path.name} corrects {pid} at position {bad[0]} beyond its {len(chars)} characters",
                    file=input_path.name,
                )
            )
            continue
        for pos, char in entry.corrections:
            chars[pos - 1] = char
        _add(dataset, Example(source, "".join(chars), id=pid, line=number))
    if limit is None:
        for pid in truth.keys() - seen:
            dataset.problems.append(
                Problem(
                    "missing_input",
                    truth[pid].line,
                    f"sentence {pid} is not in {input_path.name}",
                    file=truth_path.name,
                )
            )
    return dataset


# --------------------------------------------------------------------------------------------
# writing the SIGHAN truth format


def format_truth_line(pid: str, source: str, prediction: str) -> str:
    """The SIGHAN truth line for a prediction: 'ID, 0' or 'ID, pos, char, …' (1-based positions).

    Only same-length substitutions can be written in this format.
    """
    if len(source) != len(prediction):
        raise ValueError(
            f"{pid}: prediction length {len(prediction)} differs from source length {len(source)}"
        )
    changes = [f"{i + 1}, {p}" for i, (s, p) in enumerate(zip(source, prediction, strict=True)) if s != p]
    return f"{pid}, {', '.join(changes) if changes else '0'}"


def write_sighan_truth(path: str | Path, rows: Iterable[tuple[str, str, str]]) -> int:
    """Write (id, source, prediction) rows in the truth format; returns the number of lines."""
    lines = [format_truth_line(pid, source, prediction) for pid, source, prediction in rows]
    # Written whole or not at all: a failed write leaves an earlier file as it was.
    with atomic_output(path, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return len(lines)


def write_sighan_input(path: str | Path, rows: Iterable[tuple[str, str]]) -> int:
    """Write (id, sentence) rows in the input format '(pid=ID)<TAB>sentence'."""
    lines = [f"(pid={pid})\t{sentence}\n" for pid, sentence in rows]
    Path(path).write_text("".join(lines), encoding="utf-8")
    return len(lines)
