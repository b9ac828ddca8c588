"""ENIR and near-isotonic regression: path end points, a brute-force QP, the ENIR weighting
recomputed by hand, and the Bayes-Iso synthetic setup (Allikivi & Kull 2019, section 5.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibcli.calibrators import create
from calibcli.calibrators.fitdata import platt_targets
from calibcli.numeric.pooling import unique_with_sums
from calibcli.calibrators.enir import near_isotonic_path
from calibcli.calibrators.isotonic import pav
from calibcli.errors import FitError
from calibcli.evaluation.metrics.binary import brier, log_loss

from synthetic import section51_by_class


def brute_force(y, w, lam):
    """min 1/2 sum w (y - b)^2 + lam sum t  s.t.  t_i >= b_i - b_{i+1}, t_i >= 0 (SLSQP)."""
    from scipy.optimize import minimize

    n = y.size

    def f(z):
        b, t = z[:n], z[n:]
        return 0.5 * np.sum(w * (y - b) ** 2) + lam * np.sum(t), np.concatenate(
            [-w * (y - b), np.full(n - 1, lam)]
        )

    cons = [
        {"type": "ineq", "fun": lambda z: z[n:] - (z[: n - 1] - z[1:n])},
        {"type": "ineq", "fun": lambda z: z[n:]},
    ]
    z0 = np.concatenate([y, np.maximum(y[:-1] - y[1:], 0.0)])
    # SLSQP may end on "positive directional derivative" at 1e-14; the caller's comparison
    # with the path (and of the objectives) is the check.
    res = minimize(f, z0, jac=True, constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    return res.x[:n]


def objective(y, w, b, lam):
    return 0.5 * np.sum(w * (y - b) ** 2) + lam * np.sum(np.maximum(b[:-1] - b[1:], 0.0))


def check_against_brute_force(path, y, w, lams, atol):
    """The path's solution at each lambda matches the QP's and is at least as good."""
    for lam in lams:
        b_path = path.solution(lam)
        b_qp = brute_force(y, w, lam)
        np.testing.assert_allclose(b_path, b_qp, atol=atol)
        assert objective(y, w, b_path, lam) <= objective(y, w, b_qp, lam) + 1e-12


def test_worked_three_points():
    # y = (0, 1, 0): the middle point falls at rate 1, the last rises at rate 1; they meet at
    # lambda = 1/2 at value 1/2, and the result (0, .5, .5) is already the isotonic fit.
    path = near_isotonic_path(np.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(path.solution(0.25), [0.0, 0.75, 0.25])
    np.testing.assert_allclose(path.solution(0.5), [0.0, 0.5, 0.5])
    np.testing.assert_allclose(path.solution(7.0), [0.0, 0.5, 0.5])
    np.testing.assert_array_equal(path.breakpoints, [0.5])
    assert path.events == 1


def test_weighted_pair_meets_at_closed_form():
    # Two points y1 > y2 with weights w1, w2 meet at lambda = (y1 - y2) w1 w2 / (w1 + w2).
    y, w = np.array([0.9, 0.2]), np.array([3.0, 1.0])
    path = near_isotonic_path(y, w)
    np.testing.assert_allclose(path.breakpoints, [0.7 * 3.0 / 4.0])
    np.testing.assert_allclose(path.solution(0.3), [0.9 - 0.3 / 3.0, 0.2 + 0.3])


@pytest.mark.parametrize("seed", range(12))
def test_path_end_points_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    y = rng.integers(0, 2, n).astype(float) if seed % 3 == 0 else np.round(rng.random(n), 2)
    w = rng.integers(1, 4, n).astype(float)
    path = near_isotonic_path(y, w)
    np.testing.assert_array_equal(path.solution(0.0), y)
    np.testing.assert_allclose(path.solution(1e6), pav(y, w), atol=1e-12)
    if path.breakpoints.size:
        np.testing.assert_allclose(path.solution(path.breakpoints[-1]), pav(y, w), atol=1e-12)
    assert path.events <= n - 1
    check_against_brute_force(path, y, w, (0.03, 0.1, 0.3, 0.7, 2.0), atol=2e-6)


def test_simultaneous_meetings_against_brute_force():
    # 0/1 labels with unit weights: many pairs meet at the same lambda (1/2, 2/3, ...).
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 30).astype(float)
    w = np.ones_like(y)
    path = near_isotonic_path(y, w)
    check_against_brute_force(path, y, w, np.concatenate([path.breakpoints[::2], [0.3, 1.7]]), atol=5e-6)


def test_large_path_end_point_is_pav():
    rng = np.random.default_rng(5)
    y = (rng.random(20000) < np.linspace(0.1, 0.9, 20000)).astype(float)
    w = rng.integers(1, 5, y.size).astype(float)
    path = near_isotonic_path(y, w)
    np.testing.assert_allclose(path.solution(path.breakpoints[-1] * (1 + 1e-12)), pav(y, w), atol=1e-9)
    # Between breakpoints the solution is linear in lambda (the path is piecewise linear).
    a, b = path.breakpoints[100], path.breakpoints[101]
    mid = path.solution(0.5 * (a + b))
    np.testing.assert_allclose(mid, 0.5 * (path.solution(a * (1 + 1e-12)) + path.solution(b * (1 - 1e-12))), atol=1e-9)


def test_lambda_grid_follows_r_rule():
    rng = np.random.default_rng(3)
    path = near_isotonic_path(rng.integers(0, 2, 3000).astype(float))
    lams = np.unique(np.concatenate([[0.0], path.breakpoints]))
    assert lams.size > 100
    grid = path.lambda_grid(100)
    expected = lams[np.round(np.arange(100) / 99 * (lams.size - 1)).astype(int)]
    np.testing.assert_array_equal(grid, expected)
    assert grid[0] == 0.0 and grid[-1] == path.breakpoints[-1]


def _enir_by_hand(s, y, w, models, criterion):
    """ENIR recomputed point by point from the path: BIC per model, relative likelihoods."""
    xs, sw, swy = unique_with_sums(s, y, w)
    path = near_isotonic_path(swy / sw, sw)
    lams = path.lambda_grid(models)[1:]
    n_total = sw.sum()
    scores, fits = [], []
    for lam in lams:
        p = np.clip(path.solution(lam), 0, 1)
        ll = np.sum(swy * np.log(p) + (sw - swy) * np.log(1 - p))
        df = 1 + np.count_nonzero(np.diff(np.round(p * 1e6)))
        pen = 2.0 if criterion == "aic" else math.log(n_total) + math.log(2 * math.pi)
        scores.append(-2 * ll + df * pen)
        fits.append(p)
    scores = np.array(scores)
    v = np.exp((scores.min() - scores) / 2)
    return xs, (v[:, None] * np.array(fits)).sum(0) / v.sum()


@pytest.mark.parametrize("criterion", ["bic", "aic"])
def test_enir_average_matches_hand_computation(criterion):
    rng = np.random.default_rng(11)
    s = np.round(rng.random(400), 3)
    y = (rng.random(400) < 0.2 + 0.6 * s).astype(float)
    w = rng.integers(1, 3, 400).astype(float)
    t = platt_targets(y, w)
    xs, expected = _enir_by_hand(s, t, w, 30, criterion)
    cal = create("enir", {"models": 30, "criterion": criterion, "platt_correction": True}).fit(s, y, w)
    np.testing.assert_allclose(cal.predict(xs), expected, atol=1e-12)
    assert cal.summary()["models"] == 29


@pytest.mark.parametrize("criterion", ["bic", "aic"])
@pytest.mark.parametrize("platt", [False, True])
def test_enir_worked_example_by_hand(criterion, platt):
    """Five scores with labels 1, 0, 1, 0, 0 (targets h, l, h, l, l: h = 1, l = 0, or Platt's
    h = 3/4, l = 1/5 with N+ = 2, N- = 3), solved on paper, no module code involved.

    Near-isotonic path, d = h - l. Groups {1} {2} {3} {4,5} (equal neighbours pool). Slopes
    from each group's stationarity: b1 = h - lam, b2 = l + lam, b3 = h - lam, b45 = l + lam/2.
    At lam1 = d/2, b1 = b2 = b3 = (h + l)/2 (two meetings at once); b45 = l + d/4. The merged
    {1,2,3} has mean (2h + l)/3 and slope -1/3; it meets b45 when
    (2h + l)/3 - lam/3 = l + lam/2, at lam2 = 4d/5, where all five equal (2h + 3l)/5.
    Grid {0, lam1, lam2}, lam = 0 dropped: two models, p1 = (m, m, m, q, q) with
    m = (h + l)/2, q = l + d/4 and df 2, and the constant p2 = (2h + 3l)/5 with df 1.
    Score = -2 LL + df * penalty, LL = sum t ln p + (1 - t) ln(1 - p), penalty ln 5 + ln 2 pi
    (bic) or 2 (aic); ENIR averages p1, p2 with weights exp((min score - score) / 2).
    """
    h, l = (3 / 4, 1 / 5) if platt else (1.0, 0.0)
    t = [h, l, h, l, l]
    d = h - l
    m, q, c = (h + l) / 2, l + d / 4, (2 * h + 3 * l) / 5
    p1, p2 = [m, m, m, q, q], [c] * 5

    def loglik(p):
        total = 0.0
        for ti, pi in zip(t, p):
            total += (ti * math.log(pi) if ti > 0 else 0.0) + ((1 - ti) * math.log(1 - pi) if ti < 1 else 0.0)
        return total

    penalty = 2.0 if criterion == "aic" else math.log(5) + math.log(2 * math.pi)
    score1, score2 = -2 * loglik(p1) + 2 * penalty, -2 * loglik(p2) + 1 * penalty
    best = min(score1, score2)
    v1, v2 = math.exp((best - score1) / 2), math.exp((best - score2) / 2)
    expected = [(v1 * a + v2 * b) / (v1 + v2) for a, b in zip(p1, p2)]

    x = np.arange(1.0, 6.0)
    cal = create("enir", {"criterion": criterion, "platt_correction": platt}).fit(x, [1, 0, 1, 0, 0])
    np.testing.assert_allclose(cal.predict(x), expected, rtol=0, atol=1e-12)
    assert cal.summary()["models"] == 2 and cal.summary()["breakpoints"] == 2


def test_enir_weights_spread_on_small_data_and_concentrate_on_large():
    # BIC differences grow with N: at 3000 rows one model carries almost all the weight.
    def summary(n):
        rng = np.random.default_rng(2)
        s = rng.random(n)
        y = (rng.random(n) < s).astype(float)
        return create("enir", {"platt_correction": True}).fit(s, y).summary()

    small, large = summary(60), summary(3000)
    assert small["effective_models"] > 1.1
    assert large["effective_models"] < 1.01
    assert small["models"] == small["breakpoints"]  # fewer than 100: every breakpoint is a model
    assert large["models"] == 99  # 100 grid values minus lambda = 0


def test_enir_with_one_violation_is_isotonic():
    s = np.arange(10.0)
    y = np.array([0, 0, 0, 1, 0, 1, 1, 1, 1, 1.0])
    got = create("enir").fit(s, y).predict(s)
    expected = create("isotonic").fit(s, y).predict(s)
    # One violation (1, 0): the path has one breakpoint, the grid (0, b), lambda = 0 dropped.
    np.testing.assert_allclose(got, expected)


def test_near_isotonic_calibrator_end_points():
    rng = np.random.default_rng(4)
    s = np.round(rng.random(300), 2)
    y = (rng.random(300) < s).astype(float)
    xs, sw, swy = unique_with_sums(s, y, np.ones_like(s))
    raw = create("near-isotonic", {"lam": 0.0, "platt_correction": False}).fit(s, y)
    np.testing.assert_allclose(raw.predict(xs), swy / sw, atol=1e-15)
    iso = create("near-isotonic", {"lam": 1e9, "platt_correction": False}).fit(s, y)
    np.testing.assert_allclose(iso.predict(xs), pav(swy / sw, sw), atol=1e-12)


def test_smoothing_needs_probability_scores():
    with pytest.raises(FitError):
        create("enir", {"smoothing": True}).fit(np.array([-1.0, 0.5, 2.0]), np.array([0.0, 1.0, 1.0]))


def test_constant_scores_give_the_base_rate():
    cal = create("enir", {"platt_correction": False}).fit(np.full(5, 0.3), np.array([1.0, 0, 0, 1, 1]))
    np.testing.assert_allclose(cal.predict(np.array([0.0, 0.3, 1.0])), 0.6)
    # Default (Platt): positives count 4/5, negatives 1/4, so the rate is (3 * 4/5 + 2/4) / 5.
    cal = create("enir").fit(np.full(5, 0.3), np.array([1.0, 0, 0, 1, 1]))
    np.testing.assert_allclose(cal.predict(np.array([0.0, 0.3, 1.0])), 0.58, rtol=1e-12)


def test_enir_platt_near_the_bayes_iso_table_at_3000():
    # Paper, Table 1, ENIR-PLATT at N = 3000: Brier .1627, log-loss .4778 (ideal .1621/.4741).
    # Reduced here to 4 replicates and a 30 000-row test set; the full study is in benchmarks/.
    rng = np.random.default_rng(2019)
    st, yt = section51_by_class(30000, rng)
    bs, ll = [], []
    for _ in range(4):
        s, y = section51_by_class(3000, rng)
        p = create("enir", {"platt_correction": True}).fit(s, y).predict(st)
        bs.append(brier(yt, p))
        ll.append(log_loss(yt, p))
    assert abs(np.mean(bs) - 0.1627) < 0.003
    assert abs(np.mean(ll) - 0.4778) < 0.012
