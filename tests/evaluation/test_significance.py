"""evaluation/metrics/significance.py against scipy (the exact binomial test, the incomplete
beta function) and brute force (Holm, Benjamini-Hochberg, the mean and slope score tests)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from calibcli.evaluation.metrics import significance as sig


def test_betainc_matches_scipy_on_a_grid_of_shapes_and_points():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.uniform(0.05, 5, 200), rng.uniform(5, 5000, 200), [0.5, 1e4, 3e5]])
    b = np.concatenate([rng.uniform(0.05, 5, 200), rng.uniform(5, 5000, 200), [2e5, 0.7, 3e5]])
    x = np.concatenate([rng.random(400), [0.3, 0.999, 0.5]])
    np.testing.assert_allclose(sig.betainc(a, b, x), special.betainc(a, b, x), rtol=1e-9, atol=1e-13)
    assert np.array_equal(sig.betainc([2.0, 2.0], [3.0, 3.0], [0.0, 1.0]), [0.0, 1.0])


@pytest.mark.parametrize("n,p", [(1, 0.5), (7, 0.1), (40, 0.93), (500, 0.3), (3000, 0.002)])
def test_binomial_p_is_scipys_binomtest_doubled_smaller_tail(n, p):
    k = np.arange(n + 1, dtype=float)
    ours = sig.binomial_p(k, np.full(k.size, float(n)), np.full(k.size, p))
    lower, upper = stats.binom.cdf(k, n, p), stats.binom.sf(k - 1, n, p)
    expected = np.minimum(1.0, 2 * np.minimum(lower, upper))
    np.testing.assert_allclose(ours, expected, rtol=1e-8, atol=1e-300)
    for kk in (0, n // 3, n):  # scipy's binomtest tails are the same tails
        less = stats.binomtest(kk, n, p, alternative="less").pvalue
        greater = stats.binomtest(kk, n, p, alternative="greater").pvalue
        assert ours[kk] == pytest.approx(min(1.0, 2 * min(less, greater)), rel=1e-8, abs=1e-300)


def test_binomial_p_of_weighted_counts_lies_between_the_neighbouring_whole_counts():
    """Frequency weights give non-whole k: the tail P(X <= k) is monotone in k."""
    k = np.linspace(10, 11, 11)
    lower, _ = sig.binomial_tails(k, np.full(11, 50.0), np.full(11, 0.3))
    assert np.all(np.diff(lower) >= 0)
    whole = stats.binom.cdf([10, 11], 50, 0.3)
    assert whole[0] == pytest.approx(lower[0], rel=1e-9) and whole[1] == pytest.approx(lower[-1], rel=1e-9)
    assert np.isnan(sig.binomial_p([0.0], [0.0], [0.5])[0])


def _holm_brute(p):
    m = len(p)
    order = np.argsort(p, kind="stable")
    out = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _bh_brute(p):
    m = len(p)
    return np.array([min(min(1.0, m * p[j] / sum(p <= p[j])) for j in range(m) if p[j] >= p[i]) for i in range(m)])


@pytest.mark.parametrize("seed", range(5))
def test_holm_and_bh_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    p = rng.random(12) ** 3
    np.testing.assert_allclose(sig.holm(p), _holm_brute(p))
    np.testing.assert_allclose(sig.benjamini_hochberg(p), _bh_brute(p))
    # Holm rejects at 0.05 exactly what the step-down procedure rejects
    order = np.argsort(p)
    stop = next((r for r, i in enumerate(order) if p[i] > 0.05 / (12 - r)), 12)
    assert set(np.flatnonzero(sig.holm(p) <= 0.05)) == set(order[:stop])


def test_adjustments_skip_nan():
    out = sig.holm([0.01, math.nan, 0.04])
    assert np.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)
    out = sig.benjamini_hochberg([0.01, math.nan, 0.04])
    assert np.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)


def test_mean_test_is_the_closed_form_z():
    v = np.array([0.1, 0.4, 0.8])
    n0, n1 = np.array([9.0, 6.0, 1.0]), np.array([3.0, 2.0, 5.0])
    w = n0 + n1
    z = (n1.sum() - w @ v) / math.sqrt(w @ (v * (1 - v)))
    out = sig.mean_test(v, n0, n1)
    assert out["z"] == pytest.approx(z) and out["p_value"] == pytest.approx(2 * stats.norm.sf(abs(z)))
    assert out["predicted"] == pytest.approx(w @ v / w.sum()) and out["observed"] == pytest.approx(n1.sum() / w.sum())


def test_spread_test_is_the_score_test_of_a_logistic_slope():
    """The score test of b = 1 in logit P(y) = a + b logit(p) about (a, b) = (0, 1), the
    intercept profiled out through the information (the efficient score), computed on rows."""
    rng = np.random.default_rng(3)
    p = np.round(rng.uniform(0.05, 0.95, 400), 2)  # ties: the pooled distribution must agree
    y = (rng.random(400) < p).astype(float)
    v, idx = np.unique(p, return_inverse=True)
    n1 = np.bincount(idx, weights=y)
    n0 = np.bincount(idx) - n1
    out = sig.spread_test(v, n0, n1)
    lg = np.log(p / (1 - p))
    info = p * (1 - p)
    x = np.column_stack([np.ones_like(lg), lg])
    score = x.T @ (y - p)
    fisher = x.T @ (x * info[:, None])
    efficient = score[1] - fisher[1, 0] / fisher[0, 0] * score[0]
    variance = fisher[1, 1] - fisher[1, 0] ** 2 / fisher[0, 0]
    assert out["z"] == pytest.approx(efficient / math.sqrt(variance), rel=1e-9)
    assert out["se"] == pytest.approx(1 / math.sqrt(variance), rel=1e-9)
    for combo in itertools.product([0.5, 2.0], repeat=1):  # steeper or flatter p flips the sign
        sharp = 1 / (1 + np.exp(-combo[0] * lg))
        vs, ids = np.unique(sharp, return_inverse=True)
        m1 = np.bincount(ids, weights=y)
        z = sig.spread_test(vs, np.bincount(ids) - m1, m1)["z"]
        assert (z < 0) == (combo[0] > 1)


def test_bin_tests_count_rows_and_bound_the_rate():
    v = np.array([0.05, 0.15, 0.55, 0.95])
    n0, n1 = np.array([18.0, 8.0, 5.0, 0.0]), np.array([2.0, 2.0, 5.0, 10.0])
    bins = sig.bin_tests(v, n0, n1, 10, "uniform")
    assert [b["rows"] for b in bins] == [20, 10, 10, 10]
    assert bins[2]["observed"] == 0.5 and bins[2]["gap"] == pytest.approx(0.05)
    assert bins[2]["p_value"] == pytest.approx(stats.binomtest(5, 10, 0.55).pvalue, rel=1e-9) or \
        bins[2]["p_value"] == pytest.approx(min(1, 2 * min(stats.binom.cdf(5, 10, .55), stats.binom.sf(4, 10, .55))))
    low, high = bins[0]["observed_low"], bins[0]["observed_high"]
    ci = stats.binomtest(2, 20).proportion_ci(method="wilson")
    assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-9)
