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

from calibcli.evaluation import metrics

RELIABILITY_BINS = 10


def field_breakdown(y: np.ndarray, p: np.ndarray, codes: np.ndarray, names: list[str],
                    top: int) -> dict[str, Any]:
    """The `top` fields with the largest |bias| and the `top` with the largest |relative bias|."""
    k = len(names)
    count = np.bincount(codes, minlength=k).astype(np.float64)
    pos = np.bincount(codes, weights=y.astype(np.float64), minlength=k)
    psum = np.bincount(codes, weights=p, minlength=k)
    bias = pos - psum
    relative = bias / (pos + metrics.FIELD_RCE_EPS * count)
    seen = np.flatnonzero(count > 0)
    name_rank = np.argsort(np.argsort(np.array(names, dtype=str))) if k else np.zeros(0, np.int64)

    def rows(score: np.ndarray) -> list[dict[str, Any]]:
        # Largest first; ties broken by more rows, then by name, so the listing is stable.
        pick = seen[np.lexsort((name_rank[seen], -count[seen], -np.abs(score[seen])))][:top]
        return [{"field": names[i], "rows": int(count[i]), "positives": int(pos[i]),
                 "mean_p": float(psum[i] / count[i]), "positive_rate": float(pos[i] / count[i]),
                 "bias": float(bias[i]), "relative_bias": float(relative[i])} for i in pick]

    return {"fields": int(seen.size), "top": top,
            "by_bias": rows(bias), "by_relative_bias": rows(relative)}


def reliability_bins(y: np.ndarray, p: np.ndarray, bins: int = RELIABILITY_BINS) -> list[dict[str, Any]]:
    """Equal-mass bins of p: each with rows, mean p, positive rate and its p range."""
    order = np.argsort(p)
    n = p.size
    edges = np.linspace(0, n, min(bins, n) + 1).round().astype(np.int64)
    ps = p[order]
    cp = np.concatenate([[0.0], np.cumsum(ps)])
    cy = np.concatenate([[0.0], np.cumsum(y[order], dtype=np.float64)])
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        if b > a:
            rate = float((cy[b] - cy[a]) / (b - a))
            low, high = wilson_interval(rate, int(b - a))
            out.append({"rows": int(b - a), "mean_p": float((cp[b] - cp[a]) / (b - a)),
                        "positive_rate": rate, "p_min": float(ps[a]), "p_max": float(ps[b - 1]),
                        "rate_low": low, "rate_high": high})
    return out


HISTOGRAM_BINS = 20


def histogram(p: np.ndarray, bins: int = HISTOGRAM_BINS) -> list[int]:
    """Rows with p in each of `bins` equal-width bins of [0, 1] (1.0 in the last)."""
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    return np.bincount(index, minlength=bins).tolist()


def wilson_interval(rate: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion: the band around a bin's positive
    rate (exact coverage is close to 95% even for small bins and rates near 0 or 1)."""
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))
