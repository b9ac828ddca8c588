"""The Calibrator contract every method follows.

A method is a class deriving from `ScoreCalibrator` (predictions from the score alone) or
`FeatureCalibrator` (also reads feature columns), with:

- `name`, `description`: the registry key and the one line `calib methods` prints;
- `params`: a tuple of `Param` (`calibcli.calibrators.params`); `__init__` only checks and stores them
  in `self.params`;
- `_fit(s, y, w)` (feature methods: `_fit(s, y, w, features)`): learn from scores `s`,
  targets `y` in [0, 1] (0/1 labels, or the Platt-corrected targets when the method has the
  `platt_correction` option and it is on) and weights `w` (always an array, ones when none
  were given);
- `_predict(s)` (feature methods: `_predict(s, features)`): probabilities for new scores
  (the base class clips to [0, 1]);
- `get_state()` / `_set_state(state)`: the minimal fitted state as a flat dict of numbers,
  strings and (nested) lists or float arrays, declared by `state_spec` (`statespec.py`).
  `_predict` must read only what `_set_state` restores, so a map reloaded from JSON or
  Parquet predicts bit-for-bit what the fitted object did (float64 -> JSON repr -> float64
  is exact).

Callers use one public signature for both kinds, `fit(scores, labels, weights, features,
weight_kind)` and `predict(scores, features)`, passing `features` only where the class
`uses_features`; a score-only method refuses features rather than ignore them.

Optional hooks: `summary()` (key fitted values for the fit report), `input_features()`
(feature columns `apply` must read), and `fit_warning(...)` during `_fit` for diagnostics the
CLI shows on stderr.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Mapping

import numpy as np

from calibcli.calibrators.estimator import Estimator
from calibcli.calibrators.fitdata import as_float_array, class_weights, platt_values, scaled_weights
from calibcli.calibrators.statespec import StateSpec
from calibcli.errors import CalibWarning, FitError, MapError, NotFittedError, UsageError
from calibcli.calibrators.params import SAFE_PLATT_CORRECTION

# Resampling methods expand whole-number frequency weights into duplicated rows up to this
# many rows; above it they resample rows in proportion to their weights (with a warning).
EXPAND_LIMIT = 2_000_000


def fit_warning(message: str, stacklevel: int) -> None:
    """A CalibWarning (a diagnostic the CLI shows on stderr); `stacklevel` counts from the caller,
    as in `warnings.warn`."""
    warnings.warn(message, CalibWarning, stacklevel=stacklevel + 1)


# Scores every loaded map is probed on: predictions must be finite, in [0, 1] and, for
# monotone methods, non-decreasing (the invariants a fitted map satisfies).
PROBE_SCORES = np.array([-1.7976931348623157e308, -1e300, -1e10, -1e3, -30.0, -5.0, -1.0, -1e-300, 0.0,
                         5e-324, 1e-322, 1e-310, 1e-300, 1e-12, 1e-6, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99,
                         1 - 1e-12, 1.0, 1.0 + 1e-9, 2.0, 5.0, 30.0, 1e3, 1e10, 1e300, 1.7976931348623157e308])


def refuse_features(method: str, names: Any) -> None:
    """A score-only method given feature columns: the one refusal of `--field-col`/`--feature-col`
    at the door (`requests.FitRequest`) and of `features=` in a direct fit or predict."""
    named = ", ".join(map(str, names)) or "none"
    raise UsageError(f"method {method!r} reads no feature columns, got features ({named})",
                     hint="--field-col/--feature-col (features=) are for methods that use them (`calib methods "
                     "--json`: uses_features); `calib evaluate --field-col` measures field-level calibration")


def _one_class(y: np.ndarray, pos: float, neg: float, weighted: bool) -> FitError:
    """Why a fit sees one class only, by its true cause: all weights zero, every label the
    same, or every row of one class weighted zero."""
    if weighted and pos <= 0 and neg <= 0:
        return FitError("all weights are zero: calibration needs weight on both classes",
                        hint="check --weight-col")
    missing = 1 if pos <= 0 else 0
    if not np.any(y == missing):
        only = "0 (negative)" if missing == 1 else "1 (positive)"
        return FitError(f"every label is {only}: calibration needs both classes",
                        hint="check --label-col, or fit on more data")
    return FitError(f"every row with label {missing} has weight zero: calibration needs weight on both classes",
                    hint="check --weight-col")


class Calibrator(Estimator):
    """What score-only and feature methods share: input checks, Platt correction, clipping,
    state (parameters: `Estimator`). Methods derive from `ScoreCalibrator` or `FeatureCalibrator`."""

    kind: ClassVar[str] = "binary"
    monotone: ClassVar[bool] = True  # predictions non-decreasing in the score
    state_spec: ClassVar[StateSpec | None] = None  # what a loaded state must satisfy
    needs_probabilities: ClassVar[bool] = False  # scores must lie in [0, 1]
    uses_features: ClassVar[bool] = False  # reads --field-col/--feature-col columns
    resamples_rows: ClassVar[bool] = False  # the fit draws rows: frequency weights are expanded
    extremes: ClassVar[str] = ""  # default behaviour at 0 and 1, for `calib methods` and the README
    complexity: ClassVar[int]  # place in the simplicity order `calib compare` recommends by (registry docstring)
    fitted: ClassVar[str]  # what the fitted map holds, in words
    aliases: ClassVar[tuple[str, ...]] = ()  # other names of the method (a map records `name`)

    def __init__(self, **params: Any):
        self._fitted = False
        super().__init__(**params)

    def _configured(self) -> None:
        if "score_kind" in self.params:  # scores read as probabilities must lie in [0, 1]: fit and
            # `calib apply` refuse others (they are probably logits) rather than clip them
            self.needs_probabilities = self.params["score_kind"] == "probability"  # type: ignore[misc]

    @classmethod
    def default_extremes(cls) -> str:
        """What the method's defaults do at the extremes: `extremes`, or the Platt-default text."""
        if cls.extremes or SAFE_PLATT_CORRECTION not in cls.params:
            return cls.extremes
        return ("never exactly 0 or 1 by default (Platt's targets); platt_correction=false "
                "gives 0 or 1 where the calibration data had one class")

    @classmethod
    def from_cli(cls, pairs: Mapping[str, str]) -> "Calibrator":
        """Built from `--param key=value` texts (`Estimator.configured`)."""
        return cls().configured(pairs, texts=True)

    def fit(
        self,
        scores: Any,
        labels: Any,
        sample_weight: Any = None,
        features: Mapping[str, np.ndarray] | None = None,
        weight_kind: str = "frequency",
    ) -> "Calibrator":
        """Fit on scores and 0/1 labels (optionally weighted); returns self.

        `weight_kind="frequency"` (the default): a row of weight k counts as k rows (a whole
        number k is exactly k duplicated rows). `"importance"` (either, as checked by
        `requests.FitRequest`): only the weights' ratios matter; they are rescaled to sum to the number of rows with positive weight, so
        scaling every weight by c > 0 gives the same map. `features`: column name -> one value
        per row, for methods that read them (`uses_features`); score-only methods refuse them.
        """
        self._check_features(features)
        s = as_float_array(scores, "scores")
        y = as_float_array(labels, "labels")
        if s.shape != y.shape:
            raise FitError(f"scores and labels differ in length ({s.size} vs {y.size})")
        if s.size == 0:
            raise FitError("no rows to fit on")
        if not np.all(np.isfinite(s)):
            raise FitError("scores must be finite (no NaN or inf)")
        if not np.all((y == 0) | (y == 1)):
            raise FitError("labels must be 0 or 1")
        if sample_weight is None:
            w = np.broadcast_to(np.float64(1.0), s.shape)  # read-only unit weights, no n-long array
        else:
            w = as_float_array(sample_weight, "weights")
            if w.shape != s.shape:
                raise FitError(f"weights and scores differ in length ({w.size} vs {s.size})")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise FitError("weights must be finite and non-negative")
        pos, neg = class_weights(y, w)
        if pos <= 0 or neg <= 0:
            raise _one_class(y, pos, neg, sample_weight is not None)
        if self.needs_probabilities and (s.min() < 0 or s.max() > 1):
            raise FitError(
                f"method {self.name!r} needs scores in [0, 1], got range [{s.min():g}, {s.max():g}]"
            )
        totals = (pos, neg)  # frequency: Platt's targets count the actual weights
        if sample_weight is not None:
            w = scaled_weights(w, weight_kind)
            pos, neg = class_weights(y, w)
            if pos <= 0 or neg <= 0:
                raise FitError(
                    f"the {'positive' if pos <= 0 else 'negative'} rows' weights are all below 2^-600 "
                    "times the largest weight: too small to fit beside it",
                    hint="check --weight-col",
                )
            if weight_kind == "importance":
                totals = (pos, neg)
            elif self.resamples_rows:
                s, y, w, features = self._expand_counts(s, y, w, features)
        targets = platt_values(y, *totals) if self.params.get("platt_correction") else y
        self._fit_rows(s, targets, w, features)
        self._fitted = True
        return self

    def _expand_counts(self, s, y, w, features):
        """Whole-number frequency weights as duplicated rows, so a resampling fit sees k rows."""
        if not np.all(w == np.floor(w)) or np.all(w == 1):
            return s, y, w, features
        total = float(np.sum(w))
        if total > max(EXPAND_LIMIT, s.size):
            fit_warning(f"{self.name}: the weights sum to {total:g} rows, more than {EXPAND_LIMIT} to expand; "
                        "rows are resampled in proportion to their weights instead", stacklevel=3)
            return s, y, w, features
        k = w.astype(np.int64)
        if features is not None:
            features = {name: np.repeat(np.asarray(col), k) for name, col in features.items()}
        return np.repeat(s, k), np.repeat(y, k), np.ones(int(k.sum())), features

    def predict(self, scores: Any, features: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Calibrated probabilities in [0, 1] for new scores.

        Overflow is silenced: a huge score times a slope is inf and its sigmoid exactly 0 or 1,
        which is right, and numpy's warning would only put two lines of noise on stderr.
        """
        self._check_fitted()
        self._check_features(features)
        s = as_float_array(scores, "scores")
        with np.errstate(over="ignore", under="ignore"):
            out = np.asarray(self._predict_rows(s, features), dtype=np.float64)
        if out.flags.writeable and out.flags.owndata and not np.may_share_memory(out, s):
            return np.clip(out, 0.0, 1.0, out=out)  # the method's own fresh array: no second n-long one
        return np.clip(out, 0.0, 1.0)

    def get_state(self) -> dict[str, Any]:
        """The minimal fitted state (JSON-able after numpy arrays become lists)."""
        self._check_fitted()
        return self._get_state()

    @classmethod
    def from_state(cls, params: Mapping[str, Any], state: Mapping[str, Any]) -> "Calibrator":
        """Rebuild a fitted calibrator from saved params and state, refusing a state that breaks
        the class's `state_spec` or gives predictions a fitted map cannot (MapError)."""
        obj = cls(**dict(params))
        if cls.state_spec is None:
            raise MapError(f"{cls.name} declares no state_spec: its maps cannot be loaded")
        obj._set_state(cls.state_spec.validate(cls, obj.params, state))
        obj._fitted = True
        obj._check_probe()
        return obj

    def _check_probe(self) -> None:
        """Predictions on PROBE_SCORES must be finite, in [0, 1], monotone where promised."""
        cat, num = self.input_features()
        n = PROBE_SCORES.size
        features = {**{c: np.full(n, "", dtype=object) for c in cat}, **{c: np.zeros(n) for c in num}}
        with np.errstate(all="ignore"):
            p = self.predict(PROBE_SCORES, features or None)
        bad = np.flatnonzero(~((p >= 0) & (p <= 1)))
        if bad.size:
            raise MapError(f"{self.name} map predicts {p[bad[0]]!r} at score {PROBE_SCORES[bad[0]]:g}, "
                           "not a probability", hint="the map file is damaged or edited: fit it again")
        drop = np.flatnonzero(np.diff(p) < -1e-12)
        if self.monotone and drop.size:
            i = int(drop[0])
            raise MapError(f"{self.name} map is not monotone: it predicts {p[i]:.6g} at score "
                           f"{PROBE_SCORES[i]:g} but {p[i + 1]:.6g} at {PROBE_SCORES[i + 1]:g}",
                           hint="the map file is damaged or edited: fit it again")

    def summary(self) -> dict[str, Any]:
        """Key fitted values for the fit report and the map's training block."""
        return {}

    def envelope_fields(self) -> dict[str, Any]:
        """What the saved envelope holds beyond method, params and state: nothing for one score
        column (a K-class map's classes and score columns: `maps.classmap.ClassMap`)."""
        return {}

    def input_features(self) -> tuple[list[str], list[str]]:
        """(categorical, numeric) feature columns `predict` needs; none for score-only maps."""
        return [], []

    def _check_fitted(self) -> None:
        if not self._fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit first")

    # ScoreCalibrator and FeatureCalibrator implement these three; every method the last two.
    def _check_features(self, features: Mapping[str, np.ndarray] | None) -> None:
        raise TypeError(f"{type(self).__name__} must derive from ScoreCalibrator or FeatureCalibrator")

    def _fit_rows(self, s: np.ndarray, y: np.ndarray, w: np.ndarray,
                  features: Mapping[str, np.ndarray] | None) -> None:
        raise NotImplementedError

    def _predict_rows(self, s: np.ndarray, features: Mapping[str, np.ndarray] | None) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class ScoreCalibrator(Calibrator):
    """A method whose prediction depends on the score alone: `_fit(s, y, w)`, `_predict(s)`."""

    def _check_features(self, features: Mapping[str, np.ndarray] | None) -> None:
        if features is not None:
            refuse_features(self.name, features)

    def _fit_rows(self, s, y, w, features):
        self._fit(s, y, w)

    def _predict_rows(self, s, features):
        return self._predict(s)

    def _fit(self, s: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        raise NotImplementedError

    def _predict(self, s: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class FeatureCalibrator(Calibrator):
    """A method that also reads feature columns (`input_features()`): `_fit(s, y, w, features)`,
    `_predict(s, features)`, `features` a dict of column name to array, one value per score."""

    uses_features: ClassVar[bool] = True

    def _check_features(self, features: Mapping[str, np.ndarray] | None) -> None:
        return None

    def _fit_rows(self, s, y, w, features):
        self._fit(s, y, w, features)

    def _predict_rows(self, s, features):
        return self._predict(s, features)

    def _fit(self, s: np.ndarray, y: np.ndarray, w: np.ndarray, features: Mapping[str, np.ndarray] | None) -> None:
        raise NotImplementedError

    def _predict(self, s: np.ndarray, features: Mapping[str, np.ndarray] | None) -> np.ndarray:
        raise NotImplementedError
