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

The chunked passes these definitions run on live in `kernels.py`, the Newton fit of the
calibration slope and intercept in `calibcli/numeric/newton.py`.

References
----------
Zitnik, Bosnic, Kononenko (2012); Pan, Zhou, Wang, Ji, Zheng (2020), "Field-aware
Calibration: A Simple and Empirically Strong Method for Reliable Probabilistic Predictions".
"""

from __future__ import annotations

import numpy as np

from calibcli.numeric import newton
from calibcli.evaluation.metrics import kernels
from calibcli.evaluation.metrics.kernels import auc_from_ties, calbin_counts, calbin_sorted, field_sums, sorted_ties
from calibcli.calibrators.params import CALBIN_WINDOW, ECE_BINS  # the evaluate defaults

LOG_LOSS_EPS = 1e-15
FIELD_RCE_EPS = 0.01

# The metric table (names, directions, targets) is the door's: `calibcli.requests.metrics`.
from calibcli.requests.metrics import (ALL_METRICS, INTERVAL_KEYS, KCLASS_BASE, KCLASS_METRICS, METRICS,  # noqa: E402,F401
                                       TARGETS, TOP_LABEL, lower_is_better)


def _weight(sample_weight, n: int) -> np.ndarray | None:
    return None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).reshape(n)


def _mean(values: np.ndarray, w: np.ndarray | None) -> float:
    return float(np.mean(values)) if w is None else float(values @ w / w.sum())


def log_loss_terms(y: np.ndarray, p: np.ndarray, eps: float = LOG_LOSS_EPS) -> np.ndarray:
    """Each row's negative log-likelihood, p clipped to [eps, 1-eps]: -log(q) for a positive,
    -log(1 - q) for a negative (one log a row; 1 - q rounds by at most half an ulp of 1).

    The likelihood is selected as y q + (1 - y)(1 - q), which for labels 0 and 1 is q or
    1 - q exactly (the other product is +0): the same bits as `np.where(y == 1, q, 1 - q)`,
    without its data-dependent branch per row (docs/algorithms.md, "Evaluate at 1e7 rows")."""
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


def distribution(y: np.ndarray, p: np.ndarray, sample_weight=None, order: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct p ascending, weight of negatives, weight of positives) at each distinct p.

    AUC and CalBin depend on the rows only through this distribution (tied p are pooled).
    """
    ps, group, pos, count = sorted_ties(y, p, order, _weight(sample_weight, p.size))
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]])) if ps.size else group
    return ps[starts], count - pos, pos


def auc(y: np.ndarray, p: np.ndarray, order: np.ndarray | None = None, sample_weight=None) -> float:
    """Area under the ROC curve with ties counted half; NaN for a single class.

    `order` is an argsort of p when the caller already has one (any tie order works).
    """
    _, _, pos, count = sorted_ties(y, p, order, _weight(sample_weight, p.size))
    return auc_from_ties(pos, count - pos)


def prob_ece(y: np.ndarray, p: np.ndarray, bins: int = ECE_BINS, sample_weight=None) -> float:
    """Expected calibration error over equal-width probability bins (weighted with `sample_weight`)."""
    w = _weight(sample_weight, p.size)
    _, sp, sy = kernels.bin_sums(y, p, w, bins)
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
    ps, group, pos, count = sorted_ties(y, p, order)
    return calbin_sorted(ps, (pos / count)[group], window)


def field_ece_from_sums(count: np.ndarray, pos: np.ndarray, psum: np.ndarray) -> float:
    """Field-ECE from per-field sums (`field_sums`)."""
    return float(np.sum(np.abs(pos - psum)) / count.sum())


def field_rce_from_sums(count: np.ndarray, pos: np.ndarray, psum: np.ndarray, eps: float = FIELD_RCE_EPS) -> float:
    """Field-RCE from per-field sums (`field_sums`)."""
    keep = count > 0
    c, r = count[keep], pos[keep] - psum[keep]
    return float(np.sum(c * (np.abs(r) / (pos[keep] + eps * c))) / count.sum())  # the ratio first: no underflow


def field_ece(y: np.ndarray, p: np.ndarray, groups: np.ndarray, sample_weight=None) -> float:
    """Field-level ECE (Pan et al. 2020, eq. 5); `groups` are integer codes of the field."""
    return field_ece_from_sums(*field_sums(y, p, groups, _weight(sample_weight, p.size)))


def field_rce(y: np.ndarray, p: np.ndarray, groups: np.ndarray, eps: float = FIELD_RCE_EPS,
              sample_weight=None) -> float:
    """Field-level relative calibration error (Pan et al. 2020, eq. 6); a row of weight w counts w times."""
    return field_rce_from_sums(*field_sums(y, p, groups, _weight(sample_weight, p.size)), eps)


def log_loss_counts(p: np.ndarray, n0: np.ndarray, n1: np.ndarray, eps: float = LOG_LOSS_EPS) -> float:
    """log-loss of probabilities `p` for rows aggregated as n0 negatives and n1 positives each."""
    q = np.clip(p, eps, 1 - eps)
    return float(-(np.sum(n1 * np.log(q)) + np.sum(n0 * np.log1p(-q))) / (np.sum(n0) + np.sum(n1)))


def brier_counts(p: np.ndarray, n0: np.ndarray, n1: np.ndarray) -> float:
    """Brier score of `p` for rows aggregated as n0 negatives and n1 positives each."""
    return float((np.sum(n1 * (p - 1.0) ** 2) + np.sum(n0 * p ** 2)) / (np.sum(n0) + np.sum(n1)))


def binned_errors(weight: np.ndarray, psum: np.ndarray, ysum: np.ndarray) -> tuple[float, float]:
    """(ECE, MCE) from per-bin sums: the weight of each bin, its sum of p and of y."""
    keep = weight > 0
    if not keep.any():
        return float("nan"), float("nan")
    gap = np.abs(psum[keep] - ysum[keep])
    return float(gap.sum() / weight[keep].sum()), float(np.max(gap / weight[keep]))


def calibration_bins(xs: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int = ECE_BINS,
                     strategy: str = "uniform") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weight, mean p, positive rate) of each non-empty bin of p (`kernels.bin_sums_of_distribution`)."""
    weight, psum, pos = kernels.bin_sums_of_distribution(xs, n0, n1, bins, strategy)
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


def mce_bin_weight(weight: np.ndarray, gap: np.ndarray) -> float:
    """The rows (weight) of the bin where MCE is reached, given each non-empty bin's weight and
    |mean p - rate|: of bins with the same largest gap, the fullest. NaN without bins. A large
    MCE from a bin of a few rows is noise; this is what the report shows beside MCE."""
    if gap.size == 0 or not np.isfinite(gap).any():
        return float("nan")
    top = gap == np.nanmax(gap)
    return float(np.max(weight[top]))


def mce_count_of_distribution(xs, n0, n1, bins: int = ECE_BINS, strategy: str = "uniform") -> float:
    """`mce_bin_weight` of the bins `mce_from_distribution` reads."""
    weight, mean_p, rate = calibration_bins(xs, n0, n1, bins, strategy)
    return mce_bin_weight(weight, np.abs(mean_p - rate))


def spiegelhalter_from_sums(sums: np.ndarray) -> tuple[float, float]:
    """Spiegelhalter's z and its two-sided p-value from `kernels.spiegelhalter_sums` (NaN without
    information)."""
    return _z_test(float(sums[0] - sums[1]), float(sums[2]))


def _z_test(num: float, var: float) -> tuple[float, float]:
    """z = num / sqrt(var) and its two-sided normal p-value; NaN when var is not positive."""
    from math import erfc, sqrt

    if not var > 0:
        return float("nan"), float("nan")
    z = num / sqrt(var)
    return z, erfc(abs(z) / sqrt(2))


def spiegelhalter(xs, n0, n1) -> tuple[float, float]:
    """Spiegelhalter's (1986) z test of calibration and its two-sided p-value.

    z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)); under perfect calibration z is
    approximately standard normal. NaN when every p is 0, 1/2 or 1 (no information).
    """
    return _z_test(*kernels.spiegelhalter_of_distribution(xs, n0, n1))


def calibration_slope_intercept(xs, n0, n1, eps: float = LOG_LOSS_EPS, iterations: int = 200
                                ) -> tuple[float, float]:
    """(slope, intercept) of the logistic recalibration logit P(y=1) = a + b logit(p), by
    maximum likelihood (Cox 1958): slope 1 and intercept 0 for a calibrated model. Damped
    Newton on the 2x2 problem over distinct p (`newton.fit_logit_line`); NaN when it has no
    finite optimum (one class, one distinct p, or perfectly separated)."""
    if np.sum(n0) <= 0 or np.sum(n1) <= 0 or xs.size < 2:
        return float("nan"), float("nan")
    x = np.asarray(xs, dtype=np.float64)
    if min(max(float(x.min()), eps), 1 - eps) == min(max(float(x.max()), eps), 1 - eps):
        return float("nan"), float("nan")  # one clipped p: no slope
    n0, n1 = kernels.as_unit_counts(n0, n1)  # tiny weights: products of two of them in the Hessian would underflow
    a, b = newton.fit_logit_line(x, n0, n1, eps, iterations)
    return float(b), float(a)


def distribution_metrics(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, ece_bins: int = ECE_BINS,
                         ece_strategy: str = "uniform") -> dict[str, float]:
    """MCE, calibration slope/intercept and the Spiegelhalter test from the p distribution."""
    nan = float("nan")
    if v.size == 0:
        return {"mce": nan, "cal_slope": nan, "cal_intercept": nan, "spiegelhalter_z": nan, "spiegelhalter_p": nan}
    slope, intercept = calibration_slope_intercept(v, n0, n1)
    z, pval = spiegelhalter(v, n0, n1)
    out = {"mce": mce_from_distribution(v, n0, n1, ece_bins, ece_strategy), "cal_slope": slope,
           "cal_intercept": intercept, "spiegelhalter_z": z, "spiegelhalter_p": pval}
    return out
