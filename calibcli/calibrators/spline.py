"""Spline calibration: p = sigmoid(f(logit s)), f a penalised natural cubic spline.

f minimises the mean weighted log-loss plus lam * integral of f''(u)^2 over the knot range
(u the logit rescaled to [0, 1] between the outer knots), lam chosen among
logspace(-6, 0, 13) by k-fold cross-validated log-loss (ties: the larger lam). Knots are
`n_knots` weighted quantiles of the logits (the outer ones the smallest and largest).
Prediction is constant beyond the outer knots (the smallest and largest training logits):
the natural spline's linear extrapolation there would reach 0 or 1 at extreme scores. Folds are
drawn by hashing each distinct score with the seed, so tied scores share a fold and a
whole-number weight acts exactly as duplicated rows; above `CV_ROWS` rows the search runs
on the rows of the distinct scores a hash keeps (about CV_ROWS of them), and the final fit
on all rows uses the chosen lam scaled by the searched rows' share of the total weight
(the same penalty against the summed log-loss).

Scores are clipped to [1e-12, 1 - 1e-12] (logits to the same range on the logit scale)
before the spline; probability scores outside [0, 1] are refused. With fewer than 4 distinct scores the fit is logistic on the clipped
logit (a spline with 2 knots; a single distinct score gives its positive rate).
The map is not monotone: the spline can turn down where the data do.

The saved map is the spline as a cubic per knot interval (value, slope, and the t^2 and
t^3 coefficients at each knot, t = logit - knot), evaluated by Horner's rule.

References
----------
Lucena (2018), "Spline-based probability calibration", arXiv:1809.07751.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator, fit_warning
from calibcli.calibrators.fitdata import as_float_array, weighted_rows
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.calibrators.params import PROB_CLIP, SAFE_PLATT_CORRECTION, SCORE_KIND, SEED, Param
from calibcli.calibrators.registry import register
from calibcli.errors import FitError
from calibcli.numeric.newton import newton_minimize

LAMBDAS = np.logspace(-6, 0, 13)
CV_ROWS = 50_000
MIN_DISTINCT = 4
MIN_GAP = 2.0 ** -26  # knots closer than this share of the knot range are merged
_BOUNDS = np.array([PROB_CLIP, 1.0 - PROB_CLIP])
LOGIT_LOW, LOGIT_HIGH = (float(v) for v in np.log(_BOUNDS) - np.log(1.0 - _BOUNDS))  # what to_logit gives


def to_logit(s: np.ndarray, score_kind: str) -> np.ndarray:
    """The clipped logit the spline reads: ln(p) - ln(1 - p) of p clipped to
    [PROB_CLIP, 1 - PROB_CLIP], or a logit score clipped to the same range."""
    if score_kind == "logit":
        return np.clip(s, LOGIT_LOW, LOGIT_HIGH)
    p = np.clip(s, PROB_CLIP, 1.0 - PROB_CLIP)
    return np.log(p) - np.log(1.0 - p)


def _mix(bits: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of the score bits xor a seed-derived key (uint64 arithmetic wraps)."""
    z = bits ^ np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % (1 << 64))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _basis(u: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Natural cubic spline basis (Hastie et al. 5.4-5.5) at u: 1, u, d_j - d_{K-1}."""
    k = xi.size
    out = np.empty((u.size, k))
    out[:, 0] = 1.0
    out[:, 1] = u
    if k > 2:
        last = np.maximum(u - xi[-1], 0.0) ** 3
        dk = (np.maximum(u - xi[-2], 0.0) ** 3 - last) / (xi[-1] - xi[-2])
        for j in range(k - 2):
            out[:, j + 2] = (np.maximum(u - xi[j], 0.0) ** 3 - last) / (xi[-1] - xi[j]) - dk
    return out


def _second_derivatives(xi: np.ndarray) -> np.ndarray:
    """N_j''(xi_i): rows the knots, columns the basis (linear between knots)."""
    k = xi.size
    out = np.zeros((k, k))
    if k > 2:
        last = 6 * np.maximum(xi - xi[-1], 0.0)
        dk = (6 * np.maximum(xi - xi[-2], 0.0) - last) / (xi[-1] - xi[-2])
        for j in range(k - 2):
            out[:, j + 2] = (6 * np.maximum(xi - xi[j], 0.0) - last) / (xi[-1] - xi[j]) - dk
    return out


def penalty_matrix(xi: np.ndarray) -> np.ndarray:
    """Omega with beta' Omega beta = integral of f''^2 over [xi_0, xi_-1] (exact: f'' is linear
    on each interval, so the integral of a product is (h/6)(2 a c + a d + b c + 2 b d))."""
    d2 = _second_derivatives(xi)
    h = np.diff(xi)
    a, b = d2[:-1], d2[1:]
    return ((a * h[:, None]).T @ (2 * a + b) + (b * h[:, None]).T @ (a + 2 * b)) / 6.0


def local_cubic_maps(xi: np.ndarray) -> np.ndarray:
    """M with M[j] @ beta = (a, b, c, d) of the spline on interval j as a + b t + c t^2 + d t^3,
    t = u - xi_j (shape (K - 1, 4, K); a spline with K <= 2 knots is one linear piece)."""
    k = xi.size
    eye = np.eye(k)
    cols = [_interval_cubics(eye[m], xi, 1.0)[: max(k - 1, 1)] for m in range(k)]
    return np.stack(cols, axis=-1)


class _Design:
    """Rows grouped by knot interval with the powers of their local coordinate t, so that
    eta, the gradient and the Hessian of the spline fit cost O(rows) (a few bincounts) and
    O(intervals * knots^2), never a rows x knots matrix."""

    def __init__(self, u: np.ndarray, y: np.ndarray, w: np.ndarray, xi: np.ndarray, maps: np.ndarray):
        self.y, self.w, self.maps = y, w, maps
        self.m = maps.shape[0]
        self.j = np.clip(np.searchsorted(xi, u, side="right") - 1, 0, self.m - 1)
        t = u - xi[self.j]
        self.powers = [t]
        for _ in range(5):
            self.powers.append(self.powers[-1] * t)  # t .. t^6

    def eta(self, beta: np.ndarray) -> np.ndarray:
        poly = self.maps @ beta  # (intervals, 4)
        a, b, c, d = (poly[self.j, i] for i in range(4))
        t = self.powers[0]
        return a + t * (b + t * (c + t * d))

    def moments(self, r: np.ndarray, degree: int) -> np.ndarray:
        out = np.empty((self.m, degree + 1))
        out[:, 0] = np.bincount(self.j, weights=r, minlength=self.m)
        for k in range(1, degree + 1):
            out[:, k] = np.bincount(self.j, weights=r * self.powers[k - 1], minlength=self.m)
        return out

    def grad_hess(self, r: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = self.moments(r, 3)
        hm = self.moments(h, 6)
        idx = np.arange(4)
        local = hm[:, idx[:, None] + idx[None, :]]  # (intervals, 4, 4) Hankel blocks
        grad = np.einsum("jkm,jk->m", self.maps, g)
        hess = np.einsum("jkm,jkl,jln->mn", self.maps, local, self.maps)
        return grad, hess


def _newton(design: _Design, lam, omega, beta, max_iter=100):
    """Minimise sum(w * logloss) / sum(w) + lam * beta' Omega beta by damped Newton."""
    y, w = design.y, design.w
    total = float(np.sum(w))
    k = beta.size
    pen = 2.0 * lam * omega + 1e-12 * np.eye(k)

    def parts(b):
        eta = design.eta(b)
        loss = float(np.sum(w * (np.logaddexp(0.0, eta) - y * eta)))
        e = np.exp(-np.abs(eta))
        q = 1.0 / (1.0 + e)
        p = np.where(eta >= 0, q, e * q)
        grad, hess = design.grad_hess(w * (p - y), w * e * q * q)
        loss = loss / total + lam * float(b @ omega @ b)
        return loss, grad / total + 2 * lam * (omega @ b), hess / total + pen

    beta, decrement, stalled = newton_minimize(parts, beta, max_iter=max_iter, last_step=1e-12, min_t=1e-6,
                                             rel_tol=1e-15)
    # converged: the decrement reached rounding level, or no descent was left near it
    return beta, decrement <= 1e-12 or (stalled and decrement < 1e-8)


def _heldout_loss(design: _Design, beta) -> float:
    eta = design.eta(beta)
    return float(np.sum(design.w * (np.logaddexp(0.0, eta) - design.y * eta)))


@register
class SplineCalibrator(ScoreCalibrator):
    """Penalised natural cubic spline on the logit, smoothing chosen by CV log-loss."""

    name = "spline"
    complexity = 30
    fitted = "a penalised natural cubic spline of the logit (n_knots, 30 by default)"
    description = ("spline calibration: sigmoid of a penalised natural cubic spline of the logit, "
                   "smoothing chosen by cross-validated log-loss")
    params = (
        Param("n_knots", int, 30, "knots at weighted quantiles of the logit", low=2, high=200),
        Param("folds", int, 5, "cross-validation folds for the smoothing", low=2, high=50),
        SCORE_KIND,
        SAFE_PLATT_CORRECTION,
        SEED,
    )
    monotone = False
    extremes = ("inside (0, 1) by default: Platt's targets keep the spline finite and it is constant "
                "beyond the training scores' range; platt_correction=false can give 0 or 1 on separated classes")

    def _fit(self, s, y, w):
        s, y, w = weighted_rows(s, y, w)
        x = to_logit(s, self.params["score_kind"])
        xs = np.unique(x)
        if xs.size == 1:
            rate = float(np.sum(w * y) / np.sum(w))
            rate = min(max(rate, 1e-300), 1 - 1e-16)
            self._store(xs, np.array([[math.log(rate) - math.log1p(-rate), 0.0, 0.0, 0.0]]))
            self.lam_ = float("nan")
            return
        if xs.size < MIN_DISTINCT:
            knots = xs[[0, -1]]
        else:
            order = np.argsort(x, kind="stable")
            cum = np.cumsum(w[order])
            q = np.linspace(0.0, 1.0, self.params["n_knots"])
            idx = np.searchsorted(cum, q * cum[-1] * (1 - 1e-12), side="left")
            knots = spread_knots(np.unique(np.concatenate([x[order][np.minimum(idx, x.size - 1)], xs[[0, -1]]])))
        scale = float(knots[-1] - knots[0])
        xi = (knots - knots[0]) / scale
        u = (x - knots[0]) / scale
        omega = penalty_matrix(xi)
        self.start_ = np.zeros(xi.size)
        lam = self._choose_lambda(x, u, y, w, xi, omega) if knots.size > 2 else 0.0
        beta, converged = _newton(_Design(u, y, w, xi, local_cubic_maps(xi)), lam, omega, self.start_)
        if not converged:
            fit_warning("spline fit did not converge (are the classes perfectly separated?); "
                        "try --param platt_correction=true", stacklevel=2)
        self.lam_ = float(lam)
        cubic = _interval_cubics(beta, xi, scale)
        if not np.all(np.isfinite(cubic)):
            raise FitError(f"the spline's coefficients are beyond the float64 range: the logits span only "
                           f"{scale:g} ([{knots[0]!r}, {knots[-1]!r}])",
                           hint="rescale the scores, or use a rank-based method such as isotonic")
        self._store(knots, cubic)

    def _choose_lambda(self, x, u, y, w, xi, omega) -> float:
        """The lam of LAMBDAS with the least k-fold held-out log-loss (ties: the larger)."""
        total = float(np.sum(w))
        h = _mix(x.view(np.uint64), self.params["seed"])
        if x.size > CV_ROWS:
            sub = (h >> np.uint64(32)) < np.uint64(int(CV_ROWS / x.size * 2**32))
            x, u, y, w, h = x[sub], u[sub], y[sub], w[sub], h[sub]
        k = self.params["folds"]
        maps = local_cubic_maps(xi)
        fold = (h % np.uint64(k)).astype(np.int64)
        losses = np.zeros(LAMBDAS.size)
        for f in range(k):
            test = fold == f
            train = ~test
            if not test.any() or not train.any():
                continue
            fit = _Design(u[train], y[train], w[train], xi, maps)
            held = _Design(u[test], y[test], w[test], xi, maps)
            beta = np.zeros(xi.size)
            for i in range(LAMBDAS.size - 1, -1, -1):  # warm start from the smoothest
                beta, _ = _newton(fit, LAMBDAS[i], omega, beta, max_iter=25)
                losses[i] += _heldout_loss(held, beta)
        rounded = np.round(losses / float(np.sum(w)), 12)
        best = np.flatnonzero(rounded == rounded.min())
        lam = float(LAMBDAS[best[-1]]) * float(np.sum(w)) / total  # the same penalty per row of data
        self.start_, _ = _newton(_Design(u, y, w, xi, maps), float(LAMBDAS[best[-1]]), omega, beta)
        return lam

    def _store(self, knots: np.ndarray, cubic: np.ndarray) -> None:
        self.knots_ = np.asarray(knots, dtype=np.float64)
        self.a_, self.b_, self.c_, self.d_ = (np.ascontiguousarray(cubic[:, i]) for i in range(4))

    def _predict(self, s):
        x = np.clip(to_logit(s, self.params["score_kind"]), self.knots_[0], self.knots_[-1])
        i = np.searchsorted(self.knots_, x, side="right") - 1
        t = x - self.knots_[i]
        eta = self.a_[i] + t * (self.b_[i] + t * (self.c_[i] + t * self.d_[i]))
        return np.exp(-np.logaddexp(0.0, -eta))

    def _get_state(self) -> dict[str, Any]:
        return {"knots": self.knots_, "a": self.a_, "b": self.b_, "c": self.c_, "d": self.d_}

    state_spec = StateSpec(
        Field("knots", order="increasing", min_size=1, max_size=lambda p: max(p["n_knots"], 2),
              low=LOGIT_LOW, high=LOGIT_HIGH),
        Field("a", same_size="knots"),
        Field("b", same_size="knots"),
        Field("c", same_size="knots"),
        Field("d", same_size="knots"),
        check=lambda params, v, fail: (v["c"][-1] == 0 and v["d"][-1] == 0) or fail(
            "d", problem="must end in c = d = 0 (a natural spline is linear beyond its last knot)"),
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        self.knots_ = as_float_array(state["knots"], "state knots")
        self.a_, self.b_, self.c_, self.d_ = (as_float_array(state[k], f"state {k}") for k in "abcd")
        self.lam_ = None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"knots": int(self.knots_.size)}
        if getattr(self, "lam_", None) is not None and not math.isnan(self.lam_):
            out["smoothing"] = self.lam_
        return out


def spread_knots(knots: np.ndarray) -> np.ndarray:
    """The sorted distinct knots without those closer than MIN_GAP of the range to the previous
    kept one (the outer two always kept): on the unit scale their gaps stay normal floats whose
    reciprocals the basis and penalty can hold (logits 5e-324 apart would give 0 gaps)."""
    if knots.size <= 2:
        return knots
    span = float(knots[-1] - knots[0])
    kept = [0]
    for j in range(1, knots.size - 1):
        if (knots[j] - knots[kept[-1]]) / span >= MIN_GAP and (knots[-1] - knots[j]) / span >= MIN_GAP:
            kept.append(j)
    kept.append(knots.size - 1)
    return knots[kept]


def _interval_cubics(beta: np.ndarray, xi: np.ndarray, scale: float) -> np.ndarray:
    """(a, b, c, d) per knot: f = a + b t + c t^2 + d t^3 on [knot_i, knot_i+1), t = x - knot_i
    on the logit scale; the last knot's row is f's value and slope there (c = d = 0)."""
    k = xi.size
    coef = np.zeros((k, 4))
    # f(u) = beta0 + beta1 u + sum_j g_j (u - xi_j)_+^3 with g from the d_j - d_{K-1} terms
    g = np.zeros(k)
    if k > 2:
        inv_last = 1.0 / (xi[-1] - xi[-2])
        for j in range(k - 2):
            c = beta[j + 2]
            inv = 1.0 / (xi[-1] - xi[j])
            g[j] += c * inv
            g[-1] -= c * inv
            g[-2] -= c * inv_last
            g[-1] += c * inv_last
    for i in range(k):
        delta = xi[i] - xi[: i + 1]  # active truncated cubes at u = xi_i
        gi = g[: i + 1]
        a = beta[0] + beta[1] * xi[i] + float(np.sum(gi * delta ** 3))
        b = beta[1] + float(np.sum(3 * gi * delta ** 2))
        c = float(np.sum(3 * gi * delta))
        d = float(np.sum(gi))
        with np.errstate(over="ignore"):  # a span of subnormal logits: not finite, refused by the caller
            h = np.float64(scale)
            coef[i] = (a, b / h, np.float64(c) / h / h, np.float64(d) / h / h / h)
    coef[-1, 2:] = 0.0
    return coef
