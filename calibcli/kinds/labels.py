"""Labels, read one way by every command and entry point: `calib fit`, `evaluate` and `compare`,
`calibcli.fit/evaluate/compare`, `calibcli.sklearn.Calibrator` and the Spark and Dask engines.

A label is compared by its text, `canonical`: text is trimmed; a whole number is written
without a fraction (2, 2.0, "2.0" and "+2" are all "2"); booleans and the words true/false, in
any case, are "true"/"false"; other numbers as Python writes them (0.5). A missing label (empty,
null, None, NaN, pandas' <NA>) is an error naming its row, never a class; labels mixing text
and numbers in memory ("1" and 1) are refused (numpy would merge or split them unpredictably).

Binary labels (`BinaryLabels`): 0/1, false/true. With `pos_label`, any two values: the one
equal (as text) to `pos_label` is the positive class, the other the negative; a third is refused.

K classes (`ClassLabels`): each label is a class *name* (its text equal to a class name's) or,
when no label is a class name, a 0-based class *index* 0..K-1, never a mix; which one is fixed
by the first rows read (a file's first batch) and said in the map's training block. Class names
come from the score columns' suffixes, `--classes`/`classes=`, or a map; in Python without
`classes=`, `infer_classes` takes the labels' distinct values, sorted, when there are K of
them, else the indices 0..K-1 when every label is one (a class may then have no rows).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from calibcli.errors import InputError, UsageError, Where, shown
from calibcli.kinds.names import WHOLE as _WHOLE, canonical_text, check_classes

NAMES = "class names"
INDICES = "0-based class indices"


def _pc():
    import pyarrow.compute as pc

    return pc


def as_arrow(labels: Any, what: str = "labels") -> Any:
    """Labels as one Arrow column: a file's column as it is, a numpy array, list or pandas Series
    converted (NaN and None become nulls); labels mixing text and numbers are refused."""
    import pyarrow as pa

    if isinstance(labels, pa.ChunkedArray):
        return labels
    if isinstance(labels, pa.Array):
        return pa.chunked_array([labels])
    if not hasattr(labels, "dtype"):
        labels = np.asarray(labels, dtype=object if _mixed_list(labels) else None)
    if getattr(labels, "ndim", 1) != 1:
        raise UsageError(f"{what} must be one-dimensional, got shape {np.shape(labels)}")
    try:
        return pa.chunked_array([pa.array(labels, from_pandas=True)])
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        values = np.asarray(labels, dtype=object).tolist()
        text = next((v for v in values if isinstance(v, str)), None)
        number = next((v for v in values if v is not None and not isinstance(v, str)), None)
        raise InputError(f"{what} mix text and numbers ({text!r:.40} and {number!r:.40}): they would be merged "
                         "or split unpredictably", hint="give every label as text or every label as a number") from None


def _mixed_list(labels: Any) -> bool:
    kinds = {isinstance(v, str) for v in labels if v is not None}
    return len(kinds) > 1


def canonical(col: Any, where: Where | None = None) -> Any:
    """An Arrow column of labels as canonical text (nulls, and NaN, stay null); text that is not
    UTF-8 is refused naming its row (`where`)."""
    import pyarrow as pa

    pc, typ = _pc(), col.type
    if pa.types.is_dictionary(typ):
        col, typ = col.cast(typ.value_type), typ.value_type
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        col, typ = _utf8(col, where or Where(column="labels")), pa.string()
    if pa.types.is_null(typ):
        return pa.chunked_array([pa.nulls(len(col), pa.string())])
    if pa.types.is_boolean(typ):
        return pc.if_else(col, "true", "false")
    if pa.types.is_integer(typ):
        return col.cast(pa.string())
    if pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        v = np.asarray(_pc().cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(v) & (v == np.floor(v)) & (np.abs(v) < 2 ** 53)
        ints = pa.array(np.where(whole, v, 0).astype(np.int64)).cast(pa.string())
        text = ints if whole.all() else pc.if_else(pa.array(whole), ints, pa.array(v).cast(pa.string()))
        return pa.chunked_array([pc.if_else(pa.array(np.isnan(v)), pa.scalar(None, pa.string()), text)])
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        text = pc.utf8_trim_whitespace(col.cast(pa.string()))
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        lower = pc.utf8_lower(text)
        text = pc.if_else(pc.is_in(lower, value_set=pa.array(["true", "false"])), lower, text)
        whole = pc.fill_null(pc.match_substring_regex(text, _WHOLE), False)
        if pc.any(whole).as_py():
            number = pc.cast(pc.if_else(whole, text, "0"), pa.float64())
            small = pc.and_(whole, pc.less(pc.abs(number), 2.0 ** 53))
            text = pc.if_else(small, pc.cast(pc.cast(number, pa.int64()), pa.string()), text)
        return text if isinstance(text, pa.ChunkedArray) else pa.chunked_array([text])
    raise InputError(f"labels of type {typ} are not text, numbers or booleans")


def _utf8(col: Any, where: Where) -> Any:
    """Bytes as text, or the first row that is not UTF-8 named."""
    import pyarrow as pa

    try:
        return col.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        for i, value in enumerate(col.to_pylist()):
            try:
                value is None or value.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{where.row(i)}: value {shown(value)} is not UTF-8 text",
                                 hint="save the file as UTF-8") from None
        raise


def _values(col: Any) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


def refuse_missing(col: Any, where: Where) -> None:
    """A missing label (null, or NaN) is an error naming its row."""
    import pyarrow as pa

    missing = np.asarray(col.is_null())
    if pa.types.is_floating(col.type):
        missing = missing | np.isnan(np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64))
    if missing.any():
        raise InputError(f"{where.row(int(np.argmax(missing)))}: empty label",
                         hint="every row needs a label: remove or repair the rows without one")


class BinaryLabels:
    """Labels as 0.0/1.0 (float64): 0/1 or false/true, or with `pos_label` any two values (the
    negative one is the first other value read, kept across batches; a third is refused)."""

    def __init__(self, pos_label: Any = None):
        self.pos_label = None if pos_label is None else canonical_text(pos_label)
        self.negative: str | None = None
        self.seen = False  # a row had the positive value (this batch or an earlier one)

    def values(self, labels: Any) -> np.ndarray:
        """0.0/1.0 where a label is one, NaN where it is missing or not a label (0/1, false/true):
        the lenient form the engines count bad rows with (no `pos_label`)."""
        import pyarrow as pa

        text = canonical(as_arrow(labels))
        y = np.full(len(text), np.nan)
        known = np.asarray(_pc().fill_null(_pc().is_in(text, value_set=pa.array(["0", "1", "false", "true"])),
                                           False), dtype=bool)
        y[known] = np.asarray(_pc().is_in(text.filter(pa.array(known)), value_set=pa.array(["1", "true"])),
                              dtype=np.float64)
        return y

    def read(self, labels: Any, where: Where) -> np.ndarray:
        import pyarrow as pa

        col = as_arrow(labels)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        refuse_missing(col, where)
        if self.pos_label is None and (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                                       or pa.types.is_boolean(col.type)):
            y = np.asarray(_pc().cast(col, pa.float64(), safe=False), dtype=np.float64)
            bad = (y != 0) & (y != 1)
            if bad.any():
                i = int(np.argmax(bad))
                raise InputError(f"{where.row(i)}: label {shown(col[i].as_py())} is not 0 or 1",
                                 hint=self._hint(col))
            return y
        text = canonical(col, where)
        if self.pos_label is not None:
            return self._with_pos_label(text, where)
        known = np.asarray(_pc().is_in(text, value_set=pa.array(["0", "1", "false", "true"])))
        if not known.all():
            i = int(np.argmax(~known))
            raise InputError(f"{where.row(i)}: label {shown(col[i].as_py())} is not 0/1 or true/false",
                             hint=self._hint(col))
        return np.asarray(_pc().is_in(text, value_set=pa.array(["1", "true"])), dtype=np.float64)

    def _with_pos_label(self, text: Any, where: Where) -> np.ndarray:
        positive = np.asarray(_pc().equal(text, self.pos_label), dtype=bool)
        others = ~positive
        if others.any():
            values = _values(text)
            self.negative = values[int(np.argmax(others))] if self.negative is None else self.negative
            third = others & (values != self.negative)
            if third.any():
                i = int(np.argmax(third))
                if not (self.seen or positive.any()):
                    raise self._not_a_label(where, {self.negative, *_pc().unique(text).to_pylist()})
                raise InputError(f"{where.row(i)}: label {shown(values[i])} is a third value (besides "
                                 f"{shown(self.pos_label)} and {shown(self.negative)})",
                                 hint="pos_label (--pos-label) is for labels with two values")
        self.seen = self.seen or bool(positive.any())
        return positive.astype(np.float64)

    def _not_a_label(self, where: Where, found: set[str]) -> InputError:
        listed = sorted(found)
        same = [v for v in listed if v.lower() == self.pos_label.lower()]
        hint = (f"labels are compared as written: --pos-label {shown(same[0])}" if same
                else f"name the positive label, e.g. --pos-label {shown(listed[-1])}")
        values = ", ".join(shown(v) for v in listed[:10]) + (", ..." if len(listed) > 10 else "")
        if where.source is None:
            return InputError(f"pos_label {shown(self.pos_label)} is not a label (its values: {values})",
                              hint=hint.replace("--pos-label ", "pos_label="))
        return InputError(f"--pos-label {shown(self.pos_label)} is not a label of {where.source} column "
                          f"{shown(where.column)} (its values: {values})", hint=hint)

    @staticmethod
    def _hint(col: Any) -> str:
        """How to read labels that are not 0/1: name the positive value of two with --pos-label."""
        distinct = sorted(str(v) for v in _pc().unique(canonical(col)).to_pylist() if v is not None)
        if len(distinct) == 2:
            return (f"the labels are two values, {shown(distinct[0])} and {shown(distinct[1])}: name the positive "
                    f"one with --pos-label (pos_label=), e.g. --pos-label {shown(distinct[1])}")
        return "labels with two values other than 0/1 (yes/no, -1/1): name the positive one with --pos-label VALUE"


class ClassLabels:
    """Labels as int64 codes 0..K-1 of the classes `names` (class names, or indices when no
    label is a name; see the module docstring), batch after batch."""

    def __init__(self, names: Sequence[Any], how: str | None = None):
        self.names = list(check_classes(names, "classes"))
        self.keys = [canonical_text(n) for n in self.names]
        self.how = how  # NAMES or INDICES once the first labels are read

    def read(self, labels: Any, where: Where) -> np.ndarray:
        """The codes of these labels; a missing label, or one that is no class, is an error."""
        col = as_arrow(labels)
        refuse_missing(col, where)
        codes, how = self._codes(canonical(col, where))
        self.how = self.how or how
        bad = codes < 0
        if bad.any():
            i = int(np.argmax(bad))
            raise self._not_a_class(where, i, col[i].as_py())
        return codes

    def codes(self, labels: Any) -> tuple[np.ndarray, str | None]:
        """(codes with -1 where a label is missing or no class, how the labels read: NAMES when any
        is a class name, else INDICES when any is an index, else None), by this reader's `how`
        when it is set: the lenient form the engines count bad rows with."""
        return self._codes(canonical(as_arrow(labels)))

    def _codes(self, text: Any) -> tuple[np.ndarray, str | None]:
        import pyarrow as pa

        found = _pc().index_in(text, value_set=pa.array(self.keys, pa.string()))
        how = self.how or (NAMES if found.null_count < len(found) else None)
        if how == NAMES:
            return np.asarray(_pc().fill_null(found, -1), dtype=np.int64), how
        whole = np.asarray(_pc().fill_null(_pc().match_substring_regex(text, r"^\d+$"), False), dtype=bool)
        v = np.zeros(len(text), dtype=np.float64)
        if whole.any():
            v[whole] = np.asarray(_pc().cast(text.filter(pa.array(whole)), pa.float64()), dtype=np.float64)
        ok = whole & (v < len(self.keys))
        return np.where(ok, v, -1).astype(np.int64), self.how or (INDICES if ok.any() else None)

    def _not_a_class(self, where: Where, i: int, value: Any) -> InputError:
        listed = ", ".join(n[:40] for n in self.keys[:12]) + (", ..." if len(self.keys) > 12 else "")
        if self.how == NAMES:
            hint = (f"classes: {listed}; labels are read as class names (some are), so none is read as a 0-based "
                    "index: give all labels as class names or all as indices")
        else:
            hint = f"no label is a class name ({listed}), so labels are read as 0-based indices 0..{len(self.keys) - 1}"
        return InputError(f"{where.row(i)}: label {shown(value)} is not a class",
                          hint=hint + "; name the classes with --classes")


def infer_classes(labels: Any, k: int, where: Where = Where(column="labels")) -> list[Any]:
    """The K class names of labels given without `classes=` (Python): their distinct values,
    sorted, when there are K of them; else the indices 0..K-1 when every label is one."""
    col = as_arrow(labels)
    refuse_missing(col, where)
    text = _values(canonical(col))
    distinct, first = np.unique(text.astype(str), return_index=True)
    if distinct.size == k:
        raw = [col[int(i)].as_py() for i in first]
        try:
            return sorted(raw)
        except TypeError:  # values of types Python cannot order: by text
            return [raw[i] for i in np.argsort(distinct)]
    whole = np.array([bool(t.isdigit()) and int(t) < k for t in distinct.tolist()])
    if whole.all():
        return list(range(k))
    raise InputError(f"the labels hold {distinct.size} distinct values but the scores have {k} class columns",
                     hint="pass classes=[...] naming the class of each column, in order")


def from_file(table: Any, name: str, source: str, reader: BinaryLabels | ClassLabels | None = None,
              offset: int = 0) -> np.ndarray:
    """A file's label column (`--label-col`) read by `reader` (default: binary 0/1 labels), errors
    naming the file, the column and the 1-based data row (`offset`: rows of earlier batches)."""
    from calibcli.io.columns import column_of

    return (reader or BinaryLabels()).read(column_of(table, name, source, "--label-col"), Where(source, name, offset))


__all__ = ["BinaryLabels", "ClassLabels", "INDICES", "NAMES", "as_arrow", "canonical", "canonical_text",
           "from_file", "infer_classes", "refuse_missing"]
