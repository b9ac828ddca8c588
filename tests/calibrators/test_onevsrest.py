"""One-vs-rest against scikit-learn's `CalibratedClassifierCV` on the same probabilities."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator

import calibcli
import kdata
from calibcli.calibrators import registry


class _Fixed(ClassifierMixin, BaseEstimator):
    """A 'model' whose predict_proba returns row X[i, 0] of a fixed probability table."""

    def __init__(self, table=None, classes=None):
        self.table = table
        self.classes = classes

    def fit(self, X, y):
        self.classes_ = np.asarray(self.classes)
        return self

    def predict_proba(self, X):
        return self.table[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


@pytest.mark.parametrize("seed, k", [(0, 3), (1, 5), (2, 8)])
@pytest.mark.parametrize("sk_method, ours, params, tol", [
    ("isotonic", "isotonic", {"platt_correction": False}, 1e-9),
    ("sigmoid", "logistic", {}, 1e-6),
])
def test_equals_sklearn(seed, k, sk_method, ours, params, tol):
    P, y = kdata.probabilities(2000, k, seed=seed)
    query = np.vstack([P, np.random.default_rng(seed).dirichlet(np.ones(k), 500), np.eye(k)])
    table = np.vstack([P, query])
    model = _Fixed(table, np.arange(k)).fit(None, None)
    train = np.arange(P.shape[0])[:, None]
    ref = CalibratedClassifierCV(FrozenEstimator(model), method=sk_method).fit(train, y)
    expected = ref.predict_proba(np.arange(P.shape[0], table.shape[0])[:, None])
    got = calibcli.fit(P, y, method=ours, **params).predict(query)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tol)


def test_columns_are_the_binary_maps_renormalised():
    z, y = kdata.logits(500, 4, seed=3)
    cm = calibcli.fit(z, y, method="beta", score_kind="logit")
    raw = np.column_stack([registry.create("beta", {"score_kind": "logit"}).fit(z[:, k], (y == k).astype(float))
                           .predict(z[:, k]) for k in range(4)])
    np.testing.assert_array_equal(cm.predict(z), raw / raw.sum(axis=1, keepdims=True))


def test_a_row_of_zeros_becomes_uniform():
    P = np.array([[0.9, 0.1, 0.0], [0.1, 0.9, 0.0], [0.0, 0.1, 0.9]] * 5)
    y = np.array([0, 1, 2] * 5)
    cm = calibcli.fit(P, y, method="isotonic", platt_correction=False)
    p = cm.predict(np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    assert np.abs(p.sum(axis=1) - 1).max() <= 1e-12
    cal = cm.calibrator
    cal.maps_ = [0.0, 0.0, 0.0]
    assert np.array_equal(cal.predict(P[:2]), np.full((2, 3), 1 / 3))


OVR_METHODS = [m for m in registry.names() if registry.classes(m) == "one-vs-rest"]
_SMALL = {"bayes-iso": {"samples": 200}, "boot-isotonic": {"r": 5}, "boot-binning": {"r": 5},
          "spline": {"folds": 2}, "ilps": {"K": 20}}


@pytest.mark.parametrize("method", OVR_METHODS)
def test_every_one_vs_rest_method_is_its_binary_maps_renormalised(method):
    """For each class k the binary method fitted on column k against 1[y = k] (same params and
    seed), each row divided by its sum, a row of zeros uniform: what the one-vs-rest map gives,
    bit for bit."""
    import warnings

    from calibcli.errors import CalibWarning

    k = 3
    P, y = kdata.probabilities(300, k, seed=11)
    query = np.vstack([P[:50], np.random.default_rng(4).dirichlet(np.ones(k), 50), np.eye(k),
                       np.full((1, k), 1.0 / k)])
    declared = {p.name for p in registry.get(method).params}
    params = {**_SMALL.get(method, {}), **({"seed": 7} if "seed" in declared else {})}
    own = {**params, **({"score_kind": "probability"} if "score_kind" in declared else {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibWarning)
        cm = calibcli.fit(P, y, method=method, score_kind="probability", **params)
        raw = np.column_stack([registry.create(method, own).fit(P[:, j].copy(), (y == j).astype(float))
                               .predict(query[:, j].copy()) for j in range(k)])
    total = raw.sum(axis=1, keepdims=True)
    expected = np.where(total > 0, raw / np.where(total > 0, total, 1.0), 1.0 / k)
    np.testing.assert_array_equal(cm.predict(query), expected)
