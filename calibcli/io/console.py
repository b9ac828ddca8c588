"""Where messages go: data on stdout, everything for people on stderr (NO_COLOR respected)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys

_err = None  # the stderr rich Console; rich is imported on the first message (start-up cost)
quiet = False


def err():
    """The stderr rich Console (created on first use so tests can swap sys.stderr)."""
    global _err
    if _err is None or _err.file is not sys.stderr:
        from rich.console import Console

        _err = Console(stderr=True, no_color="NO_COLOR" in os.environ, highlight=False,
                       soft_wrap=True, emoji=False)
    return _err


# Control characters (ANSI escapes, newlines, C1 codes) and invisible format characters
# (bidi overrides, zero-width) from user text would act on the terminal or hide text.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def safe(text: str) -> str:
    """`text` with every control or invisible character shown as an escape (`\\x1b`), on one line."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})


def _escaped_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\\":
        return "\\\\"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def cell(text: object) -> str:
    """User text (a column name, a map path, a field value) as a data table shows it: on one
    line, every control, format (bidi, zero-width), separator, surrogate or unassigned
    character, and any space at either end (tables and Markdown trim a cell's edges), written
    as a visible escape (`\\x1b`, `\\u202e`, `\\x20`), and backslashes doubled, so the original
    is always recoverable from what is printed, even from a trimmed cell (`uncell`)."""
    import unicodedata

    text = str(text)
    lead = len(text) - len(text.lstrip())
    end = len(text.rstrip()) if lead < len(text) else 0
    if text.isprintable() and "\\" not in text and lead == 0 and end == len(text):
        return text
    return "".join(_escaped_char(ch) if ch == "\\" or i < lead or i >= end
                   or unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch
                   for i, ch in enumerate(text))


def uncell(shown: str) -> str:
    """The text `cell` was given, from what it printed."""
    return re.sub(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})",
                  lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), shown)


def escape(text: str) -> str:
    """`text` with rich markup escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def error(message: str, hint: str | None = None) -> None:
    """`error: <message>` and optionally `hint: <hint>`; never hidden by --quiet."""
    err().print(f"[bold red]error:[/] {escape(safe(message))}", markup=True, highlight=False)
    if hint:
        err().print(f"[bold cyan]hint:[/] {escape(safe(hint))}", markup=True, highlight=False)


def warn(message: str) -> None:
    if not quiet:
        err().print(f"[bold yellow]warning:[/] {escape(safe(message))}", markup=True, highlight=False)


def info(message: str) -> None:
    if not quiet:
        err().print(safe(message), markup=False, highlight=False)


@functools.cache
def _data_console_class():
    from rich.console import Console

    class DataConsole(Console):
        """A stdout console whose broken pipe is a `BrokenPipeError` (rich's default exits with
        1, the gate-failed code)."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            stdout_closed()
            raise BrokenPipeError

    return DataConsole


def data_console(**options):
    """A rich Console on stdout for data (tables); `options` are rich's."""
    return _data_console_class()(**options)


def stdout_closed() -> None:
    """After a broken pipe on stdout: point fd 1 at /dev/null so later writes and the final
    flush are silent (the reader is gone; there is nobody to tell)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def write_data(text: str) -> None:
    """Data text (CSV, Markdown, JSON) to stdout exactly, as UTF-8 whatever the terminal's
    encoding claims, with nothing stripped (click's echo drops ANSI sequences off a terminal)."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    buffer.write(text.encode("utf-8", "backslashreplace"))
    buffer.flush()


@contextlib.contextmanager
def data_output():
    """Print data to stdout, treating a closed pipe (`| head`) as "the reader has enough":
    the command goes on (e.g. to decide its gates) with stdout discarded."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()
