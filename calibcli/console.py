"""Where messages go: data on stdout, everything for people on stderr (NO_COLOR respected)."""

from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.markup import escape

_err: Console | None = None
quiet = False


def err() -> Console:
    """The stderr console (created on first use so tests can swap sys.stderr)."""
    global _err
    if _err is None or _err.file is not sys.stderr:
        _err = Console(stderr=True, no_color="NO_COLOR" in os.environ, highlight=False,
                       soft_wrap=True)
    return _err


def error(message: str, hint: str | None = None) -> None:
    """`error: <message>` and optionally `hint: <hint>`; never hidden by --quiet."""
    err().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    if hint:
        err().print(f"[bold cyan]hint:[/] {escape(hint)}", markup=True, highlight=False)


def warn(message: str) -> None:
    if not quiet:
        err().print(f"[bold yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


def info(message: str) -> None:
    if not quiet:
        err().print(message, markup=False, highlight=False)
