"""Exact piecewise-linear lookup, bit-for-bit `np.interp`, faster on large random-order queries.

`np.interp` binary-searches every query (~60 ns a row at 1 000 knots on random order). Here
the knot range is cut into a uniform grid of cells; each cell stores the last knot at or
below (a hair under) its left edge, so a query finds its knot with one multiply, one table
gather and, for the few queries in cells that hold a knot, a few vectorised "step right
while the next knot is <= x" passes (as many as the most knots any cell holds, at most
`_MAX_PASSES`). The value is then computed with
numpy's own formula, in the same order of operations::

    slope[j] = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j])
    value    = slope[j] * (x - xp[j]) + fp[j]      # fp[j] where x == xp[j]

with fp[0] left of the first knot and fp[-1] from the last knot on, so results equal
`np.interp(x, xp, fp)` exactly (tests compare bytes). NaN queries, tiny inputs,
non-finite slopes or knots too clustered for the grid fall back to `np.interp`.

That formula breaks on extreme knots: a gap xp[j+1] - xp[j] beyond the float64 range (knots
at -1e308 and 1e308) makes the slope 0, and a subnormal gap (knots at 0 and 7.4e-322) makes
it overflow or lose its digits. Such "wide" or "narrow" intervals (see `extreme_intervals`)
are computed as

    t     = (x - xp[j]) / (xp[j+1] - xp[j])      # halves of each term when the gap overflows
    value = fp[j] + (fp[j+1] - fp[j]) * t         # kept between fp[j] and fp[j+1]

which never overflows and is exact up to a few roundings; every other interval keeps
numpy's bytes.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from calibcli.numeric import compiled

_MIN_QUERIES = 4096  # below this, np.interp's setup-free search wins
_MAX_PASSES = 4
_CHUNK = 1 << 16  # queries per chunk
_MAX_CELLS = 1 << 18
_MIN_SPAN = 1e-280
_cache: list = []  # [(xp, fp, table)] for the last knots used: apply calls once per batch


def _grid(xp: np.ndarray) -> tuple[np.ndarray, float, int, np.ndarray] | None:
    """(start-knot table, cells per unit score, passes, busy cells), or None when knots are too clustered.

    `passes` is the most knots any cell (widened by its 1% margin) holds, so that many
    "step right" passes always land on the right knot and no pass needs a check. Only
    queries in busy cells (holding a knot past their start knot) take the passes.
    """
    k = xp.size
    with np.errstate(over="ignore"):
        span = float(xp[-1] - xp[0])
    if not np.isfinite(span) or span < _MIN_SPAN:  # cell edges would round at subnormal resolution
        return None
    cells = max(64, 4 * k)
    best = None
    while cells <= _MAX_CELLS:
        scale = cells / span
        # Lower edge of each cell, 1% of a cell early, so rounding in the cell index of a
        # query can only put the start knot too far left (fixed by stepping right), never right.
        index = np.arange(cells + 1, dtype=np.float64)
        with np.errstate(over="ignore"):  # edges past the last knot at a span near the float64 limit
            start = np.maximum(np.searchsorted(xp, xp[0] + (index - 0.01) / scale, side="right") - 1, 0)
            # The last knot a query of the cell can need: at or below its upper edge, 1% late.
            end = np.searchsorted(xp, xp[0] + (index + 1.01) / scale, side="right") - 1
        passes = int(np.max(end - start))
        if passes <= _MAX_PASSES and (best is None or passes < best[2]):
            best = (start, scale, passes, end > start)
        if passes <= 2:  # a finer grid costs cache misses for at most one saved pass
            break
        cells *= 4
    return best


def _table(xp: np.ndarray, fp: np.ndarray):
    if _cache and _cache[0][0] is xp and _cache[0][1] is fp:
        return _cache[0][2]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # non-finite slopes fall back
        slope = np.append((fp[1:] - fp[:-1]) / (xp[1:] - xp[:-1]), 0.0)
    grid = _grid(xp) if np.isfinite(slope).all() and not np.signbit(fp).any() else None
    table = None if grid is None else (*grid, slope, np.append(xp[1:], np.inf))
    _cache[:] = [(xp, fp, table)]
    return table


@functools.cache
def _kernel():
    """`calib_interp` from the compiled kernels, or None (`numeric.compiled`)."""
    double_p = ctypes.POINTER(ctypes.c_double)
    found = compiled.functions({"interp": [double_p, ctypes.c_int64, double_p, double_p, double_p, double_p,
                                           ctypes.c_int64, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                                           ctypes.c_double, double_p]})
    return None if found is None else found["interp"]


def _double_p(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


_TINY_SLOPE = float(np.finfo(np.float64).tiny)  # below it a slope is subnormal: digits lost


def extreme_intervals(xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Indices j of the intervals [xp[j], xp[j+1]] where numpy's slope formula is not exact to
    rounding: the gap overflows, or the slope overflows or is subnormal (not zero)."""
    if _extreme_cache and _extreme_cache[0][0] is xp and _extreme_cache[0][1] is fp:
        return _extreme_cache[0][2]
    found = _extreme_intervals(xp, fp)
    _extreme_cache[:] = [(xp, fp, found)]
    return found


_extreme_cache: list = []


def _extreme_intervals(xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    if xp.size < 2:
        return np.zeros(0, dtype=np.intp)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        gap = xp[1:] - xp[:-1]
        slope = (fp[1:] - fp[:-1]) / gap
    bad = ~np.isfinite(gap) | ~np.isfinite(slope) | ((slope != 0) & (np.abs(slope) < _TINY_SLOPE))
    return np.flatnonzero(bad)


def interval_values(x: np.ndarray, x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """fp[j] + (fp[j+1] - fp[j]) * t with t = (x - x0) / (x1 - x0), for x0 <= x <= x1 (finite,
    x0 < x1): no intermediate overflows (halved terms when x1 - x0 does), t is kept in [0, 1]
    and the value between y0 and y1, so the interpolant stays monotone across knots."""
    with np.errstate(over="ignore", under="ignore"):
        gap = x1 - x0
        wide = ~np.isfinite(gap)
        t = np.where(wide, (x * 0.5 - x0 * 0.5) / np.where(wide, x1 * 0.5 - x0 * 0.5, 1.0),
                     (x - x0) / np.where(wide, 1.0, gap))
    t = np.clip(t, 0.0, 1.0)
    value = y0 + (y1 - y0) * t
    return np.clip(value, np.minimum(y0, y1), np.maximum(y0, y1))


def interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Linear interpolation through knots (strictly increasing finite `xp`, finite `fp`),
    constant outside: `np.interp(x, xp, fp)` bytes, except on `extreme_intervals`, computed by
    `interval_values` without overflow."""
    x = np.asarray(x, dtype=np.float64)
    out = _np_interp(x, xp, fp)
    extreme = extreme_intervals(xp, fp)
    if extreme.size:
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        j = np.searchsorted(xp, flat_x, side="right") - 1
        inside = (j >= 0) & (j < xp.size - 1)
        mark = np.zeros(xp.size, dtype=bool)
        mark[extreme] = True
        rows = np.flatnonzero(inside & np.take(mark, np.clip(j, 0, xp.size - 1)))
        if rows.size:
            jr = j[rows]
            flat_out[rows] = interval_values(flat_x[rows], xp[jr], xp[jr + 1], fp[jr], fp[jr + 1])
    return out


def _np_interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """`np.interp(x, xp, fp)` for strictly increasing finite `xp` and finite `fp`.

    Outside the knots, clipping x to [xp[0], xp[-1]] lands on x == xp[j], where the formula
    gives exactly fp[j] (slope * 0 + fp[j]; fp holds no -0.0, checked in `_table`).
    """
    if x.size < _MIN_QUERIES or xp.size < 2:
        return np.interp(x, xp, fp)
    table = _table(xp, fp)
    if table is None:
        return np.interp(x, xp, fp)
    out = np.empty(x.shape)
    flat_x, flat_out = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
    kernel = _kernel()
    if kernel is not None:
        start, scale, _, _, slope, xp_next = table
        knots = [np.ascontiguousarray(a, dtype=np.float64) for a in (xp, fp, slope, xp_next)]
        start = np.ascontiguousarray(start, dtype=np.int64)
        kernel(_double_p(flat_x), flat_x.size, *map(_double_p, knots), xp.size,
               start.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), start.size, scale, _double_p(flat_out))
        return out
    for lo in range(0, flat_x.size, _CHUNK):  # temporaries stay in cache (docs/algorithms.md)
        _interp_chunk(flat_x[lo:lo + _CHUNK], xp, fp, table, flat_out[lo:lo + _CHUNK])
    return out


def _interp_chunk(x: np.ndarray, xp: np.ndarray, fp: np.ndarray, table, out: np.ndarray) -> None:
    """`interp` of one chunk of queries into `out` (the same length)."""
    start, scale, passes, busy, slope, xp_next = table
    # +-inf clip to the end knots, where np.interp also gives fp[0] / fp[-1]; NaN stays NaN
    # and shows in the sum (as would an overflow to inf - inf: then np.interp just does it all).
    xc = np.clip(x, xp[0], xp[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(xc)
    if np.isnan(total):
        out[:] = np.interp(x, xp, fp)
        return
    # np.take rather than fancy indexing: the same gather, faster (docs/algorithms.md).
    t = xc - xp[0]
    t *= scale
    cell = t.astype(np.intp)
    j = np.take(start, cell)
    rows = np.flatnonzero(np.take(busy, cell))  # most cells hold no knot: their start is final
    if rows.size:
        jb, xb = np.take(j, rows), np.take(xc, rows)
        for _ in range(passes):
            jb += xb >= np.take(xp_next, jb)  # xp_next[j] = xp[j+1]; inf past the last knot
        np.put(j, rows, jb)
    np.take(xp, j, out=out)
    np.subtract(xc, out, out=out)
    out *= np.take(slope, j)
    out += np.take(fp, j)
