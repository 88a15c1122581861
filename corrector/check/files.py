"""Which files `check` reads: the files named, and the supported files in the folders named.

In a folder: files with a supported suffix that match `include` (when given) and no `exclude`
glob; hidden files and folders (.git, .venv, ...) are passed over, and so are symlinked folders
(no loops, nothing outside the tree) and symlinked files that lead outside the folder named. A
file named on the command line is checked whatever its suffix (an unknown one is read as plain
text) unless `exclude` matches it, as a pre-commit hook passes every staged file. A file reached
twice (a symlink to a file also in the tree) is read once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .config import Settings, matches

FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "rst", ".srt": "srt",
           ".docx": "docx"}


@dataclass(frozen=True)
class Target:
    path: Path
    format: str


def format_of(path: Path) -> str:
    return FORMATS.get(path.suffix.lower(), "text")


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def _walk(root: Path, settings: Settings, notes: list[str]) -> Iterator[Path]:
    """The checkable files under `root`, in sorted order."""
    for folder, dirs, files in os.walk(root):  # symlinked folders are listed, never entered
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (base / d).is_symlink()
                         and not matches(settings.exclude, base / d, settings.root))
        for name in sorted(files):
            path = base / name
            if name.startswith(".") or path.suffix.lower() not in FORMATS:
                continue
            if path.is_symlink() and not _inside(path, root):
                notes.append(f"{path}: skipped, a symlink out of {root}")
                continue
            if settings.include and not matches(settings.include, path, settings.root):
                continue
            if not matches(settings.exclude, path, settings.root):
                yield path


def collect(paths: list[str], settings: Settings) -> tuple[list[Target], list[str], list[str]]:
    """The files to check, notes (skipped files) and errors (paths that do not exist)."""
    targets: list[Target] = []
    notes: list[str] = []
    errors: list[str] = []
    seen: set[Path] = set()
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = list(_walk(path, settings, notes))
        elif path.is_file():
            found = [] if matches(settings.exclude, path, settings.root) else [path]
        else:
            errors.append(f"{name}: no such file or directory")
            continue
        for file in found:
            real = file.resolve()
            if real not in seen:
                seen.add(real)
                targets.append(Target(file, format_of(file)))
    return targets, notes, errors
