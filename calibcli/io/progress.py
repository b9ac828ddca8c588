"""Progress bars for long runs, on stderr only.

Shown when stderr is a terminal and `--quiet` is off; otherwise the callbacks do nothing,
so pipes, CI logs and tests see no progress output.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator

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


class Steps:
    """What a step counter yields: `start(label)` names the step now running, `advance(n)`
    counts steps done (both do nothing when no bar is drawn)."""

    def __init__(self, bar: Any = None, task: Any = None, description: str = ""):
        self._bar, self._task, self._description = bar, task, description

    def start(self, label: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self._description}: {label}")

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)


@contextlib.contextmanager
def steps(description: str, total: int, what: str = "steps", show: bool = True) -> Iterator[Steps]:
    """A counter of `total` steps (`calib compare`: method x fold fits) with what is running,
    a bar, elapsed and remaining time; transient, like `rows`. `show=False` (a library call
    that did not ask for one) or `enabled()` false: no bar."""
    if not (show and enabled()):
        yield Steps()
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(what),
               TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=console.err(), transient=True) as bar:
        yield Steps(bar, bar.add_task(description, total=total), description)
