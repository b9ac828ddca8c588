"""`evaluation.gof` and `evaluation.smooth`: the metrics beyond the first set, each against its
peer package (or a brute-force reference) and by simulation under calibration: smECE (relplot), the debiased ECE (uncertainty-calibration),
Hosmer-Lemeshow (rows grouped by hand), KS and Kuiper (MAPIE)."""

import math

import numpy as np
import pytest

from calibcli.evaluation.metrics import gof, smooth
from calibcli.evaluation.metrics.prefix import Prefix
from calibcli.evaluation.state.binary import EvalState


def _data(n, seed, power=1.0, decimals=None, low=0.0, high=1.0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(low, high, n)
    if decimals is not None:
        p = np.round(p, decimals)
    y = (rng.uniform(size=n) < p ** power).astype(int)
    return y, p


def _dist(y, p, w=None):
    return EvalState.from_arrays(y, p, sample_weight=w).pooled()


CASES = [(400, 1, 1.0, None), (3000, 2, 1.6, 2), (20000, 3, 2.5, None), (50, 4, 1.0, None), (1500, 5, 0.7, 3)]


@pytest.mark.parametrize("n,seed,power,decimals", [*CASES, (60000, 12, 1.0, None)])  # the last: sigma < 0.01
def test_smece_equals_relplot(n, seed, power, decimals):
    relplot = pytest.importorskip("relplot")
    y, p = _data(n, seed, power, decimals)
    got, sigma = smooth.smece(*_dist(y, p))
    want, width = relplot.smECE(p, y, return_width=True)
    assert got == pytest.approx(want, abs=1e-6) and sigma == width
    assert smooth.smece_at(*_dist(y, p), 0.05) == pytest.approx(relplot.smECE_sigma(p, y, 0.05), abs=1e-6)


def test_smece_is_small_on_calibrated_data_and_large_off_it():
    y, p = _data(20000, 6)
    calibrated = smooth.smece(*_dist(y, p))[0]
    shifted = smooth.smece(*_dist(y, np.clip(p + 0.15, 0, 1)))[0]
    assert calibrated < 0.02 and shifted > 0.1


def test_smooth_curve_follows_the_positive_rate():
    y, p = _data(50000, 7, power=2.0)
    t, rate, density = smooth.smooth_curve(*_dist(y, p))
    inner = (t > 0.2) & (t < 0.8)
    assert np.max(np.abs(rate[inner] - t[inner] ** 2)) < 0.05
    assert np.all(np.diff(t) > 0) and np.all(density >= 0)
    assert np.trapezoid(density, t) == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("n,seed,power,decimals", CASES)
@pytest.mark.parametrize("bins", [10, 15, 7])
def test_ece_debiased_equals_uncertainty_calibration(n, seed, power, decimals, bins):
    calibration = pytest.importorskip("calibration")
    y, p = _data(n, seed, power, decimals)
    want = calibration.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=bins)
    assert gof.ece_debiased(*_dist(y, p), bins) == pytest.approx(want, abs=1e-9)


def test_ece_debiased_edges_are_get_equal_bins():
    calibration = pytest.importorskip("calibration")
    y, p = _data(997, 8, decimals=2)
    np.testing.assert_array_equal(gof.equal_mass_edges(Prefix(*_dist(y, p)), 10), calibration.get_equal_bins(p, 10))


def test_ece_debiased_removes_the_plug_in_bias_on_calibrated_data():
    rng = np.random.default_rng(9)
    debiased, plugin = [], []
    for _ in range(200):
        p = rng.uniform(0, 1, 300)
        y = (rng.uniform(size=p.size) < p).astype(int)
        v, n0, n1 = _dist(y, p)
        debiased.append(gof.debiased_squared_error(v, n0, n1, 10))
        edges = gof.equal_mass_edges(Prefix(v, n0, n1), 10)
        k = np.searchsorted(edges, p)
        plugin.append(sum(np.mean(k == b) * (p[k == b].mean() - y[k == b].mean()) ** 2 for b in np.unique(k)))
    se = np.std(debiased) / math.sqrt(len(debiased))
    assert abs(np.mean(debiased)) < 3 * se
    assert np.mean(plugin) > 10 * se and np.mean(plugin) > np.mean(debiased) + 5 * se


def _hl_by_rows(y, p, groups):
    """Hosmer-Lemeshow on rows: sort, cut into equal-count groups keeping ties together."""
    from scipy.stats import chi2

    order = np.argsort(p, kind="stable")
    ps, ys = p[order], y[order]
    first = np.searchsorted(ps, ps, side="left")  # each row's tie group starts here
    g = np.minimum(first * groups // ps.size, groups - 1)
    stat, used = 0.0, 0
    for k in range(groups):
        rows = g == k
        if not rows.any():
            continue
        used += 1
        n, o, e = rows.sum(), ys[rows].sum(), ps[rows].sum()
        stat += (o - e) ** 2 / (e * (1 - e / n))
    return stat, chi2.sf(stat, used - 2)


@pytest.mark.parametrize("n,seed,power,decimals", CASES[:3])
@pytest.mark.parametrize("groups", [10, 4])
def test_hosmer_lemeshow_equals_rows_grouped_by_hand(n, seed, power, decimals, groups):
    y, p = _data(n, seed, power, decimals, low=0.01, high=0.99)
    got = gof.hosmer_lemeshow(*_dist(y, p), groups)
    assert got == pytest.approx(_hl_by_rows(y, p, groups), rel=1e-10, abs=1e-12)


def _mapie_without_jitter(monkeypatch):
    mc = pytest.importorskip("mapie.metrics.calibration")
    monkeypatch.setattr(mc, "add_jitter", lambda x, noise_amplitude=1e-8, random_state=None: x)
    return mc


@pytest.mark.parametrize("n,seed,power", [(400, 1, 1.0), (20000, 3, 2.5), (7, 4, 1.0), (3000, 5, 0.9)])
def test_ks_kuiper_equal_mapie_on_untied_p(monkeypatch, n, seed, power):
    """MAPIE adds a relative 1e-8 jitter to p; with it switched off the numbers agree to
    rounding, and with it on to about 1e-7 (what the jitter itself moves)."""
    y, p = _data(n, seed, power)
    got = gof.cumulative_tests(*_dist(y, p))
    mc = pytest.importorskip("mapie.metrics.calibration")
    jittered = {"ks": mc.kolmogorov_smirnov_statistic(y, p), "kuiper": mc.kuiper_statistic(y, p)}
    assert got["ks"] == pytest.approx(jittered["ks"], abs=1e-6) and got["kuiper"] == pytest.approx(jittered["kuiper"], abs=1e-6)
    mc = _mapie_without_jitter(monkeypatch)
    assert got["ks"] == pytest.approx(mc.kolmogorov_smirnov_statistic(y, p), abs=1e-9)
    assert got["kuiper"] == pytest.approx(mc.kuiper_statistic(y, p), abs=1e-9)
    assert got["ks_p"] == pytest.approx(max(mc.kolmogorov_smirnov_p_value(y, p), 0.0), abs=1e-9)
    assert got["kuiper_p"] == pytest.approx(max(mc.kuiper_p_value(y, p), 0.0), abs=1e-9)


def test_ks_pools_tied_p_whatever_their_row_order():
    y = np.array([1, 0, 0, 1, 1, 0])
    p = np.array([0.3, 0.3, 0.3, 0.6, 0.6, 0.9])
    got = gof.cumulative_tests(*_dist(y, p))
    steps = np.array([1 - 0.9, 1 - 0.9 + 2 - 1.2, 1 - 0.9 + 2 - 1.2 - 0.9]) / 6  # at each tie group's end
    sigma = math.sqrt(np.sum(p * (1 - p))) / 6
    assert got["ks"] == pytest.approx(np.max(np.abs(steps)) / sigma, abs=1e-12)
    assert got["kuiper"] == pytest.approx((steps.max() - steps.min()) / sigma, abs=1e-12)
    flipped = gof.cumulative_tests(*_dist(y[[2, 1, 0, 4, 3, 5]], p))
    assert flipped == got


def test_weights_count_as_repeated_rows():
    y, p = _data(300, 10, decimals=2)
    w = np.random.default_rng(1).integers(1, 4, y.size)
    repeated = _dist(np.repeat(y, w), np.repeat(p, w))
    weighted = _dist(y, p, w.astype(float))
    assert gof.cumulative_tests(*weighted) == pytest.approx(gof.cumulative_tests(*repeated), abs=1e-12)
    assert gof.hosmer_lemeshow(*weighted) == pytest.approx(gof.hosmer_lemeshow(*repeated), abs=1e-12)
    assert gof.ece_debiased(*weighted, 10) == pytest.approx(gof.ece_debiased(*repeated, 10), abs=1e-12)
    assert smooth.smece(*weighted) == pytest.approx(smooth.smece(*repeated), abs=1e-12)


def _calibrated_sets(seed, sets=300, n=800):
    rng = np.random.default_rng(seed)
    for _ in range(sets):
        p = rng.uniform(0.02, 0.98, n)
        yield _dist((rng.uniform(size=p.size) < p).astype(int), p)


@pytest.mark.parametrize("name", ["ks_p", "kuiper_p"])
def test_cumulative_tests_reject_calibrated_forecasts_at_the_nominal_rate(name):
    pvals = np.array([gof.cumulative_tests(*d)[name] for d in _calibrated_sets({"ks_p": 2, "kuiper_p": 3}[name])])
    assert 0.02 <= np.mean(pvals <= 0.05) <= 0.09
    assert np.all((pvals >= 0) & (pvals <= 1))


def test_hosmer_lemeshow_under_calibration_is_chi2_with_g_degrees_of_freedom():
    """For forecasts not fitted on the evaluated rows, C follows chi^2 with g degrees of
    freedom (Hosmer & Lemeshow's g - 2 is for a logistic model fitted on the same rows), so the
    reported p-value, with g - 2 as defined, rejects somewhat more often than its level."""
    from scipy.stats import chi2

    stats, pvals = np.array([gof.hosmer_lemeshow(*d) for d in _calibrated_sets(1)]).T
    assert 0.02 <= np.mean(chi2.sf(stats, 10) <= 0.05) <= 0.09
    assert 0.05 <= np.mean(pvals <= 0.05) <= 0.2
    np.testing.assert_allclose(pvals, chi2.sf(stats, 8), rtol=1e-12)


def test_tests_detect_miscalibration():
    y, p = _data(2000, 11, power=1.5)
    v, n0, n1 = _dist(y, p)
    assert gof.hosmer_lemeshow(v, n0, n1)[1] < 1e-3
    out = gof.cumulative_tests(v, n0, n1)
    assert out["ks_p"] < 1e-3 and out["kuiper_p"] < 1e-3


def test_degenerate_distributions_give_nan():
    empty = (np.zeros(0), np.zeros(0), np.zeros(0))
    assert all(math.isnan(v) for v in gof.cumulative_tests(*empty).values())
    assert all(math.isnan(v) for v in gof.hosmer_lemeshow(*empty))
    assert math.isnan(gof.ece_debiased(*empty, 10)) and math.isnan(smooth.smece(*empty)[0])
    ones = (np.array([1.0]), np.array([0.0]), np.array([5.0]))  # p = 1 everywhere: no variance
    assert math.isnan(gof.cumulative_tests(*ones)["ks"])


@pytest.mark.parametrize("df", [1, 2, 3, 8, 9, 98, 1001])
def test_chi2_sf_equals_scipy(df):
    from scipy.stats import chi2

    for x in (0.0, 0.01, 0.5, df * 0.7, df, df * 1.6, df + 40.0, 500.0):
        assert gof.chi2_sf(x, df) == pytest.approx(chi2.sf(x, df), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 70001])
def test_prefix_reads_equal_cumulative_sums(n):
    rng = np.random.default_rng(n)
    v = np.sort(rng.random(n))
    n1, n0 = rng.integers(0, 3, n).astype(np.uint8), rng.integers(0, 2, n).astype(np.uint8)
    pre = Prefix(v, n0, n1)
    m = n0 + n1.astype(float)
    idx = np.concatenate([rng.integers(0, n + 1, 40), [0, n]])
    for key, terms in {"m": m, "y": n1.astype(float), "mp": m * v, "mpp": m * v * v, "yp": n1 * v}.items():
        np.testing.assert_allclose(pre.at(idx)[key], np.concatenate([[0], np.cumsum(terms)])[idx], rtol=1e-12,
                                   atol=1e-9)
    q = np.concatenate([rng.uniform(-1, m.sum() + 2, 40), np.cumsum(m)[rng.integers(0, n, 20)]])
    for side in ("left", "right"):
        np.testing.assert_array_equal(pre.rank(q, side), np.searchsorted(np.cumsum(m), q, side))
