"""The multicalibration error in `calib evaluate` (`--segment-col`, `requests.segments.SegmentSpec`):
the segment columns read beside each batch's predictions into one `SegmentStates`, and each
result row filled with the three metrics (`multical`, `multical_sigma`, `multical_p`; for K
classes the top-label ones, of the confidence max_k p_k against whether the top class is right)
and the table of its worst segments (`EvalRow.segments`).

Kinds: a float or decimal column is numeric (cut into `--segment-bins` quantile bins), any
other (text, integer, boolean) categorical, as the input's schema types it; the same rule for
a file, a Spark or Dask frame and Python arrays (`metrics.segments.kind_of`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from calibcli.errors import InputError
from calibcli.evaluation.metrics import segments as seg
from calibcli.evaluation.metrics.multicalibration import MulticalOptions, MulticalResult, SegmentRow
from calibcli.evaluation.metrics.segment_states import SegmentStates
from calibcli.requests.metrics import SEGMENT
from calibcli.requests.segments import SegmentSpec

SEGMENT_FIELDS = ("segment", "rows", "weight", "predicted", "observed", "ecce", "sigma", "ecce_sigma", "p")


def options_of(spec: SegmentSpec) -> MulticalOptions:
    return MulticalOptions(bins=spec.bins, top=spec.top, depth=spec.depth, min_rows=spec.min_rows,
                           max_segments=spec.max_segments)


def kinds_of(schema: pa.Schema, cols: Sequence[str]) -> dict[str, str]:
    """Each segment column's kind from the input's schema (numeric: float or decimal)."""
    return {c: seg.kind_of(schema.field(c).type) for c in cols}


def top_label(codes: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(whether the top class is right, the confidence max_k p_k) of K-class rows: the top class
    is the first k with the largest p_k, as accuracy counts it."""
    top = np.argmax(P, axis=1) if P.shape[0] else np.zeros(0, np.intp)
    return (top == codes).astype(np.uint8), (P.max(axis=1) if P.shape[0] else np.zeros(0))


class SegmentCollector:
    """The segment columns of `spec` and each prediction's (y, p), batch by batch."""

    def __init__(self, spec: SegmentSpec, count: int, kinds: Mapping[str, str] | None = None):
        self.spec = spec
        self.states = SegmentStates(count, kinds)

    def add(self, columns: Mapping[str, Any], ys: Sequence[Any], ps: Sequence[Any], w: Any, source: str,
            offset: int) -> None:
        try:
            self.states.add(ys, ps, columns, w)
        except ValueError as exc:  # a column whose values cannot be kept (mixed types)
            raise InputError(f"{source}: rows {offset + 1}-{offset + len(ps[0])}: {exc}") from None

    def results(self) -> list[MulticalResult]:
        return self.states.results(options_of(self.spec))


def segment_dict(row: SegmentRow) -> dict[str, Any]:
    """One segment as the report holds it (`EvalRow.segments`; JSON key `segments`)."""
    return {"segment": row.definition, "rows": row.rows, "weight": row.weight, "predicted": row.predicted,
            "observed": row.observed, "ecce": row.ecce, "sigma": row.sigma, "ecce_sigma": row.ecce_sigma,
            "p": row.p}


def fill_row(row: Any, result: MulticalResult, spec: SegmentSpec, prefix: str = "") -> None:
    """The metrics, the worst `spec.shown` segments and how many were checked, on an `EvalRow`
    (`prefix`: "top_label_" for a K-class prediction); no bootstrap interval (`WITHHELD`)."""
    row.metrics.update({prefix + k: v for k, v in result.metrics().items()})
    row.segments = [segment_dict(s) for s in result.worst(spec.shown)]
    row.segments_checked = len(result.segments)
    row.segments_capped = result.capped
    if row.intervals is not None:
        row.intervals.update({prefix + k: (math.nan, math.nan) for k in SEGMENT})


__all__ = ["SEGMENT_FIELDS", "SegmentCollector", "fill_row", "kinds_of", "options_of", "segment_dict", "top_label"]
