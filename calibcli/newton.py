"""Damped Newton fits: `newton_minimize`, the loop the logistic and spline calibrators share,
and the logistic recalibration fit logit P(y=1) = a + b logit(p) by damped Newton, over the
weighted distribution of p (ascending distinct p with the weight n0 of negatives and n1 of
positives at each): the maximum-likelihood calibration slope b and intercept a.

Each Newton pass goes over the distribution in chunks of `pooling.CHUNK` entries, computing
logit(p) chunk by chunk, so its temporaries stay a few chunk-sized arrays.
"""

from __future__ import annotations

import numpy as np

from calibcli import pooling
from calibcli.pooling import as_weights

WARM = 1 << 19  # distinct p in the warm-start subsample


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


def damped_newton(x: np.ndarray, n0: np.ndarray | None, n1: np.ndarray, a: float, b: float, iterations: int,
                  eps: float) -> tuple[float, float]:
    """Damped Newton from (a, b); one pass per iteration (a trial point's pass also gives the
    next step). A step is kept when the likelihood does not fall beyond its rounding noise;
    NaN when there is no finite optimum. Once full Newton steps shrink quadratically, the
    error after a step d is about d^3 / d_previous^2: a step under 1e-4 (relative) that is a
    tenth of the one before leaves under ~1e-8, and is taken without another pass."""
    current, g, h = logistic_pass(x, n0, n1, a, b, eps)
    previous = None  # size of the last full (undamped) step
    for _ in range(iterations):
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            return float("nan"), float("nan")
        size = float(np.max(np.abs(step)))
        scale = 1 + abs(a) + abs(b)
        if previous is not None and size < 1e-4 * scale and size < 0.1 * previous:
            return a + step[0], b + step[1]
        noise = 1e-13 * (abs(current) + 1.0)
        t = 1.0
        while True:
            trial = logistic_pass(x, n0, n1, a + t * step[0], b + t * step[1], eps)
            if trial[0] >= current - noise or t <= 1e-10:
                break
            t /= 2
        a, b = a + t * step[0], b + t * step[1]
        current, g, h = trial
        if not (np.isfinite(a) and np.isfinite(b)) or abs(b) > 1e6:
            return float("nan"), float("nan")
        if t * size < 1e-12 * scale:
            break
        previous = size if t == 1.0 else None
    return a, b


def fit_logit_line(x: np.ndarray, n0: np.ndarray, n1: np.ndarray, eps: float, iterations: int
                   ) -> tuple[float, float]:
    """(a, b) of the fit from (0, 1), warm-started on an evenly spaced subsample of the distinct
    p when they are many (then the full data takes about two passes). `x` float64 ascending."""
    unit = all(bool(np.all(as_weights(n0[lo:lo + pooling.CHUNK]) + as_weights(n1[lo:lo + pooling.CHUNK]) == 1))
               for lo in range(0, x.size, pooling.CHUNK))
    counts = None if unit else n0  # None: one row per distinct p
    a, b = 0.0, 1.0
    if x.size > 4 * WARM:
        every = x.size // WARM
        wa, wb = damped_newton(x[::every], None if counts is None else counts[::every], n1[::every], a, b,
                               iterations, eps)
        if np.isfinite(wa) and np.isfinite(wb):
            a, b = wa, wb
    return damped_newton(x, counts, n1, a, b, iterations, eps)


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
