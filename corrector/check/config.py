"""Settings of `check`: `[tool.corrector]` in pyproject.toml or a `.corrector.toml`, then flags.

The file is `--config FILE`, else the first found going up from the current directory, else
going up from the first path checked; in each directory `.corrector.toml` comes before a
pyproject.toml, and a pyproject.toml without `[tool.corrector]` is passed over. Paths in it (the
whitelist or confusion file, include/exclude globs) are relative to its directory.

    key        type                     meaning
    threshold  number in [0, 1]         minimum confidence of a reported correction
    include    list of globs            only files matching one are checked (in folders walked)
    exclude    list of globs            files and folders matching one are never checked
    whitelist  list of terms, or a file terms never changed (one a line in the file)
    confusion  list of pairs, or a file extra confusion pairs: "a b" or "a:bcd" (confusion files' syntax)
    model      string                   model directory or hub id

A glob without "/" matches a file or folder name at any depth (`*.min.md`, `vendor`); one with
"/" matches the path from the config's directory (`docs/legacy/**`, `**/CHANGELOG.md`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

CONFIG_NAMES = (".corrector.toml", "pyproject.toml")
KEYS = ("threshold", "include", "exclude", "whitelist", "confusion", "model")


class ConfigError(Exception):
    """A configuration that cannot be used: reported, exit status 2."""


@dataclass
class Settings:
    root: Path  # the config file's directory (the current one without a file): globs start here
    source: Path | None = None  # the config file read, if any
    threshold: float | None = None
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    whitelist: list[str] | Path = field(default_factory=list)
    confusion: list[str] | Path | None = None
    model: str | None = None


def _table(path: Path) -> dict | None:
    """The settings table of a config file; None for a pyproject.toml without one."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: {err}") from None
    if path.name == "pyproject.toml":
        return data.get("tool", {}).get("corrector")
    return data


def find_config(starts: list[Path]) -> tuple[Path, dict] | None:
    """The first config file upward from each of `starts` in turn, and its table."""
    for start in starts:
        folder = start.resolve()
        folder = folder if folder.is_dir() else folder.parent
        for directory in (folder, *folder.parents):
            for name in CONFIG_NAMES:
                candidate = directory / name
                if candidate.is_file() and (table := _table(candidate)) is not None:
                    return candidate, table
    return None


def _strings(path: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {key} must be a list of strings")
    return value


def _terms_or_file(path: Path, key: str, value: Any) -> list[str] | Path:
    """A list of entries, or a file named relative to the config's directory."""
    if isinstance(value, str):
        file = path.parent / value
        if not file.is_file():
            raise ConfigError(f"{path}: {key} file {file} not found")
        return file
    return _strings(path, key, value)


def apply_table(settings: Settings, path: Path, table: dict) -> None:
    """The config file's values into `settings`, each checked."""
    if unknown := sorted(set(table) - set(KEYS)):
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(KEYS)}")
    settings.root, settings.source = path.parent, path
    if "threshold" in table:
        value = table["threshold"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ConfigError(f"{path}: threshold must be a number in [0, 1]")
        settings.threshold = float(value)
    for key in ("include", "exclude"):
        if key in table:
            setattr(settings, key, _strings(path, key, table[key]))
    for key in ("whitelist", "confusion"):
        if key in table:
            setattr(settings, key, _terms_or_file(path, key, table[key]))
    if "model" in table:
        if not isinstance(table["model"], str):
            raise ConfigError(f"{path}: model must be a string")
        model = table["model"]
        settings.model = str(path.parent / model) if (path.parent / model).exists() else model


def load_settings(config: str | None, paths: list[str]) -> Settings:
    """Settings from `--config` or the config file found (module docstring); defaults without."""
    settings = Settings(root=Path.cwd())
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"--config {config}: no such file")
        table = _table(path)
        if table is None:
            raise ConfigError(f"--config {config}: no [tool.corrector] table")
        apply_table(settings, path, table)
        return settings
    starts = [Path.cwd()] + ([Path(paths[0])] if paths else [])
    found = find_config(starts)
    if found is not None:
        apply_table(settings, *found)
    return settings


def glob_regex(pattern: str) -> re.Pattern:
    """A glob as a regular expression over POSIX paths: `**` any folders, `*` and `?` within one
    name, `[...]` a character class."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(patterns: list[str], path: Path, root: Path) -> bool:
    """Whether `path` matches one of the globs (module docstring), taken from `root` (from the
    current directory where it lies outside `root`)."""
    absolute = Path(os.path.abspath(path))
    for base in (root, Path.cwd()):
        try:
            relative = absolute.relative_to(os.path.abspath(base)).as_posix()
            break
        except ValueError:
            continue
    else:
        relative = absolute.as_posix().lstrip("/")
    names = relative.split("/")
    for pattern in patterns:
        if "/" in pattern.rstrip("/"):
            if glob_regex(pattern.strip("/")).match(relative):
                return True
        elif any(glob_regex(pattern.rstrip("/")).match(name) for name in names):
            return True
    return False
