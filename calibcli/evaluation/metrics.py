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
