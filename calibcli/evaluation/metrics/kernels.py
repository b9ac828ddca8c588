"""The chunked passes behind the metrics of `metrics.py`: per-row sums that add up over batches,
and the passes over a distribution (ascending distinct p with the weight n0 of negatives and
n1 of positives at each) that compute AUC, CalBin, binned sums and Spiegelhalter's sums.

A pass over n entries goes in chunks of `pooling.CHUNK`, so its temporaries are a few
chunk-sized arrays whatever n is (a distribution may hold 1e8 entries), and it reads n0 and
n1 through `pooling.as_weights` (they may be compact unsigned counts).
"""

from __future__ import annotations

import math

import numpy as np

from calibcli.numeric import pooling
from calibcli.numeric.pooling import as_weights


def tie_groups(sorted_p: np.ndarray) -> np.ndarray:
    """Group index of each position in a sorted array (equal values share a group)."""
    return np.concatenate([[0], np.cumsum(sorted_p[1:] != sorted_p[:-1])])


def sorted_ties(y: np.ndarray, p: np.ndarray, order: np.ndarray | None, w: np.ndarray | None = None):
    """Sorted p, tie group of each sorted row, positives and rows (weights) per tie group."""
    if order is None:
        order = np.argsort(p)  # any tie order: everything below is per tie group
    ps = p[order]
    group = tie_groups(ps)
    if w is None:
        pos = np.bincount(group, weights=y[order])
        count = np.bincount(group).astype(np.float64)
    else:
        wo = w[order]
        pos = np.bincount(group, weights=wo * y[order])
        count = np.bincount(group, weights=wo)
    return ps, group, pos, count


def _prefix_sum(values: np.ndarray) -> np.ndarray:
    """0 followed by the running sums of `values`, written into one array."""
    out = np.empty(values.size + 1)
    out[0] = 0.0
    np.cumsum(values, out=out[1:])
    return out


_TINY_TOTAL = 2.0**-400  # counts below this are rescaled before products of two are taken


def as_unit_counts(n0: np.ndarray, n1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights whose total is below `_TINY_TOTAL` (subnormal sums, underflowing products)
    multiplied by one power of two bringing the total near 1 (exact: the ratios, and every
    scale-free metric, unchanged); others as they are, bit for bit."""
    n0, n1 = as_weights(n0), as_weights(n1)
    total = float(n0.sum() + n1.sum())
    if not 0 < total < _TINY_TOTAL:
        return n0, n1
    e = -math.frexp(total)[1]
    return np.ldexp(n0, e), np.ldexp(n1, e)


def auc_from_ties(pos: np.ndarray, neg: np.ndarray) -> float:
    """AUC from positive and negative counts per tie group of p, groups in ascending p.

    Each positive beats the negatives of lower groups and ties half of its own group's.
    Counts may be weights (a weighted Mann-Whitney statistic).
    """
    n1, n0 = float(pos.sum()), float(neg.sum())
    if n1 <= 0 or n0 <= 0:
        return float("nan")
    # tiny weights: both counts brought near 1 by powers of two (exact), so that products of
    # two weights do not underflow; the ratio is the same
    e1 = -math.frexp(n1)[1] if n1 < _TINY_TOTAL else 0
    e0 = -math.frexp(n0)[1] if n0 < _TINY_TOTAL else 0
    n1, n0 = math.ldexp(n1, e1), math.ldexp(n0, e0)
    below = tied = carry = 0.0
    for lo in range(0, pos.size, pooling.CHUNK):
        a, b = as_weights(pos[lo:lo + pooling.CHUNK]), as_weights(neg[lo:lo + pooling.CHUNK])
        if e1 or e0:
            a, b = np.ldexp(a, e1), np.ldexp(b, e0)
        cum = np.cumsum(b)
        cum += carry
        below += float(a @ cum)
        tied += float(a @ b)
        carry = float(cum[-1])
    return (below - 0.5 * tied) / (n1 * n0)


def bin_sums(y: np.ndarray, p: np.ndarray, w: np.ndarray | None, bins: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equal-width bin k = min(floor(bins p), bins - 1) (so p = 1 is in the last bin): the
    weight of its rows, the weighted sum of p and of y; ECE is the gap between the last two."""
    k = np.minimum((p * bins).astype(np.int64), bins - 1)
    return (np.bincount(k, weights=w, minlength=bins).astype(np.float64),
            np.bincount(k, weights=p if w is None else w * p, minlength=bins),
            np.bincount(k, weights=y if w is None else w * y, minlength=bins))


def spiegelhalter_sums(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """The three sums Spiegelhalter's z is made of: (sum y(1-2p), sum p(1-2p), sum (1-2p)^2 p(1-p)),
    weighted; they add up over batches, so z is exact from a stream (`spiegelhalter_from_sums`)."""
    a = 1 - 2 * p
    terms = np.stack([y * a, p * a, a * a * p * (1 - p)])
    return terms.sum(axis=1) if w is None else terms @ w


def field_sums(y: np.ndarray, p: np.ndarray, groups: np.ndarray, w: np.ndarray | None = None,
               minlength: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per field code: (weight of rows, weighted sum of y, weighted sum of p)."""
    count = np.bincount(groups, weights=w, minlength=minlength).astype(np.float64)
    pos = np.bincount(groups, weights=y if w is None else w * y, minlength=count.size)
    psum = np.bincount(groups, weights=p if w is None else w * p, minlength=count.size)
    return count, pos, psum


def calbin_sorted(ps: np.ndarray, ys: np.ndarray, window: int) -> float:
    """CalBin of ascending `ps` whose labels `ys` are already pooled within ties.

    Vectorised with prefix sums: within a window the sorted p_i below ybar_b contribute
    ybar_b - p_i and the rest p_i - ybar_b, and the split point comes from one searchsorted.
    Windows go in chunks, each with prefix sums over only the rows its windows cover, so
    the temporaries stay a few chunk-sized arrays whatever n is.
    """
    n = ps.size
    s = min(window, n)
    n_windows = max(n - s, 1)
    total = 0.0
    for lo in range(0, n_windows, pooling.CHUNK):
        hi = min(lo + pooling.CHUNK, n_windows)
        total += _window_deviations(ps[lo:hi - 1 + s], as_weights(ys[lo:hi - 1 + s]), hi - lo, s)
    return total / s / n_windows


def _window_deviations(rows: np.ndarray, ys: np.ndarray, n_starts: int, s: int) -> float:
    """Sum over the windows starting at rows 0 .. n_starts-1 of sum_i |p_i - ybar| (rows sorted).

    Window i's sums are differences of prefix sums at i and i + s: slices, not gathers."""
    cy = _prefix_sum(ys)
    cp = _prefix_sum(rows)
    ybar = cy[s:s + n_starts] - cy[:n_starts]
    ybar /= s
    # the split lies inside the window, so searching this chunk's rows is enough
    split = np.searchsorted(rows, ybar, side="left")
    starts = np.arange(n_starts)
    np.maximum(split, starts, out=split)
    below = np.minimum(split - starts, s)
    split = starts + below
    cp_split = np.take(cp, split)
    # (ybar below - (cp[split] - cp[i])) + ((cp[i + s] - cp[split]) - ybar (s - below))
    dev = ybar * (2 * below - s)
    dev -= 2 * cp_split
    dev += cp[:n_starts]
    dev += cp[s:s + n_starts]
    return float(np.sum(dev))


class SortedRuns:
    """Prefix sums of rows sorted by p, stored per distinct p: row position t (a mass, so
    fractional with weights) -> sum of p and of pooled y over the first t rows. Both are
    piecewise linear in t, so any window of the expanded rows costs two binary searches."""

    def __init__(self, v: np.ndarray, n0: np.ndarray, n1: np.ndarray):
        n0, n1 = as_weights(n0), as_weights(n1)
        c = n0 + n1
        self.v = v
        self.rate = np.divide(n1, c, out=np.zeros_like(c), where=c > 0)
        self.at = _prefix_sum(c)
        self.cy = _prefix_sum(n1)
        self.cp = _prefix_sum(c * v)
        self.total = float(self.at[-1])

    def sums(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sum of p, sum of pooled y) over the first t rows."""
        g = np.clip(np.searchsorted(self.at, t, side="right") - 1, 0, self.v.size - 1)
        dt = t - self.at[g]
        return self.cp[g] + dt * self.v[g], self.cy[g] + dt * self.rate[g]


def calbin_counts(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, window: int) -> float:
    """CalBin of the rows behind a distribution: ascending distinct p `v` with n0 negatives
    and n1 positives each (weights allowed: a weight of w counts as w rows, windows start
    at masses 0, 1, 2, ...). Equal to `calbin` of the expanded rows, without expanding them
    when p has ties; with one row per distinct p it is `calbin_sorted` itself. Whole-number
    counts take chunk-sized temporaries only, whatever the number of distinct p."""
    empty, unit, whole = False, True, True  # some count 0; every count 0 or 1; every count whole
    for lo in range(0, v.size, pooling.CHUNK):
        c = as_weights(n0[lo:lo + pooling.CHUNK]) + as_weights(n1[lo:lo + pooling.CHUNK])
        empty = empty or bool(np.any(c == 0))
        unit = unit and bool(np.all((c == 1) | (c == 0)))
        whole = whole and bool(np.all(c == np.floor(c)))
    if empty:
        keep = (as_weights(n0) + as_weights(n1)) > 0
        v, n0, n1 = v[keep], n0[keep], n1[keep]
    if v.size == 0:
        return float("nan")
    if unit:
        return calbin_sorted(v, n1, window)
    long_runs = _calbin_long_runs(v, n0, n1, window)
    if long_runs is not None:
        return long_runs
    if whole:
        return _calbin_whole_counts(v, n0, n1, window)
    runs = SortedRuns(v, n0, n1)
    n = runs.total
    s = min(float(window), n)
    n_windows = max(int(np.floor(n - s)), 1)
    total = 0.0
    for lo in range(0, n_windows, pooling.CHUNK):
        total += _run_deviations(runs, np.arange(lo, min(lo + pooling.CHUNK, n_windows), dtype=np.float64), s)
    return total / s / n_windows


def _run_deviations(runs: SortedRuns, starts: np.ndarray, s: float) -> float:
    """The summed deviations (s times each window's CalBin term) of the windows of s rows
    starting at row positions `starts`."""
    v = runs.v
    ends = starts + s
    p_lo, y_lo = runs.sums(starts)
    p_hi, y_hi = runs.sums(ends)
    ybar = (y_hi - y_lo) / s
    split = np.clip(runs.at[np.searchsorted(v, ybar, side="left")], starts, ends)
    p_split, _ = runs.sums(split)
    below = split - starts
    dev = (ybar * below - (p_split - p_lo)) + ((p_hi - p_split) - ybar * (s - below))
    return float(np.sum(dev))


LONG_WINDOWS = 1 << 22  # above this many windows, those inside one run of tied p are added in closed form


def _calbin_long_runs(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, window: int) -> float | None:
    """CalBin when weights make the rows many (a weight of w is w rows) and most windows lie
    inside one run of tied p: such a window holds rows of one p and one pooled positive rate,
    so its term is |p - rate|, and the run's windows add up in closed form; only the windows
    that cross from one run to the next are computed one by one. Equal to the window-by-window
    sum to rounding, in time proportional to the crossing windows (not to the total weight).
    None when the windows are few, or most of them cross runs."""
    runs = SortedRuns(v, n0, n1)
    n = runs.total
    s = min(float(window), n)
    n_windows = max(math.floor(n - s), 1)
    if n_windows <= LONG_WINDOWS:
        return None
    at = runs.at
    first = np.ceil(at[:-1])  # the windows starting in [first, last] lie inside run g
    last = np.minimum(np.floor(at[1:] - s), n_windows - 1)
    inside = np.maximum(last - first + 1, 0.0)
    crossing = n_windows - float(inside.sum())
    if crossing > n_windows / 4:
        return None
    total = s * float(inside @ np.abs(v - runs.rate))
    has = inside > 0
    gap_lo = np.concatenate([[0.0], last[has] + 1])  # the crossing starts: the gaps between the runs' ranges
    gap_len = np.concatenate([first[has], [float(n_windows)]]) - gap_lo
    keep = gap_len > 0
    gap_lo, gap_len = gap_lo[keep], gap_len[keep]
    gap_end = np.cumsum(gap_len)
    for lo in range(0, int(crossing), pooling.CHUNK):
        q = np.arange(lo, min(lo + pooling.CHUNK, int(crossing)), dtype=np.float64)
        g = np.searchsorted(gap_end, q, side="right")
        total += _run_deviations(runs, gap_lo[g] + (q - (gap_end[g] - gap_len[g])), s)
    return total / s / n_windows


def _calbin_whole_counts(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, window: int) -> float:
    """`calbin_sorted` of the rows behind whole-number counts (each > 0), expanding one chunk
    of windows at a time (`np.repeat` of the groups the chunk's rows fall in). The groups'
    row positions are computed a chunk of groups ahead and dropped once passed, so memory
    stays a few chunks whatever the number of distinct p."""
    n = int(sum(float(as_weights(n0[lo:lo + pooling.CHUNK]).sum() + as_weights(n1[lo:lo + pooling.CHUNK]).sum())
                for lo in range(0, v.size, pooling.CHUNK)))
    s = min(window, n)
    n_windows = max(n - s, 1)
    at = np.zeros(1, dtype=np.int64)  # row position of each loaded group, then the end of the last
    xs, rate = v[:0], np.zeros(0)  # the loaded groups' p and positive rate
    loaded = 0  # groups loaded (or passed) so far
    total = 0.0
    for lo in range(0, n_windows, pooling.CHUNK):
        hi = min(lo + pooling.CHUNK, n_windows)
        end = hi - 1 + s  # rows lo .. end-1 hold every window starting in lo .. hi-1
        passed = int(np.searchsorted(at, lo, side="right")) - 1
        if passed > 0:
            at, xs, rate = at[passed:], xs[passed:], rate[passed:]
        while at[-1] < end and loaded < v.size:
            nxt = min(loaded + pooling.CHUNK, v.size)
            y1 = as_weights(n1[loaded:nxt])
            c = as_weights(n0[loaded:nxt]) + y1
            at = np.concatenate([at, at[-1] + np.cumsum(c.astype(np.int64))])
            xs, rate = np.concatenate([xs, v[loaded:nxt]]), np.concatenate([rate, y1 / c])
            loaded = nxt
        first = int(np.searchsorted(at, lo, side="right")) - 1
        last = int(np.searchsorted(at, end, side="left"))  # groups first .. last-1 meet the rows
        reps = np.minimum(at[first + 1:last + 1], end) - np.maximum(at[first:last], lo)
        total += _window_deviations(np.repeat(xs[first:last], reps), np.repeat(rate[first:last], reps),
                                    hi - lo, s)
    return total / s / n_windows


def weighted_percentiles(xs: np.ndarray, weight: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`np.percentile(np.repeat(xs, weight), q)` (linear interpolation) without repeating rows."""
    cum = np.cumsum(weight)
    pos = q / 100.0 * (cum[-1] - 1)  # fractional 0-based rank among the repeated rows
    lo = np.floor(pos)
    i = np.minimum(np.searchsorted(cum, lo, side="right"), xs.size - 1)
    j = np.minimum(np.searchsorted(cum, lo + 1, side="right"), xs.size - 1)
    return xs[i] + (pos - lo) * (xs[j] - xs[i])


def bin_slices(xs: np.ndarray, bin_of) -> list[tuple[int, slice]]:
    """(bin, slice of xs) for each non-empty bin of ascending `xs`, where `bin_of(x)` (the
    bin of one p) never decreases with x: each bin's end is found by bisection with that same
    function, so a bin holds exactly the entries a per-entry assignment would give it."""
    out = []
    lo = 0
    while lo < xs.size:
        k = bin_of(float(xs[lo]))
        a, b = lo, xs.size  # the first entry past bin k lies in (lo, xs.size]
        while a + 1 < b:
            mid = (a + b) // 2
            a, b = (mid, b) if bin_of(float(xs[mid])) == k else (a, mid)
        out.append((k, slice(lo, b)))
        lo = b
    return out


def bin_sums_of_distribution(xs: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int,
                             strategy: str = "uniform") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weight, weighted sum of p, weight of positives) in each of the `bins` bins of p.

    uniform: bin k = min(floor(bins p), bins - 1), as `bin_sums` assigns a row;
    quantile: edges at the 0, 100/bins, ..., 100 percentiles of p, a p assigned as
    scikit-learn's `calibration_curve(strategy="quantile")` does (`searchsorted` on the
    inner edges). `xs` ascending (a distribution): each bin is one slice (`bin_slices`).
    """
    if strategy == "quantile":
        inner = weighted_percentiles(xs, as_weights(n0) + as_weights(n1), np.linspace(0, 100, bins + 1))[1:-1]

        def bin_of(x: float) -> int:
            return int(np.searchsorted(inner, x))
    else:
        def bin_of(x: float) -> int:
            return min(int(x * bins), bins - 1)
    weight, psum, pos = np.zeros(bins), np.zeros(bins), np.zeros(bins)
    for k, part in bin_slices(xs, bin_of):
        x, y1, y0 = xs[part], as_weights(n1[part]), as_weights(n0[part])
        weight[k] = float(y0.sum() + y1.sum())
        psum[k] = float(x @ y0 + x @ y1)
        pos[k] = float(y1.sum())
    return weight, psum, pos


def spiegelhalter_of_distribution(xs: np.ndarray, n0: np.ndarray, n1: np.ndarray) -> tuple[float, float]:
    """(sum (y - p)(1 - 2p), sum (1 - 2p)^2 p (1 - p)) over the rows behind a distribution:
    the numerator of Spiegelhalter's z and its variance."""
    num = var = 0.0
    for lo in range(0, xs.size, pooling.CHUNK):
        x, y1 = xs[lo:lo + pooling.CHUNK], as_weights(n1[lo:lo + pooling.CHUNK])
        count = as_weights(n0[lo:lo + pooling.CHUNK]) + y1
        num += float(np.sum((y1 - count * x) * (1 - 2 * x)))
        var += float(np.sum(count * (1 - 2 * x) ** 2 * x * (1 - x)))
    return num, var
