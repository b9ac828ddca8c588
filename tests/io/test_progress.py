"""The progress bar shows only on a terminal (`calibcli.io.progress`)."""

from __future__ import annotations

import os
import sys

from typer.testing import CliRunner

from calibcli.io import progress

runner = CliRunner()


def test_progress_bar_only_on_a_terminal(monkeypatch):
    from calibcli.io import console

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(console, "quiet", False)
    monkeypatch.setattr(sys, "stderr", Tty())
    assert progress.enabled()
    monkeypatch.setattr(sys, "stdout", Tty())
    assert progress.enabled() and not progress.enabled(data_to_stdout=True)  # data on the same terminal
    monkeypatch.setattr(console, "quiet", True)
    assert not progress.enabled()
    monkeypatch.setattr(console, "quiet", False)
    monkeypatch.setattr(sys, "stderr", open(os.devnull, "w"))
    assert not progress.enabled()


def test_steps_bar_says_what_runs_and_counts_fits(monkeypatch):
    """`steps` (calib compare's bar): the description names the step running, the count the
    fits done; nothing at all when the caller did not ask for one or no bar may be drawn."""
    import io

    from rich.console import Console

    from calibcli.io import console

    buf = io.StringIO()
    monkeypatch.setattr(console, "err", lambda: Console(file=buf, force_terminal=True, width=120))
    monkeypatch.setattr(progress, "enabled", lambda data_to_stdout=False: True)
    with progress.steps("compare", 4, "fits") as steps:
        steps.start("isotonic, fold 2 of 2")
        steps.advance(3)
    shown = buf.getvalue()
    assert "compare" in shown and "fits" in shown and "3/4" in shown
    buf.truncate(0)
    with progress.steps("compare", 4, "fits", show=False) as steps:
        steps.start("x")
        steps.advance()
    monkeypatch.setattr(progress, "enabled", lambda data_to_stdout=False: False)
    with progress.steps("compare", 4, "fits") as steps:
        steps.advance()
    assert buf.getvalue() == ""
