"""Vector scaling and Dirichlet calibration: unregularised optima against scikit-learn's
multinomial logistic regression, the ODIR gradient against finite differences, the held-out
choice of the penalties, and that the defaults do not overfit many classes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from sklearn.linear_model import LogisticRegression

import calibcli
import kdata
from calibcli.calibrators import odir


def _sklearn_unpenalised(x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = LogisticRegression(penalty=None, max_iter=20000, tol=1e-12).fit(x, y)
    return kdata.log_loss(lr.predict_proba(x), y)


@pytest.mark.parametrize("seed, k, n", [(1, 3, 800), (2, 5, 2000)])
def test_dirichlet_unregularised_is_multinomial_regression_on_log_probabilities(seed, k, n):
    P, y = kdata.probabilities(n, k, seed=seed)
    P[0, 0] = 0.0  # a zero enters as ln 2^-1075
    P[0] /= P[0].sum()
    cm = calibcli.fit(P, y, method="dirichlet", reg_lambda=0.0, reg_mu=0.0)
    x = np.where(P > 0, np.log(np.where(P > 0, P, 1)), -1075 * np.log(2))
    assert kdata.log_loss(cm.predict(P), y) <= _sklearn_unpenalised(x, y) + 1e-7


def test_matrix_scaling_on_logits_is_multinomial_regression():
    z, y = kdata.logits(1000, 4, seed=3)
    cm = calibcli.fit(z, y, method="dirichlet", reg_lambda=0.0, reg_mu=0.0)
    assert cm.score_kind == "logit"
    assert kdata.log_loss(cm.predict(z), y) <= _sklearn_unpenalised(z, y) + 1e-7


def test_vector_scaling_two_classes_is_logistic_regression():
    # softmax(v1 z1 + b1, v2 z2 + b2) is sigmoid((v1 z1 - v2 z2) + (b1 - b2)): a logistic
    # regression on (z1, z2) with free coefficients and an intercept
    z, y = kdata.logits(1500, 2, seed=4)
    cm = calibcli.fit(z, y, method="vector", reg_mu=0.0)
    assert kdata.log_loss(cm.predict(z), y) <= _sklearn_unpenalised(z, y) + 1e-7


def test_vector_scaling_reaches_a_brute_force_optimum():
    z, y = kdata.logits(600, 3, seed=5)
    cm = calibcli.fit(z, y, method="vector", reg_mu=0.0)

    def loss(theta):  # written independently of odir.py: logsumexp of the scaled logits
        from scipy.special import logsumexp

        a = z * theta[:3] + theta[3:]
        return float(np.mean(logsumexp(a, axis=1) - a[np.arange(y.size), y]))

    from scipy.optimize import minimize

    brute = minimize(loss, np.r_[np.ones(3), np.zeros(3)], method="Nelder-Mead",
                     options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 40000, "maxfev": 40000})
    assert kdata.log_loss(cm.predict(z), y) <= brute.fun + 1e-9
    assert abs(kdata.log_loss(cm.predict(z), y) - brute.fun) < 1e-6


@pytest.mark.parametrize("full", [True, False])
def test_gradient_matches_finite_differences(full):
    z, y = kdata.logits(200, 4, seed=6)
    w = np.random.default_rng(0).gamma(1.0, size=200)
    problem = odir.Problem(z, y, w, full)
    theta = problem.identity() + np.random.default_rng(1).normal(scale=0.1, size=problem.identity().size)

    def f(t):
        return problem.loss(t)[0] + odir.penalty(problem, t, 0.3, 0.7)[0]

    grad = problem.loss(theta)[1] + odir.penalty(problem, theta, 0.3, 0.7)[1]
    np.testing.assert_allclose(grad, approx_fprime(theta, f, 1e-7), atol=2e-6)


def test_penalties_chosen_on_folds_are_seeded_and_respect_given_values():
    P, y = kdata.probabilities(600, 4, seed=7)
    a = calibcli.fit(P, y, method="dirichlet", seed=3, folds=3)
    b = calibcli.fit(P, y, method="dirichlet", seed=3, folds=3)
    assert np.array_equal(a.predict(P), b.predict(P))
    chosen = a.calibrator.chosen_
    assert chosen["reg_lambda"] == chosen["reg_mu"] and chosen["reg_lambda"] in odir.GRID
    tried = chosen["held_out_log_loss"]
    assert 3 <= len(tried) <= len(odir.GRID) and tried[odir.GRID.index(chosen["reg_lambda"])] == min(tried)
    if len(tried) < len(odir.GRID):  # stopped early: the loss rose twice in a row
        assert tried[-1] > tried[-2] > tried[-3]
    given = calibcli.fit(P, y, method="dirichlet", reg_lambda=0.5, folds=3).calibrator.chosen_
    assert given["reg_lambda"] == 0.5 and given["reg_mu"] in odir.GRID
    fixed = calibcli.fit(P, y, method="dirichlet", reg_lambda=0.5, reg_mu=0.25).calibrator.chosen_
    assert (fixed["reg_lambda"], fixed["reg_mu"], fixed["held_out_log_loss"]) == (0.5, 0.25, [])


def test_defaults_do_not_overfit_many_classes():
    z, y = kdata.logits(400, 15, seed=8, scale=2.0, truth=0.5)
    zt, yt = kdata.logits(4000, 15, seed=9, scale=2.0, truth=0.5)
    default = kdata.log_loss(calibcli.fit(z, y, method="dirichlet", folds=3).predict(zt), yt)
    bare = kdata.log_loss(calibcli.fit(z, y, method="dirichlet", reg_lambda=0.0, reg_mu=0.0).predict(zt), yt)
    temperature = kdata.log_loss(calibcli.fit(z, y, method="temperature").predict(zt), yt)
    assert default < bare - 0.05  # 240 parameters on 400 rows overfit without the penalty
    assert default < temperature + 0.02


def test_weights_count_as_rows():
    z, y = kdata.logits(300, 3, seed=10)
    w = np.random.default_rng(2).integers(1, 4, 300).astype(float)
    rows = np.repeat(np.arange(300), w.astype(int))
    for method, params in (("vector", {"reg_mu": 0.01}), ("dirichlet", {"reg_lambda": 0.01, "reg_mu": 0.01})):
        weighted = calibcli.fit(z, y, method=method, sample_weight=w, **params)
        expanded = calibcli.fit(z[rows], y[rows], method=method, **params)
        np.testing.assert_allclose(weighted.predict(z), expanded.predict(z), atol=1e-6)


def test_large_sets_choose_on_a_subsample_and_keep_the_prior_weight(monkeypatch):
    P, y = kdata.probabilities(900, 3, seed=11)
    monkeypatch.setattr(odir, "CV_VALUES", 900)  # 2700 scores: every third row
    cm = calibcli.fit(P, y, method="dirichlet", folds=3, reg_mu=0.05)
    chosen = cm.calibrator.chosen_
    assert chosen["reg_mu"] == 0.05  # given: as given
    assert np.isclose(chosen["reg_lambda"] * 3, odir.GRID, rtol=1e-12).any()  # chosen on 300 rows: x 300 / 900
    sub = odir.Problem(np.log(P), y, None, True).rows(np.arange(0, 900, 3))
    pick, _, _, scale = odir.choose(sub, odir.candidates(None, 0.05), 3, 0)
    assert scale == 1.0 and pick[0] == pytest.approx(chosen["reg_lambda"] * 3, rel=1e-12)
