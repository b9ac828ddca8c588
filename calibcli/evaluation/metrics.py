"""Evaluation metrics for binary probabilities: pure functions of labels y (0/1) and p in [0, 1].

Definitions (means over the N rows; with `sample_weight` a row of weight w counts as w rows
and N is the total weight):

- log-loss: -mean(y ln p + (1-y) ln(1-p)), p clipped to [1e-15, 1 - 1e-15] (`LOG_LOSS_EPS`).
- Brier score: mean((p - y)^2).
- AUC: Mann-Whitney probability that a positive outranks a negative, ties counted half
  (average ranks); NaN when only one class is present.
- Prob-ECE: 10 equal-width bins on [0, 1], bin k = min(floor(10 p), 9) (so p = 1 is in the
  last bin); sum over bins of (n_k / N) |mean p - mean y|.
- CalBin (Zitnik et al. 2012, section II.B; "calibration by overlapping bins"): rows sorted
  by p; for each window b = 1 .. n-s of s consecutive rows, the mean over the window of
  |p_i - ybar_b|, where ybar_b is the window's positive rate; CalBin is the mean of that over
  the n-s windows. The paper's formula sums (not averages) inside each window; we divide by
  s so CalBin lies in [0, 1] like the values in the paper's tables, and keep its 1/(n-s)
  and its window count n-s. When n <= s there is one window of all n rows. Rows with tied
  p get their tie group's mean label first, so the result does not depend on row order.
- Field-ECE (Pan et al. 2020, eq. 5): (1/N) sum_z |sum_{i in z} (y_i - p_i)|.
- Field-RCE (eq. 6): (1/N) sum_z N_z |sum_{i in z}(y_i - p_i)| / sum_{i in z}(y_i + eps),
  eps = 0.01 per row as the paper writes it, so fields without positives still count.

References
----------
Zitnik, Bosnic, Kononenko (2012); Pan, Zhou, Wang, Ji, Zheng (2020), "Field-aware
Calibration: A Simple and Empirically Strong Method for Reliable Probabilistic Predictions".
"""

from __future__ import annotations

import numpy as np

LOG_LOSS_EPS = 1e-15
FIELD_RCE_EPS = 0.01
ECE_BINS = 10
CALBIN_WINDOW = 100
_CALBIN_CHUNK = 1 << 16  # rows or distinct p per chunk of the chunked metrics: temporaries stay in cache

# Display name and direction of every metric, in table order: "lower" or "higher" is better,
# or "target": best at the value in TARGETS (gates can bound it, not count a regression).
METRICS: dict[str, tuple[str, str]] = {
    "log_loss": ("log-loss", "lower"),
    "brier": ("Brier", "lower"),
    "auc": ("AUC", "higher"),
    "ece": ("ECE", "lower"),
    "mce": ("MCE", "lower"),
    "calbin": ("CalBin", "lower"),
    "cal_slope": ("slope", "target"),
    "cal_intercept": ("intercept", "target"),
    "spiegelhalter_z": ("Spiegelhalter z", "target"),
    "spiegelhalter_p": ("Spiegelhalter p", "higher"),
    "field_ece": ("Field-ECE", "lower"),
    "field_rce": ("Field-RCE", "lower"),
}
TARGETS = {"cal_slope": 1.0, "cal_intercept": 0.0, "spiegelhalter_z": 0.0}


def lower_is_better(metric: str) -> bool:
    return METRICS[metric][1] == "lower"


def check_window(window) -> None:
    """Refuse a CalBin window outside `--calbin-window`'s range, in the CLI's words (UsageError)."""
    from calibcli import bounds

    if isinstance(window, bool) or not isinstance(window, (int, np.integer)):
        from calibcli.errors import UsageError

        raise UsageError(f"--calbin-window {window!r} is not an integer")
    bounds.check(calbin_window=int(window))


def as_weights(counts: np.ndarray) -> np.ndarray:
    """Counts or weights as float64 (no copy when they are already). A distribution's n0 and
    n1 may be compact unsigned counts (`pooling.compact_counts_of_keys`): every reader casts
    them, whole or a chunk at a time, before any arithmetic, so none wraps around."""
    return np.asarray(counts, dtype=np.float64)


def _weight(sample_weight, n: int) -> np.ndarray | None:
    return None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).reshape(n)


def _mean(values: np.ndarray, w: np.ndarray | None) -> float:
    return float(np.mean(values)) if w is None else float(values @ w / w.sum())


def log_loss_terms(y: np.ndarray, p: np.ndarray, eps: float = LOG_LOSS_EPS) -> np.ndarray:
    """Each row's negative log-likelihood, p clipped to [eps, 1-eps]: -log(q) for a positive,
    -log(1 - q) for a negative (one log a row; 1 - q rounds by at most half an ulp of 1).

    The likelihood is selected as y q + (1 - y)(1 - q), which for labels 0 and 1 is q or
    1 - q exactly (the other product is +0): the same bits as `np.where(y == 1, q, 1 - q)`,
    without its branch per row (random labels made that 4x the cost of the log)."""
    q = np.clip(p, eps, 1 - eps)
    other = np.subtract(1.0, q)
    other *= np.subtract(1.0, y)
    q *= y
    q += other
    np.log(q, out=q)
    np.negative(q, out=q)
    return q


def log_loss(y: np.ndarray, p: np.ndarray, eps: float = LOG_LOSS_EPS, sample_weight=None) -> float:
    """Mean (weighted mean with `sample_weight`) negative log-likelihood, p clipped to [eps, 1-eps]."""
    return _mean(log_loss_terms(y, p, eps), _weight(sample_weight, p.size))


def brier(y: np.ndarray, p: np.ndarray, sample_weight=None) -> float:
    """Mean (weighted) squared difference between probability and label."""
    return _mean((p - y) ** 2, _weight(sample_weight, p.size))


def tie_groups(sorted_p: np.ndarray) -> np.ndarray:
    """Group index of each position in a sorted array (equal values share a group)."""
    return np.concatenate([[0], np.cumsum(sorted_p[1:] != sorted_p[:-1])])


def auc_from_ties(pos: np.ndarray, neg: np.ndarray) -> float:
    """AUC from positive and negative counts per tie group of p, groups in ascending p.

    Each positive beats the negatives of lower groups and ties half of its own group's.
    Counts may be weights (a weighted Mann-Whitney statistic).
    """
    n1, n0 = float(pos.sum()), float(neg.sum())
    if n1 <= 0 or n0 <= 0:
        return float("nan")
    below = tied = carry = 0.0
    for lo in range(0, pos.size, _CALBIN_CHUNK):  # chunk-sized temporaries: the state may hold 1e8 groups
        a, b = as_weights(pos[lo:lo + _CALBIN_CHUNK]), as_weights(neg[lo:lo + _CALBIN_CHUNK])
        cum = np.cumsum(b)
        cum += carry
        below += float(a @ cum)
        tied += float(a @ b)
        carry = float(cum[-1])
    return (below - 0.5 * tied) / (n1 * n0)


def _sorted_ties(y: np.ndarray, p: np.ndarray, order: np.ndarray | None, w: np.ndarray | None = None):
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


def distribution(y: np.ndarray, p: np.ndarray, sample_weight=None, order: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct p ascending, weight of negatives, weight of positives) at each distinct p.

    AUC and CalBin depend on the rows only through this distribution (tied p are pooled).
    """
    ps, group, pos, count = _sorted_ties(y, p, order, _weight(sample_weight, p.size))
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]])) if ps.size else group
    return ps[starts], count - pos, pos


def auc(y: np.ndarray, p: np.ndarray, order: np.ndarray | None = None, sample_weight=None) -> float:
    """Area under the ROC curve with ties counted half; NaN for a single class.

    `order` is an argsort of p when the caller already has one (any tie order works).
    """
    _, _, pos, count = _sorted_ties(y, p, order, _weight(sample_weight, p.size))
    return auc_from_ties(pos, count - pos)


def ece_sums(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None, bins: int = ECE_BINS
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per equal-width bin: the sum of (weighted) p and of (weighted) y; ECE is their gap."""
    k = np.minimum((p * bins).astype(np.int64), bins - 1)
    return (np.bincount(k, weights=p if w is None else w * p, minlength=bins),
            np.bincount(k, weights=y if w is None else w * y, minlength=bins))


def bin_sums(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None, bins: int = ECE_BINS
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equal-width bin (as `ece_sums`): the weight of its rows, the weighted sum of p and of y."""
    k = np.minimum((p * bins).astype(np.int64), bins - 1)
    return (np.bincount(k, weights=w, minlength=bins).astype(np.float64),
            np.bincount(k, weights=p if w is None else w * p, minlength=bins),
            np.bincount(k, weights=y if w is None else w * y, minlength=bins))


def binned_errors(weight: np.ndarray, psum: np.ndarray, ysum: np.ndarray) -> tuple[float, float]:
    """(ECE, MCE) from per-bin sums: the weight of each bin, its sum of p and of y."""
    keep = weight > 0
    if not keep.any():
        return float("nan"), float("nan")
    gap = np.abs(psum[keep] - ysum[keep])
    return float(gap.sum() / weight[keep].sum()), float(np.max(gap / weight[keep]))


def spiegelhalter_sums(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """The three sums Spiegelhalter's z is made of: (sum y(1-2p), sum p(1-2p), sum (1-2p)^2 p(1-p)),
    weighted; they add up over batches, so z is exact from a stream (`spiegelhalter_from_sums`)."""
    a = 1 - 2 * p
    terms = np.stack([y * a, p * a, a * a * p * (1 - p)])
    return terms.sum(axis=1) if w is None else terms @ w


def spiegelhalter_from_sums(sums: np.ndarray) -> tuple[float, float]:
    """Spiegelhalter's z and its two-sided p-value from `spiegelhalter_sums` (NaN without information)."""
    from math import erfc, sqrt

    num, var = float(sums[0] - sums[1]), float(sums[2])
    if not var > 0:
        return float("nan"), float("nan")
    z = num / sqrt(var)
    return z, erfc(abs(z) / sqrt(2))


def prob_ece(y: np.ndarray, p: np.ndarray, bins: int = ECE_BINS, sample_weight=None) -> float:
    """Expected calibration error over equal-width probability bins (weighted with `sample_weight`)."""
    w = _weight(sample_weight, p.size)
    sp, sy = ece_sums(y, p, w, bins)
    return float(np.sum(np.abs(sp - sy)) / (y.size if w is None else w.sum()))


def calbin(y: np.ndarray, p: np.ndarray, window: int = CALBIN_WINDOW,
           order: np.ndarray | None = None, sample_weight=None) -> float:
    """Calibration by overlapping bins (Zitnik et al. 2012), normalised as the module says.

    `order` is an argsort of p when the caller already has one: tied p share their mean
    label, so the order inside a tie does not matter and the sort need not be stable.
    With `sample_weight` a row of weight w counts as w rows (`calbin_counts`).
    """
    if sample_weight is not None:
        return calbin_counts(*distribution(y, p, sample_weight, order), window)
    ps, group, pos, count = _sorted_ties(y, p, order)
    return calbin_sorted(ps, (pos / count)[group], window)


def _prefix_sum(values: np.ndarray) -> np.ndarray:
    """0 followed by the running sums of `values`, written into one array."""
    out = np.empty(values.size + 1)
    out[0] = 0.0
    np.cumsum(values, out=out[1:])
    return out


def calbin_sorted(ps: np.ndarray, ys: np.ndarray, window: int = CALBIN_WINDOW) -> float:
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
    for lo in range(0, n_windows, _CALBIN_CHUNK):
        hi = min(lo + _CALBIN_CHUNK, n_windows)
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


def calbin_counts(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, window: int = CALBIN_WINDOW) -> float:
    """CalBin of the rows behind a distribution: ascending distinct p `v` with n0 negatives
    and n1 positives each (weights allowed: a weight of w counts as w rows, windows start
    at masses 0, 1, 2, ...). Equal to `calbin` of the expanded rows, without expanding them
    when p has ties; with one row per distinct p it is `calbin_sorted` itself. Whole-number
    counts take chunk-sized temporaries only, whatever the number of distinct p."""
    empty, unit, whole = False, True, True  # some count 0; every count 0 or 1; every count whole
    for lo in range(0, v.size, _CALBIN_CHUNK):
        c = as_weights(n0[lo:lo + _CALBIN_CHUNK]) + as_weights(n1[lo:lo + _CALBIN_CHUNK])
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
    if whole:
        return _calbin_whole_counts(v, n0, n1, window)
    runs = SortedRuns(v, n0, n1)
    n = runs.total
    s = min(float(window), n)
    n_windows = max(int(np.floor(n - s)), 1)
    total = 0.0
    for lo in range(0, n_windows, _CALBIN_CHUNK):
        starts = np.arange(lo, min(lo + _CALBIN_CHUNK, n_windows), dtype=np.float64)
        ends = starts + s
        p_lo, y_lo = runs.sums(starts)
        p_hi, y_hi = runs.sums(ends)
        ybar = (y_hi - y_lo) / s
        split = np.clip(runs.at[np.searchsorted(v, ybar, side="left")], starts, ends)
        p_split, _ = runs.sums(split)
        below = split - starts
        dev = (ybar * below - (p_split - p_lo)) + ((p_hi - p_split) - ybar * (s - below))
        total += float(np.sum(dev))
    return total / s / n_windows


def _calbin_whole_counts(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, window: int) -> float:
    """`calbin_sorted` of the rows behind whole-number counts (each > 0), expanding one chunk
    of windows at a time (`np.repeat` of the groups the chunk's rows fall in). The groups'
    row positions are computed a chunk of groups ahead and dropped once passed, so memory
    stays a few chunks whatever the number of distinct p."""
    n = int(sum(float(as_weights(n0[lo:lo + _CALBIN_CHUNK]).sum() + as_weights(n1[lo:lo + _CALBIN_CHUNK]).sum())
                for lo in range(0, v.size, _CALBIN_CHUNK)))
    s = min(window, n)
    n_windows = max(n - s, 1)
    at = np.zeros(1, dtype=np.int64)  # row position of each loaded group, then the end of the last
    xs, rate = v[:0], np.zeros(0)  # the loaded groups' p and positive rate
    loaded = 0  # groups loaded (or passed) so far
    total = 0.0
    for lo in range(0, n_windows, _CALBIN_CHUNK):
        hi = min(lo + _CALBIN_CHUNK, n_windows)
        end = hi - 1 + s  # rows lo .. end-1 hold every window starting in lo .. hi-1
        passed = int(np.searchsorted(at, lo, side="right")) - 1
        if passed > 0:
            at, xs, rate = at[passed:], xs[passed:], rate[passed:]
        while at[-1] < end and loaded < v.size:
            nxt = min(loaded + _CALBIN_CHUNK, v.size)
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


def field_sums(y: np.ndarray, p: np.ndarray, groups: np.ndarray, w: np.ndarray | None = None,
               minlength: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per field code: (weight of rows, weighted sum of y, weighted sum of p)."""
    count = np.bincount(groups, weights=w, minlength=minlength).astype(np.float64)
    pos = np.bincount(groups, weights=y if w is None else w * y, minlength=count.size)
    psum = np.bincount(groups, weights=p if w is None else w * p, minlength=count.size)
    return count, pos, psum


def field_ece_from_sums(count: np.ndarray, pos: np.ndarray, psum: np.ndarray) -> float:
    """Field-ECE from per-field sums (`field_sums`)."""
    return float(np.sum(np.abs(pos - psum)) / count.sum())


def field_rce_from_sums(count: np.ndarray, pos: np.ndarray, psum: np.ndarray, eps: float = FIELD_RCE_EPS) -> float:
    """Field-RCE from per-field sums (`field_sums`)."""
    keep = count > 0
    c, r = count[keep], pos[keep] - psum[keep]
    return float(np.sum(c * np.abs(r) / (pos[keep] + eps * c)) / count.sum())


def field_ece(y: np.ndarray, p: np.ndarray, groups: np.ndarray, sample_weight=None) -> float:
    """Field-level ECE (Pan et al. 2020, eq. 5); `groups` are integer codes of the field."""
    return field_ece_from_sums(*field_sums(y, p, groups, _weight(sample_weight, p.size)))


def field_rce(y: np.ndarray, p: np.ndarray, groups: np.ndarray, eps: float = FIELD_RCE_EPS,
              sample_weight=None) -> float:
    """Field-level relative calibration error (Pan et al. 2020, eq. 6); a row of weight w counts w times."""
    return field_rce_from_sums(*field_sums(y, p, groups, _weight(sample_weight, p.size)), eps)


def compute_all(
    y: np.ndarray,
    p: np.ndarray,
    groups: np.ndarray | None = None,
    calbin_window: int = CALBIN_WINDOW,
    sample_weight=None,
    order: np.ndarray | None = None,
    ece_bins: int = ECE_BINS,
    ece_strategy: str = "uniform",
) -> dict[str, float]:
    """Every metric for one probability column, in METRICS order; field metrics need groups.

    The in-memory reference that `EvalState` equals; `order` is an argsort of p if known.
    Degenerate input (no weight, one class) gives NaN for what is undefined, silently.
    """
    check_window(calbin_window)
    with np.errstate(all="ignore"):
        return _compute_all(y, p, groups, calbin_window, sample_weight, order, ece_bins, ece_strategy)


def _compute_all(y, p, groups, calbin_window, sample_weight, order, ece_bins, ece_strategy) -> dict[str, float]:
    w = _weight(sample_weight, p.size)
    if w is None:
        ps, group, pos, count = _sorted_ties(y, p, order)  # the one sort, shared by AUC and CalBin
        cal = calbin_sorted(ps, (pos / count)[group], calbin_window)
        starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]])) if ps.size else group
        v, n0, n1 = ps[starts], count - pos, pos
    else:
        v, n0, n1 = distribution(y, p, w, order)
        pos, count = n1, n0 + n1
        cal = calbin_counts(v, n0, n1, calbin_window)
    out = {
        "log_loss": log_loss(y, p, sample_weight=w),
        "brier": brier(y, p, sample_weight=w),
        "auc": auc_from_ties(pos, count - pos),
        "ece": prob_ece(y, p, sample_weight=w),
        "calbin": cal,
        **distribution_metrics(v, n0, n1, ece_bins, ece_strategy),
    }
    if groups is not None:
        sums = field_sums(y, p, groups, w)
        out["field_ece"] = field_ece_from_sums(*sums)
        out["field_rce"] = field_rce_from_sums(*sums)
    return out


def log_loss_counts(p: np.ndarray, n0: np.ndarray, n1: np.ndarray, eps: float = LOG_LOSS_EPS) -> float:
    """log-loss of probabilities `p` for rows aggregated as n0 negatives and n1 positives each."""
    q = np.clip(p, eps, 1 - eps)
    return float(-(np.sum(n1 * np.log(q)) + np.sum(n0 * np.log1p(-q))) / (np.sum(n0) + np.sum(n1)))


def brier_counts(p: np.ndarray, n0: np.ndarray, n1: np.ndarray) -> float:
    """Brier score of `p` for rows aggregated as n0 negatives and n1 positives each."""
    return float((np.sum(n1 * (p - 1.0) ** 2) + np.sum(n0 * p ** 2)) / (np.sum(n0) + np.sum(n1)))


# ---------------------------------------------------------------------------- binned and test-based
# These read the distribution of probabilities: distinct p (sorted) with the weight of its
# negatives n0 and positives n1, so they are exact from a merged summary as from rows.

ECE_STRATEGIES = ("uniform", "quantile")


def _weighted_percentiles(xs: np.ndarray, weight: np.ndarray, q: np.ndarray) -> np.ndarray:
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


def bin_sums_of_distribution(xs: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int = ECE_BINS,
                             strategy: str = "uniform") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weight, weighted sum of p, weight of positives) in each of the `bins` bins of p.

    uniform: bin k = min(floor(bins p), bins - 1), as `prob_ece` and `ece_sums` assign a
    row; quantile: edges at the 0, 100/bins, ..., 100 percentiles of p, a p assigned as
    scikit-learn's `calibration_curve(strategy="quantile")` does (`searchsorted` on the
    inner edges). `xs` ascending (a distribution): each bin is one slice (`bin_slices`).
    """
    if strategy not in ECE_STRATEGIES:
        raise ValueError(f"ECE strategy {strategy!r}: expected one of {', '.join(ECE_STRATEGIES)}")
    if strategy == "quantile":
        inner = _weighted_percentiles(xs, as_weights(n0) + as_weights(n1), np.linspace(0, 100, bins + 1))[1:-1]

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


def calibration_bins(xs: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int = ECE_BINS,
                     strategy: str = "uniform") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weight, mean p, positive rate) of each non-empty bin of p (`bin_sums_of_distribution`)."""
    weight, psum, pos = bin_sums_of_distribution(xs, n0, n1, bins, strategy)
    keep = weight > 0
    return weight[keep], psum[keep] / weight[keep], pos[keep] / weight[keep]


def ece_from_distribution(xs, n0, n1, bins: int = ECE_BINS, strategy: str = "uniform") -> float:
    """Expected calibration error: sum over bins of (weight_b / total) |mean p_b - rate_b|."""
    weight, mean_p, rate = calibration_bins(xs, n0, n1, bins, strategy)
    return float(np.sum(weight * np.abs(mean_p - rate)) / np.sum(weight))


def mce_from_distribution(xs, n0, n1, bins: int = ECE_BINS, strategy: str = "uniform") -> float:
    """Maximum calibration error: the largest |mean p_b - rate_b| over non-empty bins."""
    _, mean_p, rate = calibration_bins(xs, n0, n1, bins, strategy)
    return float(np.max(np.abs(mean_p - rate)))


def spiegelhalter(xs, n0, n1) -> tuple[float, float]:
    """Spiegelhalter's (1986) z test of calibration and its two-sided p-value.

    z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)); under perfect calibration z is
    approximately standard normal. NaN when every p is 0, 1/2 or 1 (no information).
    """
    from math import erfc, sqrt

    num = var = 0.0
    for lo in range(0, xs.size, _CALBIN_CHUNK):  # chunk-sized temporaries on 1e7+ distinct p
        x, y1 = xs[lo:lo + _CALBIN_CHUNK], as_weights(n1[lo:lo + _CALBIN_CHUNK])
        count = as_weights(n0[lo:lo + _CALBIN_CHUNK]) + y1
        num += float(np.sum((y1 - count * x) * (1 - 2 * x)))
        var += float(np.sum(count * (1 - 2 * x) ** 2 * x * (1 - x)))
    if var <= 0:
        return float("nan"), float("nan")
    z = num / sqrt(var)
    return z, erfc(abs(z) / sqrt(2))


_WARM = 1 << 19  # distinct p in the warm-start subsample of the slope/intercept fit


def _logistic_pass(p: np.ndarray, n0: np.ndarray | None, n1: np.ndarray, a: float, b: float,
                   eps: float = LOG_LOSS_EPS) -> tuple[float, np.ndarray, np.ndarray]:
    """Log-likelihood of logit P(y=1) = a + b x, x = logit(p) (p clipped to [eps, 1 - eps]),
    over weighted distinct p, its gradient and Hessian in (a, b); in cache-sized chunks, the
    logit computed in each (one log; no n-long array of them). With t = exp(-|eta|), the softplus is
    max(eta, 0) + log(1 + t) and the sigmoid 1/(1 + t) or t/(1 + t): one exp and one log an
    entry (np.logaddexp costs ten times as much). `n0` None means one row per entry
    (n0 = 1 - n1), which saves the weight products."""
    ll, g, h = 0.0, np.zeros(2), np.zeros((2, 2))
    for lo in range(0, p.size, _CALBIN_CHUNK):
        xs = np.clip(p[lo:lo + _CALBIN_CHUNK], eps, 1 - eps)
        xs /= 1 - xs
        np.log(xs, out=xs)
        y1 = as_weights(n1[lo:lo + _CALBIN_CHUNK])
        eta = xs * b
        eta += a
        t = np.abs(eta)
        np.negative(t, out=t)
        np.exp(t, out=t)
        one_t = 1.0 + t
        soft = np.maximum(eta, 0.0)
        soft += np.log(one_t)
        m = np.where(eta >= 0, 1.0, t)
        m /= one_t
        w = 1.0 - m
        w *= m
        if n0 is None:
            ll += float(y1 @ eta - soft.sum())
            r = y1 - m
        else:
            c = y1 + as_weights(n0[lo:lo + _CALBIN_CHUNK])
            ll += float(y1 @ eta - c @ soft)
            r = y1 - c * m
            w *= c
        wx = w @ xs
        g += (r.sum(), r @ xs)
        h += ((w.sum(), wx), (wx, w @ (xs * xs)))
    return ll, g, h


def _newton(x: np.ndarray, n0: np.ndarray | None, n1: np.ndarray, a: float, b: float, iterations: int,
            eps: float = LOG_LOSS_EPS) -> tuple[float, float]:
    """Damped Newton from (a, b); one pass per iteration (a trial point's pass also gives the
    next step). A step is kept when the likelihood does not fall beyond its rounding noise;
    NaN when there is no finite optimum. Once full Newton steps shrink quadratically, the
    error after a step d is about d^3 / d_previous^2: a step under 1e-4 (relative) that is a
    tenth of the one before leaves under ~1e-8, and is taken without another pass."""
    current, g, h = _logistic_pass(x, n0, n1, a, b, eps)
    previous = None  # size of the last full (undamped) step
    for _ in range(iterations):
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            return float("nan"), float("nan")
        size = float(np.max(np.abs(step)))
        scale = 1 + abs(a) + abs(b)
        if previous is not None and size < 1e-4 * scale and size < 0.1 * previous:
            return a + step[0], b + step[1]
        noise = 1e-13 * (abs(current) + 1.0)
        t = 1.0
        while True:
            trial = _logistic_pass(x, n0, n1, a + t * step[0], b + t * step[1], eps)
            if trial[0] >= current - noise or t <= 1e-10:
                break
            t /= 2
        a, b = a + t * step[0], b + t * step[1]
        current, g, h = trial
        if not (np.isfinite(a) and np.isfinite(b)) or abs(b) > 1e6:
            return float("nan"), float("nan")
        if t * size < 1e-12 * scale:
            break
        previous = size if t == 1.0 else None
    return a, b


def calibration_slope_intercept(xs, n0, n1, eps: float = LOG_LOSS_EPS, iterations: int = 200
                                ) -> tuple[float, float]:
    """(slope, intercept) of the logistic recalibration logit P(y=1) = a + b logit(p), by
    maximum likelihood (Cox 1958): slope 1 and intercept 0 for a calibrated model. Damped
    Newton on the 2x2 problem over distinct p, warm-started on an evenly spaced subsample of
    them when they are many (then the full data takes about two passes); NaN when it has
    no finite optimum (one class, one distinct p, or perfectly separated)."""
    if np.sum(n0) <= 0 or np.sum(n1) <= 0 or xs.size < 2:
        return float("nan"), float("nan")
    x = np.asarray(xs, dtype=np.float64)
    if min(max(float(x.min()), eps), 1 - eps) == min(max(float(x.max()), eps), 1 - eps):
        return float("nan"), float("nan")  # one clipped p: no slope
    unit = all(bool(np.all(as_weights(n0[lo:lo + _CALBIN_CHUNK]) + as_weights(n1[lo:lo + _CALBIN_CHUNK]) == 1))
               for lo in range(0, x.size, _CALBIN_CHUNK))
    n0 = None if unit else n0  # None: one row per distinct p
    a, b = 0.0, 1.0
    if x.size > 4 * _WARM:
        every = x.size // _WARM
        wa, wb = _newton(x[::every], None if n0 is None else n0[::every], n1[::every], a, b, iterations, eps)
        if np.isfinite(wa) and np.isfinite(wb):
            a, b = wa, wb
    a, b = _newton(x, n0, n1, a, b, iterations, eps)
    return float(b), float(a)


def distribution_metrics(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, ece_bins: int = ECE_BINS,
                         ece_strategy: str = "uniform") -> dict[str, float]:
    """MCE, calibration slope/intercept and the Spiegelhalter test from the p distribution; ECE
    too when its bins are not the default 10 equal-width ones (which the callers sum exactly)."""
    nan = float("nan")
    if v.size == 0:
        return {"mce": nan, "cal_slope": nan, "cal_intercept": nan, "spiegelhalter_z": nan, "spiegelhalter_p": nan}
    slope, intercept = calibration_slope_intercept(v, n0, n1)
    z, pval = spiegelhalter(v, n0, n1)
    out = {"mce": mce_from_distribution(v, n0, n1, ece_bins, ece_strategy), "cal_slope": slope,
           "cal_intercept": intercept, "spiegelhalter_z": z, "spiegelhalter_p": pval}
    if ece_bins != ECE_BINS or ece_strategy != "uniform":
        out["ece"] = ece_from_distribution(v, n0, n1, ece_bins, ece_strategy)
    return out
