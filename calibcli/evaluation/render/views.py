"""The binned reliability diagram's data and the histogram of p, read off a result's
distribution of p (ascending distinct p with the weight of negatives n0 and positives n1):

- `binned_reliability`: the bins of ECE and MCE (`--ece-bins`, `--ece-strategy`), each with
  its rows, mean p, positive rate and 95% Wilson band, and its p range. A distinct p is one
  entry of the distribution, so tied p always fall in one bin;
- the histogram of p (`diagnostics.histogram_of_distribution`).

The CORP and smooth diagrams' data come from `corp.diagram` and `smooth.smooth_curve`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.evaluation.metrics import diagnostics, kernels, binary as metrics
from calibcli.numeric.pooling import as_weights


def binned_reliability(v: np.ndarray, n0: np.ndarray, n1: np.ndarray, bins: int = metrics.ECE_BINS,
                       strategy: str = "uniform") -> list[dict[str, Any]]:
    """The non-empty bins of ECE/MCE: {rows, mean_p, positive_rate, rate_low, rate_high, p_min, p_max}."""
    w0, w1 = as_weights(n0), as_weights(n1)
    if strategy == "quantile":
        inner = kernels.weighted_percentiles(v, w0 + w1, np.linspace(0, 100, bins + 1))[1:-1]
        index = np.searchsorted(inner, v)
    else:
        index = np.minimum((v * bins).astype(np.int64), bins - 1)
    weight = np.bincount(index, weights=w0 + w1, minlength=bins)
    psum = np.bincount(index, weights=v * (w0 + w1), minlength=bins)
    pos = np.bincount(index, weights=w1, minlength=bins)
    seen = (w0 + w1) > 0
    ks = np.flatnonzero(weight > 0)
    vs, at = v[seen], index[seen]  # the bin index never decreases with p: each bin is one slice
    first, last = np.searchsorted(at, ks, "left"), np.searchsorted(at, ks, "right") - 1
    out = []
    for k, a, b in zip(ks, first, last):
        rate = float(pos[k] / weight[k])
        low, high = diagnostics.wilson_interval(rate, float(weight[k]))
        out.append({"rows": diagnostics.whole(weight[k]), "mean_p": float(psum[k] / weight[k]),
                    "positive_rate": rate, "rate_low": low, "rate_high": high,
                    "p_min": float(vs[a]), "p_max": float(vs[b])})
    return out


def add_plot_views(row, v: np.ndarray, n0: np.ndarray, n1: np.ndarray, ece_bins: int, ece_strategy: str) -> None:
    """Set `row.reliability` (the bins of ECE) and `row.histogram` of an `EvalRow` from its distribution."""
    row.reliability = binned_reliability(v, n0, n1, ece_bins, ece_strategy)
    row.histogram = diagnostics.histogram_of_distribution(v, n0, n1)
