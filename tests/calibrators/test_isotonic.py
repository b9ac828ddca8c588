"""Isotonic calibration against scikit-learn's IsotonicRegression and hand-computed fits."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calibcli.calibrators import create
from calibcli.calibrators.isotonic import compress_knots, pav

CLASSICAL = {"platt_correction": False}


def _sklearn(s, y, w, grid):
    ref = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)
    ref.fit(s, y, sample_weight=w)
    return ref.predict(grid)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("platt", [False, True])
def test_matches_sklearn_with_ties_and_weights(seed, weighted, platt):
    """platt_correction=false is scikit-learn's IsotonicRegression; true (the default) is the
    same regression on the targets (N+ + 1)/(N+ + 2) and 1/(N- + 2), computed here by hand."""
    rng = np.random.default_rng(seed)
    n = 500
    s = np.round(rng.random(n), 2)  # ~100 distinct values: many ties
    y = (rng.random(n) < s ** 2).astype(float)
    w = rng.uniform(0.1, 3.0, n) if weighted else None
    ww = np.ones(n) if w is None else w
    n_pos, n_neg = ww[y == 1].sum(), ww[y == 0].sum()
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2)) if platt else y
    grid = np.linspace(-0.2, 1.2, 1001)
    params = {} if platt else CLASSICAL  # the default is Platt-corrected
    ours = create("isotonic", params).fit(s, y, sample_weight=w).predict(grid)
    np.testing.assert_allclose(ours, _sklearn(s, t, w, grid), rtol=0, atol=1e-12)
    at_train = create("isotonic", params).fit(s, y, sample_weight=w).predict(s)
    np.testing.assert_allclose(at_train, _sklearn(s, t, w, s), rtol=0, atol=1e-12)
    assert (0 < ours.min() and ours.max() < 1) if platt else (ours.min() == 0 and ours.max() == 1)


def test_hand_computed_pav():
    # y = 1, 0, 1, 1 at x = 1..4: the first two pool to 0.5.
    cal = create("isotonic", CLASSICAL).fit([1, 2, 3, 4], [1, 0, 1, 1])
    np.testing.assert_array_equal(cal.predict([1, 2, 3, 4]), [0.5, 0.5, 1.0, 1.0])
    # Linear between knot 2 (0.5) and knot 3 (1.0); constant outside the range.
    np.testing.assert_allclose(cal.predict([2.5, 0.0, 10.0]), [0.75, 0.5, 1.0])


def test_tied_scores_are_pooled_before_pav():
    # Score 2 appears with labels 1, 0, 0: pooled to 1/3 before PAV.
    cal = create("isotonic", CLASSICAL).fit([1, 2, 2, 2, 3], [0, 1, 0, 0, 1])
    np.testing.assert_allclose(cal.predict([1, 2, 3]), [0.0, 1 / 3, 1.0])


def test_weighted_pav_closed_form():
    # Violating pair (0.8 with weight 3, 0.2 with weight 1) pools to (2.4 + 0.2) / 4.
    np.testing.assert_allclose(pav(np.array([0.8, 0.2]), np.array([3.0, 1.0])), [0.65, 0.65])


def test_single_distinct_score_gives_constant_map():
    cal = create("isotonic", CLASSICAL).fit([0.3] * 4, [0, 1, 1, 1])
    np.testing.assert_allclose(cal.predict([0.0, 0.3, 1.0]), [0.75] * 3)


def test_compress_knots_keeps_the_interpolant():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    v = np.array([0.1, 0.1, 0.1, 0.5, 0.5])
    xc, vc = compress_knots(x, v)
    grid = np.linspace(-1, 5, 61)
    np.testing.assert_array_equal(np.interp(grid, xc, vc), np.interp(grid, x, v))
    assert xc.size < x.size


def test_platt_correction_bounds_the_extremes():
    # All-positive top and all-negative bottom: corrected targets are 1/(N-+2) and (N++1)/(N++2).
    cal = create("isotonic").fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])  # on by default
    np.testing.assert_allclose(cal.predict([0.0, 1.0]), [1 / 4, 3 / 4])
