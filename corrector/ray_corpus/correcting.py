"""The actors' work: one `Corrector` per actor, a block of rows corrected per call.

`CorpusCorrector` is the callable class `map_batches` runs on its actor pool. Each actor loads
the model once and runs its batches on `Settings.threads` batch threads (the actor's CPUs; one
by default, so the actors are the parallelism, as ProcessCorrector's processes are). A row whose
text could not be read keeps its error and is not corrected; a text whose correction raises gets
the exception in its `error`, and the other rows of its block are corrected all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from ..pipeline import Corrector
    from ..result import Result

EDIT = pa.struct([("position", pa.int64()), ("source", pa.string()), ("target", pa.string()),
                  ("kind", pa.string()), ("confidence", pa.float64())])
EDITS = pa.list_(EDIT)


@dataclass(frozen=True)
class Settings:
    """How each actor builds its Corrector (picklable: it travels to the actors)."""

    model: str | None = None  # directory or hub id; None: $CORRECTOR_MODEL or data/model
    threshold: float | None = None  # minimum confidence of an edit (None: scorer.json's)
    batch_size: int = 32  # sentences per network batch (the CLI's --batch-size)
    passes: int | None = None  # None: CorrectorConfig's (3)
    max_edits: int | None = None  # most edits per sentence (None: 4)
    traditional: str | None = "tw"
    threads: int = 1  # batch threads = the actor's CPUs

    def build(self) -> Corrector:
        from ..pipeline import Corrector, CorrectorConfig

        options = {"passes": self.passes} if self.passes is not None else {}
        config = CorrectorConfig(batch_size=self.batch_size, traditional=self.traditional, workers=self.threads,
                                 **options)
        return Corrector(self.model, threshold=self.threshold, max_edits_per_sentence=self.max_edits, config=config)


class CorpusCorrector:
    """Corrects a block of rows (a pyarrow Table with `source` and `error`): adds `target` and
    `edits` (list of {position, source, target, kind, confidence}) and fills `error` where the
    correction failed. Rows with an error keep a null target."""

    def __init__(self, settings: Settings) -> None:
        from ..runtime.models import disable_loading_bars
        from ..runtime.threads import set_threads

        disable_loading_bars()  # one set per actor and restart would only fill the driver's log
        set_threads(settings.threads)  # no more threads than the CPUs Ray gave this actor
        self.settings = settings
        self.corrector = settings.build()

    def correct(self, texts: list[str]) -> list[Result | str]:
        """Each text's Result, or the error its correction raised (the batch is retried one text
        at a time when it fails, so one bad text costs no other its correction)."""
        try:
            return list(self.corrector.correct_batch(texts))
        except Exception:  # any failure: find the texts that cause it
            results: list[Result | str] = []
            for text in texts:
                try:
                    results.append(self.corrector.correct(text))
                except Exception as err:
                    results.append(f"{type(err).__name__}: {err}")
            return results

    def __call__(self, table: pa.Table) -> pa.Table:
        sources = table.column("source").to_pylist()
        errors = table.column("error").to_pylist()
        todo = [i for i, (text, error) in enumerate(zip(sources, errors, strict=True))
                if error is None and isinstance(text, str)]
        targets: list[str | None] = [None] * len(sources)
        edits: list[list[dict]] = [[] for _ in sources]
        for i, result in zip(todo, self.correct([sources[i] for i in todo]), strict=True):
            if isinstance(result, str):
                errors[i] = result
                continue
            targets[i] = result.target
            edits[i] = [{"position": e.position, "source": e.source, "target": e.target, "kind": e.kind,
                         "confidence": float(e.confidence)} for e in result.edits]
        table = table.drop_columns(["error"])
        table = table.append_column("target", pa.array(targets, pa.string()))
        table = table.append_column("edits", pa.array(edits, EDITS))
        return table.append_column("error", pa.array(errors, pa.string()))
