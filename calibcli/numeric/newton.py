"""Damped Newton fits: `newton_minimize`, the loop the logistic and spline calibrators and the
calibration line share, and that line: the logistic recalibration logit P(y=1) = a + b logit(p)
over the weighted distribution of p (ascending distinct p with the weight n0 of negatives and n1 of
positives at each): the maximum-likelihood calibration slope b and intercept a.

Each Newton pass goes over the distribution in chunks of `pooling.CHUNK` entries, computing
logit(p) chunk by chunk, so its temporaries stay a few chunk-sized arrays.
"""

from __future__ import annotations

import numpy as np

from calibcli.numeric import pooling
from calibcli.numeric.pooling import as_weights

WARM = 1 << 19  # distinct p in the warm-start subsample
# The calibration line's Newton decrement (of the mean log-loss) at which the last step is
# taken without another pass: the step is then ~1e-8 and the error after it ~1e-16.
LAST_STEP = 1e-16
SEPARATED = 1e-12  # a mean log-loss below this at the end: separated classes, no finite optimum


def logistic_pass(p: np.ndarray, n0: np.ndarray | None, n1: np.ndarray, a: float, b: float,
                  eps: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Log-likelihood of logit P(y=1) = a + b x, x = logit(p) (p clipped to [eps, 1 - eps]),
    over weighted distinct p, its gradient and Hessian in (a, b). With t = exp(-|eta|), the
    softplus is max(eta, 0) + log(1 + t) and the sigmoid 1/(1 + t) or t/(1 + t): one exp and
    one log an entry instead of np.logaddexp's cost (docs/algorithms.md, "Calibration slope
    and intercept"). `n0` None means one row per entry (n0 = 1 - n1): no weight products."""
    ll, g, h = 0.0, np.zeros(2), np.zeros((2, 2))
    for lo in range(0, p.size, pooling.CHUNK):
        xs = np.clip(p[lo:lo + pooling.CHUNK], eps, 1 - eps)
        xs /= 1 - xs
        np.log(xs, out=xs)
        y1 = as_weights(n1[lo:lo + pooling.CHUNK])
        eta = xs * b
        eta += a
        t = np.abs(eta)
        np.negative(t, out=t)
        np.exp(t, out=t)
        one_t = 1.0 + t
        soft = np.maximum(eta, 0.0)
        soft += np.log(one_t)
        m = np.where(eta >= 0, 1.0, t)
        m /= one_t
        w = 1.0 - m
        w *= m
        if n0 is None:
            ll += float(y1 @ eta - soft.sum())
            r = y1 - m
        else:
            c = y1 + as_weights(n0[lo:lo + pooling.CHUNK])
            ll += float(y1 @ eta - c @ soft)
            r = y1 - c * m
            w *= c
        wx = w @ xs
        g += (r.sum(), r @ xs)
        h += ((w.sum(), wx), (wx, w @ (xs * xs)))
    return ll, g, h


def _logit_line(x: np.ndarray, n0: np.ndarray | None, n1: np.ndarray, start: tuple[float, float], total: float,
                iterations: int, eps: float) -> tuple[float, float]:
    """(a, b) by `newton_minimize` on the mean negative log-likelihood, from `start`; NaN when
    there is no finite optimum: the classes are separated (the loss falls to 0 as b grows,
    so the search ends with a vanishing loss) or the slope runs beyond 1e6."""
    def parts(beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        ll, g, h = logistic_pass(x, n0, n1, float(beta[0]), float(beta[1]), eps)
        return -ll / total, -g / total, h / total

    beta, _, _ = newton_minimize(parts, np.array(start, dtype=np.float64), max_iter=iterations,
                                 last_step=LAST_STEP, min_t=1e-10, rel_tol=1e-13)
    a, b = float(beta[0]), float(beta[1])
    if not (np.isfinite(a) and np.isfinite(b)) or abs(b) > 1e6 or parts(beta)[0] < SEPARATED:
        return float("nan"), float("nan")
    return a, b


def fit_logit_line(x: np.ndarray, n0: np.ndarray, n1: np.ndarray, eps: float, iterations: int
                   ) -> tuple[float, float]:
    """(a, b) of the fit from (0, 1), warm-started on an evenly spaced subsample of the distinct
    p when they are many (then the full data takes about two passes). `x` float64 ascending."""
    unit = all(bool(np.all(as_weights(n0[lo:lo + pooling.CHUNK]) + as_weights(n1[lo:lo + pooling.CHUNK]) == 1))
               for lo in range(0, x.size, pooling.CHUNK))
    counts = None if unit else n0  # None: one row per distinct p

    def total(part: slice) -> float:
        return float(x[part].size if unit else np.sum(n0[part]) + np.sum(n1[part]))

    start = (0.0, 1.0)
    if x.size > 4 * WARM:
        every = slice(None, None, x.size // WARM)
        wa, wb = _logit_line(x[every], None if counts is None else counts[every], n1[every], start, total(every),
                             iterations, eps)
        if np.isfinite(wa) and np.isfinite(wb):
            start = (wa, wb)
    return _logit_line(x, counts, n1, start, total(slice(None)), iterations, eps)


def newton_minimize(parts, beta: np.ndarray, *, max_iter: int, last_step: float, min_t: float,
                  rel_tol: float) -> tuple[np.ndarray, float, bool]:
    """Minimise a smooth convex loss by Newton steps halved until the loss does not rise.

    `parts(beta)` gives (loss, gradient, Hessian). A full step is taken and the search ends
    once the Newton decrement is at most `last_step`; a step is accepted when the loss is
    within `rel_tol` (relative) of the current one. Returns (beta, the last decrement,
    stalled: no step longer than `min_t` lowered the loss).
    """
    loss, grad, hess = parts(beta)
    decrement = np.inf
    for _ in range(max_iter):
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        decrement = float(grad @ step)
        if not np.isfinite(decrement):
            return beta, decrement, False
        if decrement <= last_step:
            return beta - step, decrement, False
        t = 1.0
        while t > min_t:
            new = parts(beta - t * step)
            if new[0] <= loss + rel_tol * abs(loss):
                break
            t /= 2
        else:
            return beta, decrement, True
        beta = beta - t * step
        loss, grad, hess = new
    return beta, decrement, False
