"""How `calib apply` reads and extends each batch, one small plan per kind of map: `BinaryPlan`
reads one score column (and the map's feature columns) and adds `--output-col` (with
`--interval` its low and high); `ClassPlan` reads the K score columns (`kinds.columns.map_columns`)
and adds one column `<output-col>_<class>` per class, each row summing to 1 within 1e-12.
`PLANS` dispatches on the map's kind; `stream._apply_one` is the one loop both run in.

Rows whose score is invalid (empty, NaN, infinite, refused by the map: `io.refused_scores`;
for K classes a row of probabilities that is not one) stop the run with `on_invalid="error"`;
`"null"` writes them with null calibrated values, `"skip"` leaves them out and counts them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from calibcli import io
from calibcli.errors import FitError, InputError, UsageError, Where
from calibcli.kinds import BINARY, KCLASS, probabilities
from calibcli.kinds import columns as score_columns
from calibcli.requests import ApplyRequest

# Rows predicted at a time: a batch of a million rows and K columns would otherwise hold several
# (n, K) temporaries at once (scores, logits, exponentials), the bulk of apply's peak memory.
CHUNK_ROWS = 1 << 16


class BinaryPlan:
    """A binary map: reads --score-col (and the map's feature columns), adds --output-col (and
    with --interval its low and high)."""

    def __init__(self, calibrator, map_path: str, request: ApplyRequest):
        if request.score_cols is not None:
            raise UsageError(f"{map_path}: --score-cols is for K-class maps; this {calibrator.name} map reads one "
                             "score column", hint="give it with --score-col")
        score_col, output_col, on_invalid, interval = (request.score_col, request.output_col, request.on_invalid,
                                                       request.interval)
        self.calibrator, self.map_path, self.score_col = calibrator, map_path, score_col
        self.on_invalid, self.interval = on_invalid, interval
        self.added = [output_col, *interval_columns(calibrator, output_col, map_path, interval)]
        self.categorical, self.numeric = calibrator.input_features()
        self.string_columns = tuple(self.categorical)
        self.float_columns = () if on_invalid == "error" else (score_col,)
        self.batch_rows = None  # io's default
        self.unseen = UnseenValues(calibrator)

    def check(self, schema: pa.Schema, name: str) -> None:
        if self.score_col not in schema.names:
            raise io.missing_column(self.score_col, schema.names, name, "--score-col")
        missing = [c for c in (*self.categorical, *self.numeric) if c not in schema.names]
        if missing:
            raise InputError(f"{name}: the map needs feature column(s) {', '.join(map(repr, missing))}, "
                             f"which the input does not have")

    def predict(self, batch: pa.RecordBatch, name: str, offset: int
                ) -> tuple[pa.RecordBatch, list[pa.Array], int]:
        """(rows to write, their added columns, how many rows had an invalid score)."""
        calibrator, score_col = self.calibrator, self.score_col
        if self.on_invalid != "error":
            return _predict_valid(calibrator, batch, score_col, name, offset, self.categorical, self.numeric,
                                  skip=self.on_invalid == "skip", interval=self.interval, unseen=self.unseen)
        s = io.scores_from(batch, score_col, name, offset=offset)
        io.check_scores_for(calibrator, s, score_col, name, self.map_path, offset)
        feats = io.map_features(batch, self.categorical, self.numeric, name, offset) or None
        self.unseen.add(feats)
        return batch, [pa.array(v) for v in _predictions(calibrator, s, feats, self.interval)], 0


class UnseenValues:
    """Rows whose field value (a categorical feature column of a field-aware map) the fit never
    saw, counted over every batch, with the first few such values of each column as examples."""

    EXAMPLES = 3

    def __init__(self, calibrator):
        self.check = getattr(calibrator, "unseen", None)  # only maps with categorical features have one
        self.rows = 0
        self.examples: dict[str, list[str]] = {}

    def add(self, feats) -> None:
        if self.check is None or not feats:
            return
        masks = self.check(feats)
        if not masks:
            return
        rows = np.logical_or.reduce(list(masks.values()))
        self.rows += int(np.count_nonzero(rows))
        for column, mask in masks.items():
            known = self.examples.setdefault(column, [])
            if mask.any() and len(known) < self.EXAMPLES:
                for value in np.unique(np.asarray(feats[column])[mask].astype(str))[:self.EXAMPLES]:
                    if value not in known and len(known) < self.EXAMPLES:
                        known.append(str(value))


def _predict_valid(calibrator, batch: pa.RecordBatch, score_col: str, name: str, offset: int,
                   categorical, numeric, *, skip: bool, interval: bool = False, unseen: UnseenValues | None = None
                   ) -> tuple[pa.RecordBatch, list[pa.Array], int]:
    """(rows to write, their calibrated columns, how many rows had an invalid score).

    Invalid rows get a null value (or are dropped with `skip`); the map's features are read
    and checked on the valid rows only, errors naming the row in the file.
    """
    s = io.scores_or_nan(batch, score_col, name, offset)
    invalid = ~np.isfinite(s) | io.refused_scores(calibrator, s)
    n_invalid = int(np.count_nonzero(invalid))
    if n_invalid == 0:
        feats = io.map_features(batch, categorical, numeric, name, offset) or None
        if unseen is not None:
            unseen.add(feats)
        return batch, [pa.array(v) for v in _predictions(calibrator, s, feats, interval)], 0
    valid = ~invalid
    rows = np.flatnonzero(valid)
    good = batch.filter(pa.array(valid))
    feats = {c: io.field_values(good, c, name) for c in categorical}
    for c in numeric:
        values = io.scores_or_nan(good, c, name, offset, flag="--feature-col")
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{name}: column {c!r}, row {int(rows[i]) + 1 + offset}: "
                             f"feature {float(values[i])!r} is not finite")
        feats[c] = values
    if unseen is not None and rows.size:
        unseen.add(feats)
    values = (_predictions(calibrator, s[valid], feats or None, interval) if rows.size
              else [np.empty(0)] * (3 if interval else 1))
    if skip:
        return good, [pa.array(v, type=pa.float64()) for v in values], n_invalid
    columns = []
    for v in values:
        full = np.zeros(s.shape, dtype=np.float64)
        full[valid] = v
        columns.append(pa.array(full, mask=invalid))
    return batch, columns, n_invalid


class ClassPlan:
    """A K-class map: reads its K score columns, adds one calibrated column per class."""

    unseen = UnseenValues(None)  # K-class maps read no field columns
    string_columns: tuple[str, ...] = ()
    float_columns: tuple[str, ...] = ()
    on_invalid = "error"

    def __init__(self, cmap: Any, map_path: str, request: ApplyRequest):
        spec, output_col, on_invalid = request.score_cols, request.output_col, request.on_invalid
        if request.interval:
            raise UsageError(f"{map_path}: --interval needs a map with a probability interval (venn-abers); "
                             "K-class maps have none")
        self.cmap, self.map_path, self.spec = cmap, map_path, spec
        self.classes = tuple(str(c) for c in cmap.classes_.tolist())
        self.k = len(self.classes)
        self.fitted_cols = tuple(cmap.score_cols or ())
        self.added = [f"{output_col}_{c}" for c in self.classes]
        # Parquet batches of about 2.6 million scores, not a million rows: a batch is read ahead,
        # predicted, queued and written at once, so K-wide batches set apply's peak memory.
        self.batch_rows = max(CHUNK_ROWS, (5 << 19) // self.k)
        self.cols: score_columns.ScoreCols | None = None
        self.names: list[str] = []
        self.on_invalid = on_invalid
        # text cells that are not numbers read as empty (invalid rows), as the binary path does
        self.float_columns = self.fitted_cols if on_invalid != "error" and spec is None else ()

    def check(self, schema: pa.Schema, name: str) -> None:
        """Resolve the score columns against this input's schema (`kinds.columns.map_columns`)."""
        self.cols = score_columns.map_columns(self.cmap.classes_.tolist(), self.cmap.score_cols, self.cmap.list_column,
                                              self.spec, schema, name, self.map_path)
        self.names = list(self.cols.columns) or [self.cols.list_column] * self.k

    def predict(self, batch: pa.RecordBatch, name: str, offset: int
                ) -> tuple[pa.RecordBatch, list[pa.Array], int]:
        """(the batch, its K calibrated columns, 0 invalid rows: an invalid row is an error),
        predicted CHUNK_ROWS rows at a time into the output columns."""
        if self.on_invalid != "error":
            return self._predict_valid(batch, name, offset)
        out = np.empty((self.k, batch.num_rows), dtype=np.float64)  # one contiguous row per output column
        for lo in range(0, batch.num_rows, CHUNK_ROWS):
            part = batch.slice(lo, CHUNK_ROWS)
            P = score_columns.matrix_from(part, self.cols, name, offset + lo)
            try:
                out[:, lo:lo + part.num_rows] = self.cmap.predict_class_major(P)
            except (FitError, InputError) as exc:  # the map refuses rows that are not probabilities: name the file and row
                if self.cmap.score_kind == "probability":
                    probabilities.refuse_rows(P, Where(name, offset=offset + lo), self.names, probabilities.MAP_HINT)
                raise InputError(f"{name}: {exc.message}", hint=exc.hint) from None
        return batch, [pa.array(column) for column in out], 0

    def _predict_valid(self, batch: pa.RecordBatch, name: str, offset: int
                       ) -> tuple[pa.RecordBatch, list[pa.Array], int]:
        """`--on-invalid null|skip`: a row with an empty or non-finite score, or (probability
        maps) one that is not a probability vector, gets K nulls or is dropped; the other rows
        are predicted as they would be alone."""
        P = score_columns.matrix_from(batch, self.cols, name, offset, keep_invalid=True)
        with np.errstate(invalid="ignore"):
            invalid = ~np.isfinite(P).all(axis=1)
            if self.cmap.score_kind == "probability":
                invalid |= probabilities.problem_rows(P)
        valid = ~invalid
        out = np.zeros((self.k, batch.num_rows), dtype=np.float64)
        rows = np.flatnonzero(valid)
        for lo in range(0, rows.size, CHUNK_ROWS):
            part = rows[lo:lo + CHUNK_ROWS]
            out[:, part] = self.cmap.predict_class_major(P[part])
        n_invalid = int(batch.num_rows - rows.size)
        if self.on_invalid == "skip":
            return batch.filter(pa.array(valid)), [pa.array(column[valid]) for column in out], n_invalid
        return batch, [pa.array(column, mask=invalid) for column in out], n_invalid


def interval_columns(calibrator, output_col: str, map_path: str, interval: bool) -> list[str]:
    """The columns `--interval` adds, or a UsageError when the map has no interval."""
    if not interval:
        return []
    if not hasattr(calibrator, "predict_interval"):
        raise UsageError(f"{map_path}: --interval needs a map with a probability interval (venn-abers); "
                         f"{calibrator.name} maps have none")
    return [f"{output_col}_low", f"{output_col}_high"]


def _predictions(calibrator, s: np.ndarray, feats, interval: bool) -> list[np.ndarray]:
    """The calibrated probabilities, then with `interval` the map's (low, high)."""
    p = calibrator.predict(s, feats)
    return [p, *calibrator.predict_interval(s)] if interval else [p]


PLANS = {BINARY: BinaryPlan, KCLASS: ClassPlan}
