"""Fast paths give the same results as the straightforward ones.

Tie pooling and isotonic/binning maps: bit-identical to np.unique + bincount and np.interp.
Logistic and beta fits: log-loss within 1e-12 of a reference optimum found by scipy on the
raw rows. Data cover ties, weights, -0.0, negative, tiny and huge scores.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibcli.numeric import lookup as _lookup
from calibcli.calibrators import create
from calibcli.calibrators.fitdata import platt_targets
from calibcli.calibrators.isotonic import compress_knots, pav
from calibcli.numeric.pooling import unique_with_sums

SPECIAL = [0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 1e300, -1e300, 1.0, -1.0, 0.5]


def plain_pooling(s, y, w):
    xs, inv = np.unique(s, return_inverse=True)
    return xs, np.bincount(inv, weights=w, minlength=xs.size), np.bincount(inv, weights=w * y, minlength=xs.size)


def plain_isotonic(s, y, w):
    """The textbook isotonic map: np.unique + bincount pooling, PAV, flat interior knots dropped."""
    xs, sw, swy = plain_pooling(s, y, w)
    keep = sw > 0
    xs, sw, swy = xs[keep], sw[keep], swy[keep]
    return compress_knots(xs, pav(swy / sw, sw))


@st.composite
def rows(draw, weights: str):
    n = draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["continuous", "rounded", "special", "mixed"]))
    if kind == "continuous":
        s = rng.normal(size=n) * 10.0 ** rng.integers(-5, 6)
    elif kind == "rounded":
        s = np.round(rng.random(n), int(rng.integers(0, 3)))
    elif kind == "special":
        s = rng.choice(SPECIAL, n)
    else:
        s = np.where(rng.random(n) < 0.5, rng.choice(SPECIAL, n), rng.normal(size=n))
    y = (rng.random(n) < rng.random()).astype(np.float64)
    w = {"unit": np.ones(n), "counts": rng.integers(0, 4, n).astype(np.float64),
         "fractional": rng.random(n) * 3}[weights]
    return s, y, w


@pytest.mark.parametrize("weights", ["unit", "counts", "fractional"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_pooling_is_bit_identical_to_np_unique(weights, data):
    s, y, w = data.draw(rows(weights))
    for plain, fast in zip(plain_pooling(s, y, w), unique_with_sums(s, y, w)):
        assert plain.tobytes() == fast.tobytes()


@pytest.mark.parametrize("ties", ["none", "pure", "mixed"])
def test_pooling_two_valued_targets_matches_bincount_order(ties):
    rng = np.random.default_rng(3)
    s = rng.random(50_000)
    y = (rng.random(s.size) < s).astype(np.float64)
    if ties == "pure":  # tie groups hold one label each
        s = np.where(y == 1, np.round(s, 2) + 0.001, np.round(s, 2))
    elif ties == "mixed":
        s = np.round(s, 2)
    t = platt_targets(y, np.ones_like(s))
    for plain, fast in zip(plain_pooling(s, t, np.ones_like(s)), unique_with_sums(s, t, np.ones_like(s))):
        assert plain.tobytes() == fast.tobytes()


def test_pooling_unit_weights_large_continuous_and_tied():
    rng = np.random.default_rng(5)
    s = rng.random(200_000)
    s[:50_000] = np.round(s[:50_000], 3)  # ties inside and across the two labels
    s[-1000:] *= -1
    y = (rng.random(s.size) < s ** 2).astype(np.float64)
    w = np.ones_like(s)
    for plain, fast in zip(plain_pooling(s, y, w), unique_with_sums(s, y, w)):
        assert plain.tobytes() == fast.tobytes()
    broadcast = np.broadcast_to(1.0, s.shape)
    for plain, fast in zip(plain_pooling(s, y, w), unique_with_sums(s, y, broadcast)):
        assert plain.tobytes() == fast.tobytes()


@pytest.mark.parametrize("platt", [False, True])
@pytest.mark.parametrize("weights", ["unit", "counts"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_isotonic_map_is_bit_identical_to_plain_path(weights, platt, data):
    s, y, w = data.draw(rows(weights))
    if not (np.sum(w[y == 1]) > 0 and np.sum(w[y == 0]) > 0):
        return
    cal = create("isotonic", {"platt_correction": platt}).fit(s, y, w)
    x_ref, v_ref = plain_isotonic(s, platt_targets(y, w) if platt else y, w)
    assert cal.x_.tobytes() == x_ref.tobytes() and cal.y_.tobytes() == v_ref.tobytes()
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.concatenate([s, np.linspace(s.min() - 1, s.max() + 1, 5000)])
    q = q[np.isfinite(q)]
    # np.interp's bytes, except inside intervals whose slope overflows or is subnormal, which
    # are computed without overflow (tests/test_extremes.py checks them against exact values)
    j = np.searchsorted(x_ref, q, side="right") - 1
    plain = ~np.isin(j, _lookup.extreme_intervals(x_ref, v_ref)) | (q == x_ref[np.clip(j, 0, None)])
    got = cal.predict(q)[plain]
    assert got.tobytes() == np.clip(np.interp(q, x_ref, v_ref), 0, 1)[plain].tobytes()


def test_isotonic_predict_at_extreme_knots_is_np_interp_outside_the_extreme_intervals():
    """Knots at -1e300, -5e-324, 5e-324, 1e300 (found by the property above): every interval
    but the subnormal one keeps np.interp's bytes; that one stays between its end values."""
    s = np.array([-1e-300, -1e300, -1.41603347, -0.45773402, 1.0, 5e-324, 0.664414661, -5e-324, 0.0, -1e300,
                  -2.08092931, 1e300, -1e-300, 1.47397463, -1e300, -0.369506795, 0.5, 0.323774431, -1e300, -1.0,
                  1.0, -0.329360785, -0.800811183, 5e-324, 0.480075048, -2.61223333, -1.00171879, -1.03139179, 1.0])
    y = np.zeros(s.size)
    y[[5, 9, 14, 18, 23, 24]] = 1.0
    w = np.array([3, 1, 0, 3, 1, 3, 2, 3, 0, 0, 3, 1, 2, 2, 1, 2, 0, 1, 1, 1, 0, 2, 2, 3, 2, 3, 1, 0, 0], float)
    cal = create("isotonic", {"platt_correction": False}).fit(s, y, w)
    q = np.concatenate([s, np.linspace(-1e300, 1e300, 5001), [-2e-324, 0.0, 2.5e-324]])
    j = np.searchsorted(cal.x_, q, side="right") - 1
    extreme = np.isin(j, _lookup.extreme_intervals(cal.x_, cal.y_)) & (q != cal.x_[np.clip(j, 0, None)])
    got, ref = cal.predict(q), np.interp(q, cal.x_, cal.y_)
    assert extreme.any() and got[~extreme].tobytes() == ref[~extreme].tobytes()
    lo, hi = cal.y_[j[extreme]], cal.y_[j[extreme] + 1]
    assert np.all((np.minimum(lo, hi) <= got[extreme]) & (got[extreme] <= np.maximum(lo, hi)))


def test_isotonic_large_map_and_predict_match_plain_path():
    rng = np.random.default_rng(11)
    s = rng.beta(1, 3, 300_000)
    y = (rng.random(s.size) < s).astype(np.float64)
    cal = create("isotonic").fit(s, y)  # Platt's targets by default
    x_ref, v_ref = plain_isotonic(s, platt_targets(y, np.ones_like(s)), np.ones_like(s))
    assert cal.x_.tobytes() == x_ref.tobytes() and cal.y_.tobytes() == v_ref.tobytes()
    q = rng.random(500_000) * 1.2 - 0.1
    assert cal.predict(q).tobytes() == np.interp(q, x_ref, v_ref).tobytes()
    assert _lookup.interp(q, x_ref, v_ref).tobytes() == np.interp(q, x_ref, v_ref).tobytes()


@pytest.mark.parametrize("strategy", ["quantile", "width"])
def test_binning_map_matches_plain_quantiles(strategy):
    rng = np.random.default_rng(2)
    s = np.round(rng.random(50_000), 3)
    y = (rng.random(s.size) < s).astype(np.float64)
    cal = create("binning", {"n_bins": 20, "strategy": strategy, "platt_correction": False}).fit(s, y)
    if strategy == "quantile":
        inner = np.unique(np.quantile(s, np.arange(1, 20) / 20, method="inverted_cdf"))
    else:
        inner = np.linspace(s.min(), s.max(), 21)[1:-1]
    inner = inner[(inner >= s.min()) & (inner < s.max())]
    assert cal.edges_.tobytes() == inner.tobytes()
    idx = np.searchsorted(inner, s, side="left")
    ref = np.bincount(idx, weights=y, minlength=20) / np.bincount(idx, minlength=20)
    assert cal.values_.tobytes() == ref[: inner.size + 1].tobytes()


def mean_log_loss(eta, y, w):
    return float(np.sum(w * (np.logaddexp(0.0, eta) - y * eta)) / np.sum(w))


def reference_optimum(design, y, w, bounds=None):
    """Lowest mean log-loss scipy reaches on the raw rows (tight tolerances, exact gradient)."""
    from scipy.optimize import minimize

    def f(beta):
        eta = design @ beta
        return mean_log_loss(eta, y, w), design.T @ (w * (1 / (1 + np.exp(-eta)) - y)) / np.sum(w)

    x0 = np.zeros(design.shape[1])
    if bounds is None:
        res = minimize(f, x0, jac=True, method="BFGS", options={"gtol": 1e-13, "maxiter": 10_000})
    else:
        res = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 10_000})
    return float(res.fun)


def logistic_case(n, seed, ties, weights, platt):
    rng = np.random.default_rng(seed)
    s = rng.beta(1, 3, n)
    if ties:
        s = np.round(s, 2)
    y = (rng.random(n) < 0.2 + 0.6 * s).astype(np.float64)
    w = rng.integers(0, 4, n).astype(np.float64) if weights else np.ones(n)
    return s, y, w, {"platt_correction": platt}


@pytest.mark.parametrize("n,ties,weights,platt", [
    (500, False, False, False), (500, True, True, False), (500, False, True, True),
    (800_000, False, False, False), (800_000, False, True, True),  # subsample warm start
])
def test_logistic_reaches_reference_optimum(n, ties, weights, platt):
    s, y, w, params = logistic_case(n, 4, ties, weights, platt)
    cal = create("logistic", params).fit(s, y, w)
    target = cal_targets(y, w, platt)
    z = (s - s.mean()) / s.std()
    ref = reference_optimum(np.column_stack([z, np.ones(n)]), target, w)
    ours = mean_log_loss(cal.a_ * s + cal.b_, target, w)
    assert abs(ours - ref) <= 1e-12


def cal_targets(y, w, platt):
    return platt_targets(y, w) if platt else y


@pytest.mark.parametrize("method", ["beta", "beta-am", "beta-ab"])
@pytest.mark.parametrize("n,ties,weights", [(800, True, True), (800_000, False, False), (300_000, False, True)])
def test_beta_reaches_reference_optimum(method, n, ties, weights):
    s, y, w, _ = logistic_case(n, 9, ties, weights, False)
    s = np.clip(s, 1e-12, 1 - 1e-12)
    cal = create(method, {"platt_correction": False}).fit(s, y, w)
    f1, f2 = np.log(s), -np.log1p(-s)
    design, bounds = {
        "beta": (np.column_stack([f1, f2, np.ones(n)]), [(0, None), (0, None), (None, None)]),
        "beta-am": (np.column_stack([f1 + f2, np.ones(n)]), [(0, None), (None, None)]),
        "beta-ab": (np.column_stack([f1 + np.log(2), f2 - np.log(2)]), [(0, None), (0, None)]),
    }[method]
    ref = reference_optimum(design, y, w, bounds)
    ours = mean_log_loss(cal.a_ * f1 + cal.b_ * f2 + cal.c_, y, w)
    assert abs(ours - ref) <= 1e-12


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([1e-100, 1e-8, 1.0, 1e8, 1e100]))
def test_logistic_tiny_and_huge_scores(seed, scale):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=200) * scale
    y = (rng.random(200) < 1 / (1 + np.exp(-s / scale))).astype(np.float64)
    if y.min() == y.max():
        return
    cal = create("logistic", {"platt_correction": False}).fit(s, y)
    z = (s - s.mean()) / s.std()
    ref = reference_optimum(np.column_stack([z, np.ones(z.size)]), y, np.ones(z.size))
    ours = mean_log_loss(cal.a_ * s + cal.b_, y, np.ones(z.size))
    assert ours <= ref + 1e-12


def test_lookup_with_infinite_and_nan_queries_matches_np_interp():
    rng = np.random.default_rng(8)
    xp = np.unique(rng.beta(1, 3, 500))
    fp = np.sort(rng.random(xp.size))
    x = rng.random(20_000) * 1.4 - 0.2
    x[::97] = np.inf
    x[::89] = -np.inf
    assert _lookup.interp(x, xp, fp).tobytes() == np.interp(x, xp, fp).tobytes()
    x[5] = np.nan
    assert _lookup.interp(x, xp, fp).tobytes() == np.interp(x, xp, fp).tobytes()
