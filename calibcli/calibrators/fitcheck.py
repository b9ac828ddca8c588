"""A fitted map checked on the rows it was fitted on: it must not make them worse than the
scores as given, nor give a class probability 0 on the rows where it was seen.

A calibration map is fitted to lower its training loss; when the log-loss of its
predictions on those very rows is above the log-loss of the scores themselves (the identity
map), the fit has gone wrong for these data or does not suit them, and nothing else would
say so. The same holds for a probability of exactly 0 on a row whose label is that class
(an infinite loss the clipped log-loss hides) and, for K classes, for a class with no rows
that the map gives exactly 0. Each is a `CalibWarning` (the CLI shows it; `--strict` makes
it an error). docs/algorithms.md ("Fits checked on their own rows") lists per method when
each can happen.

The log-loss is the one the fit summary reports (`evaluation.metrics`: p clipped to
[1e-15, 1 - 1e-15]), weighted like the fit; "worse" allows rounding (a relative 1e-12).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibcli.calibrators.base import fit_warning

LOSS_EPS = 1e-15  # the metrics' clip of p in the log-loss (evaluation.metrics.binary.LOG_LOSS_EPS)
TOLERANCE = 1e-12  # relative: a training loss above the identity's by less is rounding
_ROWS = 1 << 16  # values (rows x K) per chunk of a check


def worse_than_scores(name: str, before: float, after: float, cause: str = "") -> str | None:
    """The warning when the map's training log-loss `after` is worse than the scores' own
    `before` (None when it is not, or either is not a number)."""
    if not (math.isfinite(before) and math.isfinite(after)) or after <= before + TOLERANCE * max(abs(before), 1e-300):
        return None
    why = cause or ("the scores may be calibrated already, or the method's form does not suit them "
                    "(`calib compare` ranks methods on held-out folds)")
    return (f"{name}: the map's training log-loss {after:.6g} is worse than the scores' own {before:.6g} "
            f"on the rows it was fitted on: {why}")


def weights_cause(weights: Any, weight_kind: str) -> str:
    """Why a map can be worse than the scores when frequency weights add up to less than one
    row ("" otherwise)."""
    if weights is None or weight_kind != "frequency":
        return ""
    with np.errstate(over="ignore"):
        total = float(np.sum(weights))
    if not total < 1:
        return ""
    return (f"the frequency weights add up to {total:.3g} rows, so little evidence that the map stays near its "
            "prior (Platt's targets near 1/2); with --weight-kind importance only their ratios count")


def _weights(w: Any, n: int) -> np.ndarray | None:
    """Weights as a float64 array brought near 1 by a power of two (their ratios exact, their
    sums finite), or None."""
    if w is None:
        return None
    w = np.asarray(w, dtype=np.float64).reshape(n)
    top = float(np.max(w)) if n else 0.0
    with np.errstate(under="ignore"):  # a weight 2^-1074 below the largest is none
        return np.ldexp(w, -math.frexp(top)[1]) if top > 0 else w


def _log_terms(p: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(p, LOSS_EPS, 1.0 - LOSS_EPS))


def check_binary(calibrator: Any, scores: np.ndarray, labels: np.ndarray, weights: Any = None,
                 features: Any = None, weight_kind: str = "frequency") -> None:
    """Warn when a fitted binary map is worse on its training rows than the scores (when they
    are probabilities) or gives probability 0 to a row's own label (`calibcli.fit`'s check;
    `calib fit` compares the training log-losses its summary reports)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    n = s.size
    if n == 0:
        return
    w = _weights(weights, n)
    raw = bool(s.min() >= 0 and s.max() <= 1)
    before = after = total = 0.0
    zero, first = 0, -1
    for lo in range(0, n, _ROWS):
        part = slice(lo, lo + _ROWS)
        feats = None if features is None else {k: v[part] for k, v in features.items()}
        p = calibrator.predict(s[part], features=feats) if calibrator.uses_features else calibrator.predict(s[part])
        own = np.where(y[part] == 1, p, 1.0 - p)
        counted = np.ones(own.size, dtype=bool) if w is None else w[part] > 0
        impossible = (own <= 0) & counted
        if impossible.any() and first < 0:
            first = lo + int(np.argmax(impossible))
        zero += int(np.count_nonzero(impossible))
        if raw:
            given = np.where(y[part] == 1, s[part], 1.0 - s[part])
            weight = None if w is None else w[part]
            before += float(_log_terms(given).sum() if weight is None else _log_terms(given) @ weight)
            after += float(_log_terms(own).sum() if weight is None else _log_terms(own) @ weight)
            total += float(own.size if weight is None else weight.sum())
    if zero:
        fit_warning(f"{calibrator.name}: the map gives probability 0 to the label of {zero} of its {n} training "
                    f"rows (first: row {first}), a certainty those rows contradict", stacklevel=2)
    if raw and total > 0:
        message = worse_than_scores(calibrator.name, before / total, after / total, weights_cause(weights, weight_kind))
        if message:
            fit_warning(message, stacklevel=2)


def _identity_true(s: np.ndarray, rows: np.ndarray, y: np.ndarray, kind: str) -> np.ndarray:
    """The probability the scores themselves give each row's class: the probability as given,
    or the softmax of the logits."""
    if kind == "probability":
        return s[rows, y]
    top = s.max(axis=1)
    with np.errstate(under="ignore", over="ignore"):
        lse = np.log(np.exp(s - top[:, None]).sum(axis=1))
        return np.exp(s[rows, y] - top - lse)


def check_kclass(calibrator: Any, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None,
                 absent: np.ndarray) -> None:
    """Warn when a fitted K-class map is worse on its training rows (`scores` (n, K), class
    codes `labels`, `weights` or None) than the scores as given, gives a class probability 0
    on rows of that class, or gives an `absent` class (no rows) exactly 0."""
    n, k = scores.shape
    w = _weights(weights, n)
    rows = max(1, _ROWS // k)
    before = after = total = 0.0
    zero, first, given_zero, given_first, absent_zero, kept = 0, -1, 0, -1, 0, 0
    for lo in range(0, n, rows):
        part = slice(lo, lo + rows)
        s, y = scores[part], labels[part]
        idx = np.arange(y.size)
        P = calibrator.predict(s)
        own = P[idx, y]
        given = _identity_true(s, idx, y, calibrator.score_kind)
        weight = None if w is None else w[part]
        after += float(_log_terms(own).sum() if weight is None else _log_terms(own) @ weight)
        before += float(_log_terms(given).sum() if weight is None else _log_terms(given) @ weight)
        total += float(y.size if weight is None else weight.sum())
        if (own <= 0).any():
            first = first if first >= 0 else lo + int(np.argmax(own <= 0))
            zero += int(np.count_nonzero(own <= 0))
            kept += int(np.count_nonzero((own <= 0) & (given <= 0)))
        if (given <= 0).any():
            given_first = given_first if given_first >= 0 else lo + int(np.argmax(given <= 0))
            given_zero += int(np.count_nonzero(given <= 0))
        if absent.any():
            absent_zero += int(np.count_nonzero(np.any(P[:, absent] <= 0, axis=1)))
    name = calibrator.name
    if zero:
        already = f"; the scores gave {kept} of them 0 already" if kept else ""
        fit_warning(f"{name}: the map gives {zero} of its {n} training rows probability 0 for their own class "
                    f"(first: row {first}), a certainty those rows contradict{already}", stacklevel=2)
    if absent_zero:
        codes = ", ".join(map(str, np.flatnonzero(absent)[:5]))
        fit_warning(f"{name}: class code(s) {codes} have no rows in the calibration set and the map gives them "
                    f"probability 0 on {absent_zero} of {n} rows: nothing in the data supports that certainty "
                    "(a weaker reg_mu, or 0, lets the intercepts run)", stacklevel=2)
    cause = ""
    if given_zero:
        cause = (f"{given_zero} rows give their own class probability 0 (first: row {given_first}); the fit counts "
                 "each as ln 2^-1075 = -745 where the log-loss clips it at 1e-15, so those rows pull the map: "
                 "correct or drop them")
    message = worse_than_scores(name, before / total, after / total, cause) if total > 0 else None
    if message:
        fit_warning(message, stacklevel=2)


def equal_scores_note(calibrator: Any, n: int, score: float) -> str:
    """What `calib fit` says when all n training scores equal `score`: the data say nothing of
    how the probability changes with the score, and whether the fitted map is then a constant
    (most methods) or not (venn-abers gives p0 and p1 their own values below, at and above the
    one calibration score; ilps extrapolates its default slope), read off the map itself."""
    head = f"all {n} scores equal {score:g}: the data say nothing of how the probability changes with the score"
    if calibrator.uses_features:
        return head
    probe = np.array([score - max(abs(score), 1.0), score, score + max(abs(score), 1.0)])
    if calibrator.needs_probabilities:
        probe = np.clip(probe, 0.0, 1.0)
    with np.errstate(all="ignore"):
        p = calibrator.predict(probe)
    if np.all(p == p[0]):
        return f"{head}; the map is the constant {float(p[0]):.6g}"
    return (f"{head}; the map is not a constant: it gives {float(p[0]):.4g} at {float(probe[0]):g}, "
            f"{float(p[1]):.4g} at {score:g} and {float(p[2]):.4g} at {float(probe[2]):g}")


__all__ = ["check_binary", "check_kclass", "equal_scores_note", "weights_cause", "worse_than_scores"]
