"""A score file's rows as a fit or a comparison sees them, for each kind of scores: the one
thing `fit_file` and `compare_file` do differently for one score column and for K of them.

`binary_rows` reads one score column (`--score-col`), 0/1 labels (or two values and
`--pos-label`), weights and feature columns (text, boolean and dictionary columns as
categorical, like `--field-col` columns, the others as numbers: `io.categorical_features`);
`kclass_rows` the K score columns (`--score-cols`), their class names, their score kind
(`auto` resolved on the rows) and labels as class codes.
Both read labels through `kinds.labels` and name the file, the column and the row in every
refusal. `ROWS` dispatches on the kind of the request's columns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from calibcli import io
from calibcli.calibrators import fitcheck
from calibcli.errors import InputError, Where
from calibcli.kinds import BINARY, KCLASS, labels, probabilities
from calibcli.kinds import columns as score_columns


@dataclass
class Rows:
    """What a file gives a fit: scores ((n,) or (n, K)), labels (0/1, or class codes), weights,
    features, and what the map's training block records of how they were read."""

    source: str
    scores: np.ndarray
    labels: np.ndarray
    weights: np.ndarray | None = None
    features: dict[str, np.ndarray] | None = None
    training: dict[str, Any] = field(default_factory=dict)
    notes: list[Any] = field(default_factory=list)  # texts, or callables of the fitted map
    classes: tuple = ()  # K classes: their names, in column order
    score_cols: tuple[str, ...] = ()  # K classes: the columns read (none for a list column)
    score_kind: str = "probability"  # K classes: the kind the scores were read as

    @property
    def n(self) -> int:
        return int(self.labels.size)


def binary_rows(table: Any, columns: Any, source: str) -> Rows:
    """One score column, its 0/1 labels, weights and feature columns."""
    s = io.scores_from(table, columns.score, source)
    y = labels.from_file(table, columns.label, source, labels.BinaryLabels(columns.pos_label))
    w = io.weights_from(table, columns.weight, source) if columns.weight else None
    categorical = io.categorical_features(table, columns.features, source)
    numeric = [c for c in columns.features if c not in categorical]
    feats = io.map_features(table, (*columns.fields, *categorical), numeric, source) or None
    training: dict[str, Any] = {
        "input": source, "rows": int(s.size), "positives": int(np.sum(y == 1)), "negatives": int(np.sum(y == 0)),
        "score_col": columns.score, "label_col": columns.label, "score_range": [float(s.min()), float(s.max())],
    }
    if columns.pos_label is not None:
        training["pos_label"] = columns.pos_label
    if columns.fields:
        training["field_cols"] = list(columns.fields)
    if columns.features:
        training["feature_cols"] = {c: "categorical" if c in categorical else "numeric" for c in columns.features}
    notes: list[Any] = []
    if s.size > 1 and s.min() == s.max():  # said once the map is fitted: is it a constant?
        notes.append(lambda fitted, n=s.size, x=float(s[0]): fitcheck.equal_scores_note(fitted, n, x))
    return Rows(source, s, y, w, feats, training, notes)


MISSING_CLASS = "have no rows in the calibration set"  # the K-class calibrators' own warning, said by name


def kclass_rows(table: Any, columns: Any, source: str) -> Rows:
    """The K score columns (class order), their kind, and labels as class codes."""
    resolved = score_columns.resolve(columns.score_cols, table.schema, source, columns.classes)
    P = score_columns.matrix_from(table, resolved, source)
    if resolved.k is None:
        resolved = resolved.with_k(P.shape[1], source, columns.classes)
    kind, warning = probabilities.resolve_kind(P, columns.score_kind, Where(source), resolved.columns or None)
    reader = labels.ClassLabels(resolved.classes)
    codes = labels.from_file(table, columns.label, source, reader)
    w = io.weights_from(table, columns.weight, source) if columns.weight else None
    counts = np.bincount(codes, minlength=len(resolved.classes))
    training: dict[str, Any] = {
        "input": source, "rows": int(codes.size), "label_col": columns.label,
        "class_rows": dict(zip(resolved.classes, counts.tolist())), "score_kind_option": columns.score_kind,
        "score_kind": kind, "labels_read_as": reader.how,
    }
    if resolved.list_column is not None:
        training["score_list_col"] = resolved.list_column
    notes = [warning] if warning else []
    missing = [resolved.classes[i] for i in np.flatnonzero(counts == 0)]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        notes.append(f"class(es) {shown} have no rows in {source}: the map still gives them a probability")
    return Rows(source, P, codes, w, None, training, notes, resolved.classes, resolved.columns, kind)


ROWS = {BINARY: binary_rows, KCLASS: kclass_rows}


def read_rows(path: str, columns: Any, fmt: str | None, kind: str) -> Rows:
    """A whole score file read for a fit or a comparison of `kind`."""
    source = io.display_name(path)
    table = io.read_table(path, fmt, string_columns=columns.fields)
    if table.num_rows == 0:
        raise InputError(f"{source}: no data rows")
    retyped = [c for c in io.categorical_features(table, columns.features, source)
               if not pa.types.is_string(table.schema.field(c).type)]
    if retyped and (os.path.isfile(path) or io.is_parts(path)):
        # A categorical feature column the reader typed (true/false text read as booleans) is
        # read again as text, as `calib apply` reads it: the map's levels are the file's words.
        table = io.read_table(path, fmt, string_columns=(*columns.fields, *retyped))
        retyped = []
    rows = ROWS[kind](table, columns, source)
    booleans = [c for c in retyped if pa.types.is_boolean(table.schema.field(c).type)]
    if booleans:  # a stream cannot be read twice: its true/false words are the levels true, false
        rows.notes.append(f"feature column(s) {', '.join(map(repr, booleans))} read from a stream as true/false: "
                          "the map's levels are 'true' and 'false'; a CSV that spells them otherwise (True) is "
                          "read at apply time as unseen values: fit from a file to keep the file's words")
    return rows


__all__ = ["MISSING_CLASS", "ROWS", "Rows", "binary_rows", "kclass_rows", "read_rows"]
