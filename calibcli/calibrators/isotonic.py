"""Isotonic regression calibration: weighted pool-adjacent-violators on tie-pooled scores.

Prediction joins the fitted (score, value) knots by linear interpolation and is constant
outside the training range (never NaN, unlike scikit-learn's default `out_of_bounds='nan'`).

References
----------
Zadrozny & Elkan (2002), "Transforming classifier scores into accurate multiclass
probability estimates"; Barlow et al. (1972) for PAV.
"""

from __future__ import annotations

import numpy as np

from calibcli.calibrators.piecewise import KnotMap
from calibcli.calibrators.registry import register
from calibcli.calibrators.params import SAFE_PLATT_CORRECTION
from calibcli.numeric.pava import pav, pav_inplace  # noqa: F401  (pav: the kernel other methods import from here)
from calibcli.numeric.pooling import unique_with_sums


def isotonic_knots(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knots (x, value) of the isotonic fit: ties pooled, then redundant interior knots removed.

    A knot is kept where the fitted value changes on either side, so the linear interpolant
    through the kept knots equals the one through every distinct score.
    """
    xs, sw, swy = unique_with_sums(s, y, w)
    keep = sw > 0
    if not keep.all():
        xs, sw, swy = xs[keep], sw[keep], swy[keep]
    del keep
    swy /= sw  # the mean target per distinct score, in place: the fit's largest arrays are n long
    fitted = pav_inplace(swy, sw)
    del swy, sw
    return compress_knots(xs, fitted)


def compress_knots(x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop interior knots that lie inside a flat run (same value on both neighbours)."""
    if x.size <= 2:
        return x, v
    flat_inside = (v[1:-1] == v[:-2]) & (v[1:-1] == v[2:])
    keep = np.concatenate([[True], ~flat_inside, [True]])
    return x[keep], v[keep]


@register
class IsotonicCalibrator(KnotMap):
    """Isotonic regression (PAV) with tied scores pooled and linear interpolation."""

    name = "isotonic"
    complexity = 1000
    fitted = "one value per pooled block of scores (grows with the data)"
    description = "isotonic regression (weighted PAV), linear between knots, constant outside"
    params = (SAFE_PLATT_CORRECTION,)

    def _fit(self, s, y, w):
        self.x_, self.y_ = isotonic_knots(s, y, w)
