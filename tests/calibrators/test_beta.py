"""Beta calibration (Kull, Silva Filho & Flach 2017): `beta`, `beta-am`, `beta-ab`.

Oracles: the `betacal` package (BetaCalibration 'abm'/'am'/'ab', scikit-learn LR inside) on
score files written to disk and read back through calibcli.io; closed forms from the paper
(identity map a = b = 1, c = 0; the Naive-Bayes map a = b = 1/k, c = 0 of section 3.2);
scipy's bounded L-BFGS-B for the constrained (a, b >= 0) optimum. The "exact" variants of
the paper's examples give every instance both labels, weighted x and 1 - x: the weighted
log-likelihood is then the expected one, whose maximiser is exactly the true map.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from calibcli.kinds import labels
from calibcli import io
from calibcli.calibrators import get
from calibcli.calibrators.fitdata import platt_targets
from calibcli.calibrators.beta import EPS, midpoint
from calibcli.errors import CalibWarning, FitError

import contract
from synthetic import logit, sigmoid

BETACAL_PARAMETERS = {"beta": "abm", "beta-am": "am", "beta-ab": "ab"}
VARIANTS = list(BETACAL_PARAMETERS)


def _log_loss(y, p, w=None):
    return float(np.average(-(y * np.log(p) + (1 - y) * np.log1p(-p)), weights=w))


def _expected_rows(s, x):
    """Each score twice, label 1 with weight x and label 0 with weight 1 - x."""
    return np.concatenate([s, s]), np.concatenate([np.ones_like(s), np.zeros_like(s)]), np.concatenate([x, 1 - x])


# --- score files for the betacal comparison -------------------------------------------------

def _naive_bayes_like(rng, n):
    x = rng.uniform(0.02, 0.98, n)  # overconfident: log-odds tripled
    return sigmoid(3 * logit(x)), (rng.random(n) < x).astype(float), None


def _boosting_like(rng, n):
    x = rng.uniform(0.02, 0.98, n)  # underconfident: pulled towards 1/2, shifted
    return sigmoid(0.4 * logit(x) + 0.3), (rng.random(n) < x).astype(float), None


def _two_betas_weighted(rng, n):
    y = (rng.random(n) < 0.3).astype(float)  # imbalanced, a != b, integer weights
    s = np.where(y == 1, rng.beta(5, 2, n), rng.beta(2, 6, n))
    return s, y, rng.integers(1, 4, n).astype(float)


def _rounded_scores(rng, n):
    y = (rng.random(n) < 0.5).astype(float)  # heavy ties: scores with 2 decimals
    s = np.round(np.where(y == 1, rng.beta(3, 2, n), rng.beta(2, 3, n)), 2)
    return np.clip(s, 0.01, 0.99), y, None


def _negative_a(rng, n):
    y = (rng.random(n) < 0.5).astype(float)  # alpha1 < alpha0: unconstrained a < 0
    return np.where(y == 1, rng.beta(1, 1, n), rng.beta(2, 5, n)), y, None


SCORE_FILES = {
    "naive-bayes": _naive_bayes_like,
    "boosting": _boosting_like,
    "two-betas-weighted": _two_betas_weighted,
    "rounded": _rounded_scores,
    "negative-a": _negative_a,
}


def _write_and_read(tmp_path, name, s, y, w):
    path = tmp_path / f"{name}.csv"
    cols = [s, y] if w is None else [s, y, w]
    header = "score,label" + ("" if w is None else ",weight")
    np.savetxt(path, np.column_stack(cols), delimiter=",", header=header, comments="", fmt="%.17g")
    table = io.read_table(str(path))
    weights = None if w is None else io.weights_from(table, "weight", name)
    return io.scores_from(table, "score", name), labels.from_file(table, "label", name), weights


@pytest.fixture
def betacal_converged(monkeypatch):
    """betacal with its inner LogisticRegression run to convergence (tol 1e-12, not 1e-4).

    Stock betacal stops scikit-learn's lbfgs at tol=1e-4, up to 4e-6 short of the optimum
    on these files; the converged reference is the one to match to 1e-6.
    """
    betacal = pytest.importorskip("betacal")
    from sklearn.linear_model import LogisticRegression

    tight = functools.partial(LogisticRegression, tol=1e-12, max_iter=10_000)
    monkeypatch.setattr(betacal.beta_calibration, "LogisticRegression", tight)
    return betacal.BetaCalibration


@pytest.mark.parametrize("method", VARIANTS)
@pytest.mark.parametrize("file", list(SCORE_FILES))
def test_matches_betacal(tmp_path, betacal_converged, file, method):
    s, y, w = _write_and_read(tmp_path, file, *SCORE_FILES[file](np.random.default_rng(7), 3000))
    ours = get(method)().fit(s, y, sample_weight=w)
    ref = betacal_converged(BETACAL_PARAMETERS[method]).fit(s, y, sample_weight=w)
    p, q = ours.predict(s), ref.predict(s)
    ll_ours, ll_ref = _log_loss(y, p, w), _log_loss(y, q, w)
    a, b, m = (float(v) for v in ref.calibrator_.map_)
    st = ours.get_state()
    if min(a, b) < 0:
        # betacal leaves a, b free in "ab" (and "am"); we keep them >= 0 (module docstring),
        # which can only cost likelihood. Here betacal's map is decreasing somewhere.
        assert method != "beta" and min(st["a"], st["b"]) == 0.0 and max(st["a"], st["b"]) > 0
        assert ll_ours >= ll_ref
        return
    assert abs(ll_ours - ll_ref) < 1e-6
    np.testing.assert_allclose([st["a"], st["b"]], [a, b], atol=1e-6)
    assert st["m"] == pytest.approx(m, abs=1e-5)  # betacal's m: bounded scalar search, xtol 1e-5
    np.testing.assert_allclose(p, q, atol=1e-6)
    if file == "negative-a" and method == "beta":
        assert a == 0 and st["a"] == 0.0 and st["b"] > 0  # both refit on -ln(1-s) alone


@pytest.mark.parametrize("method", VARIANTS)
def test_never_worse_than_stock_betacal(method):
    """Against betacal as shipped: our exact optimum has the lower (or equal) log-loss."""
    betacal = pytest.importorskip("betacal")
    s, y, w = _two_betas_weighted(np.random.default_rng(8), 3000)
    p = get(method)().fit(s, y, sample_weight=w).predict(s)
    q = betacal.BetaCalibration(BETACAL_PARAMETERS[method]).fit(s, y, sample_weight=w).predict(s)
    assert _log_loss(y, p, w) <= _log_loss(y, q, w) + 1e-12


# --- the paper's examples (section 3.2) -----------------------------------------------------

@pytest.mark.parametrize("method", VARIANTS)
def test_identity_exact(method):
    """Already calibrated scores: the expected log-likelihood is maximised by a = b = 1, c = 0."""
    x = np.linspace(0.001, 0.999, 999)
    cal = get(method)().fit(*_expected_rows(x, x))
    st = cal.get_state()
    np.testing.assert_allclose([st["a"], st["b"], st["c"], st["m"]], [1, 1, 0, 0.5], atol=1e-9)
    np.testing.assert_allclose(cal.predict(x), x, atol=1e-9)


def test_identity_sampled():
    """Identity on 200 000 sampled labels: a, b ~ 1 and c ~ 0 within 4 standard errors.

    Asymptotic SEs from the Fisher information at the truth, x ~ U(0, 1): 0.0147 for a and
    b, 0.0239 for c.
    """
    rng = np.random.default_rng(3)
    x = rng.random(200_000)
    y = (rng.random(x.size) < x).astype(float)
    st = get("beta")().fit(x, y).get_state()
    assert abs(st["a"] - 1) < 0.059 and abs(st["b"] - 1) < 0.059 and abs(st["c"]) < 0.096


def _naive_bayes_scores(x, k):
    """Naive Bayes on k copies of a calibrated feature x with balanced classes (section 3.2).

    Each copy contributes the likelihood ratio p(x|+)/p(x|-) = x/(1-x); NB multiplies them
    and turns the odds into a probability, giving s = x^k / (x^k + (1-x)^k).
    """
    copies = np.repeat(x[:, None], k, axis=1)
    odds = np.prod(copies / (1 - copies), axis=1)
    s = odds / (1 + odds)
    np.testing.assert_allclose(s, x**k / (x**k + (1 - x) ** k), rtol=1e-12)
    return s, np.sum(logit(copies), axis=1)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("method", ["beta", "beta-am"])
def test_naive_bayes_copies_exact(method, k):
    x = np.linspace(0.02, 0.98, 481)
    s, t = _naive_bayes_scores(x, k)
    st = get(method)().fit(*_expected_rows(s, x)).get_state()
    np.testing.assert_allclose([st["a"], st["b"], st["c"], st["m"]], [1 / k, 1 / k, 0, 0.5], atol=1e-9)
    # The same scores given as NB log-odds (score_kind=logit).
    lt = get(method)(score_kind="logit").fit(*_expected_rows(t, x)).get_state()
    np.testing.assert_allclose([lt["a"], lt["b"], lt["c"]], [1 / k, 1 / k, 0], atol=1e-9)


def test_naive_bayes_copies_sampled():
    """k = 4 on 100 000 sampled labels: a = b = 1/4, c = 0 within 4 SEs (0.0034, 0.0034, 0.0138)."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.01, 0.99, 100_000)
    y = (rng.random(x.size) < x).astype(float)
    s, _ = _naive_bayes_scores(x, 4)
    st = get("beta")().fit(s, y).get_state()
    assert abs(st["a"] - 0.25) < 0.014 and abs(st["b"] - 0.25) < 0.014 and abs(st["c"]) < 0.055


# --- constraints, midpoint, options ---------------------------------------------------------

def test_constrained_optimum_matches_bounded_solver():
    """a < 0 unconstrained: our refit equals scipy's L-BFGS-B with bounds a, b >= 0."""
    from scipy.optimize import minimize

    s, y, _ = _negative_a(np.random.default_rng(11), 4000)
    f = np.column_stack([np.log(s), -np.log1p(-s), np.ones_like(s)])

    def loss(beta):
        eta = f @ beta
        return np.mean(np.logaddexp(0, eta) - y * eta), f.T @ (sigmoid(eta) - y) / s.size

    ref = minimize(loss, np.array([0.5, 0.5, 0.0]), jac=True, method="L-BFGS-B",
                   bounds=[(0, None), (0, None), (None, None)], options={"ftol": 1e-15, "gtol": 1e-12})
    st = get("beta")().fit(s, y).get_state()
    assert st["a"] == 0.0
    np.testing.assert_allclose([st["a"], st["b"], st["c"]], ref.x, atol=1e-5)
    assert loss(np.array([st["a"], st["b"], st["c"]]))[0] <= ref.fun + 1e-12
    p = get("beta")().fit(s, y).predict(contract.grid(s))
    assert np.all(np.diff(p) >= 0)


@pytest.mark.parametrize(
    "a, b, c", [(1.0, 1.0, 0.0), (0.2, 5.0, 1.3), (5.0, 0.2, -2.0), (2.0, 2.0, 3.0), (0.7, 3.0, -40.0)]
)
def test_midpoint_solves_lr_equals_one(a, b, c):
    m = midpoint(a, b, c)
    assert 0 < m < 1
    assert a * np.log(m) - b * np.log1p(-m) + c == pytest.approx(0, abs=1e-9 * max(1, abs(c)))
    if a == b:
        assert m == pytest.approx(1 / (1 + np.exp(c / a)), rel=1e-14)


def test_midpoint_without_root():
    assert midpoint(2.0, 0.0, 1.0) == pytest.approx(np.exp(-0.5))  # b = 0, c > 0
    assert midpoint(2.0, 0.0, -1.0) == 1.0  # mu < 1/2 everywhere
    assert midpoint(0.0, 2.0, -1.0) == pytest.approx(1 - np.exp(-0.5))  # a = 0, c < 0
    assert midpoint(0.0, 2.0, 1.0) == 0.0  # mu > 1/2 everywhere
    assert (midpoint(0, 0, -1), midpoint(0, 0, 1), midpoint(0, 0, 0)) == (1.0, 0.0, 0.5)


def test_midpoint_of_fitted_map_gives_one_half():
    s, y, _ = _two_betas_weighted(np.random.default_rng(2), 2000)
    cal = get("beta")().fit(s, y)
    assert cal.predict(np.array([cal.get_state()["m"]]))[0] == pytest.approx(0.5, abs=1e-12)
    assert get("beta-ab")().fit(s, y).get_state()["m"] == 0.5


@pytest.mark.parametrize("method", VARIANTS)
def test_platt_correction_uses_platt_targets(method):
    """platt_correction=true equals fitting Platt's targets t as weight t on 1, 1 - t on 0."""
    s, y = contract.synthetic(300)
    corrected = get(method)(platt_correction=True).fit(s, y).get_state()
    t = platt_targets(y, np.ones_like(y))
    direct = get(method)().fit(*_expected_rows(s, t)).get_state()
    for key in "abcm":
        assert corrected[key] == pytest.approx(direct[key], abs=1e-7)


def test_separated_classes_warn_unless_platt_corrected():
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1.0])
    with pytest.warns(CalibWarning, match="separates the classes"):
        get("beta")().fit(s, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = get("beta")(platt_correction=True).fit(s, y).get_state()
    assert 0 < st["a"] < 5 and 0 < st["b"] < 5


@pytest.mark.parametrize("method", VARIANTS)
def test_logit_scores_equal_probability_scores(method):
    s, y = contract.synthetic(500, ties=False)
    prob = get(method)().fit(s, y)
    on_logits = get(method)(score_kind="logit").fit(logit(s), y)
    for key in "abcm":
        assert on_logits.get_state()[key] == pytest.approx(prob.get_state()[key], abs=1e-8)
    np.testing.assert_allclose(on_logits.predict(logit(s)), prob.predict(s), atol=1e-9)


def test_out_of_range_scores_name_the_logit_option():
    s, y = contract.synthetic(100)
    with pytest.raises(FitError, match="score_kind=logit"):
        get("beta")().fit(logit(s), y)
    get("beta")(score_kind="logit").fit(logit(s), y)
    assert get("beta")().needs_probabilities and not get("beta")(score_kind="logit").needs_probabilities


def test_clipping_is_counted_reported_and_dtype_independent():
    rng = np.random.default_rng(4)
    s = rng.random(400)
    y = (rng.random(400) < s).astype(float)
    s[:3], s[3:5], s[5] = 0.0, 1.0, 1e-13  # six scores outside [EPS, 1 - EPS]
    with pytest.warns(CalibWarning, match="6 scores"):
        cal = get("beta")().fit(s, y)
    assert cal.summary()["clipped"] == 6
    p = cal.predict(np.array([0.0, EPS, 1 - EPS, 1.0, -0.5, 1.5]))
    assert np.all(np.isfinite(p)) and p[0] == p[1] and p[2] == p[3] and p[4] == p[0] and p[5] == p[3]
    s32 = np.float32(s[6:])  # float32 input: same eps, same map as its float64 values
    a = get("beta")().fit(s32, y[6:]).get_state()
    b = get("beta")().fit(s32.astype(np.float64), y[6:]).get_state()
    assert a == b


@pytest.mark.parametrize("method", VARIANTS)
def test_one_distinct_score_gives_base_rate(method):
    y = np.array([0, 1, 1, 0, 1.0])
    p = get(method)().fit(np.full(5, 0.3), y).predict(np.array([0.1, 0.3, 0.9]))
    # beta-ab passes through (1/2, 1/2) and is non-decreasing, so at s = 0.3 it cannot
    # exceed 1/2: the constrained optimum is the flat map 1/2 (a = b = 0).
    expected = 0.5 if method == "beta-ab" else 0.6
    assert np.all(np.isfinite(p)) and p[1] == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize("method", VARIANTS)
def test_state_and_summary_round_trip(method):
    s, y = contract.synthetic(300)
    cal = get(method)(platt_correction=True).fit(s, y)
    state = cal.get_state()
    assert set(state) == {"a", "b", "c", "m", "eps"} and state["eps"] == EPS
    assert {k: cal.summary()[k] for k in "abcm"} == {k: state[k] for k in "abcm"}
    for reloaded in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
        assert reloaded.get_state() == state
        assert reloaded.params == cal.params
        assert np.array_equal(reloaded.predict(contract.grid(s)), cal.predict(contract.grid(s)))
    contract.check_round_trip(get(method), {"score_kind": "logit"}, logit(s), y)
