"""The K-class contract: `ClassCalibrator`, a calibrator of (n, K) scores, one column per class.

Not a subclass of the binary `Calibrator`: it maps a row of K scores to a row of K
probabilities summing to 1 (within 1e-12), and its labels are class codes 0..K-1. A method is a
subclass with:

- `name`, `description`, `params` (a tuple of `Param`, `score_kind` among them: the caller
  resolves "auto" before the fit, see `kinds.probabilities.resolve_kind`), `state_spec`;
- `_fit(z, y, w)`: learn from scores `z` ((n, K): logits, or the logs of probabilities
  when `uses_logits`; the scores as given otherwise), codes `y` and weights `w` (None when
  every row weighs 1; else positive, scaled as the binary methods scale them);
- `_predict(z) -> (K, n)`: from class-major scores `z` ((K, n), the transpose: one contiguous
  row per class), the probabilities, class-major too (the base renormalises them);
- `_get_state()` / `_set_state(state)`: the fitted state, `n_classes` added by the base.

Scores are checked as for binary maps (finite; kind "probability": non-negative rows summing
to 1 within 1e-6), labels must be whole numbers 0..K-1, weights finite and non-negative.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Mapping

import numpy as np

from calibcli.calibrators import kscores
from calibcli.calibrators.estimator import Estimator
from calibcli.calibrators.fitdata import as_float_array, scaled_weights
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import CalibWarning, FitError, MapError, NotFittedError, Where
from calibcli.kinds.probabilities import refuse_rows
from calibcli.calibrators.params import Param

KCLASS_SCORE_KIND = Param(
    "score_kind", str, "probability",
    "probability: rows of class probabilities (their logs are used); logit: unnormalised log-scores",
    choices=kscores.SCORE_KINDS,
)
MAX_CLASSES = 1 << 14  # largest K a map may hold
N_CLASSES = Field("n_classes", kind="int", low=2, high=MAX_CLASSES)
SUM_TOL = 1e-12  # predicted rows sum to 1 within this


def probe_scores(k: int, kind: str) -> np.ndarray:
    """Rows every loaded K-class map is probed on: extreme logits, one-hot and near-zero
    probabilities, uniform rows."""
    eye = np.eye(k)
    if kind == "probability":
        tiny = np.full((k, k), 5e-324)
        np.fill_diagonal(tiny, 1.0)
        ramp = np.linspace(1.0, 2.0, k)
        return np.vstack([eye, tiny, np.full((1, k), 1.0 / k), ramp[None] / ramp.sum()])
    big = np.finfo(np.float64).max
    return np.vstack([eye * 1e300, -eye * 1e300, eye * big - (1 - eye) * big, np.zeros((1, k)),
                      np.linspace(-30.0, 30.0, k)[None], eye * 5e-324])


class ClassCalibrator(Estimator):
    """Calibrates K-class scores (parameters: `Estimator`); see the module docstring for what a
    method implements."""

    kind: ClassVar[str] = "kclass"
    params: ClassVar[tuple[Param, ...]] = (KCLASS_SCORE_KIND,)
    state_spec: ClassVar[StateSpec | None] = None
    monotone: ClassVar[bool] = False  # read by StateSpec; K-class maps promise no order
    uses_logits: ClassVar[bool] = True  # _fit/_predict see logits (probabilities as their logs)
    classes: ClassVar[str] = "native"  # "native" or "one-vs-rest", for `calib methods`
    uses_features: ClassVar[bool] = False
    needs_probabilities: ClassVar[bool] = False
    complexity: ClassVar[int]  # place in the simplicity order `calib compare` recommends by (registry docstring)
    fitted: ClassVar[str]  # what the fitted map holds, in words
    aliases: ClassVar[tuple[str, ...]] = ()  # other names of the method (a map records `name`)

    def __init__(self, **params: Any):
        self.n_classes: int | None = None
        super().__init__(**params)

    @property
    def score_kind(self) -> str:
        return self.params["score_kind"]

    def fit(self, scores: Any, labels: Any, sample_weight: Any = None,
            weight_kind: str = "frequency") -> "ClassCalibrator":
        """Fit on (n, K) scores and class codes 0..K-1 (optionally weighted); returns self.

        `weight_kind` as for binary methods: "frequency" (weight k = k rows) or "importance"
        (only the ratios matter). A class with no rows (or no weight) is a CalibWarning: the
        map still gives it a probability. The fitted map is checked on its training rows
        (`fitcheck.check_kclass`): worse than the scores, or a probability 0 where a class was
        seen, is a CalibWarning too.
        """
        s = self._checked_scores(scores)
        n, k = s.shape
        y = _class_codes(labels, n, k)
        w = None
        if sample_weight is not None:
            w = as_float_array(sample_weight, "weights")
            if w.shape != (n,):
                raise FitError(f"weights and scores differ in length ({w.size} vs {n})")
            bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
            if bad.size:
                raise FitError(f"weights must be finite and non-negative: row {bad[0]} is {float(w[bad[0]])!r}")
            if not np.any(w > 0):
                raise FitError("all weights are zero: calibration needs weighted rows", hint="check --weight-col")
            w = scaled_weights(w, weight_kind)
            keep = w > 0
            if not keep.all():
                s, y, w = s[keep], y[keep], w[keep]
            if np.all(w == w[0]):
                w = None if w[0] == 1 else w
        present = np.bincount(y, minlength=k) > 0
        if np.count_nonzero(present) < 2:
            raise FitError("every weighted row has the same class: calibration needs at least two classes",
                           hint="check --label-col, or fit on more data")
        if not present.all():
            missing = ", ".join(map(str, np.flatnonzero(~present)[:5]))
            warnings.warn(f"{self.name}: class code(s) {missing} have no rows in the calibration set; "
                          "the map still gives them a probability", CalibWarning, stacklevel=2)
        self.n_classes = k
        self.weight_kind_ = weight_kind
        self._fit(self._inputs(s), y, w)
        from calibcli.calibrators import fitcheck  # worse than the scores, or 0 where a class was seen

        fitcheck.check_kclass(self, s, y, w, ~present)
        return self

    def predict(self, scores: Any) -> np.ndarray:
        """Calibrated (n, K) probabilities, each row summing to 1 within 1e-12 (the transpose
        of `predict_class_major`)."""
        return self.predict_class_major(scores).T

    def predict_class_major(self, scores: Any) -> np.ndarray:
        """The (K, n) transpose of `predict`, C-ordered: one contiguous row per class, what
        `calib apply` writes as columns. The same bits whatever the layout of `scores`."""
        if self.n_classes is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit first")
        s = kscores.as_class_major(scores)
        if s.shape[0] != self.n_classes:
            raise FitError(f"scores have {s.shape[0]} class columns, the map was fitted on {self.n_classes}")
        if self.score_kind == "probability":
            refuse_rows(s, Where(column="scores"), class_major=True)
        with np.errstate(over="ignore", under="ignore"):
            p = np.asarray(self._predict(self._inputs(s)), dtype=np.float64)
        return normalised_rows(p)

    def _checked_scores(self, scores: Any) -> np.ndarray:
        s = kscores.as_score_matrix(scores)
        if self.score_kind == "probability":
            refuse_rows(s, Where(column="scores"))
        return s

    def _inputs(self, s: np.ndarray) -> np.ndarray:
        return kscores.as_logits(s, self.score_kind) if self.uses_logits else s

    def get_state(self) -> dict[str, Any]:
        """The minimal fitted state, `n_classes` included (JSON-able after arrays become lists)."""
        if self.n_classes is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit first")
        return {"n_classes": int(self.n_classes), **self._get_state()}

    @classmethod
    def from_state(cls, params: Mapping[str, Any], state: Mapping[str, Any]) -> "ClassCalibrator":
        """Rebuild a fitted calibrator from saved params and state (checked by `state_spec`,
        then probed: a MapError for a state no fit gives)."""
        obj = cls(**dict(params))
        if cls.state_spec is None:
            raise MapError(f"{cls.name} declares no state_spec: its maps cannot be loaded")
        checked = cls.state_spec.validate(cls, obj.params, state)
        obj.n_classes = int(checked.pop("n_classes"))
        obj._set_state(checked)
        obj.check_probe()
        return obj

    def check_probe(self) -> None:
        """Predictions on `probe_scores` must be finite rows in [0, 1] summing to 1."""
        with np.errstate(all="ignore"):
            p = self.predict(probe_scores(int(self.n_classes or 2), self.score_kind))
        ok = np.all((p >= 0) & (p <= 1), axis=1) & (np.abs(p.sum(axis=1) - 1) <= SUM_TOL)
        if not ok.all():
            raise MapError(f"{self.name} map predicts {p[np.argmin(ok)].tolist()!r:.80} on a probe row, "
                           "not a probability vector", hint="the map file is damaged or edited: fit it again")

    def summary(self) -> dict[str, Any]:
        """Key fitted values for the fit report and the map's training block."""
        return {}

    def _fit(self, z: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> None:
        raise NotImplementedError

    def _predict(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def normalised_rows(p: np.ndarray) -> np.ndarray:
    """Class-major (K, n) probabilities, each of the n predictions divided by its sum (in
    place when `p` owns its data), NaN and negative values taken as 0; a prediction of zeros
    becomes uniform."""
    if not (p.flags.writeable and p.flags.owndata):
        p = p.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(p.sum())  # one pass; nan_to_num is the identity on finite values
    if not finite:
        np.nan_to_num(p, copy=False, nan=0.0, posinf=1.0, neginf=0.0)
    np.maximum(p, 0.0, out=p)
    total = p.sum(axis=0)
    zero = total <= 0
    if zero.any():
        p[:, zero] = 1.0
        total[zero] = p.shape[0]
    p /= total
    np.minimum(p, 1.0, out=p)
    return p


def _class_codes(labels: Any, n: int, k: int) -> np.ndarray:
    """Labels as int64 codes 0..K-1, else a FitError naming the first bad row."""
    raw = np.asarray(labels)
    if raw.ndim != 1 or raw.size != n:
        raise FitError(f"labels must be one value per row: {n} rows of scores, labels of shape {raw.shape}")
    if n == 0:
        raise FitError("no rows to fit on")
    if raw.dtype.kind not in "iufb":
        raise FitError(f"labels must be class codes 0..{k - 1}, got {raw.dtype} values",
                       hint="calibcli.fit maps any labels to codes")
    y = raw.astype(np.float64)
    bad = np.flatnonzero(~((y >= 0) & (y <= k - 1) & (y == np.floor(y))))
    if bad.size:
        raise FitError(f"labels must be class codes 0..{k - 1}: row {bad[0]} is {raw[bad[0]].item()!r}")
    return y.astype(np.int64)
