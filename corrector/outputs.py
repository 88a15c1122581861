"""Output files that never cost the user an input: the CLI's `--output`, the evaluator's
`--json` / `--report` / `--predictions` / `--sweep-json`, the cache's entries.

- `output_clashes`: an output that resolves to an input (the same path, a symlink to it, a hard
  link) is refused before anything is opened; `open(f, "w")` would have emptied the input first.
- `check_writable`: an output that cannot be written is found before a run of minutes, not after.
- `atomic_output`: everything is written to a temporary file beside the target and renamed over
  it only when complete, so a crash, Ctrl-C or a full disk leaves the old file intact.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # follows symlinks; hard links share an inode
    except OSError:  # one does not exist (yet): compare where the paths lead
        return a.resolve() == b.resolve()


def output_clashes(outputs: dict[str, str | Path | None], inputs: Iterable[str | Path]) -> list[str]:
    """One message per output (by its option name) that is an input, or another output; empty
    when every output is its own file. None and '-' (stdout/stdin) never clash."""
    input_paths = [Path(p) for p in inputs if p not in (None, "", "-")]
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for option, path in outputs.items():
        if path in (None, "", "-"):
            continue
        target = Path(path)
        for source in input_paths:
            if _same_file(target, source):
                problems.append(f"{option} {path} is the input {source}: it would be overwritten; "
                                "write the output to another file")
                break
        for other_option, other in seen.items():
            if _same_file(target, other):
                problems.append(f"{option} and {other_option} are the same file ({path})")
        seen[option] = target
    return problems


def check_writable(path: str | Path) -> str | None:
    """Why `path` cannot be written as an output (its folder missing or read-only, a directory in
    its place), or None. Nothing is created: a temporary file is made and removed."""
    target = Path(path)
    if target.is_dir():
        return f"{path} is a directory"
    folder = target.parent
    if not folder.is_dir():
        return f"folder {folder} does not exist"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{path} is not writable"
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:
        return f"cannot write in {folder}: {err.strerror or err}"
    os.close(fd)
    os.unlink(tmp)
    return None


@contextmanager
def atomic_output(path: str | Path, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """A file handle whose contents replace `path` only when the block ends without an exception
    (os.replace: readers see the old file or the new one, never half of one). A symlink at
    `path` is written through: its target is replaced, the link stays. The new file keeps the
    old one's permission bits (a new file: the umask's)."""
    target = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            try:
                os.chmod(tmp, os.stat(target).st_mode & 0o7777)
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            yield handle
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
