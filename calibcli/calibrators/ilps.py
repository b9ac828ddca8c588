"""Isotonic Line-Plot Scaling (ILPS): a non-decreasing piecewise-linear map of the logit.

eta(logit) joins the points (a_1, b_1), ..., (a_{K+1}, b_{K+1}) at fixed splits a_k in logit space
(eq. 10); q = sigmoid(eta(logit)). The values b are fitted on the weighted mean log-loss plus
lambda * sum_k (b_k - b_{k+1})_+ (eq. 11). `field_aware.py` reuses these pieces as the eta(logit)
part of Neural Calibration.

Choices where the paper is silent or inconsistent, and why:

- Knot placement. Eq. 10 needs K intervals, i.e. K+1 splits a_1 < ... < a_{K+1}, but the
  rule "sigmoid(a_k) = k/(K+1), k = 1..K" gives only K of them (k = K+1 would be
  logit(1) = inf). The third-party code (baiyimeng/UMC) keeps K knots at logit(k/(K+1)), so K-1
  intervals. We keep eq. 10's K intervals and K+1 values and put the splits at
  sigmoid(a_k) = k/(K+2), k = 1..K+1: still equally spaced in probability and symmetric.
- Outside [a_1, a_{K+1}] the end segments are extended linearly (slope of the first/last
  segment) instead of eq. 9's constant tails or UMC's clamping: with K = 100 the splits only
  cover probabilities ~[0.01, 0.99], and a constant tail would tie every CTR-like score below
  1%. Monotone whenever b is non-decreasing.
- Scores: `score_kind=probability` (default) turns p into log(p/(1-p)) after clipping p to
  [1e-12, 1 - 1e-12] (float64, so exact 0/1 scores stay finite); `score_kind=logit` uses the
  score as is. With probabilities the instance sets `needs_probabilities`, so `fit` refuses
  scores outside [0, 1] (they are probably logits) instead of clipping them.
- Optimiser. The paper trains with SGD. For ILPS alone the problem is convex in b (eta is
  linear in b), so we solve it to optimality and deterministically: tied logits are pooled
  and an orthant-wise projected Newton method (exact Hessian, Armijo line search) minimises
  over b_1 and the increments diff(b), where the hinge penalty is coordinate-wise (see
  `fit_ilps`). No seed, exact weights, independent of row order (a generic bound-constrained
  solver on a split u - v formulation needs hundreds of iterations: docs/algorithms.md).
- `ridge` (default 1e-4, 0 = eq. 11 exactly) adds ridge/2 * integral over [a_1, a_{K+1}] of
  (eta'(logit) - 1)^2, i.e. ridge/2 * sum_k (d_k - da_k)^2 / da_k with d = diff(b), da = diff(a).
  Without it the optimum is not unique where a segment holds fewer points than it has free
  values, and a run of only-negative (only-positive) lowest (highest) scores sends b to
  -inf (+inf); the term shrinks such segments toward the identity slope. For K = 100 the
  splits span [-4.6, 4.6], so a map of constant slope m pays ridge * 4.6 * (m - 1)^2 in mean
  log-loss units (4.6e-4 at m = 0 or 2 with the default): negligible where data are dense.
- lambda = 1 (default) is an exact penalty for the mean log-loss (the Lagrange multipliers
  of b_k <= b_{k+1} are partial sums of residuals, at most 1 in absolute value), so the
  optimum is already non-decreasing. Any remaining violation (lambda < 1, optimiser
  tolerance) is removed by projecting b onto non-decreasing vectors (unweighted PAV);
  summary() reports the largest violation and whether the projection changed b.

Reference: Pan, Ao, Tang, Lu, Liu, Xiao, He (2020), "Field-aware Calibration: A Simple and
Empirically Strong Method for Reliable Probabilistic Predictions", WWW '20, section 4.1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator, fit_warning
from calibcli.calibrators.fitdata import as_float_array
from calibcli.calibrators.isotonic import pav
from calibcli.calibrators.logistic import sigmoid
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import FitError
from calibcli.calibrators.params import PLATT_CORRECTION, PROB_CLIP, SCORE_KIND, Param
from calibcli.numeric.pooling import unique_with_sums

LOGIT_CLIP = 1e300

K_PARAM = Param("K", int, 100, "number of linear pieces; K+1 knots at sigmoid(a_k) = k/(K+2)", low=2, high=1000)
LAM_PARAM = Param("lam", float, 1.0, "weight of the non-decreasing penalty sum (b_k - b_k+1)_+ (eq. 11)", low=0.0, high=1e6)
RIDGE_PARAM = Param(
    "ridge", float, 1e-4, "weight of the smoothness term integral (eta' - 1)^2 / 2; 0 = paper's eq. 11", low=0.0, high=1e6
)


# Saved knots: splits a (K+1, increasing, spaced >= MIN_SPLIT_GAP) and values b (non-decreasing);
# the bounds keep eta finite (no inf - inf) for every finite score.
MIN_SPLIT_GAP = 1e-6
KNOT_FIELDS = (
    Field("a", order="increasing", low=-1e3, high=1e3, size=lambda p: p["K"] + 1),
    Field("b", order="monotone", low=-1e300, high=1e300, same_size="a"),
)


def check_splits(params: Any, values: dict[str, Any], fail: Any) -> None:
    """Loaded splits must be at least MIN_SPLIT_GAP apart (t = (logit - a_k) / gap stays finite)."""
    gaps = np.diff(values["a"])
    if gaps.size and gaps.min() < MIN_SPLIT_GAP:
        i = int(np.argmin(gaps)) + 1
        fail("a", i, values["a"][i], f"is closer than {MIN_SPLIT_GAP:g} to the split before it")


def to_logit(s: np.ndarray, score_kind: str) -> np.ndarray:
    """Logits from scores: probabilities clipped to [1e-12, 1-1e-12], logits to +-1e300 (so
    t = (logit - a_k) / gap stays finite and a flat end segment never gives 0 * inf = NaN)."""
    if score_kind == "logit":
        return np.clip(s, -LOGIT_CLIP, LOGIT_CLIP)
    p = np.clip(s, PROB_CLIP, 1.0 - PROB_CLIP)
    return np.log(p) - np.log1p(-p)


def ilps_splits(K: int) -> np.ndarray:
    """The K+1 splits a_k = logit(k/(K+2)), k = 1..K+1."""
    p = np.arange(1, K + 2, dtype=np.float64) / (K + 2)
    return np.log(p) - np.log1p(-p)


FIT_T_MAX = 1e6


def segments(logit: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segment index k (0-based, end segments extended) and position t = (logit - a_k)/(a_k+1 - a_k)."""
    k = np.clip(np.searchsorted(a, logit, side="right") - 1, 0, a.size - 2)
    t = (logit - a[k]) / (a[k + 1] - a[k])
    return k, t


def ilps_eta(logit: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """eta(logit): linear between knots (eq. 10), end segments extended linearly."""
    k, t = segments(logit, a)
    return b[k] + t * (b[k + 1] - b[k])


def eta_backward(k: np.ndarray, t: np.ndarray, r: np.ndarray, size: int) -> np.ndarray:
    """Gradient of sum_i r_i * eta(l_i) with respect to b (each row touches two knots)."""
    return np.bincount(k, weights=r * (1.0 - t), minlength=size) + np.bincount(
        k + 1, weights=r * t, minlength=size
    )


def knot_penalty(a: np.ndarray, b: np.ndarray, lam: float, ridge: float) -> tuple[float, np.ndarray]:
    """lam * sum (b_k - b_k+1)_+ + ridge/2 * sum (d_k - da_k)^2 / da_k, and its (sub)gradient in b."""
    da = np.diff(a)
    d = np.diff(b)
    viol = d < 0
    e = ridge * (d - da) / da
    value = lam * float(np.sum(-d[viol])) + 0.5 * ridge * float(np.sum((d - da) ** 2 / da))
    gd = e - lam * viol
    grad = np.zeros_like(b)
    grad[1:] += gd
    grad[:-1] -= gd
    return value, grad


def fit_ilps(logit: np.ndarray, y: np.ndarray, w: np.ndarray, a: np.ndarray, lam: float, ridge: float,
             offset: np.ndarray | None = None, b0: np.ndarray | None = None, max_iter: int = 200,
             segs: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Knot values b minimising eq. 11 (+ the ridge term) on tie-pooled logits.

    With `offset` the model is sigmoid(eta(logit) + offset) per row (rows are then not pooled):
    field-aware calibration fits eta this way next to its per-level shifts. `b0` warm-starts
    the solver; `max_iter` bounds its Newton steps; `segs` are `segments(logit, a)` of the rows
    when the caller has them (offset only: the rows are not pooled).

    Variables are c = b_1 and the increments d = diff(b), so the penalty lam * sum (-d)_+ acts
    coordinate-wise. The solver is an orthant-wise projected Newton method (as for the lasso):
    each d_i stays in its sign orthant during a step (0 is a kink that is left only when the
    gradient beats the penalty's slope), the Newton system uses the exact Hessian (tridiagonal
    in b, as each row touches two knots) on the free variables, and an Armijo line search
    keeps every step a descent. About 10-30 passes over the distinct logits.
    Returns (b before projection, info).
    """
    if offset is None:
        xs, sw, swy = unique_with_sums(logit, y, w)
        keep = sw > 0
        xs, sw, swy, off = xs[keep], sw[keep], swy[keep], None
    else:
        keep = slice(None) if np.all(w > 0) else w > 0  # a slice: no copies of every row
        xs, sw, swy, off = logit[keep], w[keep], (w * y)[keep], offset[keep]
    total = float(sw.sum())
    sw, swy = sw / total, swy / total
    k, t = segments(xs, a) if segs is None or offset is None else (segs[0][keep], segs[1][keep])
    # Far out on an end segment the fit sees t at +-1e6 (logits beyond about +-1e6, where eta has saturated
    # for any end slope above 1e-4), so that t**2 keeps the Hessian finite and well conditioned.
    t = np.clip(t, -FIT_T_MAX, FIT_T_MAX)
    n_b = a.size
    da = np.diff(a)
    # J maps (c, d) to b: b_j = c + sum_{i<j} d_i.
    jac = np.tril(np.ones((n_b, n_b)), 0)
    jac[:, 1:] = np.tril(np.ones((n_b, n_b - 1)), -1)

    def to_b(x):
        return np.concatenate([[x[0]], x[0] + np.cumsum(x[1:])])

    def linear_predictor(b):
        eta = b[k] + t * (b[k + 1] - b[k])
        return eta if off is None else eta + off

    def value(x):
        b, d = to_b(x), x[1:]
        eta = linear_predictor(b)
        loss = float(np.sum(sw * np.logaddexp(0.0, eta) - swy * eta))
        return loss + 0.5 * ridge * float(np.sum((d - da) ** 2 / da)) + lam * float(np.sum(np.maximum(-d, 0.0)))

    def smooth_grad(x, derivs):
        b, d = to_b(x), x[1:]
        q = sigmoid(linear_predictor(b))
        gb = eta_backward(k, t, sw * q - swy, n_b)
        g = np.concatenate([[gb.sum()], np.cumsum(gb[::-1])[::-1][1:] + ridge * (d - da) / da])
        if not derivs:
            return g, None
        h = sw * q * (1.0 - q)
        hb = np.zeros((n_b, n_b))
        diag = np.bincount(k, weights=h * (1 - t) ** 2, minlength=n_b) + np.bincount(
            k + 1, weights=h * t**2, minlength=n_b
        )
        off = np.bincount(k, weights=h * t * (1 - t), minlength=n_b - 1)[: n_b - 1]
        hb[np.arange(n_b), np.arange(n_b)] = diag
        hb[np.arange(n_b - 1), np.arange(1, n_b)] = off
        hb[np.arange(1, n_b), np.arange(n_b - 1)] = off
        hx = jac.T @ hb @ jac
        hx[np.arange(1, n_b), np.arange(1, n_b)] += ridge / da
        return g, hx

    x = np.concatenate([[a[0]], da]) if b0 is None else np.concatenate([[b0[0]], np.diff(b0)])
    fx = value(x)
    iters, converged, polished, flat = 0, False, 0, False
    for iters in range(1, max_iter + 1):
        g, hx = smooth_grad(x, True)
        d = x[1:]
        gd = g[1:]
        # Orthant of each increment: +1 / -1 away from zero; at zero, the side the gradient
        # points to once the penalty slope is counted (0 = stays at the kink).
        orth = np.sign(d)
        at0 = d == 0
        orth[at0 & (gd < 0)] = 1.0
        orth[at0 & (gd > lam)] = -1.0
        ge = np.concatenate([[g[0]], np.where(orth < 0, gd - lam, np.where(orth > 0, gd, 0.0))])
        free = np.concatenate([[True], orth != 0])
        gmax = float(np.max(np.abs(ge)))
        h_ff = hx[np.ix_(free, free)]
        h_ff[np.diag_indices_from(h_ff)] += 1e-12 * (1.0 + np.trace(h_ff))
        step = np.zeros_like(x)
        step[free] = -np.linalg.solve(h_ff, ge[free])
        orth_full = np.concatenate([[0.0], orth])
        if gmax < 1e-10 or flat:
            # Near the optimum the loss is flat to rounding while knots of little weight (flat
            # directions) can still be 1e-8 from it, where the weights' last bits (w or c w)
            # would move them: full Newton steps, judged by the gradient, until the step itself
            # is at rounding level.
            crossed = (orth_full != 0) & ((x + step) * orth_full < 0)
            size = np.max(np.abs(step)) / (1.0 + np.max(np.abs(x)))
            if polished >= 5 or crossed.any() or size <= 1e-12 or size > 1e-6:  # done, or not near enough
                converged = converged or gmax < 1e-6
                break
            x = x + step
            fx = value(x)
            polished += 1
            continue
        if ge @ step >= 0:  # not a descent direction (numerically): fall back to the gradient
            step = -ge
        alpha, moved = 1.0, False
        while alpha > 1e-12:
            cand = x + alpha * step
            crossed = (orth_full != 0) & (cand * orth_full < 0)
            cand[crossed] = 0.0
            fc = value(cand)
            if fc <= fx + 1e-4 * float(ge @ (cand - x)):
                moved = True
                break
            alpha *= 0.5
        decrease = fx - fc if moved else 0.0
        if moved:
            x, fx = cand, fc
        if decrease <= 1e-15 * max(1.0, abs(fx)):  # no progress left at float precision: polish
            converged, flat = gmax < 1e-6, True
    info = {"iterations": iters, "converged": converged, "loss": fx}
    return to_b(x), info


def project_monotone(b: np.ndarray) -> tuple[np.ndarray, float]:
    """Nearest non-decreasing vector (unweighted PAV) and the largest violation it removed."""
    viol = float(np.max(np.maximum(b[:-1] - b[1:], 0.0), initial=0.0))
    if viol == 0.0:
        return b, 0.0
    return pav(b, np.ones_like(b)), viol


@register
class ILPSCalibrator(ScoreCalibrator):
    """ILPS (Pan et al. 2020, eq. 10-11) solved as a convex problem, projected to be monotone."""

    name = "ilps"
    complexity = 101
    fitted = "K + 1 knot values of a piecewise-linear logit (K = 100 by default)"
    extremes = "inside (0, 1): sigmoid of a finite piecewise-linear logit"
    description = "isotonic line-plot scaling: monotone piecewise-linear map of the logit (Pan et al. 2020)"
    params = (K_PARAM, LAM_PARAM, RIDGE_PARAM, SCORE_KIND, PLATT_CORRECTION)

    def _fit(self, s, y, w):
        a = ilps_splits(self.params["K"])
        logit = to_logit(s, self.params["score_kind"])
        if s.min() < s.max() and not logit.min() < logit.max():
            raise FitError(
                f"every score is clipped to the logit {float(logit[0]):g} (probabilities within 1e-12 "
                "of 0 or 1), so the fit cannot tell them apart",
                hint="fit a rank-based method (isotonic, binning) on these scores",
            )
        b, info = fit_ilps(logit, y, w, a, self.params["lam"], self.params["ridge"])
        if not info["converged"]:
            fit_warning("ilps: the Newton solver hit its iteration limit; the map may be slightly suboptimal",
                        stacklevel=2)
        b, viol = project_monotone(b)
        self._set_state({"a": a, "b": b})
        self.info_ = dict(info, max_violation=viol, projection_changed=viol > 0.0)

    def _predict(self, s):
        return sigmoid(ilps_eta(to_logit(s, self.params["score_kind"]), self.a_, self.b_))

    def _get_state(self) -> dict[str, Any]:
        return {"a": self.a_, "b": self.b_}

    state_spec = StateSpec(*KNOT_FIELDS, check=check_splits)

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_ = np.array(as_float_array(state["a"], "state a"))
        self.b_ = np.array(as_float_array(state["b"], "state b"))
        if self.a_.size < 2 or self.a_.size != self.b_.size:
            raise FitError("ilps state needs as many knot values b as splits a (at least 2)")

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"knots": int(self.a_.size)}
        out.update(getattr(self, "info_", {}))
        return out
