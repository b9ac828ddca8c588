"""Exit codes and the exception types library code raises (the CLI turns them into one line)."""

from __future__ import annotations

from enum import IntEnum


# calibcli is installed from its repository (it is not on a package index yet): hints say so.
UPGRADE_HINT = "upgrade calibcli: in its repository, `git pull && pip install -e .`"


def extra_hint(extra: str) -> str:
    """How to install an optional extra, as it works today."""
    return f"install it from the calibcli repository: pip install -e '.[{extra}]'"


def shown(value: object) -> str:
    """A value from the user's data as messages show it: text in single quotes, written so that
    pasting the message into a shell runs nothing (`'x'"'"'$(id)'`); other values as repr."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    if not isinstance(value, str):
        return repr(value)
    return "'" + value.replace("'", "'\"'\"'") + "'"


class ExitCode(IntEnum):
    """What `calib` returns to the shell; the same three codes for every command."""

    OK = 0
    GATE_FAILED = 1  # `calib evaluate`: a metric crossed a threshold or regressed
    ERROR = 2  # usage, input, map or fit error


class CalibError(Exception):
    """An error the user can act on: printed as `error: <message>` (+ `hint: <hint>`), exit 2."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(CalibError):
    """Options that contradict each other or name something that does not exist."""


class InputError(CalibError):
    """A score/label file that cannot be read or holds invalid values."""


class MapError(CalibError):
    """A saved map that is missing, corrupt, from a newer calibcli, or for another method."""


class OutputError(CalibError):
    """An output that cannot be written (permissions, a directory, a full disk, a missing folder)."""


class FitError(CalibError):
    """Data a calibrator cannot be fitted on (one class, no rows, ...)."""


class ParamError(CalibError):
    """A `--param key=value` that the method does not know or cannot accept."""


class NotFittedError(CalibError, AttributeError):
    """`predict` or `get_state` called before `fit`."""


class CalibWarning(UserWarning):
    """Something unusual but usable (clipped scores, a collapsed posterior): shown on stderr."""


class Where:
    """Where values come from, for messages: a file's column and the rows read before this batch
    (rows are then named 1-based, as a reader counts data rows), or an array in memory (0-based,
    as Python indexes it). One place words a location, so every entry point names it alike."""

    def __init__(self, source: str | None = None, column: str | None = None, offset: int = 0):
        self.source, self.column, self.offset = source, column, offset

    def row(self, i: int, column: str | None = None) -> str:
        """`FILE: column 'c', row 12` or `labels[11]` (`column` overrides the column named)."""
        if self.source is None:
            at = f"{self.column or 'values'}[{i}]"
            return at if column is None or column == self.column else f"{at}, {column}"
        column = self.column if column is None else column
        named = f"column {shown(column)}, " if column is not None else ""
        return f"{self.source}: {named}row {i + 1 + self.offset}"

    def rows_of(self, i: int, columns: str) -> str:
        """`FILE: columns a,b, row 12` (`columns` as written), or `labels[11]` for an array."""
        if self.source is None:
            return self.row(i)
        return f"{self.source}: {columns}, row {i + 1 + self.offset}"

    def prefix(self) -> str:
        """`FILE: ` for a file, nothing for an array."""
        return "" if self.source is None else f"{self.source}: "

    def at(self, offset: int) -> "Where":
        """The same place, `offset` more rows on (the next batch)."""
        return Where(self.source, self.column, self.offset + offset)
