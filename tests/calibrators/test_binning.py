"""Histogram binning on hand-computed cases."""

import numpy as np

from calibcli.calibrators import create
from calibcli.calibrators.binning import weighted_quantiles


def test_equal_frequency_hand_case():
    cal = create("binning", {"n_bins": 2, "platt_correction": False}).fit([0.1, 0.2, 0.3, 0.4], [0, 1, 1, 1])
    np.testing.assert_array_equal(cal.edges_, [0.2])
    np.testing.assert_allclose(cal.predict([0.0, 0.15, 0.2, 0.25, 0.9]), [0.5, 0.5, 0.5, 1.0, 1.0])


def test_equal_width_fills_empty_bins_by_interpolation():
    cal = create("binning", {"n_bins": 4, "strategy": "width", "platt_correction": False}).fit([0.0, 0.1, 0.9, 1.0], [0, 1, 1, 1])
    np.testing.assert_allclose(cal.edges_, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(cal.values_, [0.5, 2 / 3, 5 / 6, 1.0])


def test_heavy_ties_merge_edges():
    s = np.array([0.0] * 50 + [1.0] * 50)
    y = np.array([0] * 40 + [1] * 10 + [0] * 5 + [1] * 45)
    cal = create("binning", {"n_bins": 10, "platt_correction": False}).fit(s, y)
    np.testing.assert_allclose(cal.predict([0.0, 1.0]), [0.2, 0.9])


def test_weighted_quantiles_match_numpy_inverted_cdf():
    rng = np.random.default_rng(0)
    s = rng.random(101)
    q = np.arange(1, 10) / 10
    np.testing.assert_array_equal(
        weighted_quantiles(s, np.ones_like(s), q), np.quantile(s, q, method="inverted_cdf")
    )
