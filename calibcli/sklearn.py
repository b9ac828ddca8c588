"""A scikit-learn classifier around any calibcli method: `calibcli.sklearn.Calibrator`.

    Calibrator(method="bayes-iso", seed=0).fit(scores, y).predict_proba(new_scores)[:, 1]

`X` is what a model predicted, not raw features: one score column (shape (n,) or (n, 1)) for
two classes, calibrated by a binary method with `classes_[1]` as the positive class; or the
K score columns of a K-class prediction (shape (n, K), K = the number of classes, in the order
of `classes_`), calibrated by the K-class path of `calibcli.fit`. Labels may be any values
(strings too); `classes_` is them sorted, or the `classes` option's order. `predict_proba` is
(n, n_classes), `predict` the most probable label, `score` the accuracy, and
`decision_function` (two classes only) the calibrated log-odds of `classes_[1]`. Method options
are keyword arguments, checked by the method's `Param` table, so `get_params`/`set_params`,
`clone`, `Pipeline`, `GridSearchCV` and `cross_val_predict` work. Needs scikit-learn (not a
dependency of calibcli itself).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

# What X must be, said whenever it is not.
_WHAT_X = ("one score column for two classes (model.predict_proba(X)[:, 1], or model.decision_function(X)) or the "
           "K columns of model.predict_proba(X), one per class")
# The floor of both probabilities in the log-odds: 0 and 1 give -/+708.4, not infinities that
# scikit-learn's metrics (roc_auc_score, ...) refuse.
_TINY = np.finfo(np.float64).tiny


# What a fit on rows without both classes (or their weight) can do about it: inside
# cross_val_predict or a search, those rows are one fold's training rows.
_SPLITS = ("in cross-validation these are one fold's training rows: split with StratifiedKFold (what an "
           "integer cv does for a classifier) or shuffle=True, use fewer folds, or add rows of the missing class")


def _rows(n: int) -> str:
    return f"the {n} rows given to fit"


def _two_classes(est: "Calibrator") -> bool:
    """`decision_function` exists before fitting and after a fit on two classes."""
    return not hasattr(est, "classes_") or len(est.classes_) == 2


class Calibrator(ClassifierMixin, BaseEstimator):
    """Calibrate a model's scores with `method` (see `calib methods`); options as keywords.

    `classes` (optional keyword): the labels in column order; for one score column the second
    one is the positive class. Without it the labels seen in `fit`, sorted.
    """

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
        """The score columns as float64 (n, k); NaN/inf, sparse, complex or empty input: ValueError."""
        from sklearn.utils.validation import check_array, validate_data

        if hasattr(X, "predict_proba") or hasattr(X, "fit"):
            raise ValueError(f"X is a {type(X).__name__}, a model: {type(self).__name__} calibrates what a model "
                             f"predicted, not the model itself: {_WHAT_X}")
        x = check_array(X, ensure_2d=False, dtype=np.float64, ensure_all_finite=True, input_name="X")
        if x.ndim == 1:
            fitted = getattr(self, "n_features_in_", 1)
            if not reset and fitted != 1:
                raise ValueError(f"X is 1-D (one score column) but {type(self).__name__} was fitted on "
                                 f"{fitted} score columns: Reshape your data to shape (n, {fitted})")
            x = x[:, None]
            X = x  # a 1-D X is one score column: n_features_in_ is 1
        fitted = getattr(self, "n_features_in_", x.shape[1])
        if not reset and x.shape[1] != fitted:  # scikit-learn's words first, then what X should be
            raise ValueError(f"X has {x.shape[1]} features, but {type(self).__name__} is expecting {fitted} features "
                             f"as input: X is the model's scores (not its features), as at fit: {_WHAT_X}")
        validate_data(self, X, reset=reset, skip_check_array=True)
        return x

    def _classes(self, y: np.ndarray, k: int) -> np.ndarray:
        """`classes_`: the `classes` option or the sorted labels, checked against `y` and k columns."""
        given = self._params.get("classes")
        classes = np.unique(y) if given is None else np.asarray(given)
        if classes.ndim != 1 or np.unique(classes).size != classes.size:
            raise ValueError(f"classes must be distinct labels, got {given!r}")
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes in the data, "
                             f"but the data contains only one class: {classes.tolist()[0]!r} ({_rows(y.size)}); "
                             f"{_SPLITS}")
        unknown = ~np.isin(y, classes)
        if unknown.any():
            raise ValueError(f"label {y[unknown][:1].tolist()[0]!r} is not one of the classes {classes.tolist()}")
        if k == 1 and classes.size != 2:
            raise ValueError(f"one score column calibrates two classes, got {classes.size}: "
                             f"X must be the {classes.size} score columns of a {classes.size}-class prediction")
        if k != 1 and k != classes.size:
            absent = "; a class without rows here needs classes=[...] naming every column's class" \
                if given is None and k > classes.size else ""
            raise ValueError(f"X has {k} columns for {classes.size} classes: X must be a model's scores, not its "
                             f"features: {_WHAT_X}{absent}")
        return classes

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "Calibrator":
        """Fit on scores `X` and labels `y` (optionally weighted; a weight k counts as k rows)."""
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import _check_sample_weight, check_consistent_length, column_or_1d

        from calibcli import api
        from calibcli.errors import CalibError

        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        x = self._scores(X, reset=True)
        y = column_or_1d(y, warn=True)
        check_consistent_length(x, y)
        check_classification_targets(y)
        if sample_weight is not None and np.size(sample_weight) == len(y) and not np.any(np.asarray(sample_weight) != 0):
            raise ValueError(f"all sample weights are zero ({_rows(len(y))}): nothing to fit on; {_SPLITS}, "
                             "or give those rows a positive weight")
        w = None if sample_weight is None else _check_sample_weight(sample_weight, x, dtype=np.float64)
        classes = self._classes(y, x.shape[1])
        params = {k: v for k, v in self._params.items() if k != "classes"}
        try:
            if x.shape[1] == 1:
                codes = (y == classes[1]).astype(np.float64)
                self.calibrator_ = api.fit(x[:, 0], codes, method=self.method, sample_weight=w, **params)
            else:
                self.calibrator_ = api.fit(x, y, method=self.method, classes=classes.tolist(), sample_weight=w, **params)
        except CalibError as exc:
            weighted = "weight" in exc.message
            raise ValueError(f"{exc.message} ({_rows(len(y))})" + (f"; {_SPLITS}" if weighted else "")) from None
        self.classes_ = classes
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """The calibrated probability of each class (columns in `classes_` order), shape (n, n_classes)."""
        check_is_fitted(self, "calibrator_")
        x = self._scores(X, reset=False)
        if x.shape[1] > 1:
            return self.calibrator_.predict(x)
        p = self.calibrator_.predict(x[:, 0])
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """The most probable label per row (the first in `classes_` order on a tie), shape (n,)."""
        check_is_fitted(self, "calibrator_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    @available_if(_two_classes)
    def decision_function(self, X: Any) -> np.ndarray:
        """Two classes: the calibrated log-odds ln(P(classes_[1]) / P(classes_[0])), shape (n,).

        Positive where `classes_[1]` is the more probable (as `predict` says); both probabilities
        are floored at the smallest normal float, so 0 and 1 give -/+708.4, not infinities.
        """
        proba = self.predict_proba(X)
        return np.log(np.maximum(proba[:, 1], _TINY)) - np.log(np.maximum(proba[:, 0], _TINY))
