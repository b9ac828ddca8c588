"""Isotonic regression calibration: weighted pool-adjacent-violators on tie-pooled scores.

Prediction joins the fitted (score, value) knots by linear interpolation and is constant
outside the training range (never NaN, unlike scikit-learn's default `out_of_bounds='nan'`).

References
----------
Zadrozny & Elkan (2002), "Transforming classifier scores into accurate multiclass
probability estimates"; Barlow et al. (1972) for PAV.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
from pathlib import Path

import numpy as np

from calibcli.calibrators.piecewise import KnotMap
from calibcli.calibrators.registry import register
from calibcli.options import SAFE_PLATT_CORRECTION
from calibcli.pooling import unique_with_sums


def pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted isotonic (non-decreasing) least-squares fit of `y`, already sorted by score.

    The kernel is scipy's compiled pool-adjacent-violators (`scipy.optimize.isotonic_regression`,
    O(n)); a vectorised numpy PAV needs one pass per cascade of pools, far slower on large
    inputs. Weights must be positive (callers drop zero-weight points).
    Imported here so that `calib --help` and `apply` never pay for scipy.optimize.
    """
    from scipy.optimize import isotonic_regression

    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return y.copy()
    return isotonic_regression(y, weights=np.asarray(w, dtype=np.float64), increasing=True).x


def pav_inplace(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """`pav(y, w)` written over `y` (and `w` garbled): saves the two n-long copies scipy makes.

    Calls the compiled kernel behind `scipy.optimize.isotonic_regression` directly, with the
    same arguments, so the result is bit-identical; falls back to `pav` where that private
    module is missing or the arrays are not writable contiguous float64.
    """
    pava = _pava_kernel()
    if pava is None:
        return pav(y, w)
    arrays_ok = all(a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable for a in (y, w))
    if not arrays_ok or y.size == 0 or y.shape != w.shape:
        return pav(y, w)
    # Block starts: the kernel writes r[b + 1] before it reads it, so np.empty is enough, and
    # only the pages of the deepest block stack are touched (np.full would make all n resident).
    pava(y, w, np.empty(y.size + 1, dtype=np.intp))
    return y


@functools.cache
def _pava_kernel():
    """scipy's compiled PAVA function, or None.

    `import scipy.optimize._pava_pybind` would first run `scipy.optimize`'s package import,
    which loads most of scipy (docs/algorithms.md, "`calib fit` end to end"); the extension
    module itself loads alone from its file, found without importing scipy. Any failure falls back to the
    regular import, and then to None (`pav`)."""
    with contextlib.suppress(ImportError, OSError, StopIteration, TypeError, AttributeError):
        spec = importlib.util.find_spec("scipy")
        folder = Path(next(iter(spec.submodule_search_locations or ()))) / "optimize"
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"_pava_pybind{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader("_pava_pybind", str(path))
                module = importlib.util.module_from_spec(
                    importlib.util.spec_from_file_location("_pava_pybind", path, loader=loader))
                loader.exec_module(module)
                return module.pava
    try:
        from scipy.optimize._pava_pybind import pava
    except ImportError:
        return None
    return pava


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
    description = "isotonic regression (weighted PAV), linear between knots, constant outside"
    params = (SAFE_PLATT_CORRECTION,)

    def _fit(self, s, y, w):
        self.x_, self.y_ = isotonic_knots(s, y, w)
