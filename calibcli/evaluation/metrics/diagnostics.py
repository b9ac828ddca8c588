"""What a person looks at when a calibration metric moves: per-field bias and reliability bins.

Pure functions of labels y (0/1), probabilities p and field codes; no printing.

- Per field value z (the rows whose `--field-col` is z): rows N_z, positives, mean p,
  positive rate, bias = sum_{i in z}(y_i - p_i) (positive: the model predicts too low) and
  relative bias = bias / sum_{i in z}(y_i + 0.01), the per-field term of Field-RCE
  (Pan et al. 2020, eq. 6). Field-ECE is sum_z |bias_z| / N and Field-RCE is
  sum_z N_z |relative bias_z| / N, so the fields listed first are the ones that move them.
- Reliability diagram: equal-mass bins (rows sorted by p, split into `bins` groups of
  nearly equal size; tied p may straddle two bins), each with its row count, mean p and
  positive rate. One sort of p per column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.evaluation.metrics import kernels, binary as metrics
from calibcli.numeric.pooling import as_weights

RELIABILITY_BINS = 10


def field_breakdown(y: np.ndarray, p: np.ndarray, codes: np.ndarray, names: list[str],
                    top: int) -> dict[str, Any]:
    """The `top` fields with the largest |bias| and the `top` with the largest |relative bias|."""
    return field_breakdown_sums(*kernels.field_sums(y.astype(np.float64), p, codes, None, len(names)),
                                names, top)


def field_breakdown_sums(count: np.ndarray, pos: np.ndarray, psum: np.ndarray, names: list[str],
                         top: int) -> dict[str, Any]:
    """`field_breakdown` from per-field sums (`kernels.field_sums`, or an evaluation state)."""
    k = len(names)
    bias = pos - psum
    relative = bias / (pos + metrics.FIELD_RCE_EPS * count)
    seen = np.flatnonzero(count > 0)
    name_rank = np.argsort(np.argsort(np.array(names, dtype=str))) if k else np.zeros(0, np.int64)

    def rows(score: np.ndarray) -> list[dict[str, Any]]:
        # Largest first; ties broken by more rows, then by name, so the listing is stable.
        pick = seen[np.lexsort((name_rank[seen], -count[seen], -np.abs(score[seen])))][:top]
        return [{"field": names[i], "rows": whole(count[i]), "positives": whole(pos[i]),
                 "mean_p": float(psum[i] / count[i]), "positive_rate": float(pos[i] / count[i]),
                 "bias": float(bias[i]), "relative_bias": float(relative[i])} for i in pick]

    return {"fields": int(seen.size), "top": top,
            "by_bias": rows(bias), "by_relative_bias": rows(relative)}


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


def wilson_interval(rate: float, n: float, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion: the band around a bin's positive
    rate (exact coverage is close to 95% even for small bins and rates near 0 or 1)."""
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))
