"""A scikit-learn estimator around any calibcli method: `calibcli.sklearn.Calibrator`.

    Calibrator(method="bayes-iso", seed=0).fit(scores, y).predict_proba(new_scores)[:, 1]

It is a one-feature transformer/regressor of calibrated probabilities: `X` is the score column
(shape (n,) or (n, 1)), `predict` gives P(y=1) as a 1-D array, `transform` as one column, `predict_proba`
the two columns. Method options are keyword arguments, checked by the method's `Param`
table, so `get_params`/`set_params`, `clone`, `Pipeline` and `cross_val_predict` work.
Needs scikit-learn (not a dependency of calibcli itself).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from calibcli.calibrators import registry


class Calibrator(TransformerMixin, BaseEstimator):
    """Calibrate one score column with `method` (see `calib methods`); options as keywords."""

    def __init__(self, method: str = "isotonic", **params: Any):
        self.method = method
        self._params = dict(params)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"method": self.method, **self._params}

    def set_params(self, **params: Any) -> "Calibrator":
        if "method" in params:
            self.method = params.pop("method")
        self._params.update(params)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    def _scores(self, X: Any, reset: bool) -> np.ndarray:
        """The score column as float64; other shapes, NaN/inf, sparse or complex input: ValueError."""
        from sklearn.utils.validation import validate_data

        x = validate_data(self, X, reset=reset, ensure_2d=False, dtype=np.float64, ensure_all_finite=True)
        if x.ndim == 2:
            if x.shape[1] != 1:
                raise ValueError(f"a calibrator takes one score column, got {x.shape[1]} features")
            x = x[:, 0]
        return x

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "Calibrator":
        """Fit on scores `X` and 0/1 labels `y` (optionally weighted)."""
        from sklearn.utils.validation import _check_sample_weight, column_or_1d

        from calibcli.errors import CalibError

        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        s = self._scores(X, reset=True)
        y = column_or_1d(y, warn=True).astype(np.float64)
        w = None if sample_weight is None else _check_sample_weight(sample_weight, s, dtype=np.float64)
        if w is not None and not np.any(w > 0):
            raise ValueError("all sample weights are zero: nothing to fit on")
        try:
            self.calibrator_ = registry.create(self.method, self._params).fit(s, y, weights=w)
        except CalibError as exc:
            raise ValueError(exc.message) from None
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Calibrated P(y=1) for scores `X`, shape (n,)."""
        check_is_fitted(self, "calibrator_")
        return self.calibrator_.predict(self._scores(X, reset=False))

    def transform(self, X: Any) -> np.ndarray:
        """The calibrated probability as the one transformed feature, shape (n, 1)."""
        return self.predict(X)[:, None]

    def predict_proba(self, X: Any) -> np.ndarray:
        """[P(y=0), P(y=1)] per score, shape (n, 2)."""
        p = self.predict(X)
        return np.column_stack([1.0 - p, p])
