"""Bayes-Iso: posterior mean against exact quadrature, sampler against a recursive reference."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from calibcli.calibrators import get
from calibcli.calibrators import bayes_iso, bayes_iso_sampler
from calibcli.calibrators.bayes_iso_bounds import pool_cells, sample_bounds
from calibcli.calibrators.bayes_iso_sampler import posterior_mean, sample_maps
from calibcli.calibrators.isotonic import pav
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
    post = posterior_mean(n1, n0, lower, upper, *ONE_BLOCK, samples=200_000, seed=3)
    # 3125 trees of 64 maps; the single maps' count overstates
    assert 300 < post.ess[0] < 3125 < post.map_ess[0] and not post.dominated[0]
    np.testing.assert_allclose(post.mean, exact, atol=4e-3)


def test_posterior_mean_with_bounds_matches_quadrature():
    n1, n0 = np.array([1.0, 0.0, 2.0]), np.array([2.0, 1.0, 0.0])
    lower, upper = np.array([0.05, 0.1, 0.4]), np.array([0.5, 0.8, 0.95])
    exact = quadrature_posterior(n1, n0, lower, upper, points=120)
    mean = posterior_mean(n1, n0, lower, upper, *ONE_BLOCK, samples=200_000, seed=9).mean
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
    # 20 000 rows from a linear calibration map (the blocked path: 20 blocks, 3000 cells).
    # Any estimator faithful to the data averages, over a bin of m rows, to within binomial
    # noise sqrt(p(1-p)/m) of the true map; 4 such standard deviations per bin of 2000 rows.
    rng = np.random.default_rng(11)
    s = np.sort(rng.random(20_000))
    truth = 0.2 + 0.6 * s
    y = (rng.random(s.size) < truth).astype(float)
    cal = BayesIso(samples=3000).fit(s, y)
    assert cal.summary()["blocks"] == 20
    p = cal.predict(s).reshape(10, -1).mean(axis=1)
    t = truth.reshape(10, -1).mean(axis=1)
    assert np.all(np.abs(p - t) < 4 * np.sqrt(t * (1 - t) / 2000))


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


def test_blocked_estimator_close_to_single_block():
    # 3000 rows pooled into 300 cells: three blocks of 1000 rows against one block. Both
    # sample within the same bounds [lo, hi] per cell, so each posterior mean has Monte
    # Carlo sd at most (hi - lo) / (2 sqrt(ESS)) (a variable on [lo, hi] has variance at
    # most (hi - lo)^2 / 4). The blocks' own approximation must stay inside 4 such sds of
    # the difference, cell by cell.
    s, y = contract.synthetic(3000, seed=6, ties=False)
    params = dict(samples=20_000, grid=300, target_ess=400)
    one = BayesIso(block_size=3000, **params).fit(s, y)
    three = BayesIso(block_size=1000, **params).fit(s, y)
    assert one.summary()["blocks"] == 1 and three.summary()["blocks"] == 3
    order = np.argsort(s)
    xs, sw, swy = pool_cells(s[order], np.ones(s.size), y[order], 300)
    lower, upper = sample_bounds(sw, swy, pav(swy / sw, sw), one.bin_size_, 1 / np.sqrt(3000))
    sd = (upper - lower) / 2 * np.sqrt(1 / one.ess_ + 1 / three.ess_)
    diff = np.abs(one.predict(xs) - three.predict(xs))
    assert np.all(diff <= 4 * sd)


def test_dominance_warns_with_advice():
    # Paper's wide bounds, few samples, blocks of 1000 ranks: one tree carries the mass.
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


def test_platt_targets_are_fractional_counts(monkeypatch):
    # The sampler sees, per distinct score, n1 = sum of Platt targets and n0 = sum of
    # (1 - target): positives count (N+ + 1)/(N+ + 2), negatives 1/(N- + 2) (paper, section 3).
    s = np.array([0.1, 0.1, 0.2, 0.3, 0.3, 0.3, 0.4, 0.5])
    y = np.array([0, 1, 0, 0, 1, 1, 1, 0.0])
    seen = {}
    real = bayes_iso.posterior_mean

    def spy(n1, n0, *args):
        seen.update(n1=n1.copy(), n0=n0.copy())
        return real(n1, n0, *args)

    monkeypatch.setattr(bayes_iso, "posterior_mean", spy)
    cal = BayesIso(samples=1000, platt_correction=True).fit(s, y)
    pos, neg = 5 / 6, 1 / 6  # N+ = 4, N- = 4
    np.testing.assert_allclose(seen["n1"], [neg + pos, neg, neg + 2 * pos, pos, neg], rtol=1e-15)
    np.testing.assert_allclose(seen["n0"], [pos + neg, pos, pos + 2 * neg, neg, pos], rtol=1e-15)
    p = cal.predict(np.unique(s))
    assert np.all((p > 0) & (p < 1)) and np.all(np.diff(p) >= 0)


def test_single_distinct_score():
    # One rank, 3 positives of 10: bins of one instance (N/20 < 1) give the rate 0.3, so the
    # bounds are [0, 0.3 + 1/sqrt(10)] and the posterior is Beta(4, 8) truncated to them:
    # mean = B(5, 8) [I_u(5, 8)] / (B(4, 8) [I_u(4, 8)]), with I the regularised incomplete beta.
    from scipy.special import beta, betainc

    u = 0.3 + 1 / np.sqrt(10)
    exact = beta(5, 8) * betainc(5, 8, u) / (beta(4, 8) * betainc(4, 8, u))
    sd = np.sqrt(beta(6, 8) * betainc(6, 8, u) / (beta(4, 8) * betainc(4, 8, u)) - exact**2)
    cal = BayesIso(samples=20_000).fit(np.full(10, 0.3), np.array([1, 1, 1] + [0] * 7, dtype=float))
    assert cal.x_.size == 1 and cal.summary()["effective_sample_size"] > 100
    got = cal.predict(np.array([0.0, 0.3, 1.0]))
    assert np.all(got == got[0])
    assert abs(got[0] - exact) < 4 * sd / np.sqrt(cal.summary()["effective_sample_size"])


def _spread(share, samples, monkeypatch, seeds=40):
    """Summed variance over ranks of the posterior mean across seeds, and the mean ESSs."""
    s, y = contract.synthetic(60, seed=3, ties=False)
    y = y[np.argsort(s)]
    lower, upper = sample_bounds(np.ones(60), y, pav(y, np.ones(60)), 3.0, 1 / np.sqrt(60))
    monkeypatch.setattr(bayes_iso_sampler, "SHARE", share)
    one = (np.array([0]), np.array([60]))
    runs = [posterior_mean(y, 1 - y, lower, upper, *one, samples, seed) for seed in range(seeds)]
    var = np.var([r.mean for r in runs], axis=0, ddof=1).sum()
    return var, np.mean([r.ess[0] for r in runs]), np.mean([r.map_ess[0] for r in runs])


def test_tree_ess_is_honest_about_shared_trees(monkeypatch):
    # For an honest ESS, spread across seeds x ESS estimates the posterior variance whatever
    # the sampler. Independent maps (SHARE = 1) give the reference; with 64 maps per tree
    # the tree ESS may only understate (spread x ESS no larger), while the single maps'
    # count overstates. Each side is a variance over 40 seeds: a ratio of two beyond
    # F(39, 39)'s 99.5% point, 2.3, is not noise.
    var1, ess1, map1 = _spread(1, 1000, monkeypatch)
    assert ess1 == pytest.approx(map1, rel=1e-12)
    var64, ess64, map64 = _spread(64, 10_000, monkeypatch)
    assert var64 * ess64 < 2.3 * var1 * ess1
    assert var64 * map64 > 2.3 * var1 * ess1


def test_share_one_tree_ess_equals_map_ess_and_one_tree_is_one(monkeypatch):
    n1, n0 = np.array([1.0, 0.0, 2.0, 1.0]), np.array([2.0, 1.0, 0.0, 1.0])
    lower, upper = np.zeros(4), np.ones(4)
    blocks = (np.array([0]), np.array([4]))
    single = posterior_mean(n1, n0, lower, upper, *blocks, samples=64, seed=1)  # one tree
    assert single.ess[0] == pytest.approx(1.0) and single.dominated[0] and single.map_ess[0] > 2
    monkeypatch.setattr(bayes_iso_sampler, "SHARE", 1)
    post = posterior_mean(n1, n0, lower, upper, *blocks, samples=500, seed=1)
    assert post.ess[0] == pytest.approx(post.map_ess[0], rel=1e-12)


def test_tally_merge_equals_direct_sums():
    # Two sampling rounds merged (the second over block 1 only) against sums over all maps.
    rng = np.random.default_rng(0)
    bstart, bend = np.array([0, 2]), np.array([2, 5])
    block_of = np.array([0, 0, 1, 1, 1])
    maps1 = rng.random((3, 5, 4)).astype(np.float32)
    ll1 = rng.normal(0, 3, (3, 2, 4))
    maps2 = rng.random((2, 3, 4)).astype(np.float32)
    ll2 = rng.normal(0, 3, (2, 1, 4)) + 5
    tally = bayes_iso_sampler.Tally(5, 2)
    tally.add(maps1, ll1, block_of)
    extra = bayes_iso_sampler.Tally(3, 1)
    extra.add(maps2, ll2, np.zeros(3, dtype=int))
    tally.merge(extra, np.array([1]), np.arange(2, 5), block_of)
    for b, maps, ll in ((0, [maps1[:, :2]], [ll1[:, 0]]), (1, [maps1[:, 2:], maps2], [ll1[:, 1], ll2[:, 0]])):
        w = [np.exp(x - tally.top[b]) for x in ll]
        trees = np.concatenate([x.sum(axis=1) for x in w])
        total = trees.sum()
        mean = sum(np.einsum("tnk,tk->n", m.astype(float), x) for m, x in zip(maps, w)) / total
        np.testing.assert_allclose(tally.acc[bstart[b] : bend[b]] / tally.total[b], mean, rtol=1e-6)
        np.testing.assert_allclose(tally.ess()[b], total**2 / np.sum(trees**2), rtol=1e-12)
        np.testing.assert_allclose(tally.map_sq[b], sum(np.sum(x * x) for x in w), rtol=1e-12)
        assert tally.tree_max[b] == pytest.approx(trees.max(), rel=1e-12)


def test_target_ess_adds_samples_to_needy_blocks_only():
    s, y = contract.synthetic(3000, seed=6, ties=False)
    base = BayesIso(samples=640, grid=300, block_size=300, target_ess=0).fit(s, y)
    more = BayesIso(samples=640, grid=300, block_size=300, target_ess=20).fit(s, y)
    assert base.ess_ < 20 <= more.ess_
    capped = BayesIso(samples=640, grid=300, block_size=300, target_ess=1e6, budget=1).fit(s, y)
    assert capped.ess_ < 1e6 and capped.summary()["effective_sample_size"] == capped.ess_
