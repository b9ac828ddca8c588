"""What a person looks at when a calibration metric moves: per-field bias and reliability bins.

Pure functions of labels y (0/1), probabilities p and field codes; no printing.

- Per field value z (the rows whose `--field-col` is z) with at least `--min-rows` rows:
  rows N_z, positives, mean p, positive rate, gap = mean p - positive rate (positive: the
  model predicts too high), bias = sum_{i in z}(y_i - p_i) and relative bias = bias /
  sum_{i in z}(y_i + 0.01) (the per-field terms of Field-ECE and Field-RCE, Pan et al.
  2020, eq. 5-6), the exact binomial test of the positives against the mean p and its
  p-value adjusted over every value tested (Benjamini-Hochberg). Values are ranked by that
  evidence, not by the size of the gap: a 10-row value with a gap of 600% is noise.
- Reliability diagram: equal-mass bins (rows sorted by p, split into `bins` groups of
  nearly equal size; tied p may straddle two bins), each with its row count, mean p and
  positive rate. One sort of p per column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.evaluation.metrics import kernels, significance, binary as metrics
from calibcli.evaluation.metrics.significance import wilson_interval  # noqa: F401 (imported from here too)
from calibcli.numeric.pooling import as_weights

RELIABILITY_BINS = 10


MIN_ROWS = 30  # `--min-rows`: field values with fewer rows are not tested or shown


def field_breakdown(y: np.ndarray, p: np.ndarray, codes: np.ndarray, names: list[str],
                    top: int, min_rows: float = MIN_ROWS) -> dict[str, Any]:
    """The `top` field values with the strongest evidence of a gap (`field_breakdown_sums`)."""
    return field_breakdown_sums(*kernels.field_sums(y.astype(np.float64), p, codes, None, len(names)),
                                names, top, min_rows)


def field_breakdown_sums(count: np.ndarray, pos: np.ndarray, psum: np.ndarray, names: list[str],
                         top: int, min_rows: float = MIN_ROWS) -> dict[str, Any]:
    """Per field value with at least `min_rows` rows (weight): the exact binomial test of its
    positives against its mean p (`significance.binomial_p`), the p-values adjusted over every
    value tested by Benjamini-Hochberg; the `top` values ranked by adjusted p-value (then by
    the size of the gap in standard errors, then rows and name), from per-field sums
    (`kernels.field_sums`, or an evaluation state)."""
    seen = np.flatnonzero(count > 0)
    tested = seen[count[seen] >= min_rows]
    n, k = count[tested], pos[tested]
    mean_p = psum[tested] / n
    p_values = significance.binomial_p(k, n, mean_p) if tested.size else np.zeros(0)
    adjusted = significance.benjamini_hochberg(p_values)
    gap = mean_p - k / n
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(gap) * np.sqrt(n / (mean_p * (1 - mean_p)))
    z = np.where(np.isnan(z), 0.0, z)
    name_rank = np.argsort(np.argsort(np.array([names[i] for i in tested], dtype=str))) if tested.size else tested
    order = np.lexsort((name_rank, -n, -z, np.where(np.isnan(adjusted), 2.0, adjusted)))[:top]
    values = []
    for j in order:
        i = tested[j]
        bias = float(pos[i] - psum[i])
        values.append({"field": names[i], "rows": whole(count[i]), "positives": whole(pos[i]),
                       "mean_p": float(mean_p[j]), "positive_rate": float(k[j] / n[j]), "gap": float(gap[j]),
                       "bias": bias, "relative_bias": bias / float(pos[i] + metrics.FIELD_RCE_EPS * count[i]),
                       "p_value": float(p_values[j]), "adjusted_p": float(adjusted[j]),
                       "significant": bool(adjusted[j] <= SIGNIFICANCE)})
    return {"fields": int(seen.size), "tested": int(tested.size), "min_rows": whole(min_rows), "top": top,
            "significant": int(np.count_nonzero(adjusted <= SIGNIFICANCE)), "level": SIGNIFICANCE,
            "test": "exact binomial, two-sided (doubled smaller tail), at the mean p of the value's rows",
            "adjustment": "benjamini-hochberg", "values": values}


SIGNIFICANCE = 0.05  # the false discovery rate at which a field value is flagged


def whole(x: float) -> int | float:
    """A count as an int; a weight sum that is not whole stays a float."""
    return int(x) if float(x).is_integer() else float(x)


def reliability_bins(y: np.ndarray, p: np.ndarray, bins: int = RELIABILITY_BINS) -> list[dict[str, Any]]:
    """Equal-mass bins of p: each with rows, mean p, positive rate (with its 95% Wilson band)
    and its p range; tied p share their pooled positive rate."""
    return reliability_from_distribution(*metrics.distribution(y.astype(np.float64), p), bins)


def reliability_from_distribution(v: np.ndarray, n0: np.ndarray, n1: np.ndarray,
                                  bins: int = RELIABILITY_BINS) -> list[dict[str, Any]]:
    """Equal-mass bins of the rows behind a distribution (ascending distinct p `v` with n0
    negatives and n1 positives each): tied p share their pooled positive rate, and a bin
    edge may fall inside a tie, as it can in `reliability_bins`."""
    runs = kernels.SortedRuns(v, n0, n1)
    n = runs.total
    if n <= 0:
        return []
    k = int(min(bins, np.ceil(n)))
    edges = np.linspace(0, n, k + 1)
    if float(n).is_integer():
        edges = edges.round()
    cp, cy = runs.sums(edges)
    first = np.clip(np.searchsorted(runs.at, edges[:-1], side="right") - 1, 0, v.size - 1)
    last = np.clip(np.searchsorted(runs.at, edges[1:], side="left") - 1, 0, v.size - 1)
    out = []
    for i in range(k):
        mass = edges[i + 1] - edges[i]
        if mass > 0:
            rate = float((cy[i + 1] - cy[i]) / mass)
            low, high = wilson_interval(rate, mass)
            out.append({"rows": whole(mass), "mean_p": float((cp[i + 1] - cp[i]) / mass),
                        "positive_rate": rate, "p_min": float(v[first[i]]), "p_max": float(v[last[i]]),
                        "rate_low": low, "rate_high": high})
    return out


HISTOGRAM_BINS = 20


def histogram(p: np.ndarray, bins: int = HISTOGRAM_BINS) -> list[int]:
    """Rows with p in each of `bins` equal-width bins of [0, 1] (1.0 in the last)."""
    return histogram_of_distribution(p, np.zeros(p.size), np.ones(p.size), bins)


def histogram_of_distribution(v: np.ndarray, n0: np.ndarray, n1: np.ndarray,
                              bins: int = HISTOGRAM_BINS) -> list[int | float]:
    """`histogram` of the rows behind a distribution (distinct p with n0 and n1 each);
    weights sum per bin (whole numbers stay ints)."""
    index = np.minimum((v * bins).astype(np.int64), bins - 1)
    return [whole(c) for c in np.bincount(index, weights=as_weights(n0) + as_weights(n1),
                                          minlength=bins)]
