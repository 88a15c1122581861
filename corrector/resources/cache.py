"""The user cache directory and binary cache entries in it: what start-up would otherwise rebuild
in every process (jieba's dictionaries, text/protection.py; the ONNX encoder graphs,
runtime/onnx_encoder.py; the parsed error-pair table, error_pairs.py; jieba's idioms,
idioms.py). The confusion tables' JSON caches live here too (confusion.py).

An entry is `cache_dir()/NAME-KEY.bin`, KEY a hash of everything the value is built from, so a
changed input is a new file, never a stale hit. It holds a checksum of its payload: a corrupt or
truncated file (a full disk, a crash of another tool) is detected before its bytes are
unpickled or handed to ONNX Runtime, and rebuilt. Writes go to a temporary file in the same
directory, then `os.replace`: concurrent first runs each write a whole file and one rename wins,
and a reader never sees half a file. A directory that cannot be written (a read-only home) only
costs the rebuild.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..outputs import atomic_output

T = TypeVar("T")
MAGIC = b"CSC-CACHE-1\n"
DIGEST_SIZE = 32  # sha256 of the payload, after MAGIC


def cache_dir() -> Path:
    """`$ELECTRA_CSC_CACHE`, else `$XDG_CACHE_HOME/electra-csc`, else `~/.cache/electra-csc`."""
    configured = os.environ.get("ELECTRA_CSC_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "electra-csc"


def key_digest(*parts: object) -> str:
    """A short hex key for `cached`: the hash of `parts` (bytes as they are, anything else by repr)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes | bytearray | memoryview) else repr(part).encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:24]


def read_entry(path: Path) -> bytes | None:
    """The payload of a cache file, or None if it is missing, unreadable or corrupt."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header = len(MAGIC) + DIGEST_SIZE
    if len(data) < header or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[header:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):header]:
        return None
    return payload.tobytes()


def write_entry(path: Path, payload: bytes) -> bool:
    """Write a cache file atomically; False where the directory cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path, "wb") as handle:
            handle.write(MAGIC + hashlib.sha256(payload).digest())
            handle.write(payload)
    except OSError:
        return False
    return True


def cached(name: str, key: str, build: Callable[[], tuple[T, bytes]], load: Callable[[bytes], T],
           keep: int = 1) -> T:
    """`load(payload)` of the entry NAME-KEY, or, when there is none (or it is corrupt, or `load`
    rejects it with a ValueError), `build()`'s value, its payload written as the entry. Then
    only the `keep` most recently used entries of NAME are kept (other keys: other inputs)."""
    path = cache_dir() / f"{name}-{key}.bin"
    payload = read_entry(path)
    if payload is not None:
        try:
            value = load(payload)
        except ValueError:
            pass  # written by an incompatible version under the same key: rebuild
        else:
            _touch(path)
            return value
    value, payload = build()
    if write_entry(path, payload):
        _prune(path.parent, name, keep)
    return value


def cached_tables(name: str, key: str, build: Callable[[], T], valid: Callable[[object], bool],
                  keep: int = 1) -> T:
    """`cached` for a value of plain dicts, lists, strings and numbers, stored with marshal (the
    fastest of Python's own readers for such tables): `build()` makes it, an entry whose value
    `valid` rejects is rebuilt."""

    def load(payload: bytes) -> T:
        value = marshal.loads(payload)
        if not valid(value):
            raise ValueError(f"not a {name} table")
        return value

    def build_entry() -> tuple[T, bytes]:
        value = build()
        return value, marshal.dumps(value)

    return cached(name, key, build_entry, load, keep)


def _touch(path: Path) -> None:
    try:
        os.utime(path)  # most recently used: kept by _prune
    except OSError:
        pass


def _prune(directory: Path, name: str, keep: int) -> None:
    entries = []
    for path in directory.glob(f"{name}-*.bin"):
        try:
            entries.append((path.stat().st_mtime, path))
        except OSError:
            continue  # removed meanwhile by another process
    for _, path in sorted(entries, reverse=True)[keep:]:
        path.unlink(missing_ok=True)
