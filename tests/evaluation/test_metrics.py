"""`evaluation.metrics` and its kernels: a hand-computed case, brute-force references and
invariants; ECE/MCE bins and strategies, Spiegelhalter, slope and intercept against
independent computations (scikit-learn, a hand formula, a second optimiser)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from calibcli.evaluation.metrics import binary as metrics
from calibcli.evaluation.state.binary import compute_all
from calibcli.evaluation.metrics import kernels

Y = np.array([0, 1, 1, 0, 1], dtype=float)
P = np.array([0.1, 0.8, 0.6, 0.4, 0.4])
G = np.array([0, 0, 1, 1, 1])


def test_hand_computed_case():
    assert metrics.log_loss(Y, P) == pytest.approx(
        -(math.log(0.9) + math.log(0.8) + math.log(0.6) + math.log(0.6) + math.log(0.4)) / 5
    )
    assert metrics.brier(Y, P) == pytest.approx(0.73 / 5)
    assert metrics.auc(Y, P) == pytest.approx(5.5 / 6)  # one tie (0.4 vs 0.4) counts half
    # ECE: bins 1, 4 (two rows), 6, 8: gaps 0.1 + |0.8 - 1| + 0.4 + 0.2 over 5 rows.
    assert metrics.prob_ece(Y, P) == pytest.approx(0.9 / 5)
    # Field 0: residual -0.1 + 0.2 = 0.1; field 1: 0.4 - 0.4 + 0.6 = 0.6.
    assert metrics.field_ece(Y, P, G) == pytest.approx(0.7 / 5)
    assert metrics.field_rce(Y, P, G) == pytest.approx((2 * 0.1 / 1.02 + 3 * 0.6 / 2.03) / 5)
    # CalBin, s = 2: sorted p .1 .4 .4 .6 .8, tied labels -> 0 .5 .5 1 1; windows 1..3:
    # (|.1-.25| + |.4-.25|)/2 = .15, (|.4-.5| * 2)/2 = .1, (|.4-.75| + |.6-.75|)/2 = .25.
    assert metrics.calbin(Y, P, window=2) == pytest.approx((0.15 + 0.1 + 0.25) / 3)


def calbin_paper(p, f, s):
    """Zitnik et al. (2012), section II, literally (1-based indices, scalar loops):

        CalBin = 1/(n-s) sum_{b=1}^{n-s} sum_{i=b}^{b+s-1} | p_i - (sum_{i=b}^{b+s-1} f_i) / s |

    for p sorted ascending and f the class indicators in the same order.
    """
    n = len(p)
    total = 0.0
    for b in range(1, n - s + 1):
        rate = sum(f[i - 1] for i in range(b, b + s)) / s
        total += sum(abs(p[i - 1] - rate) for i in range(b, b + s))
    return total / (n - s)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("window", [1, 7, 100])
def test_calbin_is_the_paper_sum_divided_by_the_window(seed, window):
    """Distinct p (the paper's setting, no ties to resolve): metrics.calbin is the paper's sum,
    then the one documented change, a division by s so the value lies in [0, 1]."""
    rng = np.random.default_rng(seed)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(float)
    order = np.argsort(p)
    expected = calbin_paper(list(p[order]), list(y[order]), window) / window
    assert metrics.calbin(y, p, window) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("seed", range(3))
def test_calbin_with_ties_uses_the_tie_groups_positive_rate(seed):
    """Tied p: the documented rule gives each tied row its group's positive rate (so no
    ordering of the ties is privileged); then the paper's sum and the division, as above."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(300), 2)
    y = (rng.random(300) < p).astype(float)
    order = np.argsort(p)
    ps, f = list(p[order]), list(y[order])
    pooled = [sum(fj for pj, fj in zip(ps, f) if pj == pi) / ps.count(pi) for pi in ps]
    assert metrics.calbin(y, p, 7) == pytest.approx(calbin_paper(ps, pooled, 7) / 7, rel=1e-12)
    shuffled = rng.permutation(300)
    assert metrics.calbin(y[shuffled], p[shuffled], 7) == pytest.approx(metrics.calbin(y, p, 7), rel=1e-12)


def test_calbin_window_at_least_n_is_one_window_of_all_rows():
    """The paper needs s < n; with s >= n calib uses the one window of all n rows."""
    p = np.array([0.1, 0.3, 0.6, 0.9])
    y = np.array([0.0, 1.0, 0.0, 1.0])
    assert metrics.calbin(y, p, 10) == pytest.approx(np.mean(np.abs(p - 0.5)))


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(500), 1)
    y = (rng.random(500) < p).astype(float)
    assert metrics.auc(y, p) == pytest.approx(roc_auc_score(y, p), abs=1e-12)


def test_auc_single_class_is_nan():
    assert math.isnan(metrics.auc(np.ones(4), np.linspace(0, 1, 4)))


def test_log_loss_clips_certain_mistakes():
    assert metrics.log_loss(np.array([1.0]), np.array([0.0])) == pytest.approx(-math.log(1e-15))


def test_ece_puts_p_equal_one_in_the_last_bin():
    assert metrics.prob_ece(np.array([1.0, 1.0]), np.array([1.0, 0.95])) == pytest.approx(0.025)


def test_field_rce_counts_fields_without_positives():
    y = np.array([0.0, 0.0])
    p = np.array([0.1, 0.3])
    assert metrics.field_rce(y, p, np.array([0, 0])) == pytest.approx(2 * 0.4 / 0.02 / 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=60),
       st.integers(1, 20), st.randoms())
def test_invariants(rows, window, rnd):
    p = np.array([r[0] for r in rows])
    y = np.array([float(r[1]) for r in rows])
    out = compute_all(y, p, np.zeros(len(rows), dtype=np.int64), window)
    assert 0 <= out["brier"] <= 1
    assert 0 <= out["ece"] <= 1
    assert 0 <= out["calbin"] <= 1
    assert out["log_loss"] >= 0
    perm = list(range(len(rows)))
    rnd.shuffle(perm)
    again = compute_all(y[perm], p[perm], np.zeros(len(rows), dtype=np.int64), window)
    for key, value in out.items():
        assert again[key] == pytest.approx(value, abs=1e-12, nan_ok=True)
    # Field-ECE with a single field is |mean(y - p)|.
    assert out["field_ece"] == pytest.approx(abs(np.mean(y - p)), abs=1e-12)


def test_perfectly_calibrated_constant_has_zero_ece():
    y = np.array([1, 0, 0, 0] * 25, dtype=float)
    p = np.full(100, 0.25)
    assert metrics.prob_ece(y, p) == pytest.approx(0.0)
    assert metrics.field_ece(y, p, np.zeros(100, dtype=np.int64)) == pytest.approx(0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 500), st.sampled_from([np.float64, np.float32, np.int8, np.int64, bool]))
def test_log_loss_terms_select_the_likelihood_bit_for_bit(seed, n, label_dtype):
    """The branch-free selection y q + (1 - y)(1 - q) gives np.where's bits for 0/1 labels of
    any dtype, including p at 0, 1 and inside the clipping margin."""
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    p[rng.random(n) < 0.1] = 0.0
    p[rng.random(n) < 0.1] = 1.0
    p[rng.random(n) < 0.1] = 1e-17
    y = rng.random(n) < 0.5
    q = np.clip(p, metrics.LOG_LOSS_EPS, 1 - metrics.LOG_LOSS_EPS)
    expected = -np.log(np.where(y, q, 1.0 - q))
    assert metrics.log_loss_terms(y.astype(label_dtype), p).tobytes() == expected.tobytes()


# ECE/MCE with bins and strategies, the Spiegelhalter test and calibration slope/intercept,

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


@pytest.mark.parametrize("seed", range(3))
def test_log_loss_and_brier_equal_sklearn(seed):
    from sklearn.metrics import brier_score_loss, log_loss

    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, 2000)
    y = (rng.uniform(size=2000) < p).astype(float)
    w = rng.uniform(0.2, 3.0, 2000)
    got = compute_all(y, p)
    assert got["log_loss"] == pytest.approx(log_loss(y, p), rel=1e-12)
    assert got["brier"] == pytest.approx(brier_score_loss(y, p), rel=1e-12)
    weighted = compute_all(y, p, sample_weight=w)
    assert weighted["log_loss"] == pytest.approx(log_loss(y, p, sample_weight=w), rel=1e-12)
    assert weighted["brier"] == pytest.approx(brier_score_loss(y, p, sample_weight=w), rel=1e-12)
