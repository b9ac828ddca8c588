"""Beta calibration: mu(s; a, b, c) = 1 / (1 + 1 / (e^c s^a / (1-s)^b)), with a, b >= 0.

Three registered variants, all fitted by maximum likelihood (weighted log-loss, exact Newton
through `fit_logistic_columns`) in the feature space of the paper's section 3.3:

- `beta` (3 parameters, Algorithm 2): logistic regression on ln(s) and -ln(1-s) with an
  intercept c;
- `beta-am` (a = b, Algorithm 1 / Proposition 1): logistic regression on ln(s/(1-s));
- `beta-ab` (m = 1/2 fixed): no intercept, features ln(2s) and -ln(2(1-s)) (as betacal), so
  c = (a - b) ln 2.

Every variant predicts through the same formula sigmoid(a ln s - b ln(1-s) + c) from the
stored (a, b, c); m (the midpoint, LR(m) = 1 in section 3.2) is stored and reported only.

Choices, where the paper and the released `betacal` code differ:

- Clipping: s is clipped to [EPS, 1 - EPS] with EPS = 1e-12 whatever the input dtype
  (betacal uses the dtype's machine epsilon, so float32 and float64 inputs give different
  maps, and float32 scores hit log(0) issues). EPS is stored in the map so old maps keep
  predicting the same numbers. The number of clipped training scores is reported in
  `summary()["clipped"]` and by a CalibWarning.
- Logit scores (`score_kind=logit`): t = logit(s) is clipped to +-ln((1-EPS)/EPS), the same
  clip in logit space, and the features are computed from t directly (ln s = -softplus(-t),
  -ln(1-s) = softplus(t)) rather than through sigmoid(t), which would lose the relative
  precision of 1-s for large t.
- a, b >= 0 (section 3.3, last paragraph, "eliminate variables with negative coefficients and
  refit"): when the unconstrained fit breaks a constraint we refit with every subset of the
  coefficients fixed at 0 and keep the feasible refit with the lowest log-loss. For a convex
  loss this is exactly the constrained maximum-likelihood fit; it covers the paper's "fix
  at 0 and refit the rest" and also re-checks the refit coefficient, which betacal does not
  (betacal sets a = 0 and refits on -ln(1-s) alone even if that refit gives b < 0). `beta-am`
  with a < 0 becomes the constant map at the base rate; `beta-ab` the constant 1/2 when
  both are 0. The paper and betacal leave a, b unconstrained in these two variants; here
  they are constrained too so that every variant is monotone.
- m: the root of a ln m - b ln(1-m) + c = 0, found by bracketing in logit space (betacal
  minimises |.| with a bounded scalar search to about 1e-5). With a = b it is
  1 / (1 + e^{c/a}) in closed form. When no root exists (a or b is 0, or both), m is the end
  of [0, 1] the map never reaches 1/2 before: 1 if mu < 1/2 everywhere, 0 if mu > 1/2
  everywhere, and 1/2 for the flat map a = b = c = 0, which equals 1/2 everywhere.
- Tied scores are pooled first (weights and weighted targets summed), which makes the fit
  cost per distinct score; large inputs whose scores are nearly all distinct (judged on a
  strided sample) are fitted on the rows instead, which reaches the same optimum without
  the sort.
- Soft (Platt-corrected) targets are supported directly, as in the bayesiso copy of betacal.

References
----------
Kull, Silva Filho & Flach (2017), "Beta calibration: a well-founded and easily implemented
improvement on logistic calibration for binary classifiers", AISTATS, sections 3.1-3.3.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator, fit_warning
from calibcli.calibrators.fitdata import as_float_array
from calibcli.calibrators.logistic import fit_logistic_columns, sigmoid
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import FitError
from calibcli.calibrators.params import PLATT_CORRECTION, PROB_CLIP, SCORE_KIND
from calibcli.numeric.pooling import mostly_distinct, unique_with_sums

EPS = PROB_CLIP  # probability clip, float64 whatever the input dtype
LN2 = math.log(2.0)
GRAD_TOL = 1e-8  # mean-log-loss gradient below which a fit counts as converged


def clip_scores(s: np.ndarray, kind: str, eps: float = EPS) -> tuple[np.ndarray, int]:
    """Scores clipped to [eps, 1-eps] (or the same bound in logit space); returns (clipped, count)."""
    if kind == "logit":
        bound = math.log1p(-eps) - math.log(eps)
        lo, hi = -bound, bound
    else:
        lo, hi = eps, 1.0 - eps
    n_clipped = int(np.count_nonzero((s < lo) | (s > hi)))
    return np.clip(s, lo, hi), n_clipped


def log_features(s: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The paper's features (ln s, -ln(1-s)) of already clipped scores."""
    if kind == "logit":
        return -np.logaddexp(0.0, -s), np.logaddexp(0.0, s)
    return np.log(s), -np.log1p(-s)


def _mean_log_loss(eta: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean log-loss of sigmoid(eta) against (possibly fractional) targets."""
    return float(np.sum(w * (np.logaddexp(0.0, eta) - y * eta)) / np.sum(w))


def fit_nonnegative(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, intercept: bool
) -> tuple[np.ndarray, float, bool]:
    """Maximum-likelihood logistic coefficients constrained to be >= 0 (intercept free).

    Fits without constraints first; if a coefficient is negative, refits with each subset of
    the coefficients fixed at 0 and keeps the feasible fit with the lowest loss, which for a
    convex loss is the constrained optimum (it lies on the face of the free coefficients,
    where it is an unconstrained optimum). Returns (coefficients, intercept, converged).
    """
    coef, c, converged = _fit_subset(x, y, w, intercept)
    if np.all(coef >= 0):
        return coef, c, converged  # the unconstrained optimum is feasible, hence optimal
    k = x.shape[1]
    best: tuple[float, np.ndarray, float, bool] | None = None
    for size in range(k - 1, -1, -1):
        for keep in combinations(range(k), size):
            coef, c, converged = _fit_subset(x[:, list(keep)], y, w, intercept)
            if np.any(coef < 0):
                continue
            full = np.zeros(k)
            full[list(keep)] = coef
            loss = _mean_log_loss(x @ full + c, y, w)
            if best is None or loss < best[0]:
                best = (loss, full, c, converged)
    assert best is not None  # the empty subset is always feasible
    return best[1], best[2], best[3]


def _fit_subset(x: np.ndarray, y: np.ndarray, w: np.ndarray, intercept: bool) -> tuple[np.ndarray, float, bool]:
    """Unconstrained fit on the given columns; closed form when only an intercept is left."""
    if x.shape[1] == 0:
        if not intercept:
            return np.zeros(0), 0.0, True
        rate = float(np.sum(w * y) / np.sum(w))
        return np.zeros(0), math.log(rate) - math.log1p(-rate), True
    columns = [np.ascontiguousarray(x[:, j]) for j in range(x.shape[1])]
    beta, converged = fit_logistic_columns(columns, y, w, intercept)
    if not converged:
        design = np.column_stack([x, np.ones(x.shape[0])]) if intercept else x
        # trust-exact also stops unsuccessfully when the loss change drops below float
        # precision (large n) at an optimum; judge by the gradient of the mean loss instead.
        grad = design.T @ (w * (sigmoid(design @ beta) - y)) / np.sum(w)
        converged = bool(np.all(np.isfinite(beta)) and np.max(np.abs(grad)) <= GRAD_TOL)
    if intercept:
        return beta[:-1], float(beta[-1]), converged
    return beta, 0.0, converged


def separated(xs: np.ndarray, ybar: np.ndarray) -> bool:
    """True when every score holding negative mass lies below every score holding positive mass."""
    top_neg = np.max(xs, where=ybar < 1, initial=-np.inf)
    low_pos = np.min(xs, where=ybar > 0, initial=np.inf)
    return bool(top_neg < low_pos and np.isfinite(top_neg) and np.isfinite(low_pos))


def midpoint(a: float, b: float, c: float) -> float:
    """m in [0, 1] with mu(m) = 1/2, i.e. a ln m - b ln(1-m) + c = 0 (section 3.2).

    Without a root (a or b is 0) m is the end of [0, 1] the map stays on one side of 1/2 up
    to: 1 if mu < 1/2 on all of (0, 1), 0 if mu > 1/2 on all of it, 1/2 for a = b = c = 0.
    """
    if a > 0 and b > 0:
        if a == b:
            return float(sigmoid(np.float64(-c / a)))
        from scipy.optimize import brentq

        # In logit space t (ln m = -softplus(-t), ln(1-m) = -softplus(t)) the equation is
        # g(t) = a t + (b - a) softplus(t) + c = 0, g increasing. As softplus(t) is within
        # ln 2 of max(t, 0), g < 0 below lo and g > 0 above hi.
        def g(t: float) -> float:
            return a * t + (b - a) * float(np.logaddexp(0.0, t)) + c

        slack = abs(b - a) * LN2
        lo = min(0.0, -(c + slack) / a) - 1.0
        hi = max(0.0, (slack - c) / b) + 1.0
        return float(sigmoid(np.float64(brentq(g, lo, hi, xtol=1e-14, rtol=1e-15))))
    if a > 0:  # b = 0: a ln m + c = 0
        return math.exp(-c / a) if c > 0 else 1.0
    if b > 0:  # a = 0: -b ln(1-m) + c = 0
        return -math.expm1(c / b) if c < 0 else 0.0
    return 0.5 if c == 0 else (1.0 if c < 0 else 0.0)


class _BetaFamily(ScoreCalibrator):
    """Shared fitting, prediction and state of the three beta variants."""

    params = (PLATT_CORRECTION, SCORE_KIND)
    monotone = True  # a, b >= 0 and both features increase with s
    needs_probabilities = True  # the default score_kind; each instance follows its own
    _has_intercept = True  # False for beta-ab, whose c is tied to a and b
    extremes = ("inside (0, 1) for scores inside (0, 1) when the classes overlap; the scores 0 and 1 "
                "(clipped to 1e-12 from the ends) map to 0 and 1 when a, b > 0, as the identity does; "
                "on separated classes the coefficients grow (the fit warns)")

    def fit(self, scores, labels, sample_weight=None, features=None, weight_kind="frequency"):
        """As Calibrator.fit, with an error that names `score_kind=logit` for out-of-range scores."""
        s = as_float_array(scores, "scores")
        if self.needs_probabilities and s.size and np.all(np.isfinite(s)) and (s.min() < 0 or s.max() > 1):
            raise FitError(
                f"method {self.name!r} needs probability scores in [0, 1], got range "
                f"[{s.min():g}, {s.max():g}]; if the scores are log-odds, use "
                "`--param score_kind=logit`"
            )
        return super().fit(s, labels, sample_weight, features, weight_kind)

    def _fit(self, s, y, w):
        kind = self.params["score_kind"]
        spread = bool(s.min() < s.max())
        s, self.clipped_ = clip_scores(s, kind, EPS)
        if spread and not s.min() < s.max():
            raise FitError(
                f"every score is clipped to {float(s[0]):g} (scores within 1e-12 of 0 or 1, "
                "or logits beyond +-27.6), so the fit cannot tell them apart",
                hint="fit a rank-based method (isotonic, binning) on these scores",
            )
        if self.clipped_:
            what = "logits beyond +-%.4g" % (math.log1p(-EPS) - math.log(EPS)) if kind == "logit" else (
                f"scores outside [{EPS:g}, 1-{EPS:g}]"
            )
            fit_warning(f"{self.clipped_} {what} were clipped before the beta fit", stacklevel=4)
        if mostly_distinct(s):  # pooling would cost a sort and save nothing: fit on the rows
            keep = w > 0
            xs, sw, ybar = (s, w, y) if keep.all() else (s[keep], w[keep], y[keep])
        else:
            xs, sw, swy = unique_with_sums(s, y, w)
            keep = sw > 0
            xs, sw, ybar = xs[keep], sw[keep], swy[keep] / sw[keep]
        f1, f2 = log_features(xs, kind)
        if xs.size == 1 and self._has_intercept:
            # One distinct score: the features are constant, only the base rate is identifiable.
            _, c, converged = _fit_subset(np.zeros((1, 0)), ybar, sw, intercept=True)
            a = b = 0.0
        else:
            a, b, c, converged = self._fit_coefficients(f1, f2, ybar, sw)
        if separated(xs, ybar):
            fit_warning(f"the score separates the classes perfectly, so the {self.name} fit has no finite "
                        "optimum and the map is close to a step; try --param platt_correction=true", stacklevel=4)
        elif not converged:
            fit_warning(f"{self.name} fit did not converge; try --param platt_correction=true", stacklevel=4)
        self.a_, self.b_, self.c_ = float(a), float(b), float(c)
        self.m_ = self._midpoint()
        self.eps_ = EPS

    def _midpoint(self) -> float:
        return midpoint(self.a_, self.b_, self.c_)

    def _fit_coefficients(self, f1, f2, y, w) -> tuple[float, float, float, bool]:
        """(a, b, c, converged) from the features ln s, -ln(1-s) of the pooled scores."""
        raise NotImplementedError

    def _predict(self, s):
        kind = self.params["score_kind"]
        f1, f2 = log_features(clip_scores(s, kind, self.eps_)[0], kind)
        eta = self.a_ * f1 + self.b_ * f2 + self.c_
        # 1/(1+e^-eta), cheaper than logistic.sigmoid's logaddexp form and within a few ulps of
        # it (docs/algorithms.md); e^-eta overflows only where the map is below 1e-308 (giving 0).
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-eta))

    def _get_state(self) -> dict[str, Any]:
        return {"a": self.a_, "b": self.b_, "c": self.c_, "m": self.m_, "eps": self.eps_}

    # a, b >= 0 keep the map monotone; the caps keep a ln s - b ln(1-s) + c finite.
    state_spec = StateSpec(
        Field("a", "number", low=0.0, high=1e100),
        Field("b", "number", low=0.0, high=1e100),
        Field("c", "number", low=-1e300, high=1e300),
        Field("m", "number", unit=True),
        Field("eps", "number", low=1e-300, high=0.25),
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_, self.b_, self.c_ = float(state["a"]), float(state["b"]), float(state["c"])
        self.m_, self.eps_ = float(state["m"]), float(state["eps"])

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"a": self.a_, "b": self.b_, "c": self.c_, "m": self.m_}
        if hasattr(self, "clipped_"):
            out["clipped"] = self.clipped_
        return out


@register
class BetaCalibrator(_BetaFamily):
    """Full beta calibration (a, b, c): Algorithm 2, logistic regression on ln s and -ln(1-s)."""

    name = "beta"
    complexity = 3
    fitted = "3 numbers: a, b, c"
    description = "beta calibration (Kull 2017): sigmoid(a ln s - b ln(1-s) + c), a, b >= 0"

    def _fit_coefficients(self, f1, f2, y, w):
        coef, c, converged = fit_nonnegative(np.column_stack([f1, f2]), y, w, intercept=True)
        return coef[0], coef[1], c, converged


@register
class BetaAMCalibrator(_BetaFamily):
    """Beta calibration with a = b: Algorithm 1, logistic regression on the log-odds."""

    name = "beta-am"
    complexity = 2
    fitted = "2 numbers: a (= b), c"
    description = "beta calibration with a = b: sigmoid(a ln(s/(1-s)) + c), a >= 0"

    def _fit_coefficients(self, f1, f2, y, w):
        coef, c, converged = fit_nonnegative((f1 + f2)[:, None], y, w, intercept=True)
        return coef[0], coef[0], c, converged


@register
class BetaABCalibrator(_BetaFamily):
    """Beta calibration with the midpoint fixed at m = 1/2 (no free intercept)."""

    name = "beta-ab"
    complexity = 2
    fitted = "2 numbers: a, b"
    description = "beta calibration with m = 1/2: sigmoid(a ln 2s - b ln 2(1-s)), a, b >= 0"
    _has_intercept = False

    def _fit_coefficients(self, f1, f2, y, w):
        coef, _, converged = fit_nonnegative(np.column_stack([f1 + LN2, f2 - LN2]), y, w, intercept=False)
        a, b = coef
        return a, b, (a - b) * LN2, converged

    def _midpoint(self) -> float:
        return 0.5  # by construction: a ln(1/2) - b ln(1/2) + (a - b) ln 2 = 0
