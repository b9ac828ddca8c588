"""Column names given as options (`--score-col`, `--label-col`, ...): checked once, at the door.

A name that is empty or only white space names no column a person can point at: messages
would show `''` or `'  '`, and `calib export --sql` would quote it as an identifier a reader
cannot see. Every command refuses it (as it refuses a NUL character, which no SQL can quote).
"""

from __future__ import annotations

from typing import Iterable

from calibcli.errors import UsageError, shown


def column_option(flag: str, name: str | None) -> str | None:
    """`name` (None: the option was not given) when it names a column, else a UsageError."""
    if name is None:
        return None
    if not name.strip():
        raise UsageError(f"{flag} must name a column, got the blank name {shown(name)}",
                         hint="a column name needs a visible character: rename the column")
    if "\x00" in name:
        raise UsageError(f"{flag} {shown(name)} has a NUL character, which no column name holds")
    return name


def column_options(pairs: Iterable[tuple[str, str | None]]) -> None:
    """`column_option` of each (flag, name)."""
    for flag, name in pairs:
        column_option(flag, name)


__all__ = ["column_option", "column_options"]
