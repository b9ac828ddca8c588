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
