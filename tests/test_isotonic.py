"""Isotonic calibration against scikit-learn's IsotonicRegression and hand-computed fits."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calibcli.calibrators import create
from calibcli.calibrators.isotonic import compress_knots, pav


def _sklearn(s, y, w, grid):
    ref = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)
    ref.fit(s, y, sample_weight=w)
    return ref.predict(grid)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_sklearn_with_ties_and_weights(seed, weighted):
    rng = np.random.default_rng(seed)
    n = 500
    s = np.round(rng.random(n), 2)  # ~100 distinct values: many ties
    y = (rng.random(n) < s ** 2).astype(float)
    w = rng.uniform(0.1, 3.0, n) if weighted else None
    grid = np.linspace(-0.2, 1.2, 1001)
    ours = create("isotonic").fit(s, y, weights=w).predict(grid)
    np.testing.assert_allclose(ours, _sklearn(s, y, w, grid), rtol=0, atol=1e-12)
    at_train = create("isotonic").fit(s, y, weights=w).predict(s)
    np.testing.assert_allclose(at_train, _sklearn(s, y, w, s), rtol=0, atol=1e-12)


def test_hand_computed_pav():
    # y = 1, 0, 1, 1 at x = 1..4: the first two pool to 0.5.
    cal = create("isotonic").fit([1, 2, 3, 4], [1, 0, 1, 1])
    np.testing.assert_array_equal(cal.predict([1, 2, 3, 4]), [0.5, 0.5, 1.0, 1.0])
    # Linear between knot 2 (0.5) and knot 3 (1.0); constant outside the range.
    np.testing.assert_allclose(cal.predict([2.5, 0.0, 10.0]), [0.75, 0.5, 1.0])


def test_tied_scores_are_pooled_before_pav():
    # Score 2 appears with labels 1, 0, 0: pooled to 1/3 before PAV.
    cal = create("isotonic").fit([1, 2, 2, 2, 3], [0, 1, 0, 0, 1])
    np.testing.assert_allclose(cal.predict([1, 2, 3]), [0.0, 1 / 3, 1.0])


def test_weighted_pav_closed_form():
    # Violating pair (0.8 with weight 3, 0.2 with weight 1) pools to (2.4 + 0.2) / 4.
    np.testing.assert_allclose(pav(np.array([0.8, 0.2]), np.array([3.0, 1.0])), [0.65, 0.65])


def test_single_distinct_score_gives_constant_map():
    cal = create("isotonic").fit([0.3] * 4, [0, 1, 1, 1])
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
    cal = create("isotonic", {"platt_correction": True}).fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    np.testing.assert_allclose(cal.predict([0.0, 1.0]), [1 / 4, 3 / 4])
