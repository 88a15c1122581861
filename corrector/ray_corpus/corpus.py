"""The Ray Data pipeline: files -> numbered rows (tasks) -> corrected rows (an actor pool) ->
one file (the driver, in line order) or a directory of parts (tasks).

Reading and writing tasks ask Ray for no CPU (`num_cpus=0`): they are light next to the
correction, and the actors may then take every CPU without starving them (an actor holds its CPUs
for the whole run, so tasks that needed one could never be scheduled).

Fault tolerance: an actor that dies (killed, out of memory, its node lost) is restarted and the
calls it had in flight are sent again (`max_restarts`, `max_task_retries`), so no line is lost or
written twice: without limit by default (Ray Data's), or at most `Plan.retries` times a call, after
which the run fails.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .correcting import CorpusCorrector, Settings
from .reading import read_files
from .writing import Tally, output_file_format, write_file, write_part

if TYPE_CHECKING:
    from ray.data import Dataset

DEFAULT_ROWS_PER_CALL = 256  # rows an actor corrects per call: small enough that the last calls keep all busy
BYTES_PER_ROW = 48  # a guess, on the small side: a short line read here is ~70 bytes in Arrow
MIN_BLOCK_BYTES = 8 * 1024


@dataclass(frozen=True)
class Plan:
    """How the corpus is spread: actors x CPUs each, rows per call, retries of a failed call."""

    actors: int
    cpus_per_actor: int = 1
    rows_per_call: int = DEFAULT_ROWS_PER_CALL
    retries: int | None = None  # None: Ray Data's (no limit); else calls resent at most this often
    corrector_class: type = CorpusCorrector  # the callable class the actors run (a test's may die once)

    @property
    def cpus(self) -> int:
        return self.actors * self.cpus_per_actor


def corpus_dataset(files: list[str], fmt: str, text_field: str, rows_per_block: int) -> Dataset:
    """The rows of `files` (reading.py), one read task per file, blocks of `rows_per_block` rows."""
    import ray

    listing = ray.data.from_items([{"file": path} for path in files], override_num_blocks=max(1, len(files)))
    return listing.map_batches(read_files, batch_size=1, batch_format="pyarrow", num_cpus=0,
                               fn_kwargs={"fmt": fmt, "text_field": text_field, "with_path": len(files) > 1,
                                          "rows": rows_per_block})


def corrected(rows: Dataset, settings: Settings, plan: Plan) -> Dataset:
    """`rows` corrected on a pool of `plan.actors` actors, one Corrector each."""
    from ray.data import ActorPoolStrategy

    retries = {}
    if plan.retries is not None:
        # Ray Data's defaults (since 2.10) restart a dead actor and resend its calls without limit;
        # a bound goes through `ray_remote_args`, which Ray 2.60 warns will go in 2.64.
        retries = {"max_restarts": -1, "max_task_retries": plan.retries}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
        return rows.map_batches(
            plan.corrector_class,
            fn_constructor_args=(settings,),
            batch_size=plan.rows_per_call,
            batch_format="pyarrow",
            compute=ActorPoolStrategy(size=plan.actors),
            num_cpus=plan.cpus_per_actor,
            **retries,
        )


def block_bytes(rows_per_call: int) -> int:
    """Ray Data's target block size for the run: about `rows_per_call` rows of short text.

    A task's outputs are gathered into blocks of up to `DataContext.target_max_block_size` (128
    MiB by default), and Ray hands an actor whole blocks: with the default, a file of 10,000 lines
    read by one task was one block, corrected by one actor while the other idled. Blocks this small
    are bundled back up to `rows_per_call` rows a call. (`repartition(target_num_rows_per_block=)`
    would cut by rows, but it runs as tasks of one CPU each, which never start while the actors
    hold every CPU.)"""
    return max(MIN_BLOCK_BYTES, rows_per_call * BYTES_PER_ROW)


@contextmanager
def execution(keep_order: bool, progress: bool, target_block_bytes: int) -> Iterator[None]:
    """Ray Data's order, block size and progress bars as asked, for the run only."""
    from ray.data import DataContext

    context = DataContext.get_current()
    before = (context.execution_options.preserve_order, context.enable_progress_bars,
              context.target_max_block_size)
    context.execution_options.preserve_order = keep_order or before[0]
    context.enable_progress_bars = progress
    context.target_max_block_size = target_block_bytes
    try:
        yield
    finally:
        (context.execution_options.preserve_order, context.enable_progress_bars,
         context.target_max_block_size) = before


def correct_corpus(files: list[str], output: str, *, fmt: str, text_field: str, settings: Settings, plan: Plan,
                   directory_format: str = "jsonl", progress: bool = True) -> Tally:
    """Correct `files` into `output` (writing.py: one file by its suffix, else a directory of
    `directory_format` parts); what was written. Ray must be initialised."""
    file_format = output_file_format(output)
    with execution(file_format is not None, progress, block_bytes(plan.rows_per_call)):
        results = corrected(corpus_dataset(files, fmt, text_field, plan.rows_per_call), settings, plan)
        if file_format is not None:
            return write_file(results.iter_batches(batch_size=None, batch_format="pyarrow"), output, file_format)
        parts = results.map_batches(write_part, batch_size=None, batch_format="pyarrow", num_cpus=0,
                                    fn_kwargs={"directory": output, "fmt": directory_format})
        tally = Tally()
        for summary in parts.iter_batches(batch_size=None, batch_format="pyarrow"):
            for row in summary.to_pylist():
                tally.add(row["lines"], row["errors"], row["examples"])
        return tally
