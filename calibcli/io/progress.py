"""Progress bars for long runs, on stderr only.

Shown when stderr is a terminal and `--quiet` is off; otherwise the callbacks do nothing,
so pipes, CI logs and tests see no progress output.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from calibcli.io import console


def enabled(data_to_stdout: bool = False) -> bool:
    """True when a progress bar should be drawn: stderr is a terminal, no --quiet, and data
    is not being printed on the same terminal (where the bar would garble it)."""
    def tty(stream) -> bool:
        return bool(getattr(stream, "isatty", lambda: False)())

    return not console.quiet and tty(sys.stderr) and not (data_to_stdout and tty(sys.stdout))


@contextlib.contextmanager
def rows(description: str, total: int | None = None, data_to_stdout: bool = False
         ) -> Iterator[Callable[[int], None]]:
    """A row counter: yields `advance(n)`; with `total` (e.g. from Parquet metadata) a bar and ETA.

    The bar is transient: it disappears when the run ends, leaving stderr for messages.
    """
    if not enabled(data_to_stdout):
        yield lambda n: None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    columns = [TextColumn(description), BarColumn(), MofNCompleteColumn(), TextColumn("rows"),
               TimeElapsedColumn()]
    if total is not None:
        columns.append(TimeRemainingColumn())
    with Progress(*columns, console=console.err(), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextlib.contextmanager
def working(description: str) -> Iterator[None]:
    """A spinner with elapsed time for a step with no row count (evaluate's read and metrics)."""
    if not enabled():
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn(description), TimeElapsedColumn(),
                  console=console.err(), transient=True) as bar:
        bar.add_task(description, total=None)
        yield
