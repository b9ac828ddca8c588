"""Evaluation metrics for binary probabilities: pure functions of labels y (0/1) and p in [0, 1].

Definitions (all unweighted means over the N rows):

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
_CALBIN_CHUNK = 1 << 20

# Display name and direction ("lower" or "higher" is better) of every metric, in table order.
METRICS: dict[str, tuple[str, str]] = {
    "log_loss": ("log-loss", "lower"),
    "brier": ("Brier", "lower"),
    "auc": ("AUC", "higher"),
    "ece": ("ECE", "lower"),
    "calbin": ("CalBin", "lower"),
    "field_ece": ("Field-ECE", "lower"),
    "field_rce": ("Field-RCE", "lower"),
}


def log_loss(y: np.ndarray, p: np.ndarray, eps: float = LOG_LOSS_EPS) -> float:
    """Mean negative log-likelihood with p clipped to [eps, 1-eps]."""
    q = np.clip(p, eps, 1 - eps)
    return float(-np.mean(np.where(y == 1, np.log(q), np.log1p(-q))))


def brier(y: np.ndarray, p: np.ndarray) -> float:
    """Mean squared difference between probability and label."""
    return float(np.mean((p - y) ** 2))


def tie_groups(sorted_p: np.ndarray) -> np.ndarray:
    """Group index of each position in a sorted array (equal values share a group)."""
    return np.concatenate([[0], np.cumsum(sorted_p[1:] != sorted_p[:-1])])


def auc_from_ties(pos: np.ndarray, neg: np.ndarray) -> float:
    """AUC from positive and negative counts per tie group of p, groups in ascending p.

    Each positive beats the negatives of lower groups and ties half of its own group's.
    """
    n1, n0 = float(pos.sum()), float(neg.sum())
    if n1 <= 0 or n0 <= 0:
        return float("nan")
    return float(pos @ (np.cumsum(neg) - 0.5 * neg)) / (n1 * n0)


def _sorted_ties(y: np.ndarray, p: np.ndarray, order: np.ndarray | None):
    """Sorted p, tie group of each sorted row, positives and rows per tie group."""
    if order is None:
        order = np.argsort(p)  # any tie order: everything below is per tie group
    ps = p[order]
    group = tie_groups(ps)
    pos = np.bincount(group, weights=y[order])
    count = np.bincount(group).astype(np.float64)
    return ps, group, pos, count


def auc(y: np.ndarray, p: np.ndarray, order: np.ndarray | None = None) -> float:
    """Area under the ROC curve with ties counted half; NaN for a single class.

    `order` is an argsort of p when the caller already has one (any tie order works).
    """
    _, _, pos, count = _sorted_ties(y, p, order)
    return auc_from_ties(pos, count - pos)


def prob_ece(y: np.ndarray, p: np.ndarray, bins: int = ECE_BINS) -> float:
    """Expected calibration error over equal-width probability bins."""
    k = np.minimum((p * bins).astype(np.int64), bins - 1)
    gap = np.abs(np.bincount(k, weights=p, minlength=bins) - np.bincount(k, weights=y, minlength=bins))
    return float(np.sum(gap) / y.size)


def calbin(y: np.ndarray, p: np.ndarray, window: int = CALBIN_WINDOW,
           order: np.ndarray | None = None) -> float:
    """Calibration by overlapping bins (Zitnik et al. 2012), normalised as the module says.

    `order` is an argsort of p when the caller already has one: tied p share their mean
    label, so the order inside a tie does not matter and the sort need not be stable.
    """
    ps, group, pos, count = _sorted_ties(y, p, order)
    return calbin_sorted(ps, (pos / count)[group], window)


def calbin_sorted(ps: np.ndarray, ys: np.ndarray, window: int = CALBIN_WINDOW) -> float:
    """CalBin of ascending `ps` whose labels `ys` are already pooled within ties.

    Vectorised with prefix sums: within a window the sorted p_i below ybar_b contribute
    ybar_b - p_i and the rest p_i - ybar_b, and the split point comes from one searchsorted.
    """
    n = ps.size
    s = min(window, n)
    n_windows = max(n - s, 1)
    cy = np.concatenate([[0.0], np.cumsum(ys)])
    cp = np.concatenate([[0.0], np.cumsum(ps)])
    total = 0.0
    for lo in range(0, n_windows, _CALBIN_CHUNK):  # chunks of windows bound the temporaries
        starts = np.arange(lo, min(lo + _CALBIN_CHUNK, n_windows))
        ybar = (cy[starts + s] - cy[starts]) / s
        split = np.clip(np.searchsorted(ps, ybar, side="left"), starts, starts + s)
        below = split - starts
        dev = (ybar * below - (cp[split] - cp[starts])) + ((cp[starts + s] - cp[split]) - ybar * (s - below))
        total += float(np.sum(dev))
    return total / s / n_windows


def _field_sums(y: np.ndarray, p: np.ndarray, groups: np.ndarray):
    count = np.bincount(groups)
    resid = np.bincount(groups, weights=y - p, minlength=count.size)
    pos = np.bincount(groups, weights=y, minlength=count.size)
    return count, resid, pos


def field_ece(y: np.ndarray, p: np.ndarray, groups: np.ndarray) -> float:
    """Field-level ECE (Pan et al. 2020, eq. 5); `groups` are integer codes of the field."""
    _, resid, _ = _field_sums(y, p, groups)
    return float(np.sum(np.abs(resid)) / y.size)


def field_rce(y: np.ndarray, p: np.ndarray, groups: np.ndarray, eps: float = FIELD_RCE_EPS) -> float:
    """Field-level relative calibration error (Pan et al. 2020, eq. 6)."""
    count, resid, pos = _field_sums(y, p, groups)
    keep = count > 0
    return float(np.sum(count[keep] * np.abs(resid[keep]) / (pos[keep] + eps * count[keep])) / y.size)


def compute_all(
    y: np.ndarray,
    p: np.ndarray,
    groups: np.ndarray | None = None,
    calbin_window: int = CALBIN_WINDOW,
) -> dict[str, float]:
    """Every metric for one probability column, in METRICS order; field metrics need groups."""
    ps, group, pos, count = _sorted_ties(y, p, None)  # the one sort, shared by AUC and CalBin
    out = {
        "log_loss": log_loss(y, p),
        "brier": brier(y, p),
        "auc": auc_from_ties(pos, count - pos),
        "ece": prob_ece(y, p),
        "calbin": calbin_sorted(ps, (pos / count)[group], calbin_window),
    }
    if groups is not None:
        out["field_ece"] = field_ece(y, p, groups)
        out["field_rce"] = field_rce(y, p, groups)
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


def distribution(y: np.ndarray, p: np.ndarray, sample_weight: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct p sorted, n0, n1): the weight of negatives and positives at each p."""
    w = np.ones_like(p) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    xs, inverse = np.unique(p, return_inverse=True)
    n1 = np.bincount(inverse, weights=w * y, minlength=xs.size)
    return xs, np.bincount(inverse, weights=w, minlength=xs.size) - n1, n1


def _weighted_percentiles(xs: np.ndarray, weight: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`np.percentile(np.repeat(xs, weight), q)` (linear interpolation) without repeating rows."""
    cum = np.cumsum(weight)
    pos = q / 100.0 * (cum[-1] - 1)  # fractional 0-based rank among the repeated rows
    lo = np.floor(pos)
    i = np.minimum(np.searchsorted(cum, lo, side="right"), xs.size - 1)
    j = np.minimum(np.searchsorted(cum, lo + 1, side="right"), xs.size - 1)
    return xs[i] + (pos - lo) * (xs[j] - xs[i])


def calibration_bins(xs: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int = ECE_BINS,
                     strategy: str = "uniform") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weight, mean p, positive rate) of each non-empty bin of p.

    uniform: bin k = min(floor(bins p), bins - 1), as `prob_ece`; quantile: edges at the
    0, 100/bins, ..., 100 percentiles of p, a p assigned as scikit-learn's
    `calibration_curve(strategy="quantile")` does (`searchsorted` on the inner edges).
    """
    if strategy not in ECE_STRATEGIES:
        raise ValueError(f"ECE strategy {strategy!r}: expected one of {', '.join(ECE_STRATEGIES)}")
    count = n0 + n1
    if strategy == "uniform":
        k = np.minimum((xs * bins).astype(np.int64), bins - 1)
    else:
        edges = _weighted_percentiles(xs, count, np.linspace(0, 100, bins + 1))
        k = np.searchsorted(edges[1:-1], xs)
    weight = np.bincount(k, weights=count, minlength=bins)
    psum = np.bincount(k, weights=count * xs, minlength=bins)
    pos = np.bincount(k, weights=n1, minlength=bins)
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

    count = n0 + n1
    num = float(np.sum((n1 - count * xs) * (1 - 2 * xs)))
    var = float(np.sum(count * (1 - 2 * xs) ** 2 * xs * (1 - xs)))
    if var <= 0:
        return float("nan"), float("nan")
    z = num / sqrt(var)
    return z, erfc(abs(z) / sqrt(2))


def calibration_slope_intercept(xs, n0, n1, eps: float = LOG_LOSS_EPS, iterations: int = 200
                                ) -> tuple[float, float]:
    """(slope, intercept) of the logistic recalibration logit P(y=1) = a + b logit(p), by
    maximum likelihood (Cox 1958): slope 1 and intercept 0 for a calibrated model. Damped
    Newton on the 2x2 problem over distinct p; NaN when it has no finite optimum (one class,
    one distinct p, or perfectly separated)."""
    count = n0 + n1
    q = np.clip(xs, eps, 1 - eps)
    x = np.log(q) - np.log1p(-q)
    if n0.sum() <= 0 or n1.sum() <= 0 or np.unique(x).size < 2:
        return float("nan"), float("nan")

    def loglik(a: float, b: float) -> float:
        eta = a + b * x
        return float(np.sum(n1 * eta - count * np.logaddexp(0.0, eta)))

    a, b = 0.0, 1.0
    current = loglik(a, b)
    for _ in range(iterations):
        eta = a + b * x
        m = np.exp(-np.logaddexp(0.0, -eta))
        r = n1 - count * m
        v = count * m * (1 - m)
        g = np.array([r.sum(), (r * x).sum()])
        h = np.array([[v.sum(), (v * x).sum()], [(v * x).sum(), (v * x * x).sum()]])
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            return float("nan"), float("nan")
        t = 1.0
        while t > 1e-10 and not loglik(a + t * step[0], b + t * step[1]) >= current:
            t /= 2
        a, b = a + t * step[0], b + t * step[1]
        current = loglik(a, b)
        if not (np.isfinite(a) and np.isfinite(b)) or abs(b) > 1e6:
            return float("nan"), float("nan")
        if np.max(np.abs(t * step)) < 1e-12 * (1 + abs(a) + abs(b)):
            break
    return float(b), float(a)
