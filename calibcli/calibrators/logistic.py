"""Platt scaling: p = 1 / (1 + exp(-(a*s + b))), fitted by maximum likelihood.

Scores are standardised before the fit (Platt's and scikit-learn's overflow issue #6888),
then the coefficients are mapped back, so a and b apply to the raw score. The optimiser is
scipy's trust-region Newton (`trust-exact`) with the exact gradient and Hessian of the
weighted log-loss, which also accepts Platt-corrected (fractional) targets.

References
----------
Platt (1999), "Probabilistic outputs for support vector machines and comparisons to
regularized likelihood methods".
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibcli.calibrators.base import SAFE_PLATT_CORRECTION, Calibrator, Field, StateSpec
from calibcli.calibrators.registry import register
from calibcli.errors import CalibWarning


def sigmoid(t: np.ndarray) -> np.ndarray:
    """Overflow-free logistic function."""
    return np.exp(-np.logaddexp(0.0, -t))


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, bool]:
    """Maximum-likelihood coefficients of y ~ sigmoid(X @ beta) for a design matrix X.

    Minimises the mean weighted log-loss with exact gradient and Hessian; returns
    (beta, converged). `x` has one column per coefficient (add a column of ones for an
    intercept); `y` may be fractional.
    """
    from scipy.optimize import minimize

    total = float(w.sum())
    cache: dict[str, np.ndarray] = {}

    def objective(beta):
        # One exp per row: softplus(eta) and sigmoid(eta) from e = exp(-|eta|), no overflow.
        eta = x @ beta
        e = np.exp(-np.abs(eta))
        p = np.where(eta >= 0, 1.0, e) / (1.0 + e)
        cache["beta"], cache["p"] = beta.copy(), p
        loss = float(np.sum(w * (np.maximum(eta, 0.0) + np.log1p(e) - y * eta))) / total
        grad = x.T @ (w * (p - y)) / total
        return loss, grad

    def hessian(beta):
        p = cache["p"] if np.array_equal(cache.get("beta"), beta) else sigmoid(x @ beta)
        return (x * (w * p * (1 - p))[:, None]).T @ x / total

    res = minimize(
        objective,
        np.zeros(x.shape[1]),
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-9, "maxiter": 200},
    )
    beta = np.asarray(res.x, dtype=np.float64)
    # trust-exact stops when rounding noise spoils its model ("bad approximation"); a few
    # plain Newton steps, kept only while the loss does not rise or the gradient shrinks
    # (near the optimum the loss is flat to rounding), finish at machine precision.
    loss, grad = objective(beta)
    for _ in range(3):
        try:
            step = np.linalg.solve(hessian(beta), grad)
        except np.linalg.LinAlgError:
            break
        new_loss, new_grad = objective(beta - step)
        if not (new_loss <= loss or np.max(np.abs(new_grad)) < np.max(np.abs(grad))):
            break
        beta, loss, grad = beta - step, new_loss, new_grad
    converged = bool(np.max(np.abs(grad)) < 1e-7)
    return beta, converged


@register
class LogisticCalibrator(Calibrator):
    """Platt scaling on the raw score."""

    name = "logistic"
    extremes = ("inside (0, 1) up to float64 rounding (|a*score + b| > 37 rounds to 0 or 1); Platt's "
                "targets (the default) keep a and b finite on separated classes, where "
                "platt_correction=false diverges (warns) and gives 0 and 1")
    description = "Platt scaling: sigmoid(a*score + b) fitted by maximum likelihood"
    params = (SAFE_PLATT_CORRECTION,)
    monotone = False  # a is unconstrained: a < 0 (higher scores, fewer positives) decreases

    def _fit(self, s, y, w, features):
        mu = float(np.average(s, weights=w))
        sd = float(np.sqrt(np.average((s - mu) ** 2, weights=w)))
        if sd == 0.0 or not np.isfinite(sd):
            rate = float(np.average(y, weights=w))
            self.a_, self.b_ = 0.0, float(np.log(rate) - np.log1p(-rate))
            return
        z = (s - mu) / sd
        beta, converged = fit_logistic(np.column_stack([z, np.ones_like(z)]), y, w)
        if not converged:
            warnings.warn(
                "logistic fit did not converge (are the classes perfectly separated?); "
                "try --param platt_correction=true",
                CalibWarning,
                stacklevel=2,
            )
        self.a_ = float(beta[0] / sd)
        self.b_ = float(beta[1] - beta[0] * mu / sd)

    def _predict(self, s, features):
        return sigmoid(self.a_ * s + self.b_)

    def _get_state(self) -> dict[str, Any]:
        return {"a": self.a_, "b": self.b_}

    state_spec = StateSpec(Field("a", "number"), Field("b", "number"))

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_ = float(state["a"])
        self.b_ = float(state["b"])

    def summary(self) -> dict[str, Any]:
        return {"a": self.a_, "b": self.b_}
