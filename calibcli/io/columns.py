"""Columns of a score file as checked numpy arrays: scores, labels, weights, fields.

Every check names the file, the column and the 1-based data row (header not counted) and
the offending value, as an `InputError` the CLI prints as one line with exit 2. Values are
shown with `errors.shown`, so pasting a message into a shell runs nothing.
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from calibcli.errors import InputError, shown
from calibcli.io.paths import display_name


def _pc():
    """pyarrow.compute, imported on first use: its import costs ~0.05 s that numeric Parquet
    columns never need."""
    import pyarrow.compute as pc

    return pc


def missing_column(name: str, names: list[str], source: str, flag: str) -> InputError:
    """The error for a column the file lacks, suggesting the closest existing name."""
    import difflib  # only for this message

    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = (f"did you mean {shown(close[0])}? " if close else "") + "columns: " + ", ".join(names[:20])
    if len(names) == 1:
        delimiter = next((d for d in ";|\t," if d in names[0]), None)
        if delimiter is not None:
            named = "tab" if delimiter == "\t" else repr(delimiter)
            hint = (f"the header is one column {shown(names[0])}: is the file delimited by {named}? "
                    "calib reads comma-separated CSV, tab-separated TSV (--format tsv), JSON lines and Parquet")
    return InputError(f"{source}: no column {shown(name)} (set it with {flag})", hint=hint)


def column_of(table: pa.Table | pa.RecordBatch, name: str, source: str, flag: str) -> pa.ChunkedArray:
    names = list(table.schema.names)
    count = names.count(name)
    if count == 0:
        raise missing_column(name, names, source, flag)
    if count > 1:
        raise InputError(f"{source}: column {shown(name)} appears {count} times in the header")
    col = table.column(names.index(name))
    return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])


def first_true(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def to_float(col: pa.ChunkedArray, name: str, source: str, offset: int) -> np.ndarray:
    """A numeric/boolean/numeric-text column as float64; errors name row and value."""
    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = col.type
    if col.null_count:
        row = first_true(np.asarray(col.is_null())) + 1 + offset
        raise InputError(f"{source}: column {shown(name)}, row {row}: empty value")
    if pa.types.is_float64(typ) or pa.types.is_float32(typ):  # exact, and no pyarrow.compute import
        # One chunk (a record batch's column): a read-only view of Arrow's buffer, no copy.
        values = col.chunk(0).to_numpy() if col.num_chunks == 1 else col.to_numpy()
        return values.astype(np.float64, copy=False)
    if pa.types.is_boolean(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ) \
            or pa.types.is_decimal(typ):
        # Integers beyond 2**53 (int64, uint64 up to 2**64 - 1) round to the nearest float64,
        # as a long decimal in a CSV does: numbers are read as float64.
        return np.asarray(_pc().cast(col, pa.float64(), safe=False), dtype=np.float64)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        trimmed = _pc().utf8_trim_whitespace(col)
        with contextlib.suppress(pa.ArrowInvalid):  # numbers stored as text parse here
            return np.asarray(_pc().cast(trimmed, pa.float64()), dtype=np.float64)
        i = _first_not_number(trimmed)  # error path only: the first row pyarrow does not read as a number
        value = trimmed[i].as_py() if isinstance(trimmed, pa.Array) else trimmed.combine_chunks()[i].as_py()
        raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: {shown(value)} is not a number",
                         hint="numbers are written like 1000, -0.25 or 1e-3 (no digit separators such as 1_000 "
                         "or 1,000)" if isinstance(value, str) and any(c in value for c in "_,'") else None)
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        for i, value in enumerate(col.to_pylist()):  # error path only: the first non-UTF-8 row
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: value {shown(value)} "
                                 "is not UTF-8 text", hint="save the file as UTF-8") from None
    raise InputError(f"{source}: column {shown(name)} has type {typ}, expected numbers")


def scores_from(table: pa.Table | pa.RecordBatch, name: str, source: str, offset: int = 0,
                flag: str = "--score-col") -> np.ndarray:
    """A finite float64 score (or probability) column."""
    s = to_float(column_of(table, name, source, flag), name, source, offset)
    bad = ~np.isfinite(s)
    if bad.any():
        i = first_true(bad)
        raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: score {shown(float(s[i]))} is not finite",
                         hint="remove or repair rows with NaN or inf scores")
    return s


def scores_or_nan(table: pa.Table | pa.RecordBatch, name: str, source: str, offset: int = 0,
                  flag: str = "--score-col") -> np.ndarray:
    """A numeric score column as float64 with empty (null) values as NaN and non-finite
    values kept: for callers that decide per row (`calib apply --on-invalid`)."""
    col = column_of(table, name, source, flag)
    if pa.types.is_null(col.type):
        return np.full(len(col), np.nan)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if not col.null_count:
        return to_float(col, name, source, offset)
    nulls = np.asarray(col.is_null())
    try:
        filled = _pc().fill_null(col, pa.scalar(0).cast(col.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return to_float(col, name, source, offset)  # a column that is no numbers anyway: its error
    s = np.array(to_float(filled, name, source, offset), dtype=np.float64)
    s[nulls] = np.nan
    return s


def _first_not_number(text: Any) -> int:
    """The index of the first value of a text column that pyarrow's cast to float64 refuses
    (the cast itself decides, not Python's float, which reads `1_000`), by bisection: about
    log2(n) casts of halves."""
    arr = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    lo, hi = 0, len(arr)  # the first bad value lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            _pc().cast(arr.slice(lo, mid - lo), pa.float64())
            lo = mid
        except pa.ArrowInvalid:
            hi = mid
    return lo


def weights_from(table: pa.Table | pa.RecordBatch, name: str, source: str, offset: int = 0) -> np.ndarray:
    """A finite, non-negative weight column (`offset`: rows before this batch, for messages)."""
    w = to_float(column_of(table, name, source, "--weight-col"), name, source, offset)
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = first_true(bad)
        raise InputError(f"{source}: column {shown(name)}, row {i + 1 + offset}: weight {shown(float(w[i]))} "
                         "must be finite and >= 0")
    return w


def field_codes(table: pa.Table | pa.RecordBatch, name: str, source: str) -> tuple[np.ndarray, list[str]]:
    """A categorical column as integer codes and the category names (nulls become '')."""
    return _dictionary(column_of(table, name, source, "--field-col"))


def _dictionary(col: Any) -> tuple[np.ndarray, list[str]]:
    """The one field encoder: an Arrow column of field values as (int64 codes, names), nulls
    named ''; a column stored dictionary-encoded is read as stored (no hashing)."""
    typ = col.type
    if pa.types.is_dictionary(typ) and (pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)):
        encoded = col.combine_chunks() if isinstance(col, pa.ChunkedArray) and col.num_chunks != 1 else (
            col.chunk(0) if isinstance(col, pa.ChunkedArray) else col)
        names = encoded.dictionary.to_pylist()
        indices = encoded.indices
        if indices.null_count:
            if "" not in names:
                names.append("")
            indices = _pc().fill_null(indices, names.index(""))
        return np.asarray(indices, dtype=np.int64), names
    col = _pc().fill_null(col.cast(pa.string()), "")
    encoded = _pc().dictionary_encode(col)
    encoded = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
    return np.asarray(encoded.indices, dtype=np.int64), encoded.dictionary.to_pylist()


def encode_fields(values: Any) -> tuple[np.ndarray, list[str]]:
    """Field values of any type in memory (strings, numbers, None; the Python API, engine
    partitions, `EvalState.from_arrays`) as integer codes into their distinct names, sorted;
    each value is named by `str`, None by ''. The encoding is a file column's (`_dictionary`)."""
    arr = np.asarray(values)
    if arr.dtype == object:
        arr = np.where(np.frompyfunc(lambda v: v is None, 1, 1)(arr).astype(bool), "", arr)
    codes, names = _dictionary(pa.array(arr.ravel().astype(str), type=pa.string()))
    order = np.argsort(np.asarray(names, dtype=str), kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[codes], [names[i] for i in order]


def field_values(table: pa.Table | pa.RecordBatch, name: str, source: str) -> np.ndarray:
    """A categorical column as an object array of strings (nulls become '')."""
    codes, categories = field_codes(table, name, source)
    return np.asarray(categories, dtype=object)[codes] if codes.size else np.empty(0, dtype=object)


def refused_scores(cal: Any, s: np.ndarray) -> np.ndarray:
    """Which scores lie outside a method's or map's domain: outside [0, 1] when it needs
    probabilities. `calib apply` refuses them (`check_scores_for`), the engines give no
    value there and exported SQL gives NULL."""
    if not cal.needs_probabilities:
        return np.zeros(s.shape, dtype=bool)
    return (s < 0) | (s > 1)


def check_scores_for(cal: Any, s: np.ndarray, col: str, source: str, map_path: str | None,
                     offset: int = 0) -> None:
    """A method or map for probabilities refuses scores outside [0, 1] (naming the row) instead
    of clipping them; `map_path` is None while fitting."""
    if not cal.needs_probabilities:
        return
    bad = refused_scores(cal, s)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{source}: column {shown(col)}, row {i + 1 + offset}: score {float(s[i])!r} is outside [0, 1], "
            + (f"but method {cal.name!r} needs probabilities" if map_path is None else
               f"but the {cal.name} map {display_name(map_path)} was fitted on probabilities"),
            hint="pass the probability column with --score-col"
            + (", or for log-odds scores fit with --param score_kind=logit" if "score_kind" in cal.params else ""),
        )


def is_categorical(typ: pa.DataType) -> bool:
    """Whether a feature column of this Arrow type is read as categorical: text, booleans
    and dictionary-encoded columns; every other type is numeric."""
    return (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_boolean(typ)
            or pa.types.is_dictionary(typ) or pa.types.is_null(typ))


def categorical_features(table: pa.Table | pa.RecordBatch, names: Sequence[str], source: str) -> list[str]:
    """The `--feature-col` columns of `table` that are categorical (`is_categorical`), in the given order."""
    return [c for c in names if is_categorical(column_of(table, c, source, "--feature-col").type)]


def map_features(table: pa.Table | pa.RecordBatch, categorical: Sequence[str], numeric: Sequence[str],
                 source: str, offset: int = 0) -> dict[str, np.ndarray]:
    """The feature columns a field-aware or multicalibration map reads: categorical as strings
    (a null as ''), numeric as floats."""
    feats = {c: field_values(table, c, source) for c in categorical}
    feats.update({c: scores_from(table, c, source, offset, flag="--feature-col") for c in numeric})
    return feats
