"""The K score columns of one prediction against a file's schema: `--score-cols SPEC`,
`--prob-cols SPEC`, or the columns a map recorded when it was fitted (`map_columns`).

SPEC is a comma list (`p_cat,p_dog,p_car`), shell patterns (`'p_*'`, matches in natural
order: `p_2` before `p_10`), or one Parquet list / fixed-size-list column of length K
(`probs`). Class names are the columns' suffixes after their common prefix (`p_cat` ->
`cat`), or `--classes`. Labels are read by `kinds.labels`.

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
from calibcli.io.columns import column_of, first_true, missing_column, scores_or_nan, to_float
from calibcli.kinds.names import check_classes, parse_classes  # noqa: F401

def _pc():
    import pyarrow.compute as pc

    return pc


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
    return check_classes(names, "class names" if source else "--classes")


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
                       else to_float(column_of(table, name, source, "--score-cols"), name, source, offset))
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
    col = column_of(table, name, source, "--score-cols")
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if arr.null_count:
        row = first_true(np.asarray(arr.is_null())) + 1 + offset
        raise InputError(f"{source}: column {shown(name)}, row {row}: empty value")
    n = len(arr)
    if pa.types.is_fixed_size_list(arr.type):
        k = arr.type.list_size
    else:
        lengths = np.asarray(_pc().list_value_length(arr), dtype=np.int64)
        k = cols.k if cols.k is not None else (int(lengths[0]) if n else 0)
        bad = lengths != k
        if bad.any():
            i = first_true(bad)
            raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: {int(lengths[i])} scores, "
                             f"expected {k} like " + ("the map's classes" if cols.k is not None else "row 1"))
    if cols.k is not None and k != cols.k:
        raise InputError(f"{source}: column {shown(name)} gives {k} scores a row, but {cols.k} are needed")
    if n and k < 2:
        raise _one_column(cols.spec, source, "--score-cols")
    values = arr.flatten()  # a sliced list array's values start where the slice does
    if values.null_count:
        i = first_true(np.asarray(values.is_null()))
        raise InputError(f"{source}: column {shown(name)}, row {i // k + 1 + offset}: an empty score in the list")
    flat = to_float(pa.chunked_array([values]), name, source, 0)
    return flat.reshape(n, k)


def map_columns(classes: Sequence, recorded: Sequence[str] | None, list_column: str | None, spec: str | None,
                schema: pa.Schema, source: str, map_name: str, flag: str = "--score-cols") -> ScoreCols:
    """The K score columns a K-class map reads in `schema`, in the map's class order: one rule
    for `apply`, `evaluate --map`, `export --sql` and the engines.

    Without `spec`: the columns the map recorded at fit (exact names), or its list column. With
    `spec` (`--score-cols`): the columns it resolves to, matched to the map's classes by the
    column names the map recorded (the same columns in another order), else by their suffixes
    when those are the map's class names, else by position in the order given.
    """
    names = tuple(str(c) for c in classes)
    k = len(names)
    if spec is None:
        if recorded:
            return resolve_columns(recorded, schema, source).with_k(k, source, names)
        if list_column:
            return resolve(list_column, schema, source).with_k(k, source, names)
        raise UsageError(f"{map_name}: the map does not record its score columns", hint=f"name them with {flag}")
    cols = resolve(spec, schema, source, flag=flag)
    if cols.list_column is not None:
        return cols.with_k(k, source, names)
    if cols.k != k:
        the_map = "the map" if map_name == source else f"the map {map_name}"
        raise InputError(f"{source}: {flag} {shown(spec)} gives {cols.k} columns but {the_map} has {k} classes")
    given = list(cols.columns)
    if recorded and sorted(given) == sorted(recorded):
        ordered = list(recorded)
    else:
        from calibcli.kinds.labels import canonical_text

        suffix = {canonical_text(c): col for c, col in zip(class_names(given), given)}
        wanted = [canonical_text(c) for c in classes]
        ordered = [suffix[c] for c in wanted] if len(suffix) == k and set(suffix) == set(wanted) else given
    return ScoreCols(spec, columns=tuple(ordered), k=k, classes=names)


def named_schema(columns: Sequence[str]) -> pa.Schema:
    """A schema of float columns with these names: for `map_columns` where no file is read
    (`export --sql --score-cols a,b,c`)."""
    return pa.schema([(str(c), pa.float64()) for c in columns])
