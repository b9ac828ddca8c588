"""`calib apply` with a K-class map: each batch's K score columns through the map, one output
column `<output-col>_<class>` per class, each row summing to 1 within 1e-12.

The map records the score columns it was fitted on (or the Parquet list column); `--score-cols`
overrides them. When the columns `--score-cols` names carry the map's class names as suffixes
in another order they are read in the map's order; otherwise by position.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from calibcli.errors import FitError, InputError, UsageError, shown
from calibcli.io import score_cols

# Rows predicted at a time: a batch of a million rows and K columns would otherwise hold several
# (n, K) temporaries at once (scores, logits, exponentials), the bulk of apply's peak memory.
CHUNK_ROWS = 1 << 16


class ClassPlan:
    """How `applying._apply_one` reads and extends each batch for a K-class map."""

    string_columns: tuple[str, ...] = ()
    float_columns: tuple[str, ...] = ()
    on_invalid = "error"

    def __init__(self, cmap: Any, envelope: Mapping[str, Any], map_path: str, spec: str | None,
                 output_col: str, on_invalid: str, interval: bool):
        if interval:
            raise UsageError(f"{map_path}: --interval needs a map with a probability interval (venn-abers); "
                             "K-class maps have none")
        self.cmap, self.map_path, self.spec = cmap, map_path, spec
        self.classes = tuple(str(c) for c in cmap.classes_.tolist())
        self.k = len(self.classes)
        self.fitted_cols = tuple(cmap.score_cols or ())
        self.list_col = (envelope.get("training") or {}).get("score_list_col")
        self.added = [f"{output_col}_{c}" for c in self.classes]
        # Parquet batches of about 2.6 million scores, not a million rows: a batch is read ahead,
        # predicted, queued and written at once, so K-wide batches set apply's peak memory.
        self.batch_rows = max(CHUNK_ROWS, (5 << 19) // self.k)
        self.cols: score_cols.ScoreCols | None = None
        self.on_invalid = on_invalid
        # text cells that are not numbers read as empty (invalid rows), as the binary path does
        self.float_columns = self.fitted_cols if on_invalid != "error" and spec is None else ()

    def check(self, schema: pa.Schema, name: str) -> None:
        """Resolve the score columns against this input's schema: K must be the map's."""
        if self.spec is not None:
            cols = score_cols.resolve(self.spec, schema, name)
            if cols.k is not None and cols.k != self.k:
                raise InputError(f"{name}: --score-cols {shown(self.spec)} gives {cols.k} columns but the map "
                                 f"{self.map_path} has {self.k} classes")
            if cols.list_column is None and set(cols.classes) == set(self.classes):
                order = {c: i for i, c in enumerate(cols.classes)}
                cols = score_cols.ScoreCols(self.spec, tuple(cols.columns[order[c]] for c in self.classes),
                                            k=self.k, classes=self.classes)
        elif self.fitted_cols:
            cols = score_cols.resolve_columns(self.fitted_cols, schema, name)
        elif self.list_col is not None:
            cols = score_cols.resolve(self.list_col, schema, name)
        else:
            raise UsageError(f"{self.map_path}: the map does not record its score columns",
                             hint="name them with --score-cols")
        self.cols = cols if cols.k == self.k and cols.list_column is None else cols.with_k(self.k, name, self.classes)

    def predict(self, batch: pa.RecordBatch, name: str, offset: int
                ) -> tuple[pa.RecordBatch, list[pa.Array], int]:
        """(the batch, its K calibrated columns, 0 invalid rows: an invalid row is an error),
        predicted CHUNK_ROWS rows at a time into the output columns."""
        if self.on_invalid != "error":
            return self._predict_valid(batch, name, offset)
        out = np.empty((self.k, batch.num_rows), dtype=np.float64)  # one contiguous row per output column
        for lo in range(0, batch.num_rows, CHUNK_ROWS):
            part = batch.slice(lo, CHUNK_ROWS)
            P = score_cols.matrix_from(part, self.cols, name, offset + lo)
            try:
                out[:, lo:lo + part.num_rows] = self.cmap.predict_class_major(P)
            except FitError as exc:  # the map refuses rows that are not probabilities: name the file and row
                if self.cmap.score_kind == "probability":
                    score_cols.check_probabilities(P, self.cols, name, offset + lo, score_cols.MAP_HINT)
                raise InputError(f"{name}: {exc.message}", hint=exc.hint) from None
        return batch, [pa.array(column) for column in out], 0

    def _predict_valid(self, batch: pa.RecordBatch, name: str, offset: int
                       ) -> tuple[pa.RecordBatch, list[pa.Array], int]:
        """`--on-invalid null|skip`: a row with an empty or non-finite score, or (probability
        maps) one that is not a probability vector, gets K nulls or is dropped; the other rows
        are predicted as they would be alone."""
        P = score_cols.matrix_from(batch, self.cols, name, offset, keep_invalid=True)
        with np.errstate(invalid="ignore"):
            invalid = ~np.isfinite(P).all(axis=1)
            if self.cmap.score_kind == "probability":
                invalid |= score_cols.probability_problems(P)
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
