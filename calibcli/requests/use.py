"""The door of `calib apply` and `calib export`: how a saved map is used, checked once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from calibcli.errors import UsageError
from calibcli.requests import bounds
from calibcli.requests.names import column_options
from calibcli.calibrators.params import SQL_DIALECTS

ON_INVALID = ("error", "null", "skip")
_SQL_QUOTES = {"ansi": "'\"", "spark": "'\"`"}  # what opens a quote in a --score-expr, per --dialect


@dataclass(frozen=True)
class ApplyRequest:
    """How `calib apply` writes: the score column(s) read, the column added, what invalid
    scores do, and whether the map's interval is written too."""

    score_col: str = "score"
    output_col: str = "calibrated"
    on_invalid: str = "error"
    interval: bool = False
    score_cols: str | None = None  # --score-cols: the K score columns a K-class map reads

    @classmethod
    def build(cls, score_col: str = "score", output_col: str = "calibrated", on_invalid: str = "error",
              interval: bool = False, score_cols: str | None = None) -> "ApplyRequest":
        if on_invalid not in ON_INVALID:
            raise UsageError(f"--on-invalid {on_invalid!r}: expected one of {', '.join(ON_INVALID)}")
        column_options([("--score-col", score_col), ("--output-col", output_col)])
        return cls(score_col, output_col, on_invalid, interval, score_cols)


@dataclass(frozen=True)
class ExportRequest:
    """What `calib export --sql` writes: the score as a column (quoted in the dialect) or a
    SQL expression, the dialect, the knot budget, the K score columns of a K-class map.
    Whether the map is K-class is known once it is read (`export.dispatch.export_map`)."""

    column: str | None = None  # --score-col (None: the column `score`, or a K-class map's columns)
    expression: str | None = None
    dialect: str = "ansi"
    max_knots: int | None = None
    score_cols: tuple[str, ...] | None = None

    @classmethod
    def build(cls, column: str | None = None, expression: str | None = None, dialect: str = "ansi",
              max_knots: int | None = None, score_cols: str | Sequence[str] | None = None) -> "ExportRequest":
        """Check the options; `column` None: the column `score`, unless an expression is given;
        `score_cols`: names, or the text of `--score-cols a,b,c`."""
        if column is not None and expression is not None:
            raise UsageError("give --score-col or --score-expr, not both")
        if score_cols is not None and (column is not None or expression is not None):
            raise UsageError("--score-cols (K-class maps) cannot be combined with --score-col or --score-expr")
        if dialect not in SQL_DIALECTS:
            raise UsageError(f"--dialect {dialect!r} is not one of {', '.join(SQL_DIALECTS)}")
        bounds.check(max_knots=max_knots)
        if expression is not None:
            check_expression(expression, dialect)
        column_options([("--score-col", column)])
        return cls(column, expression, dialect, max_knots, None if score_cols is None else _sql_columns(score_cols))


def _sql_columns(names: str | Sequence[str]) -> tuple[str, ...]:
    """`export --score-cols a,b,c`: column names (export reads no file, so no pattern), none
    empty, none twice."""
    from calibcli.errors import shown

    names = tuple(n.strip() for n in (names.split(",") if isinstance(names, str) else names))
    for i, name in enumerate(names):
        if not name:
            raise UsageError("--score-cols: an empty column name", hint="e.g. --score-cols p_a,p_b,p_c")
        if name in names[:i]:
            raise UsageError(f"--score-cols names column {shown(name)} more than once")
        if "\x00" in name:
            raise UsageError(f"--score-cols {name!r} has a NUL character, which SQL cannot quote")
    return names


def check_expression(expr: str, dialect: str = "ansi") -> None:
    """Refuse (UsageError) a score expression that could end the statement, open a comment or
    leave a quote, parenthesis or bracket open, reading quotes as the dialect does.

    Strings are '...' and identifiers "..." (a quote doubled inside is the quote); Spark also
    reads "..." as a string and quotes identifiers with backticks, which ANSI mode refuses
    (DuckDB and MySQL read them as quotes, PostgreSQL does not). Backslashes, `$` outside
    quotes and `${` are refused: backslash escapes (PostgreSQL's E'..' strings, every Spark
    string) and dollar quoting would move where a string ends, and Spark substitutes
    `${var}` before parsing.
    """
    def refuse(why: str) -> UsageError:
        return UsageError(f"--score-expr {expr!r} {why}",
                          hint="give one expression of the score, e.g. --score-expr 'CAST(raw AS DOUBLE)'")

    if not expr.strip():
        raise UsageError("--score-expr must be a SQL expression")
    for bad, why in (("\\", "has a backslash"), ("\x00", "has a NUL character"), ("${", "has '${'")):
        if bad in expr:
            raise refuse(why)
    quotes, opened, i, n = _SQL_QUOTES[dialect], [], 0, len(expr)
    while i < n:
        c = expr[i]
        if c in quotes:
            j = i + 1
            while True:
                j = expr.find(c, j)
                if j < 0:
                    raise refuse(f"leaves a {c} quote open")
                if expr.startswith(c + c, j):
                    j += 2
                    continue
                break
            i = j + 1
            continue
        two = expr[i:i + 2]
        if c == ";":
            raise refuse("has ';' outside quotes (it would end the statement)")
        if two in ("--", "/*") or c == "#":
            raise refuse(f"has {two if c != '#' else c!r} outside quotes (it would open a comment)")
        if c in "$`":
            raise refuse(f"has {c!r} outside quotes")
        if c in "([":
            opened.append(c)
        elif c in ")]":
            if not opened or opened.pop() != "([)]"[")]".index(c)]:
                raise refuse(f"closes a {c!r} it did not open")
        i += 1
    if opened:
        raise refuse(f"leaves a {opened[-1]!r} open")


__all__ = ["ApplyRequest", "ExportRequest", "ON_INVALID", "check_expression"]
