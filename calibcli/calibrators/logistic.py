"""Platt scaling: p = 1 / (1 + exp(-(a*s + b))), fitted by maximum likelihood.

Scores are standardised before the fit (Platt's and scikit-learn's overflow issue #6888),
then the coefficients are mapped back, so a and b apply to the raw score. The optimiser is
Newton's method with the exact gradient and Hessian of the weighted log-loss (warm-started
on a subsample for large inputs), which also accepts Platt-corrected (fractional) targets.

References
----------
Platt (1999), "Probabilistic outputs for support vector machines and comparisons to
regularized likelihood methods".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator, fit_warning
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import FitError
from calibcli.numeric.newton import newton_minimize
from calibcli.calibrators.params import SAFE_PLATT_CORRECTION

_SCALE_EXP = 256


def sigmoid(t: np.ndarray) -> np.ndarray:
    """Overflow-free logistic function."""
    return np.exp(-np.logaddexp(0.0, -t))


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, bool]:
    """Maximum-likelihood coefficients of y ~ sigmoid(X @ beta) for a design matrix X.

    `x` has one column per coefficient (add a column of ones for an intercept); `y` may be
    fractional. Returns (beta, converged); see `fit_logistic_columns`.
    """
    beta, converged = fit_logistic_columns([np.ascontiguousarray(x[:, j]) for j in range(x.shape[1])], y, w, False)
    return beta, converged


def fit_logistic_columns(
    columns: list[np.ndarray], y: np.ndarray, w: np.ndarray, intercept: bool
) -> tuple[np.ndarray, bool]:
    """Logistic maximum likelihood on feature columns (+ an implicit intercept, last in beta).

    Newton's method with the exact gradient and Hessian of the mean weighted log-loss and a
    backtracking line search. With many rows the Newton steps start from the fit on a
    strided subsample, so the full data costs the last two quadratically converging steps;
    once the Newton decrement g'H^-1 g (twice the predicted loss decrease) is below
    `_LAST_STEP`, the step is taken without another pass (what it leaves is of the order of
    its square, far below float precision of the loss).
    """
    k = len(columns) + intercept
    if bool(np.all(w == 1)):
        w = np.broadcast_to(1.0, y.shape)
    beta = np.zeros(k)
    n = y.size
    if n > 3 * _WARM_ROWS:
        step = n // _WARM_ROWS
        sub = [np.ascontiguousarray(c[::step]) for c in columns]
        beta, _ = _newton(sub, y[::step], w[::step], intercept, beta)
        if not np.all(np.isfinite(beta)):
            beta = np.zeros(k)
    return _newton(columns, y, w, intercept, beta)


_WARM_ROWS = 250_000
_MAX_NEWTON = 60
_LAST_STEP = 1e-8  # decrement below which the Newton step is taken without another pass
GRAD_TOL_CONVERGED = 1e-7


_CHUNK = 1 << 16  # rows per chunk of a loss pass: its temporaries stay in cache


def _loss_grad_hess(cols, y, w, intercept, beta, total):
    """Mean weighted log-loss of sigmoid(eta), its gradient and Hessian (one exp per row),
    summed over chunks of rows so that no temporary is n long."""
    k = len(cols) + intercept
    loss, grad, hess = 0.0, np.zeros(k), np.zeros((k, k))
    unit = _unit(w)
    for lo in range(0, y.size, _CHUNK):
        part = slice(lo, lo + _CHUNK)
        chunk = [c[part] for c in cols]
        part_loss, part_grad, part_hess = _chunk_loss_grad_hess(
            chunk, y[part], None if unit else w[part], intercept, beta)
        loss += part_loss
        grad += part_grad
        hess += part_hess
    return loss / total, grad / total, hess / total


def _chunk_loss_grad_hess(cols, y, w, intercept, beta):
    """Summed (not mean) loss, gradient and Hessian of some rows; `w` None for unit weights."""
    eta = np.full(y.shape, beta[-1]) if intercept else np.zeros(y.shape)
    for c, b in zip(cols, beta):
        eta += b * c
    e = np.abs(eta)
    np.negative(e, out=e)
    np.exp(e, out=e)  # e = exp(-|eta|): softplus and sigmoid without overflow
    q = 1.0 + e
    np.reciprocal(q, out=q)  # q = 1 / (1 + e)
    terms = np.log1p(e)
    terms += np.maximum(eta, 0.0)
    terms -= y * eta
    r = np.where(eta >= 0, 1.0, e)
    r *= q  # p = sigmoid(eta)
    r -= y
    h = e
    h *= q
    h *= q  # p (1 - p) = e q^2
    if w is not None:
        terms *= w
        r *= w
        h *= w
    # Sums of products by numpy reductions, not BLAS dots: threaded BLAS is slow on a busy
    # machine and its summation order (hence the last bits) depends on the thread count.
    features = list(cols) + ([None] if intercept else [])
    tmp = np.empty_like(r)

    def dot(a: np.ndarray, b: np.ndarray | None) -> float:
        return float(a.sum()) if b is None else float(np.multiply(a, b, out=tmp).sum())

    grad = np.array([dot(r, c) for c in features])
    hess = np.empty((len(features), len(features)))
    for i, ci in enumerate(features):
        hc = h if ci is None else h * ci
        for j in range(i, len(features)):
            hess[i, j] = hess[j, i] = dot(hc, features[j])
    return float(terms.sum()), grad, hess


def _unit(w: np.ndarray) -> bool:
    return (w.strides[0] == 0 and bool(w[0] == 1)) if w.ndim == 1 and w.size else False


def _newton(cols, y, w, intercept, beta):
    """Damped Newton from `beta` until the Newton decrement is at rounding level."""
    total = float(y.size) if _unit(w) else float(w.sum())
    beta, decrement, _ = newton_minimize(lambda b: _loss_grad_hess(cols, y, w, intercept, b, total), beta,
                                       max_iter=_MAX_NEWTON, last_step=_LAST_STEP, min_t=1e-12, rel_tol=4e-16)
    converged = bool(np.all(np.isfinite(beta)) and 0 <= decrement <= _LAST_STEP)
    return beta, converged


@register
class LogisticCalibrator(ScoreCalibrator):
    """Platt scaling on the raw score."""

    name = "logistic"
    complexity = 2
    fitted = "2 numbers: slope a, intercept b"
    aliases = ("sigmoid", "platt")
    extremes = ("inside (0, 1) up to float64 rounding (|a*score + b| > 37 rounds to 0 or 1); Platt's "
                "targets (the default) keep a and b finite on separated classes, where "
                "platt_correction=false diverges (warns) and gives 0 and 1")
    description = "Platt scaling: sigmoid(a*score + b) fitted by maximum likelihood"
    params = (SAFE_PLATT_CORRECTION,)
    monotone = False  # a is unconstrained: a < 0 (higher scores, fewer positives) decreases

    def _fit(self, s, y, w):
        # Scores beyond 2**+-256 are fitted scaled by a power of two (exact), so that their
        # mean and variance neither overflow nor underflow; the scale folds back into a.
        e = math.frexp(float(np.max(np.abs(s))))[1]
        e = e if abs(e) > _SCALE_EXP else 0
        a, b = self._fit_scaled(np.ldexp(s, -e) if e else s, y, w)
        with np.errstate(over="ignore", under="ignore"):
            self.a_, self.b_ = float(np.ldexp(a, -e)), b
        if not (math.isfinite(self.a_) and math.isfinite(self.b_)) or (self.a_ == 0.0 and a != 0.0):
            raise FitError(
                f"the fitted slope a = {a:g} * 2^{-e} is not representable in float64 "
                f"(scores span [{float(s.min()):g}, {float(s.max()):g}])",
                hint="rescale the scores, or use a rank-based method such as isotonic",
            )

    def _fit_scaled(self, s, y, w):
        """(a, b) of the maximum-likelihood fit on scores of moderate magnitude."""
        mu = float(np.average(s, weights=w))
        sd = float(np.sqrt(np.average((s - mu) ** 2, weights=w)))
        if sd == 0.0 or not np.isfinite(sd):
            rate = float(np.average(y, weights=w))
            return 0.0, float(np.log(rate) - np.log1p(-rate))
        z = (s - mu) / sd
        beta, converged = fit_logistic_columns([z], y, w, intercept=True)
        if not converged:
            fit_warning("logistic fit did not converge (are the classes perfectly separated?); "
                        "try --param platt_correction=true", stacklevel=2)
        if not np.all(np.isfinite(beta)):
            raise FitError("the fit diverged (are the classes perfectly separated?)",
                           hint="try --param platt_correction=true")
        return float(beta[0] / sd), float(beta[1] - beta[0] * mu / sd)

    def _predict(self, s):
        return sigmoid(self.a_ * s + self.b_)

    def _get_state(self) -> dict[str, Any]:
        return {"a": self.a_, "b": self.b_}

    state_spec = StateSpec(Field("a", "number"), Field("b", "number"))

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_ = float(state["a"])
        self.b_ = float(state["b"])

    def summary(self) -> dict[str, Any]:
        return {"a": self.a_, "b": self.b_}
