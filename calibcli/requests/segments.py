"""The segment options of `calib evaluate` (`--segment-col`, `--segment-bins`, `--segment-top`,
`--segment-depth`, `--segment-min-rows`, `--segment-max`, `--segments`) as checked at the door:
`SegmentSpec`, the segments of the multicalibration error (docs/multicalibration.md).

Without `--segment-col` there are no segments, and the other options are refused (they would
change nothing). The defaults are MCGrad's (`MulticalibrationError`): numeric columns cut into
3 quantile bins, categorical columns kept to their 2 most frequent values plus "other",
intersections of up to 3 columns, segments of at least 10 rows, at most 1000 segments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from calibcli.errors import UsageError
from calibcli.requests.bounds import whole
from calibcli.requests.names import column_option

BINS, TOP, DEPTH, MIN_ROWS, MAX_SEGMENTS, SHOWN = 3, 2, 3, 10, 1000, 10
CELLS_MAX_BITS = 62  # every combination of the columns' levels is numbered in a 64-bit integer


@dataclass(frozen=True)
class SegmentSpec:
    """The segment columns (in the order given) and how segments are made of them; `shown`:
    the rows of the worst-segments table (`--segments`)."""

    cols: tuple[str, ...]
    bins: int = BINS
    top: int = TOP
    depth: int = DEPTH
    min_rows: int = MIN_ROWS
    max_segments: int = MAX_SEGMENTS
    shown: int = SHOWN

    def settings(self) -> dict[str, Any]:
        """What a report records (`results.GATED_SETTINGS`): the options that change the metric."""
        return {"segment_cols": list(self.cols), "segment_bins": self.bins, "segment_top": self.top,
                "segment_depth": self.depth, "segment_min_rows": self.min_rows, "segment_max": self.max_segments}


NO_SEGMENTS: dict[str, Any] = dict.fromkeys(SegmentSpec(()).settings())  # a report without --segment-col


def segment_spec(cols: Sequence[str] = (), *, bins: int | None = None, top: int | None = None,
                 depth: int | None = None, min_rows: int | None = None, max_segments: int | None = None,
                 shown: int | None = None) -> SegmentSpec | None:
    """The checked segment options (None: no `--segment-col`). Each number is a whole number
    within its bounds (`bounds.OPTIONS`); the columns are distinct, non-empty names, few
    enough that every combination of their levels can be numbered (at most `top + 1` levels
    for a categorical column, `bins + 1` for a numeric one: its bins and "missing")."""
    given = {"--segment-bins": bins, "--segment-top": top, "--segment-depth": depth,
             "--segment-min-rows": min_rows, "--segment-max": max_segments, "--segments": shown}
    if isinstance(cols, str):
        cols = [cols]
    cols = tuple(cols)
    if not cols:
        named = [flag for flag, value in given.items() if value is not None]
        if named:
            raise UsageError(f"{named[0]} needs --segment-col (the columns whose segments are checked)",
                             hint="e.g. --segment-col country --segment-col age")
        return None
    values = {flag: whole(flag, value) for flag, value in given.items() if value is not None}
    seen: set[str] = set()
    for col in cols:
        if not isinstance(col, str) or not col:
            raise UsageError(f"--segment-col {col!r}: expected a column name")
        column_option("--segment-col", col)
        if col in seen:
            raise UsageError(f"--segment-col {col} is given twice")
        seen.add(col)
    spec = SegmentSpec(cols, values.get("--segment-bins", BINS), values.get("--segment-top", TOP),
                       values.get("--segment-depth", DEPTH), values.get("--segment-min-rows", MIN_ROWS),
                       values.get("--segment-max", MAX_SEGMENTS), values.get("--segments", SHOWN))
    levels = max(spec.top, spec.bins) + 1
    if len(cols) * math.log2(levels) >= CELLS_MAX_BITS:
        raise UsageError(f"--segment-col: {len(cols)} columns of up to {levels} levels each make up to "
                         f"{levels}^{len(cols)} cells, more than 2^{CELLS_MAX_BITS}",
                         hint="give fewer segment columns, or a smaller --segment-bins/--segment-top")
    return spec


__all__ = ["NO_SEGMENTS", "SegmentSpec", "segment_spec"]
