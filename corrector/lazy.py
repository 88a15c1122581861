"""Names a package exports lazily (PEP 562): imported from their module on first use, so that
importing the package stays cheap (`import corrector.result` must not pay for torch; `python -m
corrector.ray_corpus` must get to say that pyarrow is missing)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict) -> Callable[[str], object]:
    """The module `__getattr__` of `package`: a name of `exports` ({name: relative module}) is
    imported from its module and kept in `namespace` (the package's globals)."""

    def __getattr__(name: str) -> object:
        if name in exports:
            value = getattr(importlib.import_module(exports[name], package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
