"""The arrays a fit sees: checked float input, the classes' summed weights, Platt's targets
and the weights rescaled to stay inside the float64 range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibcli.errors import FitError


def class_weights(labels: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """(summed weight of the positives, of the negatives) of 0/1 labels; a broadcast unit
    weight (no --weight-col) is a count, with no n-long temporary."""
    if weights.ndim == 1 and weights.size and weights.strides[0] == 0 and weights[0] == 1:
        pos = int(np.count_nonzero(labels == 1))
        return float(pos), float(np.count_nonzero(labels == 0))
    return _safe_sum(weights[labels == 1]), _safe_sum(weights[labels == 0])


def _safe_sum(w: np.ndarray) -> float:
    """Sum of non-negative weights; one that overflows is summed scaled by a power of two
    (inf only where the true sum is beyond the float64 range)."""
    with np.errstate(over="ignore"):
        total = float(np.sum(w))
    if math.isfinite(total) or w.size == 0:
        return total
    e = math.frexp(float(np.max(w)))[1]
    with np.errstate(over="ignore"):
        return float(np.ldexp(np.sum(np.ldexp(w, -e)), e))


def platt_targets(labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Platt's label correction (Allikivi & Kull 2019, section 3).

    Positives become 1 - 1/(N+ + 2) = (N+ + 1)/(N+ + 2), negatives 1/(N- + 2). With weights,
    N+ and N- are the summed weights of the positives and negatives.
    """
    return platt_values(labels, *class_weights(labels, weights))


def platt_values(labels: np.ndarray, n_pos: float, n_neg: float) -> np.ndarray:
    """`platt_targets` from the summed weights of the two classes (inf: a target of 1 or 0)."""
    high = (n_pos + 1.0) / (n_pos + 2.0) if math.isfinite(n_pos) else 1.0
    return np.where(labels == 1, high, 1.0 / (n_neg + 2.0))


# Weights are kept inside [2**-WEIGHT_EXP, 2**WEIGHT_EXP]·(a few) for the fit, so that their
# sums, squares and products with targets neither overflow nor underflow (see `scaled_weights`).
WEIGHT_EXP = 400


def scaled_weights(w: np.ndarray, kind: str) -> np.ndarray:
    """The weights a fit sees.

    importance: only ratios matter; they are divided by a power of two near the largest
    (exact) and rescaled to sum to the number of rows with positive weight, so w and c*w give
    the same map. frequency: a row of weight k counts as k rows; weights whose largest is
    beyond 2**+-WEIGHT_EXP are multiplied by the power of two that brings it to that bound
    (still a huge or a tiny count: ratios exact, no overflowing sums, no targets times a
    subnormal weight rounding to 0).
    """
    top = float(np.max(w))
    e = math.frexp(top)[1]
    negligible = (w > 0) & (w < math.ldexp(top, -NEGLIGIBLE_EXP))
    if negligible.any():
        w = np.where(negligible, 0.0, w)
    if kind == "importance":
        positive = w > 0
        if np.all(w[positive] == w[positive][0]):
            return positive.astype(np.float64)  # equal weights: exactly the unweighted rows
        if abs(e) > WEIGHT_EXP:
            w = np.ldexp(w, -e)
        return w * (np.count_nonzero(w) / float(np.sum(w)))
    if e > WEIGHT_EXP:
        return np.ldexp(w, WEIGHT_EXP - e)
    if e < -WEIGHT_EXP:
        return np.ldexp(w, -WEIGHT_EXP - e)
    return w


def unit_scaled(w: np.ndarray | None) -> np.ndarray | None:
    """Weights multiplied by the power of two that brings the largest into [1/2, 1): their
    ratios exact and their sum at most the row count, for weighted means (the training
    log-loss and Brier of a fit report) that must not overflow whatever the weights' scale."""
    if w is None or w.size == 0:
        return w
    top = float(np.max(w))
    with np.errstate(under="ignore"):  # a weight 2^-1074 below the largest is none
        return np.ldexp(w, -math.frexp(top)[1]) if top > 0 and math.isfinite(top) else w


# A weight below 2**-NEGLIGIBLE_EXP times the largest counts as 0: its share is far below
# float64 resolution, and kept it would be a subnormal weight whose reciprocal overflows.
NEGLIGIBLE_EXP = 600


def as_float_array(values: Any, what: str) -> np.ndarray:
    """A 1-D float64 array from state or user input; raises FitError on other shapes."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise FitError(f"{what} must be one-dimensional, got shape {arr.shape}")
    return arr


def weighted_rows(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of positive weight (a zero-weight row is no evidence; fits that place bins or
    knots by the rows must not see it)."""
    keep = w > 0
    return (s, y, w) if keep.all() else (s[keep], y[keep], w[keep])
