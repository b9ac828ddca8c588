"""ECE/MCE with bins and strategies, the Spiegelhalter test and calibration slope/intercept,
each against an independent computation (scikit-learn, a hand formula, a second optimiser)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibcli.evaluation import kernels, metrics


def _data(n=2000, seed=0, power=1.3):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    y = (rng.random(n) < p**power).astype(float)
    return y, p


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("bins", [5, 10, 15])
def test_bins_match_sklearn_calibration_curve(strategy, bins):
    from sklearn.calibration import calibration_curve

    y, p = _data(seed=bins)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=bins, strategy=strategy)
    weight, mean_p, rate = metrics.calibration_bins(*metrics.distribution(y, p), bins, strategy)
    assert mean_p == pytest.approx(prob_pred, abs=1e-12) and rate == pytest.approx(prob_true, abs=1e-12)
    assert weight.sum() == p.size
    ece = metrics.ece_from_distribution(*metrics.distribution(y, p), bins, strategy)
    assert ece == pytest.approx(np.sum(weight / p.size * np.abs(prob_true - prob_pred)), abs=1e-12)
    assert metrics.mce_from_distribution(*metrics.distribution(y, p), bins, strategy) == pytest.approx(
        np.max(np.abs(prob_true - prob_pred)), abs=1e-12)
    if strategy == "uniform" and bins == 10:
        assert ece == pytest.approx(metrics.prob_ece(y, p), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(0, 20), min_size=1, max_size=30),
       counts=st.lists(st.integers(1, 5), min_size=30, max_size=30),
       q=st.floats(0, 100))
def test_weighted_percentiles_equal_numpy_on_repeated_rows(values, counts, q):
    xs = np.unique(np.asarray(values, dtype=float) / 20)
    w = np.asarray(counts[: xs.size], dtype=float)
    got = kernels.weighted_percentiles(xs, w, np.array([q]))[0]
    assert got == pytest.approx(np.percentile(np.repeat(xs, w.astype(int)), q), abs=1e-12)


def test_spiegelhalter_matches_the_row_formula_and_is_uniform_under_calibration():
    y, p = _data(seed=3, power=1.0)
    z, pval = metrics.spiegelhalter(*metrics.distribution(y, p))
    hand = np.sum((y - p) * (1 - 2 * p)) / math.sqrt(np.sum((1 - 2 * p) ** 2 * p * (1 - p)))
    assert z == pytest.approx(hand, rel=1e-12)
    assert pval == pytest.approx(2 * (1 - 0.5 * (1 + math.erf(abs(hand) / math.sqrt(2)))), rel=1e-9)
    # Under perfect calibration the p-values of many data sets are roughly uniform.
    pvals = [metrics.spiegelhalter(*metrics.distribution(*_data(500, s, 1.0)))[1] for s in range(200)]
    assert 0.02 < np.mean(np.array(pvals) < 0.05) < 0.10
    # An overconfident model (true log-odds half the model's) is caught.
    rng = np.random.default_rng(1)
    p2 = rng.random(5000)
    truth = 1 / (1 + np.exp(-0.5 * (np.log(p2) - np.log1p(-p2))))
    y2 = (rng.random(5000) < truth).astype(float)
    assert metrics.spiegelhalter(*metrics.distribution(y2, p2))[1] < 1e-6


def test_slope_intercept_match_an_unpenalised_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    y, p = _data(seed=4, power=1.6)
    slope, intercept = metrics.calibration_slope_intercept(*metrics.distribution(y, p))
    logit = np.log(np.clip(p, 1e-15, 1 - 1e-15) / (1 - np.clip(p, 1e-15, 1 - 1e-15)))
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(logit[:, None], y)
    assert slope == pytest.approx(ref.coef_[0, 0], rel=1e-6)
    assert intercept == pytest.approx(ref.intercept_[0], rel=1e-6, abs=1e-8)
    # A calibrated model: slope near 1, intercept near 0; scores made sharper: slope < 1.
    y1, p1 = _data(200_000, seed=5, power=1.0)
    s1, i1 = metrics.calibration_slope_intercept(*metrics.distribution(y1, p1))
    assert abs(s1 - 1) < 0.03 and abs(i1) < 0.03
    sharp = 1 / (1 + np.exp(-3 * (np.log(p1) - np.log1p(-p1))))
    assert metrics.calibration_slope_intercept(*metrics.distribution(y1, sharp))[0] == pytest.approx(1 / 3, rel=0.05)


def test_degenerate_inputs_give_nan_not_errors():
    xs, n0, n1 = np.array([0.5]), np.array([3.0]), np.array([2.0])
    assert all(math.isnan(v) for v in metrics.spiegelhalter(xs, n0, n1))
    assert all(math.isnan(v) for v in metrics.calibration_slope_intercept(xs, n0, n1))
    sep = metrics.calibration_slope_intercept(np.array([0.2, 0.8]), np.array([5.0, 0.0]), np.array([0.0, 5.0]))
    assert all(math.isnan(v) for v in sep)
