"""Calibration error estimates and tests that read a distribution of p (ascending distinct p
with the weight n0 of negatives and n1 of positives at each); a row of weight w counts as w
rows.

- `ece_debiased`: Kumar, Liang & Ma (NeurIPS 2019), the debiased estimate of the squared
  L2 calibration error over B equal-mass bins, reported as its square root: per bin with
  n_b >= 2 rows, (mean p - mean y)^2 - ybar(1 - ybar)/(n_b - 1), weighted by n_b/N, the
  sum clipped at 0. Bins as `calibration.get_equal_bins`: the sorted rows split as
  `np.array_split` does (the first N mod B parts one row longer), an edge halfway between
  the last p of a part and the first of the next, a row in the first bin whose edge is
  >= p (so tied p never straddle two bins).
- `hosmer_lemeshow`: Hosmer & Lemeshow (1980): g groups of equal mass (a distinct p in the
  group where its first row falls, so ties stay together), C = sum_g (O_g - E_g)^2 /
  (E_g (1 - E_g/n_g)) over non-empty groups with 0 < E_g < n_g, p-value from chi^2 with
  (groups - 2) degrees of freedom.
- `cumulative_tests`: Arrieta-Ibarra, Gujral, Tannenbaum & Tygert (JMLR 2022): the
  cumulative differences C_k = sum_{i<=k} (y_i - p_i)/N in ascending p, scaled by
  sigma = sqrt(sum p(1 - p))/N; Kolmogorov-Smirnov = max |C|/sigma, Kuiper = (max C -
  min C)/sigma over k = 1..N (as MAPIE), with the p-values of the maximum absolute value and of
  the range of standard Brownian motion on [0, 1] (series truncated at machine precision,
  as Tygert 2022). Tied p are one step: C is read at the end of each tie group, so the
  result does not depend on the order of tied rows (MAPIE instead breaks ties with a
  random relative jitter of 1e-8).
"""

from __future__ import annotations

import math

import numpy as np

from calibcli.numeric import pooling
from calibcli.evaluation.metrics.prefix import Prefix
from calibcli.numeric.pooling import as_weights

HL_GROUPS = 10
_EPS = float(np.finfo(np.float64).eps)


def _prefix(p, n0, n1, prefix: Prefix | None) -> Prefix:
    return prefix if prefix is not None else Prefix(p, n0, n1)


def _whole(n0, n1) -> bool:
    """Whether every count is a whole number (always for integer arrays: unweighted states)."""
    if np.issubdtype(np.asarray(n0).dtype, np.integer) and np.issubdtype(np.asarray(n1).dtype, np.integer):
        return True
    return all(bool(np.all(np.mod(as_weights(a[lo:lo + pooling.CHUNK]), 1.0) == 0))
               for a in (n0, n1) for lo in range(0, len(a), pooling.CHUNK))


def equal_mass_edges(pre: Prefix, bins: int, whole: bool = True) -> np.ndarray:
    """The bin edges of `calibration.get_equal_bins` for the rows of a distribution (`whole`
    counts; otherwise the total weight is split into equal parts)."""
    total = pre.total["m"]
    v = pre.v
    if whole:
        n = int(round(total))
        bins = min(bins, n)
        q, rem = divmod(n, bins)
        starts = np.arange(1, bins) * q + np.minimum(np.arange(1, bins), rem)
    else:
        starts = np.arange(1, bins) * (total / bins)
    last = v[np.minimum(pre.rank(starts, "left"), v.size - 1)]
    first = v[np.minimum(pre.rank(starts, "right"), v.size - 1)]
    return np.unique(np.concatenate([(last + first) / 2.0, [1.0]]))


def ece_debiased(p, n0, n1, bins: int, prefix: Prefix | None = None) -> float:
    """sqrt of Kumar et al.'s debiased squared L2 calibration error over equal-mass bins."""
    squared = debiased_squared_error(p, n0, n1, bins, prefix)
    return math.sqrt(max(squared, 0.0)) if squared == squared else squared


def debiased_squared_error(p, n0, n1, bins: int, prefix: Prefix | None = None) -> float:
    """Kumar et al.'s debiased estimate of the squared L2 calibration error, not clipped at 0
    (unbiased per bin: its mean over data sets of a calibrated forecast is near 0)."""
    pre = _prefix(p, n0, n1, prefix)
    if pre.v.size == 0 or not pre.total["m"] > 0:
        return float("nan")
    edges = equal_mass_edges(pre, bins, _whole(n0, n1))
    sums = pre.between(np.concatenate([[0], np.searchsorted(pre.v, edges, side="right")]))
    nb, sp, sy = sums["m"], sums["mp"], sums["y"]
    ok = nb >= 2
    nb, sp, sy = nb[ok], sp[ok], sy[ok]
    ybar = sy / nb
    err = (sp / nb - ybar) ** 2 - ybar * (1 - ybar) / (nb - 1)
    return float(np.dot(nb / pre.total["m"], err))


def hosmer_lemeshow(p, n0, n1, groups: int = HL_GROUPS, prefix: Prefix | None = None) -> tuple[float, float]:
    """(C statistic, p-value) of the Hosmer-Lemeshow test over `groups` equal-mass groups."""
    pre = _prefix(p, n0, n1, prefix)
    total = pre.total["m"]
    if pre.v.size == 0 or not total > 0:
        return float("nan"), float("nan")
    # an entry is in group g = floor(weight before it * groups / total): group k starts at the
    # first entry whose weight before reaches k total / groups
    cuts = np.minimum(pre.rank(np.arange(1, groups) * (total / groups), "left") + 1, pre.v.size)
    sums = pre.between(np.concatenate([[0], cuts, [pre.v.size]]))
    n, obs, exp = sums["m"], sums["y"], sums["mp"]
    ok = (n > 0) & (exp > 0) & (exp < n)
    df = int(np.count_nonzero(n > 0)) - 2
    if df < 1:
        return float("nan"), float("nan")
    stat = float(np.sum((obs[ok] - exp[ok]) ** 2 / (exp[ok] * (1 - exp[ok] / n[ok]))))
    return stat, chi2_sf(stat, df)


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X ~ chi^2 with `df` degrees of freedom: the regularised upper gamma
    function at a = df/2, as its finite sum (a whole or half-integer), in logs."""
    if not x > 0:
        return 1.0
    h = x / 2
    if df % 2 == 0:
        k = np.arange(df // 2, dtype=np.float64)
        log_gamma = np.concatenate([[0.0], np.cumsum(np.log(k[1:]))])  # log k!
        return min(1.0, float(np.sum(np.exp(k * math.log(h) - log_gamma - h))))
    k = np.arange(1, (df + 1) // 2, dtype=np.float64)
    log_gamma = math.lgamma(0.5) + np.cumsum(np.log(k - 0.5))  # log Gamma(k + 1/2)
    return min(1.0, math.erfc(math.sqrt(h)) + float(np.sum(np.exp((k - 0.5) * math.log(h) - log_gamma - h))))


def ks_cdf(x: float) -> float:
    """P(max |B| <= x) for standard Brownian motion B on [0, 1] (Darling & Siegert 1953)."""
    if not x > 0:
        return 0.0
    kmax = math.ceil(0.5 + x * math.sqrt(2) / math.pi * math.sqrt(math.log(4 / (math.pi * _EPS))))
    k = np.arange(kmax) + 0.5
    signs = np.where(np.arange(kmax) % 2 == 0, 1.0, -1.0)
    return float(2 / math.pi * np.sum(signs / k * np.exp(-k ** 2 * math.pi ** 2 / (2 * x ** 2))))


def kuiper_cdf(x: float) -> float:
    """P(max B - min B <= x) for standard Brownian motion B on [0, 1] (Feller 1951)."""
    if not x > 0:
        return 0.0
    kmax = math.ceil(0.5 + x / (math.pi * math.sqrt(2)) * math.sqrt(
        math.log(4 / (math.sqrt(2 * math.pi) * _EPS) * (1 / x + x / math.pi ** 2))))
    k = np.arange(kmax) + 0.5
    return float(np.sum((8 / x ** 2 + 2 / k ** 2 / math.pi ** 2) * np.exp(-2 * k ** 2 * math.pi ** 2 / x ** 2)))


def cumulative_tests(p, n0, n1, prefix: Prefix | None = None) -> dict[str, float]:
    """`ks`, `kuiper` and their p-values `ks_p`, `kuiper_p` (NaN without variance)."""
    pre = _prefix(p, n0, n1, prefix)
    nan = float("nan")
    total, var = pre.total["m"], pre.total["mp"] - pre.total["mpp"]
    hi, lo = pre.high, pre.low
    if total <= 0 or not var > 0:
        return {"ks": nan, "kuiper": nan, "ks_p": nan, "kuiper_p": nan}
    sigma = math.sqrt(var)  # the running sums are not divided by the total: the ratio is the same
    ks = max(hi, -lo) / sigma
    kuiper = (hi - lo) / sigma
    return {"ks": ks, "kuiper": kuiper, "ks_p": _unit(1 - ks_cdf(ks)), "kuiper_p": _unit(1 - kuiper_cdf(kuiper))}


def _unit(value: float) -> float:
    """A p-value kept in [0, 1] (the truncated series may pass 1 by a few ulps)."""
    return min(max(value, 0.0), 1.0)


__all__ = ["HL_GROUPS", "chi2_sf", "cumulative_tests", "debiased_squared_error", "ece_debiased", "equal_mass_edges", "hosmer_lemeshow",
           "kuiper_cdf", "ks_cdf"]
