"""Segment columns for the multicalibration error: how batches of a column are kept, and how
a column becomes a few *levels* (the values segments are made of), as MCGrad does it.

Kinds. Text, integer, boolean (and object) columns are *categorical*, float columns
*numeric*; `kinds={"col": "numeric"}` overrides. A column's kind is fixed by its first batch.

Levels of a categorical column (MCGrad's `collapse_infrequent_values`, with its
`max_values_per_segment_feature` m equal to `top + 1`). A missing value (null, None, NaN) is a
value like any other ("missing"). With at most `top + 1` distinct values every value is a
level; otherwise the `top` most frequent values are levels and all others form one level
"other". Equal counts are ranked by first appearance in the rows sorted by p (the value
whose smallest p is smaller ranks first: pandas' `value_counts` is a stable sort of counts
in first-appearance order), then by the value's text.

Levels of a numeric column (MCGrad's `collapse_numeric_values`, m = `bins`). Missing
values (null, NaN) are a level of their own, outside the count. With at most `bins`
distinct non-missing values each value is a level; otherwise the edges are the
quantiles `np.quantile(x, linspace(0, 1, bins + 1))` ("linear", numpy's default, over the
non-missing values), duplicate edges are dropped, and the bins are right-closed with the
lowest edge included: [e0, e1], (e1, e2], ... (`pd.cut(include_lowest=True,
duplicates="drop")`).

Order. A column's levels are numbered in order of first appearance in the rows sorted by p
(their smallest p; equal smallest p by the level's count, larger first, then its text):
this is the order of `Series.unique()` on MCGrad's p-sorted frame, and it fixes which
segments the `max_segments` cut-off keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CATEGORICAL, NUMERIC = "categorical", "numeric"
MISSING = None  # the dictionary key of a missing categorical value


def kind_of(values: Any) -> str:
    """The kind a column's first batch implies: float -> numeric, anything else categorical."""
    if isinstance(values, pa.ChunkedArray):
        values = values.type
    if isinstance(values, pa.Array):
        values = values.type
    if isinstance(values, pa.DataType):
        t = values.value_type if pa.types.is_dictionary(values) else values
        return NUMERIC if pa.types.is_floating(t) or pa.types.is_decimal(t) else CATEGORICAL
    arr = np.asarray(values)
    return NUMERIC if arr.dtype.kind == "f" else CATEGORICAL


def _narrow(size: int) -> type:
    return np.uint8 if size <= 256 else np.uint16 if size <= 65536 else np.int32


def _arrow(values: Any) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.ravel()
    return pa.array(arr, from_pandas=True)  # NaN and None become nulls


class CategoricalColumn:
    """A categorical column's batches as small integer codes into one dictionary of values
    (first seen first; `MISSING` for null/None/NaN): a byte a row while it has at most 256
    values, two up to 65 536, four beyond."""

    kind = CATEGORICAL

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.index: dict[Any, int] = {}
        self.codes: list[np.ndarray] = []

    def _code(self, value: Any) -> int:
        if isinstance(value, float) and value != value:
            value = MISSING
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.values)
            self.values.append(value)
        return code

    def add(self, values: Any) -> int:
        if isinstance(values, np.ndarray) and values.dtype.kind in "US":  # pa.array() of numpy text is slow
            uniq, inverse = np.unique(values.ravel(), return_inverse=True)
            return self._add_codes(inverse, uniq.tolist(), False)
        arr = _arrow(values)
        if pa.types.is_dictionary(arr.type):
            indices, dictionary = arr.indices, arr.dictionary
        else:
            enc = pc.dictionary_encode(arr)
            indices, dictionary = enc.indices, enc.dictionary
        nulls = indices.null_count > 0
        idx = (indices.fill_null(-1) if nulls else indices).to_numpy(zero_copy_only=False)
        return self._add_codes(idx, dictionary.to_pylist(), nulls)

    def _add_codes(self, idx: np.ndarray, dictionary: list, nulls: bool) -> int:
        lookup = [self._code(v) for v in dictionary]
        lookup.append(self._code(MISSING) if nulls else 0)  # index -1: null
        table = np.asarray(lookup, dtype=_narrow(len(self.values)))
        self.codes.append(table[idx])
        return int(idx.size)

    def merged_into(self, target: CategoricalColumn) -> None:
        """Append this column's rows to `target`, re-coded into `target`'s dictionary."""
        table = np.asarray([target._code(v) for v in self.values] or [0], dtype=np.int64)
        table = table.astype(_narrow(len(target.values)))
        target.codes.extend(table[c] for c in self.codes)

    def compact(self) -> np.ndarray:
        if len(self.codes) != 1:
            self.codes = [np.concatenate(self.codes) if self.codes else np.zeros(0, np.uint8)]
        return self.codes[0]

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.codes)


class NumericColumn:
    """A numeric column's batches as float64 (missing as NaN): exact quantiles need every value."""

    kind = NUMERIC

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []

    def add(self, values: Any) -> int:
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            arr = _arrow(values)
            if pa.types.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            x = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)
        else:
            x = np.asarray(values)
            if x.dtype.kind not in "fiub":
                x = _arrow(x).cast(pa.float64()).to_numpy(zero_copy_only=False)
        x = np.array(x, dtype=np.float64, copy=True).ravel()
        self.parts.append(x)
        return x.size

    def merged_into(self, target: NumericColumn) -> None:
        target.parts.extend(self.parts)

    def compact(self) -> np.ndarray:
        if len(self.parts) != 1:
            self.parts = [np.concatenate(self.parts) if self.parts else np.zeros(0)]
        return self.parts[0]

    @property
    def nbytes(self) -> int:
        return sum(x.nbytes for x in self.parts)


def new_column(kind: str) -> CategoricalColumn | NumericColumn:
    return NumericColumn() if kind == NUMERIC else CategoricalColumn()


@dataclass
class Levels:
    """A column cut into levels: a raw code per row (`raw`: dictionary code or bin), `table`
    from raw codes to levels, and `labels`, the words that define each level. `levels_of`
    gives them in no particular order; `number_levels` numbers them in MCGrad's order."""

    name: str
    raw: np.ndarray
    table: np.ndarray
    labels: list[str]

    @property
    def codes(self) -> np.ndarray:
        """The level of every row (one gather: the segment plan never needs it)."""
        return self.table[self.raw]


def _fmt(x: float, digits: int = 6) -> str:
    text = f"{x:.{digits}g}"
    return text if "e" in text or "." in text or "inf" in text or "nan" in text else text + ".0"


def _fmt_all(xs: list[float]) -> list[str]:
    """Short decimal forms of `xs`, longer only when the short ones would not tell them apart."""
    for digits in (6, 10, 17):
        out = [_fmt(x, digits) for x in xs]
        if len(set(out)) == len(set(xs)):
            return out
    return [repr(float(x)) for x in xs]


def _first_p(codes: np.ndarray, p: np.ndarray, size: int) -> np.ndarray:
    """The smallest p of each code (inf for a code without rows)."""
    out = np.full(size, np.inf)
    if codes.size:
        np.minimum.at(out, codes, p)
    return out


def _ranked(keys: list[tuple]) -> list[int]:
    """Indices of `keys` in ascending order (a plain sort of small tuples)."""
    return sorted(range(len(keys)), key=keys.__getitem__)


def number_levels(lv: Levels, rows: np.ndarray, first: np.ndarray) -> tuple[Levels, np.ndarray]:
    """`lv` with its levels numbered by first appearance in p (`first`: each level's smallest
    p; equal: more `rows` first, then the label), and the map old level -> new. A level
    without rows (an empty quantile bin, an unused dictionary entry) is dropped, as MCGrad's
    `unique()` never sees it (the map sends it to 0)."""
    used = [i for i in range(len(lv.labels)) if rows[i]]
    order = [used[j] for j in _ranked([(first[i], -rows[i], lv.labels[i]) for i in used])]
    renumber = np.zeros(len(lv.labels), dtype=np.int64)
    renumber[order] = np.arange(len(order))
    return Levels(lv.name, lv.raw, renumber[lv.table], [lv.labels[i] for i in order]), renumber


def categorical_levels(name: str, column: CategoricalColumn, p: np.ndarray, top: int) -> Levels:
    codes = column.compact()
    size = len(column.values)
    text = ["missing" if v is MISSING else str(v) for v in column.values]
    labels = [f"{name}={t}" if v is not MISSING else f"{name} is missing" for v, t in zip(column.values, text)]
    if size <= top + 1:  # every value a level: no pass over the rows
        return Levels(name, codes, np.arange(size), labels)
    counts = np.bincount(codes, minlength=size)
    present = np.flatnonzero(counts)
    if present.size <= top + 1:
        return Levels(name, codes, np.arange(size), labels)
    first = _first_p(codes, p, size)
    kept = present[_ranked([(-counts[i], first[i], text[i]) for i in present])[:top]]
    table = np.full(size, len(kept), dtype=np.int64)  # "other"
    table[kept] = np.arange(len(kept))
    other = f"{name} not in {{{', '.join(text[i] for i in kept)}}}"
    return Levels(name, codes, table, [labels[i] for i in kept] + [other])


def _distinct_upto(x: np.ndarray, limit: int) -> list[float]:
    """The distinct values of `x` if there are at most `limit`, else the first `limit` + 1 found."""
    head = np.unique(x[:4096])
    if head.size > limit:  # the usual case, decided without a pass over every value
        return [float(v) for v in head[:limit + 1]]
    found: list[float] = []
    rest = x
    while rest.size and len(found) <= limit:
        v = rest[0]
        found.append(float(v))
        rest = rest[rest != v]
    return found


def linear_quantiles(scratch: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """`np.quantile(x, qs)` (method "linear", what pandas' `Series.quantile` calls), bit for bit,
    from a partition of `scratch` (a copy of x, reordered) at the interior order statistics
    only: the smallest and largest come from `min` and `max`, which numpy's own partition at
    0 and n - 1 makes much slower. An edge between two infinite values (numpy: NaN) is the
    lower one, so no NaN reaches the bins."""
    n = scratch.size
    virtual = (n - 1) * qs
    prev = np.floor(virtual)
    prev[virtual >= n - 1] = -1
    nxt = np.where(prev < 0, -1, prev + 1)
    prev, nxt = prev.astype(np.intp), nxt.astype(np.intp)
    inner = np.unique(np.concatenate((prev, nxt)))
    inner = inner[(inner > 0) & (inner < n - 1)]
    if inner.size:
        scratch.partition(inner)
    low, high = scratch.min(), scratch.max()

    def stat(i: np.ndarray) -> np.ndarray:
        return np.where(i == 0, low, np.where((i < 0) | (i >= n - 1), high, scratch[np.clip(i, 0, n - 1)]))

    a, b = stat(prev), stat(nxt)
    gamma = virtual - prev
    with np.errstate(invalid="ignore"):  # inf - inf
        diff = b - a
        out = a + diff * gamma
        np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return np.where(np.isnan(out), a, out)


def numeric_levels(name: str, column: NumericColumn, p: np.ndarray, bins: int) -> Levels:
    x = column.compact()
    missing = np.isnan(x)
    any_missing = bool(missing.any())
    values = x[~missing] if any_missing else x
    distinct = _distinct_upto(values, bins)
    level = np.zeros(x.size, dtype=np.uint8 if bins < 255 else np.int64)
    if len(distinct) <= bins:
        for i, v in enumerate(distinct):
            level[x == v] = i
        labels = [f"{name}={t}" for t in _fmt_all(distinct)]
    else:
        edges = np.unique(linear_quantiles(values.copy() if values is x else values, np.linspace(0.0, 1.0, bins + 1)))
        for e in edges[1:-1]:
            level += x > e
        text = _fmt_all([float(e) for e in edges])
        labels = [f"{name} in {'[' if i == 0 else '('}{text[i]}, {text[i + 1]}]" for i in range(edges.size - 1)]
    if any_missing:
        level[missing] = len(labels)
        labels.append(f"{name} is missing")
    return Levels(name, level, np.arange(len(labels)), labels)


def levels_of(name: str, column: CategoricalColumn | NumericColumn, p: np.ndarray,
              bins: int, top: int) -> Levels:
    if column.kind == NUMERIC:
        return numeric_levels(name, column, p, bins)
    return categorical_levels(name, column, p, top)


__all__ = ["CATEGORICAL", "NUMERIC", "MISSING", "kind_of", "CategoricalColumn", "NumericColumn",
           "new_column", "Levels", "levels_of", "number_levels", "categorical_levels", "numeric_levels",
           "linear_quantiles"]
