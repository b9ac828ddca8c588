"""The K score columns of one prediction (`--score-cols SPEC`) against a file's schema.

SPEC is a comma list (`p_cat,p_dog,p_car`), shell patterns (`'p_*'`, matches in natural
order: `p_2` before `p_10`), or one Parquet list / fixed-size-list column of length K
(`probs`). Class names are the columns' suffixes after their common prefix (`p_cat` ->
`cat`), or `--classes`. A label column holds class names (strings, or integers equal to the
suffixes) or, when no label is a suffix, 0-based indices (`label_codes`).

Every refusal is an `InputError` (or `UsageError`) naming the file, the column and the
1-based data row, which the CLI prints as one line with exit 2.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pyarrow as pa

from calibcli.errors import InputError, UsageError, shown
from calibcli.io.columns import _column, _first, _pc, _to_float, label_text, missing_column, scores_or_nan

SCORE_KINDS = ("auto", "probability", "logit")
PROBABILITY_TOLERANCE = 1e-6  # how far from 1 a row of probabilities may sum (float32 rounding)
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class ScoreCols:
    """K score columns resolved against a schema: `columns` in class order, or one list column
    (`list_column`, with `k` None until the data or a map says it)."""

    spec: str
    columns: tuple[str, ...] = ()
    list_column: str | None = None
    k: int | None = None
    classes: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The columns as messages name them."""
        if self.list_column is not None:
            return f"column {shown(self.list_column)}"
        return "columns " + ",".join(self.columns) if len(self.columns) <= 4 else \
            f"columns {shown(self.spec)} ({self.columns[0]} .. {self.columns[-1]})"

    def with_k(self, k: int, source: str, classes: Sequence[str] | None = None) -> "ScoreCols":
        """The same columns with K fixed (a list column's length from its data or a map)."""
        if self.k is not None and self.k != k:
            raise InputError(f"{source}: {self.shown} give {self.k} scores a row, but {k} are needed")
        names = tuple(classes) if classes is not None else (self.classes or tuple(str(i) for i in range(k)))
        return replace(self, k=k, classes=_checked_classes(names, k, source))


def natural_key(name: str) -> tuple:
    """Sort key putting `p_2` before `p_10`: digit runs compare as numbers (then the name
    itself breaks ties such as `p_01` and `p_1`)."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def common_prefix(names: Sequence[str]) -> str:
    """The longest prefix all names share that leaves each a non-empty suffix and does not end
    inside a run of letters or of digits (`p_cat`, `p_car` -> `p_`; `p1`, `p10` -> `p`)."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    n = 0
    while n < len(first) and n < len(last) and first[n] == last[n]:
        n += 1
    n = min(n, min(len(x) for x in names) - 1)

    def same_run(a: str, b: str) -> bool:
        return (a.isdigit() and b.isdigit()) or (a.isalpha() and b.isalpha())

    while n > 0 and any(same_run(x[n - 1], x[n]) for x in names):
        n -= 1
    return first[:n]


def class_names(columns: Sequence[str]) -> tuple[str, ...]:
    """Each column's suffix after the columns' common prefix."""
    cut = len(common_prefix(columns))
    return tuple(c[cut:] for c in columns)


def _is_list(typ: pa.DataType) -> bool:
    return pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)


def resolve(spec: str, schema: pa.Schema, source: str, classes: Sequence[str] | None = None,
            flag: str = "--score-cols") -> ScoreCols:
    """`spec` against `schema`: the K columns in class order and the class names."""
    names = list(schema.names)
    items = [item.strip() for item in spec.split(",")]
    if not spec.strip() or any(not item for item in items):
        raise UsageError(f"{flag} {shown(spec)}: an empty column name", hint="e.g. --score-cols 'p_*' or p_a,p_b,p_c")
    if len(items) == 1 and items[0] in names and _is_list(schema.field(items[0]).type):
        typ = schema.field(items[0]).type
        k = typ.list_size if pa.types.is_fixed_size_list(typ) else None
        cols = ScoreCols(spec, list_column=items[0], classes=tuple(classes or ()))
        if k is not None and k < 2:
            raise _one_column(spec, source, flag)
        return cols.with_k(k, source, classes) if k is not None else cols
    columns: list[str] = []
    for item in items:
        if item in names or not _GLOB.search(item):
            if item not in names:
                raise missing_column(item, names, source, flag)
            columns.append(item)
            continue
        matched = sorted((c for c in names if fnmatch.fnmatchcase(c, item)), key=natural_key)
        if not matched:
            raise InputError(f"{source}: {flag} pattern {shown(item)} matches no column",
                             hint="columns: " + ", ".join(names[:20]))
        columns.extend(matched)
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise UsageError(f"{source}: {flag} {shown(spec)} names column {shown(repeated[0])} more than once")
    if len(columns) < 2:
        raise _one_column(spec, source, flag, columns)
    for c in columns:
        if _is_list(schema.field(c).type):
            raise InputError(f"{source}: column {shown(c)} holds lists: give it alone to {flag}")
    k = len(columns)
    return ScoreCols(spec, columns=tuple(columns), k=k,
                     classes=_checked_classes(tuple(classes) if classes is not None else class_names(columns),
                                              k, source))


def resolve_columns(columns: Sequence[str], schema: pa.Schema, source: str) -> ScoreCols:
    """Exactly these columns (a map's recorded score columns), their suffixes as class names."""
    names = list(schema.names)
    for c in columns:
        if c not in names:
            raise missing_column(c, names, source, "--score-cols; the map was fitted on it")
    return ScoreCols(",".join(columns), tuple(columns), k=len(columns), classes=class_names(columns))


def _one_column(spec: str, source: str, flag: str, columns: Sequence[str] = ()) -> UsageError:
    got = f"only column {shown(columns[0])}" if columns else "one score a row"
    return UsageError(f"{source}: {flag} {shown(spec)} gives {got}: K-class scores need 2 or more columns",
                      hint=f"for one {'probability' if flag == '--prob-cols' else 'score'} column (binary labels) "
                           f"use {flag[:-1]}")  # --prob-col, --score-col


def _checked_classes(names: tuple[str, ...], k: int, source: str) -> tuple[str, ...]:
    if len(names) != k:
        raise UsageError(f"{source}: --classes names {len(names)} classes but the score columns give {k}")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"{source}: class name {shown(name)} appears twice",
                             hint="name the classes with --classes a,b,c")
        seen.add(name)
    return names


def parse_classes(text: str | None) -> tuple[str, ...] | None:
    """`--classes a,b,c` as names (None when not given), checked by `check_classes`."""
    if text is None:
        return None
    return check_classes(tuple(part.strip() for part in text.split(",")))


def check_classes(names: Sequence) -> tuple:
    """Class names given by `--classes` (or `classes=` of `calibcli.fit`): none empty, none
    twice (as text), refused with the same words from the command and the API."""
    text = [str(name) for name in names]
    given = ",".join(text)
    if any(not name for name in text):
        raise UsageError(f"--classes {shown(given)}: an empty class name")
    seen: set[str] = set()
    for name in text:
        if name in seen:
            raise UsageError(f"--classes {shown(given)}: class name {shown(name)} appears twice")
        seen.add(name)
    return tuple(names)


def check_score_kind(kind: str) -> str:
    if kind not in SCORE_KINDS:
        raise UsageError(f"--score-kind {kind!r}: expected one of {', '.join(SCORE_KINDS)}")
    return kind


def matrix_from(table: pa.Table | pa.RecordBatch, cols: ScoreCols, source: str, offset: int = 0,
                keep_invalid: bool = False) -> np.ndarray:
    """The (n, K) float64 scores of a table or batch; every value finite (the row named), or
    with `keep_invalid` empty values as NaN and non-finite values kept, for callers that
    decide per row (`calib apply --on-invalid null|skip`)."""
    if cols.list_column is not None:
        P = _list_matrix(table, cols, source, offset)
        names = [cols.list_column] * P.shape[1]
    else:
        names = list(cols.columns)
        P = np.empty((table.num_rows, len(names)), dtype=np.float64, order="F")  # columns written whole
        for j, name in enumerate(names):
            P[:, j] = (scores_or_nan(table, name, source, offset, flag="--score-cols") if keep_invalid
                       else _to_float(_column(table, name, source, "--score-cols"), name, source, offset))
    if keep_invalid:
        return P
    bad = ~np.isfinite(P)
    if bad.any():
        i, j = divmod(int(np.argmax(bad)), P.shape[1])
        raise InputError(f"{source}: column {shown(names[j])}, row {i + 1 + offset}: score "
                         f"{shown(float(P[i, j]))} is not finite", hint="remove or repair rows with NaN or inf scores")
    return P


def _list_matrix(table: pa.Table | pa.RecordBatch, cols: ScoreCols, source: str, offset: int) -> np.ndarray:
    name = cols.list_column
    col = _column(table, name, source, "--score-cols")
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if arr.null_count:
        row = _first(np.asarray(arr.is_null())) + 1 + offset
        raise InputError(f"{source}: column {shown(name)}, row {row}: empty value")
    n = len(arr)
    if pa.types.is_fixed_size_list(arr.type):
        k = arr.type.list_size
    else:
        lengths = np.asarray(_pc().list_value_length(arr), dtype=np.int64)
        k = cols.k if cols.k is not None else (int(lengths[0]) if n else 0)
        bad = lengths != k
        if bad.any():
            i = _first(bad)
            raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: {int(lengths[i])} scores, "
                             f"expected {k} like " + ("the map's classes" if cols.k is not None else "row 1"))
    if cols.k is not None and k != cols.k:
        raise InputError(f"{source}: column {shown(name)} gives {k} scores a row, but {cols.k} are needed")
    if n and k < 2:
        raise _one_column(cols.spec, source, "--score-cols")
    values = arr.flatten()  # a sliced list array's values start where the slice does
    if values.null_count:
        i = _first(np.asarray(values.is_null()))
        raise InputError(f"{source}: column {shown(name)}, row {i // k + 1 + offset}: an empty score in the list")
    flat = _to_float(pa.chunked_array([values]), name, source, 0)
    return flat.reshape(n, k)


def probability_problems(P: np.ndarray) -> np.ndarray:
    """Rows that are not probabilities: a negative value or a sum more than 1e-6 from 1."""
    return (P < 0).any(axis=1) | (np.abs(P.sum(axis=1) - 1.0) > PROBABILITY_TOLERANCE)


# What a refused row of probabilities suggests, by command: only options that command has.
KIND_HINT = "give --score-kind logit for scores that are not probabilities"  # fit, compare
MAP_HINT = ("the map was fitted on probabilities: if these columns are logits, refit it with "
            "calib fit --score-kind logit")  # apply, evaluate --map
PROB_COLS_HINT = ("--prob-cols takes probabilities (rows of non-negative values summing to 1); for "
                  "logits, evaluate a map fitted on them with --map")  # evaluate --prob-cols


def check_probabilities(P: np.ndarray, cols: ScoreCols, source: str, offset: int = 0,
                        hint: str = KIND_HINT) -> None:
    """Refuse a row of probabilities with a negative value or not summing to 1, naming it;
    `hint` says what the command offers instead."""
    bad = probability_problems(P)
    if not bad.any():
        return
    i = _first(bad)
    negative = P[i] < 0
    if negative.any():
        j = int(np.argmax(negative))
        name = cols.list_column or cols.columns[j]
        raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: probability "
                         f"{float(P[i, j])!r} is negative", hint=hint)
    raise InputError(f"{source}: {cols.shown}, row {i + 1 + offset}: the probabilities sum to "
                     f"{float(P[i].sum())!r}, not 1 (within {PROBABILITY_TOLERANCE:g})", hint=hint)


def score_kind_of(P: np.ndarray, kind: str, cols: ScoreCols, source: str, offset: int = 0) -> str:
    """`kind` resolved on these scores: `auto` is `probability` when every row is one (non-negative,
    summing to 1 within 1e-6), else `logit`; `probability` refuses rows that are not."""
    if kind == "auto":
        return "logit" if probability_problems(P).any() else "probability"
    if kind == "probability":
        check_probabilities(P, cols, source, offset)
    return kind


def auto_logits_note(P: np.ndarray, cols: ScoreCols) -> str | None:
    """The warning when `auto` chose logits though most rows are probabilities to within 1e-3
    (written with few decimals, or a few bad rows), else None."""
    from calibcli.calibrators.kscores import NEAR_TOL, auto_logits_rows

    near = auto_logits_rows(P)
    if not near:
        return None
    return (f"--score-kind auto reads {cols.shown} as logits, though {near} of {P.shape[0]} rows are probabilities "
            f"to within {NEAR_TOL:g} (auto needs every row within {PROBABILITY_TOLERANCE:g}): give --score-kind "
            "probability (which names a row that is not) or --score-kind logit")


LABELS_AS_NAMES = "class names"
LABELS_AS_INDICES = "0-based class indices"


def label_codes(table: pa.Table | pa.RecordBatch, name: str, classes: Sequence[str], source: str,
                offset: int = 0, how: str | None = None) -> tuple[np.ndarray, str]:
    """The label column as class codes 0..K-1, and how it was read (`LABELS_AS_NAMES` when any
    label is a class name, else `LABELS_AS_INDICES`); pass `how` back for later batches."""
    col = _column(table, name, source, "--label-col")
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if col.null_count:
        row = _first(np.asarray(col.is_null())) + 1 + offset
        raise InputError(f"{source}: column {shown(name)}, row {row}: empty label")
    text = label_text(col, name, source, offset)
    found = _pc().index_in(text, value_set=pa.array(list(classes), pa.string()))
    if how is None:
        how = LABELS_AS_NAMES if found.null_count < len(found) or len(found) == 0 else LABELS_AS_INDICES
    if how == LABELS_AS_NAMES:
        if found.null_count:
            i = _first(np.asarray(found.is_null()))
            raise _not_a_class(source, name, i + 1 + offset, col[i].as_py(), classes, how)
        return np.asarray(found, dtype=np.int64), how
    codes = np.asarray(_pc().cast(text, pa.float64(), safe=False), dtype=np.float64) \
        if _all_numbers(text) else None
    if codes is None:
        i = _first(~_number_mask(text))
        raise _not_a_class(source, name, i + 1 + offset, col[i].as_py(), classes, how)
    bad = (codes != np.floor(codes)) | (codes < 0) | (codes >= len(classes))
    if bad.any():
        i = _first(bad)
        raise _not_a_class(source, name, i + 1 + offset, col[i].as_py(), classes, how)
    return codes.astype(np.int64), how


def _number_mask(text: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(_pc().match_substring_regex(text, r"^[+-]?\d+(\.0*)?$"))


def _all_numbers(text: pa.ChunkedArray) -> bool:
    return bool(_number_mask(text).all())


def _not_a_class(source: str, name: str, row: int, value, classes: Sequence[str], how: str) -> InputError:
    """A label that is not a class, read as `how` says: labels are all class names (when any
    label is one) or all 0-based indices, never a mix."""
    listed = ", ".join(classes[:12]) + (", ..." if len(classes) > 12 else "")
    if how == LABELS_AS_NAMES:
        hint = (f"classes: {listed}; labels are read as class names (some are), so none is read as a 0-based "
                "index: give all labels as class names or all as indices")
    else:
        hint = f"no label is a class name ({listed}), so labels are read as 0-based indices 0..{len(classes) - 1}"
    return InputError(f"{source}: column {shown(name)}, row {row}: label {shown(value)} is not a class",
                      hint=hint + "; name the classes with --classes")
