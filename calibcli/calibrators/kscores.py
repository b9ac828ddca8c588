"""K-class scores: what kind they are, their logs, and a softmax that never gives NaN.

Scores are an (n, K) float64 array, one column per class, either probabilities (rows of
non-negative values summing to 1) or logits (any finite values). Native K-class methods work
on logits; probabilities become logits through `log_probabilities`:

    z = ln p  (p > 0),   z = ln 2^-1075 = -745.13  (p = 0)

Every positive probability, subnormals included, keeps its exact logarithm (no offset: the
ratios between small probabilities are what temperature and Dirichlet scaling rescale). An
exact 0 becomes the log of 2^-1075, half the smallest positive float64: finite (no -inf, so
no inf - inf = NaN in a fit's sums) and below the log of every positive value, so the order
of a row is kept. scikit-learn takes ln(p + 1e-12) instead, which moves every
probability below about 1e-10 (1e-15 and 1e-300 both become about -27.6) and so flattens
exactly the tail a 100-class model's confident predictions live in.
"""

from __future__ import annotations

from typing import Any

import math

import numpy as np

from calibcli.errors import FitError
from calibcli.kinds.probabilities import SCORE_KINDS  # noqa: F401  (the kinds a K-class map reads)

ZERO_LOG = -1075 * math.log(2)  # ln 2^-1075: what ln 0 is taken as
_CHUNK = 1 << 20  # values per chunk of a row-wise pass


def as_score_matrix(scores: Any, what: str = "scores") -> np.ndarray:
    """An (n, K) C-ordered float64 array with K >= 2 and finite values, else a FitError. C
    order whatever the input's layout: row sums over a Fortran-ordered array add in another
    order, and predictions must not change in their last bits with the memory layout."""
    s = np.ascontiguousarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] < 2:
        raise FitError(f"{what} must have shape (n, K) with K >= 2 classes, got shape {s.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(s, axis=None)  # one pass, no n x K mask; inf or NaN if any value is
    if not np.isfinite(total) and not (finite := np.isfinite(s)).all():
        row, col = np.argwhere(~finite)[0]
        raise FitError(f"{what} must be finite (no NaN or inf): row {row}, class column {col} is {float(s[row, col])!r}")
    return s


def as_class_major(scores: Any, what: str = "scores") -> np.ndarray:
    """The (K, n) transpose of (n, K) scores as a C-ordered float64 array (no copy when the
    scores are Fortran-ordered, as columns read from a file are), K >= 2, every value finite,
    else a FitError naming the first bad row. Predictions work class by class on it: reductions
    over the classes then run along whole contiguous rows, in one order whatever the input's
    layout, so the same scores give the same bits."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] < 2:
        raise FitError(f"{what} must have shape (n, K) with K >= 2 classes, got shape {s.shape}")
    cm = np.ascontiguousarray(s.T)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(cm, axis=None)
    if not np.isfinite(total) and not (finite := np.isfinite(cm)).all():
        row = int(np.argmin(finite.all(axis=0)))
        col = int(np.argmin(finite[:, row]))
        raise FitError(f"{what} must be finite (no NaN or inf): row {row}, class column {col} is {float(cm[col, row])!r}")
    return cm


def log_probabilities(p: np.ndarray) -> np.ndarray:
    """ln p, with ln 2^-1075 for p = 0: a new array (see the module docstring)."""
    if p.size and p.min() > 0:  # the common case: one pass to check, no filled temporary
        return np.log(p)
    return np.log(p, out=np.full(p.shape, ZERO_LOG), where=p > 0)


def as_logits(s: np.ndarray, kind: str) -> np.ndarray:
    """The logits a native method fits on: logs of probabilities, logits as they are."""
    return log_probabilities(s) if kind == "probability" else s


def softmax(a: np.ndarray) -> np.ndarray:
    """Softmax over the classes of class-major (K, n) values (a new array), finite or infinite,
    never NaN: +inf entries share a row's mass, a row of -inf is uniform. Each of the n
    predictions sums to 1 within K ulps."""
    top = np.finfo(np.float64).max
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(a.sum())  # one pass; nan_to_num is the identity on finite rows
    e = np.array(a, dtype=np.float64) if finite else np.nan_to_num(a, nan=0.0, posinf=top, neginf=-top)
    with np.errstate(over="ignore", invalid="ignore"):
        e -= e.max(axis=0)  # now in [-inf, 0]: exp in [0, 1], 1 at the max
    np.exp(e, out=e)
    e /= e.sum(axis=0)
    return e


HALF_MAX = float(np.finfo(np.float64).max) / 2
DIRECTION_SCALE = 1e300  # the logits of an extreme row: its direction, scaled so the softmax is its limit


def overflow_bound(row_sums: float, intercept: float = 0.0) -> float:
    """The largest |score| below which no logit of a map can overflow: with each logit a_k a
    sum of score times coefficient plus an intercept, |a_k| <= R M + |b|, R the largest row
    sum of |coefficients| and M the row's largest |score|, which stays below half the float64
    range (so a_k - max a fits too) while M <= (max / 2 - |b|) / R."""
    if not row_sums > 0:
        return float("inf")
    return max((HALF_MAX - intercept) / row_sums, 0.0)


def extreme_rows(z: np.ndarray, bound: float) -> np.ndarray:
    """Of class-major (K, n) scores, the predictions whose largest |score| passes `bound`."""
    if bound == float("inf"):
        return np.zeros(z.shape[1], dtype=bool)
    return np.max(np.abs(z), axis=0) > bound


def direction(z: np.ndarray, coefficients: np.ndarray | None, row_sums: float) -> np.ndarray:
    """The logits of extreme predictions (class-major (K, m) scores): the map's linear part
    applied to the scores divided by their largest |score| (each in [-1, 1]), times
    1e300 / (the largest row sum of |coefficients|), so every logit is within 1e300 and the
    softmax is the limit of the map's as the scores grow along that direction: the classes of
    the largest linear term share the row. `coefficients` None: the identity (temperature,
    whose positive 1/T does not change the direction). `calib export --sql` writes the same
    arithmetic."""
    zb = z / np.max(np.abs(z), axis=0)
    if coefficients is None:
        return zb * DIRECTION_SCALE
    d = zb * coefficients[:, None] if coefficients.ndim == 1 else coefficients @ zb
    return d * (DIRECTION_SCALE / row_sums)


def affine_logits(z: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """W z + b of class-major (K, n) logits z (w (K, K) full or (K,) diagonal); predictions
    whose largest |logit| passes the map's `overflow_bound` (beyond which a logit could
    overflow) get the logits of their `direction` (the limit of the softmax as the logits grow
    that way), so they are never inf - inf = NaN, and SQL can test the same bound."""
    row_sums = float(np.max(np.abs(w) if w.ndim == 1 else np.abs(w).sum(axis=1)))
    bad = extreme_rows(z, overflow_bound(row_sums, float(np.max(np.abs(b)))))
    with np.errstate(over="ignore", invalid="ignore"):
        a = z * w[:, None] if w.ndim == 1 else w @ z
        a += b[:, None]
    if bad.any():
        a[:, bad] = direction(z[:, bad], w, row_sums)
    return a
