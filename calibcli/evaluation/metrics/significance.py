"""Tests of observed against predicted positives, and the adjustments for testing many at once:
what the verdict (`evaluation.verdict`) and `--by-field` read. Pure numpy (no scipy at run
time: `calib evaluate` never pays for importing it); tests/evaluation/test_significance.py
checks every function against scipy and brute force.

- `binomial_p`: the two-sided exact binomial test of k positives in n rows at rate p,
  p-value min(1, 2 min(P(X <= k), P(X >= k))) for X ~ Binomial(n, p) (the doubled smaller
  tail; the tails are scipy's `binomtest(..., alternative="less"/"greater")`). The tails are
  regularised incomplete beta functions, P(X <= k) = I_{1-p}(n - k, k + 1) and P(X >= k) =
  I_p(k, n - k + 1), which also give non-whole k and n: with row weights (frequency
  weights, as everywhere in `calib evaluate`) n is the weight of the rows and k the weight
  of the positives. For rows whose p differ (a field, a bin), p is their mean: the count of
  positives of a calibrated forecast is then Poisson-binomial, whose tails are lighter than
  the binomial's of the same mean (Hoeffding 1956), so the test is conservative.
- `mean_test`: calibration in the large, z = sum w (y - p) / sqrt(sum w p (1 - p)), the
  exact variance of the sum under calibration; two-sided normal p-value.
- `spread_test`: the score test of slope 1 in the logistic recalibration logit P(y = 1) =
  a + b logit(p) (Cox 1958) with the intercept a free: z = sum w (y - p)(l - lbar) /
  sqrt(sum w p (1 - p)(l - lbar)^2), l = logit(p) (p clipped to [1e-15, 1 - 1e-15]), lbar its
  mean weighted by p (1 - p). z < 0 is a slope below 1 (over-confident: p too far from the
  middle), z > 0 above 1 (under-confident). Orthogonal to `mean_test` under calibration.
- `bin_tests`: per bin of p (the bins of ECE), rows, mean p, positive rate, its 95% Wilson
  band and `binomial_p`.
- `holm` (family-wise error) and `benjamini_hochberg` (false discovery rate) adjusted p-values.
"""

from __future__ import annotations

import math

import numpy as np

from calibcli.evaluation.metrics import kernels
from calibcli.numeric.pooling import as_weights

CLIP = 1e-15  # as the log-loss and the calibration slope clip p
_TINY = 1e-300
_EPS = 1e-15


def _lbeta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lgamma = np.frompyfunc(math.lgamma, 1, 1)
    return (lgamma(a) + lgamma(b) - lgamma(a + b)).astype(np.float64)


def _beta_fraction(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The continued fraction of I_x(a, b) (modified Lentz), for x < (a + 1) / (a + b + 2).
    Every entry steps until the last converges (a converged entry's steps are 1 to rounding)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0

    def guard(v: np.ndarray) -> np.ndarray:
        return np.where(np.abs(v) < _TINY, _TINY, v)

    c = np.ones_like(x)
    d = 1.0 / guard(1.0 - qab * x / qap)
    h = d.copy()
    limit = 100 + int(8 * math.sqrt(float(np.max(np.maximum(a, b), initial=1.0))))
    for m in range(1, limit + 1):
        m2 = 2.0 * m
        num = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / guard(1.0 + num * d)
        c = guard(1.0 + num / c)
        h *= d * c
        num = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / guard(1.0 + num * d)
        c = guard(1.0 + num / c)
        step = d * c
        h *= step
        if not np.any(np.abs(step - 1.0) > _EPS):
            break
    return h


def betainc(a, b, x) -> np.ndarray:
    """The regularised incomplete beta function I_x(a, b) for a, b > 0 and x in [0, 1]."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, x)))
    a, b, x = a.ravel().copy(), b.ravel().copy(), x.ravel().copy()
    out = np.where(x >= 1.0, 1.0, 0.0)
    inner = (x > 0) & (x < 1)
    if inner.any():
        xi, ai, bi = x[inner], a[inner], b[inner]
        flip = xi >= (ai + 1.0) / (ai + bi + 2.0)  # the fraction converges fast on the other side
        xs, as_, bs = np.where(flip, 1.0 - xi, xi), np.where(flip, bi, ai), np.where(flip, ai, bi)
        with np.errstate(divide="ignore", under="ignore", over="ignore"):
            log_front = as_ * np.log(xs) + bs * np.log1p(-xs) - _lbeta(as_, bs) - np.log(as_)
            value = np.exp(log_front) * _beta_fraction(xs, as_, bs)
        out[inner] = np.clip(np.where(flip, 1.0 - value, value), 0.0, 1.0)
    return out


def binomial_tails(k, n, p) -> tuple[np.ndarray, np.ndarray]:
    """(P(X <= k), P(X >= k)) for X ~ Binomial(n, p), element-wise; non-whole k and n through
    the incomplete beta function (module docstring)."""
    k, n, p = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (k, n, p)))
    k, n, p = k.ravel(), n.ravel(), np.clip(p.ravel(), 0.0, 1.0)
    lower, upper = np.ones(k.size), np.ones(k.size)
    below, above = np.flatnonzero(k < n), np.flatnonzero(k > 0)
    # P(X <= k) = I_{1-p}(n - k, k + 1) and P(X >= k) = I_p(k, n - k + 1), in one call
    both = betainc(np.concatenate([n[below] - k[below], k[above]]),
                   np.concatenate([k[below] + 1.0, n[above] - k[above] + 1.0]),
                   np.concatenate([1.0 - p[below], p[above]]))
    lower[below], upper[above] = both[:below.size], both[below.size:]
    return lower, upper


def binomial_p(k, n, p) -> np.ndarray:
    """The two-sided exact binomial p-value: the smaller tail doubled, at most 1 (NaN where n <= 0)."""
    lower, upper = binomial_tails(k, n, p)
    out = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
    return np.where(np.asarray(n, dtype=np.float64).ravel() > 0, out, np.nan)


def normal_p(z: float) -> float:
    """Two-sided p-value of a standard normal z (NaN stays NaN)."""
    return math.erfc(abs(z) / math.sqrt(2.0)) if z == z else float("nan")


def _adjusted(p_values, adjust) -> np.ndarray:
    """`adjust(sorted p, m)` applied to the tested (non-NaN) p-values in ascending order; NaN stays NaN."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    if tested.size:
        order = tested[np.argsort(p[tested], kind="stable")]
        out[order] = adjust(p[order], tested.size)
    return out


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error); NaN entries are not tested and stay NaN."""
    return _adjusted(p_values, lambda q, m: np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * q)))


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate); NaN entries stay NaN."""
    return _adjusted(p_values,
                     lambda q, m: np.minimum.accumulate(np.minimum(1.0, m * q / np.arange(1, m + 1))[::-1])[::-1])


def _sums(v: np.ndarray, n0, n1) -> tuple[np.ndarray, np.ndarray]:
    """(weight, weight of positives) at each distinct p."""
    w1 = as_weights(n1)
    return as_weights(n0) + w1, w1


def mean_test(v: np.ndarray, n0, n1) -> dict[str, float]:
    """Calibration in the large: {z, p_value, predicted, observed, weight, variance} (module docstring).
    Rows at p = 0 or 1 whose label contradicts it make z infinite (p-value 0)."""
    w, w1 = _sums(v, n0, n1)
    total = float(w.sum())
    if not total > 0:
        return {"z": math.nan, "p_value": math.nan, "predicted": math.nan, "observed": math.nan,
                "weight": total, "variance": 0.0}
    diff = float(w1.sum() - w @ v)
    var = float(w @ (v * (1.0 - v)))
    z = diff / math.sqrt(var) if var > 0 else (math.copysign(math.inf, diff) if abs(diff) > 1e-9 * total else math.nan)
    return {"z": z, "p_value": normal_p(z), "predicted": float(w @ v) / total, "observed": float(w1.sum()) / total,
            "weight": total, "variance": var}


def spread_test(v: np.ndarray, n0, n1) -> dict[str, float]:
    """The score test of calibration slope 1, intercept free: {z, p_value, se} (module docstring);
    `se` is the slope's standard error under calibration, 1 / sqrt(information). NaN without
    spread in logit(p) (a single p, or every p at 0, 1/2 or 1)."""
    w, w1 = _sums(v, n0, n1)
    q = np.clip(v, CLIP, 1.0 - CLIP)
    logit = np.log(q) - np.log1p(-q)
    info = w * v * (1.0 - v)
    total = float(info.sum())
    if not total > 0:
        return {"z": math.nan, "p_value": math.nan, "se": math.nan}
    centred = logit - float(info @ logit) / total
    var = float(info @ (centred * centred))
    if not var > total * 1e-24:
        return {"z": math.nan, "p_value": math.nan, "se": math.nan}
    score = float((w1 - w * v) @ centred)
    z = score / math.sqrt(var)
    return {"z": z, "p_value": normal_p(z), "se": 1.0 / math.sqrt(var)}


def bin_index(v: np.ndarray, weight: np.ndarray, bins: int, strategy: str) -> np.ndarray:
    """The ECE bin of each distinct p (`kernels.bin_sums_of_distribution`'s assignment)."""
    if strategy == "quantile":
        inner = kernels.weighted_percentiles(v, weight, np.linspace(0, 100, bins + 1))[1:-1]
        return np.searchsorted(inner, v)
    return np.minimum((v * bins).astype(np.int64), bins - 1)


def bin_tests(v: np.ndarray, n0, n1, bins: int, strategy: str = "uniform") -> list[dict[str, float]]:
    """Per non-empty bin of ECE: {p_min, p_max, rows, predicted, observed, observed_low,
    observed_high, gap, p_value}; `gap` is predicted minus observed (positive: p too high)."""
    w, w1 = _sums(v, n0, n1)
    if v.size == 0:
        return []
    index = bin_index(v, w, bins, strategy)
    weight = np.bincount(index, weights=w, minlength=bins)
    psum = np.bincount(index, weights=w * v, minlength=bins)
    pos = np.bincount(index, weights=w1, minlength=bins)
    seen = w > 0
    present = np.flatnonzero(weight > 0)
    at, vs = index[seen], v[seen]
    first, last = np.searchsorted(at, present, "left"), np.searchsorted(at, present, "right") - 1
    mean_p = psum[present] / weight[present]
    p_values = binomial_p(pos[present], weight[present], mean_p)
    out = []
    for j, b in enumerate(present):
        rate = float(pos[b] / weight[b])
        low, high = wilson_interval(rate, float(weight[b]))
        out.append({"p_min": float(vs[first[j]]), "p_max": float(vs[last[j]]), "rows": _whole(weight[b]),
                    "predicted": float(mean_p[j]), "observed": rate, "observed_low": low, "observed_high": high,
                    "gap": float(mean_p[j]) - rate, "p_value": float(p_values[j])})
    return out


def wilson_interval(rate: float, n: float, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion: the band around a bin's positive
    rate (exact coverage is close to 95% even for small bins and rates near 0 or 1)."""
    # multiplied through by n, so a tiny weight total (n * n below the smallest float) stays finite
    centre = (rate * n + z * z / 2) / (n + z * z)
    half = z * math.sqrt(max(0.0, rate * (1 - rate) * n) + z * z / 4) / (n + z * z)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def _whole(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


__all__ = ["benjamini_hochberg", "betainc", "bin_index", "bin_tests", "binomial_p", "binomial_tails", "holm",
           "mean_test", "normal_p", "spread_test", "wilson_interval"]
