"""Spline calibration: SplineCalib (ml-insights) on the same folds, the fallbacks, extremes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibcli.calibrators import get
from calibcli.calibrators.spline import _basis, _interval_cubics, penalty_matrix, to_logit


def _logloss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def _curved(seed, n):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * 1.5
    truth = 1 / (1 + np.exp(-(0.3 + 1.8 * z - 0.25 * z**2 + 0.15 * np.sin(2 * z))))
    return 1 / (1 + np.exp(-z)), (rng.random(n) < truth).astype(float)


@pytest.mark.parametrize("seed", [0])
def test_held_out_log_loss_within_1e_3_of_splinecalib_on_the_same_folds(seed):
    """No worse than SplineCalib by more than 1e-3. It can be better by more: SplineCalib's
    final fit uses only its last training fold (4/5 of the rows) and samples 30 knots at
    random, which costs it on a few thousand rows."""
    splinecalib = pytest.importorskip("splinecalib")
    s, y = _curved(seed, 3000)
    folds = np.random.default_rng(seed + 100).permutation(np.arange(s.size) % 5)
    theirs, ours = [], []
    for f in range(5):
        train, test = folds != f, folds == f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer = splinecalib.SplineCalib()
            peer.fit(s[train], y[train])
        theirs.append(_logloss(y[test], peer.calibrate(s[test])))
        ours.append(_logloss(y[test], get("spline")().fit(s[train], y[train]).predict(s[test])))
    assert np.mean(ours) <= np.mean(theirs) + 1e-3, (np.mean(ours), np.mean(theirs))


def test_penalty_is_the_integral_of_the_squared_second_derivative():
    rng = np.random.default_rng(3)
    xi = np.sort(np.concatenate([[0.0, 1.0], rng.random(7)]))
    beta = rng.normal(size=xi.size)
    u = np.linspace(0, 1, 400_001)
    h = u[1] - u[0]
    d2 = np.gradient(np.gradient(_basis(u, xi) @ beta, h), h)
    assert beta @ penalty_matrix(xi) @ beta == pytest.approx(np.sum(d2[2:-2] ** 2) * h, rel=1e-6)


def test_saved_cubics_equal_the_basis_expansion():
    rng = np.random.default_rng(4)
    xi = np.sort(np.concatenate([[0.0, 1.0], rng.random(10)]))
    beta = rng.normal(size=xi.size)
    cubic = _interval_cubics(beta, xi, 1.0)
    u = np.linspace(0, 1, 1001)
    i = np.searchsorted(xi, u, side="right") - 1
    t = u - xi[i]
    got = cubic[i, 0] + t * (cubic[i, 1] + t * (cubic[i, 2] + t * cubic[i, 3]))
    np.testing.assert_allclose(got, _basis(u, xi) @ beta, atol=1e-12)


@pytest.mark.parametrize("distinct", [2, 3])
def test_few_distinct_scores_fall_back_to_logistic_on_the_logit(distinct):
    rng = np.random.default_rng(distinct)
    s = rng.choice(np.linspace(0.2, 0.8, distinct), 500)
    y = (rng.random(500) < s).astype(float)
    spline = get("spline")().fit(s, y)
    logistic = get("logistic")().fit(to_logit(s, "probability"), y)
    q = np.linspace(0.2, 0.8, 13)
    np.testing.assert_allclose(spline.predict(q), logistic.predict(to_logit(q, "probability")), atol=1e-7)
    assert spline.summary()["knots"] == 2


def test_one_distinct_score_gives_its_platt_corrected_rate():
    y = np.array([1.0, 0, 0, 1, 1])
    p = get("spline")().fit(np.full(5, 0.3), y).predict(np.array([0.0, 0.3, 1.0]))
    platt = (3 * (3 + 1) / (3 + 2) + 2 * 1 / (2 + 2)) / 5  # Platt's targets averaged
    np.testing.assert_allclose(p, platt, rtol=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["probability", "logit"]))
def test_extreme_scores_give_finite_probabilities(seed, kind):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    if kind == "probability":
        pool = np.array([0.0, 5e-324, 1e-300, 1e-12, 0.3, 0.5, 1 - 1e-12, 1.0])
    else:
        pool = np.array([-1e300, -745.0, -30.0, -1.0, 0.0, 2.0, 40.0, 1e300])
    s = np.where(rng.random(n) < 0.5, rng.choice(pool, n), rng.random(n) if kind == "probability" else rng.normal(size=n))
    y = (rng.random(n) < 0.5).astype(float)
    y[:2] = [0, 1]
    cal = get("spline")(score_kind=kind).fit(s, y)
    p = cal.predict(np.concatenate([pool, s]))
    assert np.all(np.isfinite(p)) and np.all((p > 0) & (p < 1))


@pytest.mark.parametrize("distinct", [1, 3, 40])
def test_sql_of_small_splines_equals_predict(distinct):
    """One knot (a constant), two knots (the logistic fallback) and a full spline, in DuckDB."""
    duckdb = pytest.importorskip("duckdb")
    import pyarrow as pa

    from calibcli.export import sql as export

    rng = np.random.default_rng(distinct)
    s = rng.choice(np.linspace(0.1, 0.9, distinct), 400)
    y = (rng.random(400) < s).astype(float)
    y[:2] = [0, 1]
    cal = get("spline")().fit(s, y)
    q = np.concatenate([[0.0, 5e-324, 1e-300, 1.0, -3.0, 7.0], np.linspace(0, 1, 501), cal.knots_])
    con = duckdb.connect()
    con.register("t", pa.table({"score": q, "i": np.arange(q.size)}))
    got = con.sql(f"SELECT {export.sql_expression(cal)} AS p FROM t ORDER BY i").to_arrow_table()
    p = got.column("p").to_numpy(zero_copy_only=False)
    inside = (q >= 0) & (q <= 1)
    assert np.all(np.isnan(p[~inside]))  # a map for probabilities gives NULL outside [0, 1], as apply refuses
    np.testing.assert_allclose(p[inside], cal.predict(q[inside]), rtol=0, atol=1e-12)


def test_logits_a_subnormal_apart_share_a_knot_or_are_refused():
    """Knots 5e-324 apart inside a wide range are merged (the fit works, gaps stay normal on the
    unit scale); logits that all lie within a subnormal span are a one-line FitError."""
    from calibcli.errors import FitError

    rng = np.random.default_rng(5)
    s = np.concatenate([rng.normal(0, 3, 300), np.repeat([-1e-323, -5e-324, 0.0, 5e-324, 1e-323], 20)])
    y = (rng.random(s.size) < 1 / (1 + np.exp(-s))).astype(float)
    y[:2] = [0, 1]
    cal = get("spline")(score_kind="logit").fit(s, y)
    gaps = np.diff(cal.knots_) / (cal.knots_[-1] - cal.knots_[0])
    assert np.all(gaps >= 2.0 ** -26)
    p = cal.predict(np.concatenate([s, [-1e308, 1e308, 5e-324]]))
    assert np.all(np.isfinite(p)) and np.all((p > 0) & (p < 1))
    tiny = np.array([0.0, 5e-324, 1e-323, 0.0, 5e-324, 1e-323])
    with pytest.raises(FitError) as err:
        get("spline")(score_kind="logit").fit(tiny, np.array([0.0, 1.0, 1.0, 1.0, 0.0, 1.0]))
    assert "\n" not in err.value.message
