"""Weighted pool-adjacent-violators (isotonic least squares on sorted points), the kernel of
the isotonic calibrator and of the CORP recalibration (`evaluation/corp.py`), loaded without
importing `scipy.optimize`.

References
----------
Barlow et al. (1972), "Statistical Inference under Order Restrictions".
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
from pathlib import Path

import numpy as np


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


def pav_blocks(y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pav_inplace(y, w)` and its blocks: (fit written over `y`, the weight of each block,
    the index where each block starts followed by the end). `w` is garbled."""
    pava = _pava_kernel()
    arrays_ok = all(a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable for a in (y, w))
    if pava is None or not arrays_ok or y.size == 0 or y.shape != w.shape:
        from scipy.optimize import isotonic_regression

        res = isotonic_regression(np.asarray(y, dtype=np.float64), weights=np.asarray(w, dtype=np.float64))
        return res.x, res.weights, res.blocks
    x, wx, r, b = pava(y, w, np.empty(y.size + 1, dtype=np.intp))
    return x, wx[:b], r[:b + 1]


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


__all__ = ["pav", "pav_blocks", "pav_inplace"]
