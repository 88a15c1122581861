"""Correct a corpus beyond one machine on Ray Data (docs/ray.md; needs `pip install 'electra-csc[ray]'`).

    python -m corrector.ray_corpus corpus.txt --output corrected.jsonl          # a local Ray
    python -m corrector.ray_corpus s3://bucket/corpus/ -o s3://bucket/out/ --address auto --format jsonl

    module          what it does
    reading.py      files -> blocks of rows numbered by line (text, JSONL, Parquet), bad rows kept with their error
    correcting.py   the actors' callable class: one Corrector per actor, a block corrected per call
    writing.py      one file in line order (the driver) or a directory of parts (tasks); the tally
    corpus.py       the Ray Data pipeline, its actor pool and retries
    __main__.py     the command line

Nothing else in the library imports this package: ray and pyarrow are needed only here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

__all__ = ["CorpusCorrector", "Plan", "Settings", "Tally", "correct_corpus"]

if TYPE_CHECKING:
    from .corpus import Plan, correct_corpus
    from .correcting import CorpusCorrector, Settings
    from .writing import Tally

# Exported lazily (PEP 562), as the package's names are: `python -m corrector.ray_corpus` imports
# this first, and where pyarrow (which comes with ray[data]) is missing it must still get to say so.
_EXPORTS = {"CorpusCorrector": ".correcting", "Settings": ".correcting", "Plan": ".corpus",
            "correct_corpus": ".corpus", "Tally": ".writing"}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
