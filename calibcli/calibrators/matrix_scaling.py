"""Vector scaling and Dirichlet calibration: affine maps of the logits under a softmax.

- `vector`: p = softmax(v * z + b), a scale and an intercept per class (Guo et al. 2017).
- `dirichlet`: p = softmax(W ln(p) + b) with W a full K x K matrix (Kull et al. 2019); on
  logits (score_kind=logit) the same map is matrix scaling, softmax(W z + b).

Both are fitted by L-BFGS with analytic gradients under the paper's ODIR penalties
(off-diagonal `reg_lambda`, intercept `reg_mu`; vector scaling has no off-diagonal), chosen on
`folds` held-out folds unless given (`odir.py`). Probabilities enter as their logs
(`kscores.log_probabilities`).

References
----------
Kull, Perello-Nieto, Kängsepp, Silva Filho, Song & Flach (2019), "Beyond temperature scaling:
obtaining well-calibrated multiclass probabilities with Dirichlet calibration", NeurIPS.
Guo, Pleiss, Sun & Weinberger (2017), "On calibration of modern neural networks", ICML.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from calibcli.calibrators import odir
from calibcli.calibrators.kclass import KCLASS_SCORE_KIND, N_CLASSES, ClassCalibrator
from calibcli.calibrators.kscores import affine_logits, softmax
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.calibrators.params import SEED, Param

REG_LAMBDA = Param("reg_lambda", float, None, "ODIR off-diagonal penalty lambda (auto: chosen on held-out folds)",
                   low=0.0, high=1e6, optional=True)
REG_MU = Param("reg_mu", float, None, "ODIR intercept penalty mu (auto: chosen on held-out folds)",
               low=0.0, high=1e6, optional=True)
FOLDS = Param("folds", int, 5, "folds the penalties are chosen on (when not given)", low=2, high=20)


def _state_sizes(square: bool) -> Callable[..., None]:
    """StateSpec check: w holds K*K (square) or K values and b K, for K = n_classes."""
    def check(params: Any, state: dict[str, Any], fail: Callable[..., None]) -> None:
        k = state["n_classes"]
        for name, size in (("w", k * k if square else k), ("b", k)):
            if state[name].size != size:
                fail(name, problem=f"has {state[name].size} values, expected {size} for n_classes = {k}")
    return check


class _AffineSoftmax(ClassCalibrator):
    """Shared fit, state and prediction of the two maps; `full` says whether W is a matrix."""

    full = False

    def _fit(self, z, y, w):
        problem = odir.Problem(z, y, w, self.full)
        given = (self.params["reg_lambda"] if self.full else 0.0, self.params["reg_mu"])
        pairs = odir.candidates(*given)
        chosen, held_out, start, scale = odir.choose(problem, pairs, self.params["folds"], self.params["seed"])
        lam, mu = (value if user is not None else value * scale for value, user in zip(chosen, given))
        wmat, b = problem.split(odir.fit(problem, lam, mu, start))
        self.w_, self.b_ = np.array(wmat, dtype=np.float64), np.array(b, dtype=np.float64)
        self.chosen_ = {"reg_lambda": lam, "reg_mu": mu, "held_out_log_loss": held_out}

    def _predict(self, z):
        return softmax(affine_logits(z, self.w_, self.b_))

    def _get_state(self) -> dict[str, Any]:
        return {"w": self.w_.ravel(), "b": self.b_}

    def _set_state(self, state: dict[str, Any]) -> None:
        k = int(self.n_classes or 0)
        self.w_ = np.asarray(state["w"], dtype=np.float64).reshape((k, k) if self.full else (k,))
        self.b_ = np.asarray(state["b"], dtype=np.float64)

    def summary(self) -> dict[str, Any]:
        chosen = getattr(self, "chosen_", {})
        return {key: chosen[key] for key in ("reg_lambda", "reg_mu") if key in chosen and key in self.params}


@register
class VectorScaling(_AffineSoftmax):
    """softmax(v * z + b): a scale and an intercept per class."""

    name = "vector"
    complexity = 2
    fitted = "2 numbers per class: a scale and an intercept"
    description = ("vector scaling: softmax(v*z + b), a scale and intercept per class, L-BFGS with the ODIR "
                   "intercept penalty reg_mu chosen on held-out folds")
    params = (KCLASS_SCORE_KIND, REG_MU, FOLDS, SEED)
    state_spec = StateSpec(N_CLASSES, Field("w"), Field("b"), check=_state_sizes(False))


@register
class DirichletCalibration(_AffineSoftmax):
    """softmax(W ln p + b) with a full W (matrix scaling on logits), ODIR-regularised."""

    name = "dirichlet"
    complexity = 4
    fitted = "K + 1 numbers per class: a K x K matrix and K intercepts"
    description = ("Dirichlet calibration (Kull et al. 2019): softmax(W ln p + b), full W (matrix scaling on "
                   "logits), L-BFGS with ODIR penalties reg_lambda, reg_mu chosen on held-out folds")
    params = (KCLASS_SCORE_KIND, REG_LAMBDA, REG_MU, FOLDS, SEED)
    full = True
    state_spec = StateSpec(N_CLASSES, Field("w"), Field("b"), check=_state_sizes(True))
