"""Bayes-Iso: posterior mean against exact quadrature, sampler against a recursive reference."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from calibcli.calibrators import get
from calibcli.calibrators.bayes_iso import posterior_mean, sample_bounds, sample_maps
from calibcli.errors import CalibWarning

import contract

BayesIso = get("bayes-iso")


def _sub(ranks, lo, hi):
    """Every random-pivot (sub)tree over `ranks` between anchor ranks lo and hi (None = the 0
    or 1 boundary), as (probability, [(rank, lo anchor, hi anchor), ...]) in drawing order."""
    if not ranks:
        yield 1.0, []
        return
    for i, k in enumerate(ranks):
        lefts, rights = list(_sub(ranks[:i], lo, k)), list(_sub(ranks[i + 1 :], k, hi))
        for (pl, left), (pr, right) in itertools.product(lefts, rights):
            yield pl * pr / len(ranks), [(k, lo, hi)] + left + right


def quadrature_posterior(n1, n0, lower, upper, points=64):
    """E[C L(C)] / E[L(C)] under the bounded prior by Gauss-Legendre over the uniforms.

    Each map is a deterministic function of its pivot tree and one uniform per rank; without
    bounds it is polynomial in the uniforms, so the rule is exact. Independent of the sampler.
    """
    n = len(n1)
    nodes, weights = np.polynomial.legendre.leggauss(points)
    nodes, weights = (nodes + 1) / 2, weights / 2
    grids = np.meshgrid(*([nodes] * n), indexing="ij")
    wgrid = np.prod(np.meshgrid(*([weights] * n), indexing="ij"), axis=0)
    num = np.zeros(n)
    den = 0.0
    for prob, order in _sub(list(range(n)), None, None):
        values = {}
        for step, (k, lo, hi) in enumerate(order):
            a = np.maximum(lower[k], 0.0 if lo is None else values[lo])
            b = np.minimum(upper[k], 1.0 if hi is None else values[hi])
            values[k] = a + grids[step] * (b - a)
        like = np.ones_like(wgrid)
        for k in range(n):
            like = like * values[k] ** n1[k] * (1 - values[k]) ** n0[k]
        den += prob * np.sum(wgrid * like)
        for k in range(n):
            num[k] += prob * np.sum(wgrid * like * values[k])
    return num / den


def recursive_map(rng, lower, upper, lo=0, hi=None, vlo=0.0, vhi=1.0, out=None):
    """The paper's sampler, the slow obvious way: uniform pivot, uniform value, recurse."""
    if out is None:
        hi = len(lower)
        out = np.empty(hi)
    if lo >= hi:
        return out
    k = int(rng.integers(lo, hi))
    a, b = max(lower[k], vlo), min(upper[k], vhi)
    out[k] = rng.uniform(a, b)
    recursive_map(rng, lower, upper, lo, k, vlo, out[k], out)
    recursive_map(rng, lower, upper, k + 1, hi, out[k], vhi, out)
    return out


ONE_BLOCK = (np.array([0]), np.array([3]))


@pytest.mark.parametrize(
    "n1, n0",
    [([0.0, 1.0, 1.0], [1.0, 1.0, 0.0]), ([0.0, 0.0, 2.0], [3.0, 0.0, 1.0]), ([1.0, 0.0, 0.0], [0.0, 1.0, 1.0])],
)
def test_posterior_mean_equals_exact_integral_n3(n1, n0):
    n1, n0 = np.array(n1), np.array(n0)
    lower, upper = np.zeros(3), np.ones(3)
    exact = quadrature_posterior(n1, n0, lower, upper)
    mean, ess, dominated = posterior_mean(n1, n0, lower, upper, *ONE_BLOCK, samples=200_000, seed=3)
    assert ess[0] > 20_000 and not dominated[0]
    np.testing.assert_allclose(mean, exact, atol=4e-3)


def test_posterior_mean_with_bounds_matches_quadrature():
    n1, n0 = np.array([1.0, 0.0, 2.0]), np.array([2.0, 1.0, 0.0])
    lower, upper = np.array([0.05, 0.1, 0.4]), np.array([0.5, 0.8, 0.95])
    exact = quadrature_posterior(n1, n0, lower, upper, points=120)
    mean, _, _ = posterior_mean(n1, n0, lower, upper, *ONE_BLOCK, samples=200_000, seed=9)
    np.testing.assert_allclose(mean, exact, atol=4e-3)


def test_sampler_matches_recursive_reference():
    from scipy.stats import ks_2samp

    lower = np.array([0.0, 0.05, 0.1, 0.3, 0.3])
    upper = np.array([0.4, 0.6, 0.6, 0.9, 1.0])
    maps = sample_maps(np.random.default_rng(0), lower, upper, np.array([0]), np.array([5]), 40, 64)
    ours = maps.transpose(0, 2, 1).reshape(-1, 5)
    rng = np.random.default_rng(1)
    ref = np.array([recursive_map(rng, lower, upper) for _ in range(3000)])
    assert np.all(np.diff(ours, axis=1) >= 0)
    assert np.all(ours >= lower.astype(np.float32)) and np.all(ours <= upper.astype(np.float32))
    for k in range(5):
        assert ks_2samp(ours[:, k], ref[:, k]).pvalue > 1e-3
    # the joint law too: the gap between neighbours
    assert ks_2samp(ours[:, 3] - ours[:, 1], ref[:, 3] - ref[:, 1]).pvalue > 1e-3


def test_bounds_worked_example():
    # 6 ranks, one instance each, labels 0 0 1 0 1 1, bins of 2 and margin 0.1.
    y = np.array([0, 0, 1, 0, 1, 1.0])
    iso = np.array([0, 0, 0.5, 0.5, 1, 1.0])
    lower, upper = sample_bounds(np.ones(6), y, iso, 2.0, 0.1)
    # upper: rates of bins starting at each rank 0, .5, .5, .5, 1, 1 (last bin shortened);
    # running max, then at least iso, + 0.1, clipped.
    np.testing.assert_allclose(upper, [0.1, 0.6, 0.6, 0.6, 1.0, 1.0])
    # lower: rates of bins ending at each rank 0, 0, .5, .5, .5, 1 (first shortened);
    # reverse running min, at most iso, - 0.1, clipped.
    np.testing.assert_allclose(lower, [0.0, 0.0, 0.4, 0.4, 0.4, 0.9])


def test_bins_count_weights_pro_rata():
    # rank weights 3 and 1; a bin of 2 from rank 0 covers 2 of its 3 instances
    lower, upper = sample_bounds(np.array([3.0, 1.0]), np.array([1.5, 1.0]), np.array([0.5, 1.0]), 2.0, 0.0)
    np.testing.assert_allclose(upper, [0.5, 1.0])
    np.testing.assert_allclose(lower, [0.5, 0.75])


def test_monotone_in_unit_interval_with_ties():
    s, y = contract.synthetic(400, seed=2)
    s = np.round(s, 1)
    cal = BayesIso(samples=2000).fit(s, y)
    assert np.array_equal(cal.x_, np.unique(s))
    p = cal.predict(np.linspace(-1, 2, 500))
    assert np.all((p >= 0) & (p <= 1)) and np.all(np.diff(p) >= 0)


def test_ties_equal_weights_exactly():
    s, y = contract.synthetic(200, seed=4)
    w = np.where(np.arange(200) % 3 == 0, 2.0, 1.0)
    dup = np.repeat(np.arange(200), w.astype(int))
    a = BayesIso(samples=1000).fit(s, y, w).predict(s)
    b = BayesIso(samples=1000).fit(s[dup], y[dup]).predict(s)
    assert np.array_equal(a, b)


def test_seed_reproducible_and_seed_matters():
    s, y = contract.synthetic(300, seed=5)
    a = BayesIso(samples=1000, seed=7).fit(s, y).get_state()
    b = BayesIso(samples=1000, seed=7).fit(s, y).get_state()
    c = BayesIso(samples=1000, seed=8).fit(s, y).get_state()
    assert np.array_equal(a["y"], b["y"])
    assert not np.array_equal(a["y"], c["y"])


def test_close_to_true_map_on_easy_data():
    # 2000 rows from a linear calibration map: the posterior mean follows it.
    rng = np.random.default_rng(11)
    s = rng.random(2000)
    y = (rng.random(2000) < 0.2 + 0.6 * s).astype(float)
    cal = BayesIso(samples=3000).fit(s, y)
    grid = np.linspace(0.1, 0.9, 9)
    assert np.max(np.abs(cal.predict(grid) - (0.2 + 0.6 * grid))) < 0.08


def test_blocks_and_grid_round_trip_and_diagnostics():
    s, y = contract.synthetic(3000, seed=6, ties=False)
    cal = BayesIso(samples=500, grid=200, block_size=300).fit(s, y)
    summary = cal.summary()
    assert cal.x_.size == 200 and summary["blocks"] == 10
    assert summary["effective_sample_size"] > 1
    p = cal.predict(contract.grid(s))
    assert np.all(np.diff(p) >= 0)
    for back in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
        assert np.array_equal(back.predict(contract.grid(s)), p)
        assert back.summary() == summary


def test_dominance_warns_with_advice():
    # Paper's wide bounds, few samples, one block of 2000 ranks: one map carries the mass.
    s, y = contract.synthetic(2000, seed=8, ties=False)
    with pytest.warns(CalibWarning, match="more samples"):
        cal = BayesIso(samples=100, bin_size=200, margin=0.5).fit(s, y)
    assert cal.summary()["dominated"] and cal.summary()["effective_sample_size"] < 2


def test_no_warning_when_weights_are_spread():
    s, y = contract.synthetic(100, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibWarning)
        cal = BayesIso(samples=2000).fit(s, y)
    assert not cal.summary()["dominated"] and cal.summary()["effective_sample_size"] > 10


def test_platt_targets_are_fractional_counts():
    s, y = contract.synthetic(300, seed=3)
    plain = BayesIso(samples=1000).fit(s, y).predict(s)
    corrected = BayesIso(samples=1000, platt_correction=True).fit(s, y).predict(s)
    assert np.all(np.isfinite(corrected)) and not np.array_equal(plain, corrected)


def test_single_distinct_score():
    cal = BayesIso(samples=500).fit(np.full(10, 0.3), np.array([1, 0] * 5, dtype=float))
    assert 0.2 < cal.predict(np.array([0.0]))[0] < 0.8
