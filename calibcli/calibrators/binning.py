"""Histogram binning: the calibrated value is the (weighted) positive rate of the score's bin.

Bins are equal-frequency (weighted inverted-CDF quantiles of the training scores; edges that coincide because of
tied scores are merged, so heavy ties give fewer bins) or equal-width over the training
range. A score equal to an edge belongs to the bin below it (so with n distinct scores
and n_bins dividing n, equal-frequency bins hold equally many). An empty equal-width bin takes
the value linearly interpolated (over bin index) between its nearest non-empty neighbours,
constant beyond the outermost ones. Scores outside the training range fall in the first or
last bin.

References
----------
Zadrozny & Elkan (2001), "Obtaining calibrated probability estimates from decision trees
and naive Bayesian classifiers".
"""

from __future__ import annotations

import math

import numpy as np

from calibcli.calibrators.piecewise import StepMap
from calibcli.calibrators.registry import register
from calibcli.calibrators.params import SAFE_PLATT_CORRECTION, Param


def weighted_quantiles(s: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inverted-CDF quantiles: the smallest score whose cumulative weight share reaches q.

    With unit weights this is numpy's method="inverted_cdf"; weight 2 acts as a duplicated row.
    """
    order = np.argsort(s, kind="stable")
    cum = np.cumsum(w[order])
    idx = np.searchsorted(cum, q * cum[-1] * (1 - 1e-12), side="left")  # guard 0.3*10 > 3
    return s[order][np.minimum(idx, s.size - 1)]


def width_edges(lo: float, hi: float, n_bins: int) -> np.ndarray:
    """The n_bins - 1 inner edges of equal-width bins over [lo, hi]: `np.linspace` where hi - lo
    is finite, else lo/n * (n - k) + hi/n * k, whose terms cannot overflow (a range of
    +-1e308 keeps all its bins)."""
    if math.isfinite(hi - lo):
        with np.errstate(over="ignore"):  # numpy's own temporaries near the float64 limit; the edges are finite
            return np.linspace(lo, hi, n_bins + 1)[1:-1]
    k = np.arange(1, n_bins, dtype=np.float64)
    return np.sort((lo / n_bins) * (n_bins - k) + (hi / n_bins) * k)


def bin_edges(s: np.ndarray, w: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    """Inner edges (ascending, distinct) splitting the training scores into at most n_bins bins."""
    lo, hi = float(s.min()), float(s.max())
    if strategy == "width":
        inner = width_edges(lo, hi, n_bins)
    else:
        inner = weighted_quantiles(s, w, np.arange(1, n_bins) / n_bins)
    inner = np.unique(inner)
    return inner[(inner >= lo) & (inner < hi)]


def bin_values(s: np.ndarray, y: np.ndarray, w: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Weighted target mean per bin; empty bins interpolated from their non-empty neighbours."""
    idx = np.searchsorted(edges, s, side="left")
    nb = edges.size + 1
    sw = np.bincount(idx, weights=w, minlength=nb)
    swy = np.bincount(idx, weights=w * y, minlength=nb)
    filled = sw > 0
    values = np.zeros(nb)
    values[filled] = swy[filled] / sw[filled]
    if not filled.all():
        k = np.arange(nb)
        values = np.interp(k, k[filled], values[filled])
    return values


@register
class BinningCalibrator(StepMap):
    """Histogram binning with equal-frequency or equal-width bins."""

    name = "binning"
    complexity = 10
    fitted = "one rate per bin and the bin edges (n_bins, 10 by default)"
    description = "histogram binning: positive rate per equal-frequency or equal-width bin"
    params = (
        Param("n_bins", int, 10, "number of bins", low=1, high=1_000_000),
        Param("strategy", str, "quantile", "bin edges: quantile (equal-frequency) or width",
              choices=("quantile", "width")),
        SAFE_PLATT_CORRECTION,
    )
    monotone = False

    def _fit(self, s, y, w):
        self.edges_ = bin_edges(s, w, self.params["n_bins"], self.params["strategy"])
        self.values_ = bin_values(s, y, w, self.edges_)
