"""The rules of K-class scores, written once: what a row of probabilities is, how `auto` reads
the score kind, and what class names may be.

- A row of K probabilities has no negative value and sums to 1 within `ROW_SUM_TOL` (1e-6:
  float32 rounding of a softmax). Every reader of probability rows (fit, apply, evaluate, the
  engines, the Python API) refuses the first row that is not, with `refuse_rows`' words.
- The score kind: `probability` (rows as above; their logs are used), `logit` (any finite
  values), or `auto`, which reads probabilities when every row is one and logits otherwise,
  warning (`AUTO_LOGITS`) when most rows are probabilities to within 1e-3 (written with few
  decimals, or a few bad rows): `auto` then probably chose wrong.
Class names and the score kind options are `kinds.names`'. numpy only (the calibrators read
this module; `calib methods` imports no pyarrow).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from calibcli.errors import CalibWarning, InputError, Where
from calibcli.kinds.names import KIND_OPTIONS, SCORE_KINDS, check_classes, check_kind_option  # noqa: F401

ROW_SUM_TOL = 1e-6  # |row sum - 1| at most this for a row of probabilities
NEAR_TOL = 1e-3  # rows this close to probabilities make `auto` reading logits a warning

# What a refused row of probabilities suggests, by what read it: only options that reader has.
KIND_HINT = "give --score-kind logit for scores that are not probabilities"  # fit, compare
MAP_HINT = ("the map was fitted on probabilities: if these columns are logits, refit it with "
            "calib fit --score-kind logit")  # apply, evaluate --map
PROB_COLS_HINT = ("--prob-cols takes probabilities (rows of non-negative values summing to 1); for "
                  "logits, evaluate a map fitted on them with --map")  # evaluate --prob-cols
ARRAY_HINT = "pass logits with score_kind='logit'"  # the Python API


def problem_rows(P: np.ndarray, class_major: bool = False) -> np.ndarray:
    """Rows (of (n, K) scores, or columns of (K, n) class-major ones) that are not probabilities:
    a negative value, or a sum more than `ROW_SUM_TOL` from 1. NaN rows count as problems."""
    axis = 0 if class_major else 1
    with np.errstate(invalid="ignore"):
        return (P < 0).any(axis=axis) | ~(np.abs(P.sum(axis=axis) - 1.0) <= ROW_SUM_TOL)


def are_probabilities(P: np.ndarray) -> bool:
    """Every row a row of probabilities."""
    return not problem_rows(P).any()


def refuse_rows(P: np.ndarray, where: Where, columns: Sequence[str] | None = None, hint: str = ARRAY_HINT,
                class_major: bool = False) -> None:
    """Refuse the first row that is not a row of probabilities, naming it (and its column when a
    value is negative): `where` says whether rows are a file's (1-based) or an array's (0-based)."""
    bad = problem_rows(P, class_major)
    if not bad.any():
        return
    i = int(np.argmax(bad))
    row = P[:, i] if class_major else P[i]
    negative = row < 0
    if negative.any():
        j = int(np.argmax(negative))
        column = columns[j] if columns is not None else f"class {j}"
        raise InputError(f"{where.row(i, column)}: probability {float(row[j])!r} is negative", hint=hint)
    named = where.row(i) if columns is None else where.rows_of(i, columns_shown(columns))
    raise InputError(f"{named}: the probabilities sum to {float(row.sum())!r}, not 1 (within {ROW_SUM_TOL:g})",
                     hint=hint)


def columns_shown(columns: Sequence[str]) -> str:
    """K columns as messages name them: `columns p_a,p_b,p_c`, or the first and last of many."""
    if len(set(columns)) == 1:
        return f"column {columns[0]}"
    return "columns " + (",".join(columns) if len(columns) <= 4 else f"{columns[0]} .. {columns[-1]}")


def resolve_kind(P: np.ndarray, kind: str, where: Where, columns: Sequence[str] | None = None,
                 hint: str = KIND_HINT) -> tuple[str, str | None]:
    """(`kind` resolved on these scores, the warning `auto` gives or None): `auto` is
    `probability` when every row is one, else `logit`; `probability` refuses a row that is not."""
    if kind == "probability":
        refuse_rows(P, where, columns, hint)
        return kind, None
    if kind == "logit":
        return kind, None
    if are_probabilities(P):
        return "probability", None
    return "logit", auto_logits_warning(P, columns)


def auto_logits_warning(P: np.ndarray, columns: Sequence[str] | None = None) -> str | None:
    """The warning when `auto` chose logits though most rows are probabilities to within
    `NEAR_TOL`, else None."""
    with np.errstate(invalid="ignore"):
        near = int(np.count_nonzero(np.all(P >= 0, axis=1) & (np.abs(P.sum(axis=1) - 1.0) <= NEAR_TOL)))
    if not 2 * near > P.shape[0]:
        return None
    what = "the scores" if columns is None else columns_shown(columns)
    return (f"--score-kind auto reads {what} as logits, though {near} of {P.shape[0]} rows are probabilities "
            f"to within {NEAR_TOL:g} (auto needs every row within {ROW_SUM_TOL:g}): give --score-kind "
            "probability (which names a row that is not) or --score-kind logit")


def warn(message: str | None, stacklevel: int = 3) -> None:
    """A rule's warning as a CalibWarning (the CLI prints it; --strict makes it an error)."""
    if message:
        import warnings

        warnings.warn(message, CalibWarning, stacklevel=stacklevel)


__all__ = ["ARRAY_HINT", "KIND_HINT", "KIND_OPTIONS", "MAP_HINT", "NEAR_TOL", "PROB_COLS_HINT", "ROW_SUM_TOL",
           "SCORE_KINDS", "are_probabilities", "auto_logits_warning", "check_classes", "check_kind_option",
           "problem_rows", "refuse_rows", "resolve_kind", "warn"]
