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
            out.append({"rows": int(b - a), "mean_p": float((cp[b] - cp[a]) / (b - a)),
                        "positive_rate": float((cy[b] - cy[a]) / (b - a)),
                        "p_min": float(ps[a]), "p_max": float(ps[b - 1])})
    return out
