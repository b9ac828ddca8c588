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
