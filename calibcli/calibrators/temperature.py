"""Temperature scaling: p = softmax(z / T), one parameter for all classes.

Fitted by Newton's method on the exact multinomial log-likelihood as a function of the
inverse temperature b = 1/T, which is convex in b: with d = z - max_k z (per row) and p the
softmax of b d,

    loss(b)  = sum_i w_i (ln sum_k exp(b d_ik) - b d_iy) / sum w
    loss'(b) = sum_i w_i (E_p[d_i] - d_iy) / sum w,   loss''(b) = sum_i w_i Var_p[d_i] / sum w

each a weighted sum over rows, computed in chunks of rows (vectorised, no temporary of n x K).
Steps are safeguarded by a bracket on the sign of loss' (a step that leaves it bisects), b is
kept in [2^-40, 2^40]. Newton starts from the optimum on an evenly spaced subsample of the rows,
so the full data costs about two passes; once a step is below 1e-7 relative, the error it
leaves is of the order of its square and it is taken without another pass.

References
----------
Guo, Pleiss, Sun & Weinberger (2017), "On calibration of modern neural networks", ICML.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.calibrators.kclass import KCLASS_SCORE_KIND, N_CLASSES, ClassCalibrator
from calibcli.calibrators.kscores import direction, extreme_rows, overflow_bound, softmax
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec

B_MIN, B_MAX = 2.0**-40, 2.0**40
_CHUNK = 1 << 16  # values (rows x K) per chunk of a pass
_WARM_ROWS = 20_000
_LAST_STEP = 1e-7  # relative step taken without another pass
_MAX_ITER = 100


def _pass(z: np.ndarray, top: np.ndarray, dy: np.ndarray, w: np.ndarray | None, b: float,
          spread: bool) -> tuple[float, float, float]:
    """(loss, loss', loss'') at inverse temperature b, unnormalised (summed weights)."""
    rows = max(1, _CHUNK // z.shape[1])
    loss = grad = hess = 0.0
    for lo in range(0, z.shape[0], rows):
        with np.errstate(over="ignore"):
            d = z[lo:lo + rows] - top[lo:lo + rows, None]
        if spread:  # logits over 1e300 apart: keep d * e finite where e is 0
            np.maximum(d, -1e300, out=d)
        e = np.multiply(d, b)
        np.exp(e, out=e)
        s = e.sum(axis=1)
        e *= d
        m1 = e.sum(axis=1)
        m2 = np.einsum("ij,ij->i", e, d)
        m1 /= s
        m2 /= s
        var = m2 - m1 * m1
        np.maximum(var, 0.0, out=var)
        ll = np.log(s)
        ll -= b * dy[lo:lo + rows]
        m1 -= dy[lo:lo + rows]
        if w is None:
            loss += float(ll.sum())
            grad += float(m1.sum())
            hess += float(var.sum())
        else:
            part = w[lo:lo + rows]
            loss += float(part @ ll)
            grad += float(part @ m1)
            hess += float(part @ var)
    return loss, grad, hess


def fit_inverse_temperature(z: np.ndarray, y: np.ndarray, w: np.ndarray | None, b: float = 1.0) -> float:
    """The b = 1/T minimising the weighted multinomial log-loss of softmax(b z), in [2^-40, 2^40]."""
    n = z.shape[0]
    if n > 4 * _WARM_ROWS:
        every = n // _WARM_ROWS
        b = fit_inverse_temperature(z[::every], y[::every], None if w is None else w[::every], b)
    top = z.max(axis=1)
    with np.errstate(over="ignore"):
        spread = bool(np.max(top - z.min(axis=1)) > 1e300)
    dy = z[np.arange(n), y] - top
    lo, hi = B_MIN, B_MAX
    b = min(max(b, lo), hi)
    for _ in range(_MAX_ITER):
        _, g, h = _pass(z, top, dy, w, b, spread)
        if g < 0:
            lo = b
        else:
            hi = b
        if g == 0 or hi <= lo * (1 + 1e-15):
            return b
        step = -g / h if h > 0 else np.inf
        new = b + step
        if lo < new < hi:
            if abs(step) <= _LAST_STEP * b:
                return new
        elif g < 0:
            new = 4 * b if hi == B_MAX else float(np.sqrt(lo * hi))
        else:
            new = b / 4 if lo == B_MIN else float(np.sqrt(lo * hi))
        new = min(max(new, B_MIN), B_MAX)
        b = new
    return b


@register
class TemperatureScaling(ClassCalibrator):
    """softmax(z / T) with T fitted by Newton's method (Guo et al. 2017)."""

    name = "temperature"
    complexity = 1
    fitted = "1 number: the temperature T, shared by every class"
    description = "temperature scaling (Guo et al. 2017): softmax(z / T), one T for all classes, Newton fit"
    params = (KCLASS_SCORE_KIND,)
    state_spec = StateSpec(N_CLASSES, Field("temperature", kind="number", low=1 / B_MAX, high=1 / B_MIN))

    def _fit(self, z, y, w):
        self.temperature_ = 1.0 / fit_inverse_temperature(z, y, w)

    def _predict(self, z):
        with np.errstate(over="ignore"):
            a = z / self.temperature_
        bad = extreme_rows(z, overflow_bound(1.0 / self.temperature_))
        if bad.any():  # logits that could overflow: the limit along their direction (kscores.direction)
            a[:, bad] = direction(z[:, bad], None, 1.0)
        return softmax(a)

    def _get_state(self) -> dict[str, Any]:
        return {"temperature": float(self.temperature_)}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.temperature_ = float(state["temperature"])

    def summary(self) -> dict[str, Any]:
        return {"temperature": float(self.temperature_)}
