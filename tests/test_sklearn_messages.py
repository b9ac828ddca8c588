"""The scikit-learn wrapper's refusals say where and what to do (issue #33): a one-class or
zero-weight set of rows, as one fold of `cross_val_predict` gives them, names the rows given
to fit, that they are one fold's training rows, and the splits that avoid it; the estimator's
repr looks like scikit-learn's for string parameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import KFold, cross_val_predict  # noqa: E402

from calibcli.sklearn import Calibrator  # noqa: E402

ADVICE = "in cross-validation these are one fold's training rows: split with StratifiedKFold"


@settings(max_examples=20, deadline=None)
@given(n=st.integers(20, 80), tail=st.integers(1, 8), folds=st.integers(2, 5),
       weights=st.sampled_from(["none", "zero-class", "all-zero"]))
def test_a_fold_without_what_a_fit_needs_says_so(n, tail, folds, weights):
    """Positives only in the last rows and an unshuffled KFold: the last fold's training rows
    lack them (or their weight, or all weight); the error says so and what to do."""
    rng = np.random.default_rng(n)
    s = np.sort(rng.random(n))[:, None]
    y = (np.arange(n) >= n - min(tail, n // folds)).astype(int)
    params = {}
    if weights == "zero-class":
        params = {"sample_weight": np.where(y == 1, 0.0, 1.0)}
    elif weights == "all-zero":
        params = {"sample_weight": np.zeros(n)}
    with pytest.raises(ValueError) as info:
        cross_val_predict(Calibrator(), s, y, cv=KFold(folds), method="predict_proba", params=params)
    message = str(info.value)
    assert "rows given to fit" in message and ADVICE in message, message
    assert "np.int64" not in message and "Sample weights must contain" not in message, message


@pytest.mark.parametrize("params, text", [
    ({"method": "logistic", "score_kind": "logit"}, "Calibrator(method='logistic', score_kind='logit')"),
    ({"score_kind": "logit"}, "Calibrator(score_kind='logit')"),
    ({"method": "isotonic"}, "Calibrator()"),
    ({"method": "spline", "seed": 3, "platt_correction": False},
     "Calibrator(method='spline', platt_correction=False, seed=3)"),
])
def test_repr_is_scikit_learns(params, text):
    est = Calibrator(**params)
    assert repr(est) == text and repr(clone(est)) == text
    assert eval(repr(est), {"Calibrator": Calibrator}).get_params() == est.get_params()
