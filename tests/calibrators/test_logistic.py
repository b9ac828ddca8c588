"""Platt scaling against an independent maximum-likelihood fit (plain Newton-Raphson)."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from calibcli.calibrators import create
from calibcli.calibrators.fitdata import platt_targets


def newton_mle(s, t, w, iters=100):
    """Reference: Newton-Raphson on the raw (unstandardised) score, no scipy involved."""
    beta = np.zeros(2)
    x = np.column_stack([s, np.ones_like(s)])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(x @ beta)))
        grad = x.T @ (w * (p - t))
        hess = (x * (w * p * (1 - p))[:, None]).T @ x
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-14:
            break
    return beta


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("platt", [False, True])
def test_matches_independent_mle(seed, platt):
    rng = np.random.default_rng(seed)
    s = rng.normal(0, 2, 800)
    y = (rng.random(800) < 1 / (1 + np.exp(-(0.7 * s - 0.4)))).astype(float)
    w = rng.uniform(0.5, 2.0, 800)
    cal = create("logistic", {"platt_correction": platt}).fit(s, y, sample_weight=w)
    t = platt_targets(y, w) if platt else y
    a, b = newton_mle(s, t, w)
    np.testing.assert_allclose([cal.a_, cal.b_], [a, b], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(cal.predict(s), 1 / (1 + np.exp(-(a * s + b))), rtol=0, atol=1e-9)


def test_matches_sklearn_unpenalised():
    rng = np.random.default_rng(7)
    s = rng.random(2000)
    y = (rng.random(2000) < s).astype(float)
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(s[:, None], y)
    cal = create("logistic", {"platt_correction": False}).fit(s, y)
    np.testing.assert_allclose([cal.a_, cal.b_], [ref.coef_[0, 0], ref.intercept_[0]], rtol=1e-6)


def test_huge_scores_do_not_overflow():
    rng = np.random.default_rng(3)
    s = rng.normal(0, 1, 500)
    y = (rng.random(500) < 1 / (1 + np.exp(-s))).astype(float)
    small = create("logistic").fit(s, y)
    big = create("logistic").fit(s * 1e6, y)
    np.testing.assert_allclose(big.predict(s * 1e6), small.predict(s), atol=1e-9)
    assert np.all(np.isfinite(big.predict([-1e300, 1e300])))


def test_constant_scores_give_the_positive_rate():
    cal = create("logistic", {"platt_correction": False}).fit([2.0] * 5, [1, 0, 0, 0, 1])
    np.testing.assert_allclose(cal.predict([-5.0, 2.0, 9.0]), [0.4] * 3)
    # Default (Platt): positives count 3/4, negatives 1/5, so the rate is (2 * 3/4 + 3/5) / 5.
    cal = create("logistic").fit([2.0] * 5, [1, 0, 0, 0, 1])
    np.testing.assert_allclose(cal.predict([-5.0, 2.0, 9.0]), [0.42] * 3, rtol=1e-12)
