"""Evaluation metrics for K-class probabilities: pure functions of labels y (integer codes
0 .. K-1, shape (n,)) and P (shape (n, K), rows of probabilities).

Definitions (means over the N rows; with `sample_weight` a row of weight w counts as w rows
and N is the total weight):

- log-loss: -mean ln p_y, p_y clipped to [1e-15, 1 - 1e-15] as the binary log-loss.
- Brier score (Brier 1950): mean over rows of sum_k (p_k - 1[y = k])^2, in [0, 2].
- accuracy: the weight of rows whose top class (the first k with the largest p_k) is y.
- top-label ECE and MCE: the binary ECE and MCE (`--ece-bins`, `--ece-strategy`, the same
  binning code) of the confidence max_k p_k against whether the top class is y.
- classwise ECE (Kull et al. 2019): the mean over the K classes of the binary ECE of p_k
  against 1[y = k].
- AUC: macro one-vs-rest, the mean over classes of the binary AUC of p_k against
  1[y = k] (ties counted half); classes without both positives and negatives among the rows
  are left out of the mean (NaN when none is left).

`kclass_state.KClassState` computes the same numbers from mergeable partial results.

References
----------
Brier (1950), "Verification of forecasts expressed in terms of probability"; Guo, Pleiss,
Sun, Weinberger (2017), "On Calibration of Modern Neural Networks"; Kull, Perello-Nieto,
Kängsepp, Silva Filho, Song, Flach (2019), "Beyond temperature scaling: Obtaining
well-calibrated multiclass probabilities with Dirichlet calibration".
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import binary as _binary

SUM_TOLERANCE = 1e-6  # rows of P must sum to 1 within this (as `--score-kind auto` reads probabilities)

# display name and direction, in table order (without the top-label reductions `kclass_state` adds)
KCLASS_METRICS = {k: _binary.KCLASS_METRICS[k] for k in _binary.KCLASS_BASE}


def check_inputs(y: Any, P: Any, sample_weight: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(codes int64 (n,), P float64 (n, K), weights or None), or a UsageError saying which
    row breaks what: P rows of finite non-negative values summing to 1 (within
    `SUM_TOLERANCE`, so a value may pass 1 by that much), codes in 0 .. K-1, weights finite
    and non-negative."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[1] < 2:
        raise UsageError(f"K-class probabilities must have shape (n, K) with K >= 2, got {P.shape}")
    codes = np.asarray(y)
    if codes.shape != (P.shape[0],):
        raise UsageError(f"labels must have shape ({P.shape[0]},) for {P.shape[0]} rows of probabilities, "
                         f"got {codes.shape}")
    if codes.dtype.kind not in "iu" and not (codes.dtype.kind == "f" and np.all(codes == np.round(codes))):
        raise UsageError("labels must be integer class codes 0 .. K-1")
    codes = codes.astype(np.int64)
    _first_bad("label code outside 0 .. K-1", (codes < 0) | (codes >= P.shape[1]))
    _first_bad("probability that is negative or not finite", ~np.all(np.isfinite(P) & (P >= 0), axis=1))
    _first_bad(f"row of probabilities that does not sum to 1 (within {SUM_TOLERANCE:g})",
               np.abs(P.sum(axis=1) - 1.0) > SUM_TOLERANCE)
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64).ravel()
        if w.shape != codes.shape:
            raise UsageError(f"weights must have {codes.size} values, got {w.size}")
        _first_bad("weight that is negative or not finite", ~(np.isfinite(w) & (w >= 0)))
    return codes, P, w


def _first_bad(what: str, bad: np.ndarray) -> None:
    if bad.any():
        raise UsageError(f"row {int(np.argmax(bad))}: a {what} ({int(bad.sum())} such rows)")


def _mean(values: np.ndarray, w: np.ndarray | None) -> float:
    return _binary._mean(values, w)


def log_loss_terms(y: np.ndarray, P: np.ndarray, eps: float = _binary.LOG_LOSS_EPS) -> np.ndarray:
    """Each row's -ln p_y, p_y clipped to [eps, 1 - eps]."""
    return -np.log(np.clip(P[np.arange(y.size), y], eps, 1 - eps))


def brier_terms(y: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Each row's sum_k (p_k - 1[y = k])^2."""
    d = P.copy()
    d[np.arange(y.size), y] -= 1.0
    d *= d
    return d.sum(axis=1)


def top_label(y: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(confidence max_k p_k, 1.0 where the top class (first largest p_k) is y, else 0.0)."""
    top = np.argmax(P, axis=1)
    return P[np.arange(y.size), top], (top == y).astype(np.float64)


def log_loss(y: np.ndarray, P: np.ndarray, eps: float = _binary.LOG_LOSS_EPS, sample_weight=None) -> float:
    """Mean (weighted) -ln p_y, clipped as the binary log-loss."""
    return _mean(log_loss_terms(y, P, eps), _binary._weight(sample_weight, y.size))


def brier(y: np.ndarray, P: np.ndarray, sample_weight=None) -> float:
    """Mean (weighted) over rows of sum_k (p_k - 1[y = k])^2."""
    return _mean(brier_terms(y, P), _binary._weight(sample_weight, y.size))


def accuracy(y: np.ndarray, P: np.ndarray, sample_weight=None) -> float:
    """Weighted share of rows whose top class is y."""
    return _mean(top_label(y, P)[1], _binary._weight(sample_weight, y.size))


def binned_pair(y01: np.ndarray, p: np.ndarray, bins: int, strategy: str, sample_weight=None
                ) -> tuple[float, float]:
    """(ECE, MCE) of binary labels `y01` against `p`, binned as `calib evaluate` bins
    (`metrics.calibration_bins`); NaN without weight."""
    xs, n0, n1 = _binary.distribution(y01, p, sample_weight)
    return ece_mce_of_distribution(xs, n0, n1, bins, strategy)


def ece_mce_of_distribution(xs, n0, n1, bins: int, strategy: str) -> tuple[float, float]:
    """(ECE, MCE) from a distribution (distinct p ascending, n0, n1); NaN without weight."""
    if xs.size == 0 or float(np.sum(n0) + np.sum(n1)) <= 0:
        return float("nan"), float("nan")
    weight, mean_p, rate = _binary.calibration_bins(xs, n0, n1, bins, strategy)
    gap = np.abs(mean_p - rate)
    return float(np.sum(weight * gap) / np.sum(weight)), float(np.max(gap))


def top_label_bins(y: np.ndarray, P: np.ndarray, bins: int = _binary.ECE_BINS, strategy: str = "uniform",
                   sample_weight=None) -> tuple[float, float]:
    """(ECE, MCE) of the confidence max_k p_k against whether the top class is right."""
    conf, correct = top_label(y, P)
    return binned_pair(correct, conf, bins, strategy, sample_weight)


def top_label_ece(y: np.ndarray, P: np.ndarray, *binning: Any, **options: Any) -> float:
    """ECE of the top-label confidence (`top_label_bins`'s first value, same arguments)."""
    return top_label_bins(y, P, *binning, **options)[0]


def top_label_mce(y: np.ndarray, P: np.ndarray, *binning: Any, **options: Any) -> float:
    """MCE (largest bin gap) of the top-label confidence (`top_label_bins`'s second value)."""
    return top_label_bins(y, P, *binning, **options)[1]


def classwise_ece(y: np.ndarray, P: np.ndarray, bins: int = _binary.ECE_BINS, strategy: str = "uniform",
                  sample_weight=None) -> float:
    """Mean over the K classes of the binary ECE of p_k against 1[y = k] (Kull et al. 2019)."""
    return float(np.mean([binned_pair((y == k).astype(np.float64), P[:, k], bins, strategy, sample_weight)[0]
                          for k in range(P.shape[1])]))


def macro_auc(per_class: list[float]) -> float:
    """The mean of the defined per-class AUCs (NaN when none is)."""
    defined = [a for a in per_class if not np.isnan(a)]
    return float(np.mean(defined)) if defined else float("nan")


def auc(y: np.ndarray, P: np.ndarray, sample_weight=None) -> float:
    """Macro one-vs-rest AUC over the classes that have positives and negatives."""
    return macro_auc([_binary.auc((y == k).astype(np.float64), P[:, k], sample_weight=sample_weight)
                      for k in range(P.shape[1])])


def compute_all(y: Any, P: Any, sample_weight: Any = None, ece_bins: int = _binary.ECE_BINS,
                ece_strategy: str = "uniform") -> dict[str, float]:
    """Every K-class metric of rows in memory, in `KCLASS_METRICS` order (input checked)."""
    y, P, w = check_inputs(y, P, sample_weight)
    if not (y.size if w is None else w.sum()) > 0:
        return dict.fromkeys(KCLASS_METRICS, float("nan"))
    with np.errstate(all="ignore"):
        top_ece, top_mce = top_label_bins(y, P, ece_bins, ece_strategy, w)
        return {
            "log_loss": log_loss(y, P, sample_weight=w), "brier": brier(y, P, w), "accuracy": accuracy(y, P, w),
            "top_label_ece": top_ece, "top_label_mce": top_mce,
            "classwise_ece": classwise_ece(y, P, ece_bins, ece_strategy, w), "auc": auc(y, P, w),
        }


def label_codes(labels: Any, k: int, classes: Sequence[Any] | None = None) -> tuple[np.ndarray, list[Any]]:
    """(codes 0 .. K-1 of `labels`, the K class names) for K probability columns.

    With `classes` (the columns' classes in order) each label must be one of them (by value,
    or by its text: label 2 matches class "2"). Without it the labels' distinct values,
    sorted, are the classes when there are K of them; otherwise integer labels in
    0 .. K-1 are column indices (a class may be absent from the rows)."""
    values = np.asarray(labels)
    if values.ndim != 1:
        raise UsageError(f"labels must be 1-D, got shape {values.shape}")
    uniq, inverse = np.unique(values, return_inverse=True)
    if classes is None:
        if uniq.size == k:
            return inverse.astype(np.int64), uniq.tolist()
        if values.dtype.kind in "iu" and uniq.size and uniq[0] >= 0 and uniq[-1] < k:
            return values.astype(np.int64), list(range(k))
        raise UsageError(f"the labels have {uniq.size} distinct values for {k} probability columns",
                         hint="pass classes= (the class of each column, in order)")
    names = list(classes)
    if len(names) != k:
        raise UsageError(f"{len(names)} classes for {k} probability columns")
    if len({_key(c) for c in names}) != k:
        raise UsageError(f"duplicate class names in {names}")
    index = {_key(c): i for i, c in enumerate(names)}
    lut = np.array([index.get(_key(u), -1) for u in uniq.tolist()], dtype=np.int64)
    codes = lut[inverse]
    if (codes < 0).any():
        row = int(np.argmax(codes < 0))
        raise UsageError(f"row {row}: label {values[row].item()!r} is not one of the classes {names}")
    return codes, names


def _key(value: Any) -> str:
    """A label's text for matching classes: 2, 2.0 and "2" are the same class."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)
