"""Temperature scaling against scikit-learn's `_TemperatureScaling` optimum, and at extremes."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import _TemperatureScaling

import calibcli
import kdata
from calibcli.calibrators import registry
from calibcli.calibrators.temperature import fit_inverse_temperature


def _sklearn_loss(z, y, w=None):
    ts = _TemperatureScaling().fit(z, y, sample_weight=w)
    return kdata.log_loss(kdata.softmax(z * ts.beta_), y, w)


@pytest.mark.parametrize("seed, k, n", [(0, 3, 500), (1, 10, 5000), (2, 2, 300), (3, 50, 3000), (4, 4, 400_000)])
def test_reaches_sklearn_optimum(seed, k, n):
    z, y = kdata.logits(n, k, seed=seed)
    cm = calibcli.fit(z, y, method="temperature")
    ours = kdata.log_loss(cm.predict(z), y)
    assert ours <= _sklearn_loss(z, y) + 1e-9
    # the optimum: the derivative in b = 1/T vanishes (a central difference of the exact loss)
    b, h = 1 / cm.calibrator.temperature_, 1e-5
    up, down = (kdata.log_loss(kdata.softmax(z * (b + d)), y) for d in (h, -h))
    assert abs(up - down) / (2 * h) < 1e-6


def test_weighted_and_probabilities_reach_sklearn_optimum():
    P, y = kdata.probabilities(2000, 5, seed=7)
    w = np.random.default_rng(1).gamma(1.0, size=y.size)
    cm = calibcli.fit(P, y, method="temperature", sample_weight=w, weight_kind="importance")
    z = np.log(P)  # what calibcli fits on (no zeros here); scikit-learn reads these as logits
    assert kdata.log_loss(cm.predict(P), y, w) <= _sklearn_loss(z, y, w) + 1e-9
    assert np.array_equal(cm.predict(P), calibcli.fit(z, y, method="temperature", sample_weight=w,
                                                      weight_kind="importance").predict(z))


def test_known_temperature_recovered():
    z, y = kdata.logits(200_000, 6, seed=5, truth=0.5)  # labels from softmax(z / 2)
    t = calibcli.fit(z, y, method="temperature").calibrator.temperature_
    assert abs(t - 2.0) < 0.03


def test_separable_and_useless_scores_stay_in_range():
    z = np.array([[3.0, 0.0], [0.0, 3.0]] * 10)
    y = np.array([0, 1] * 10)
    b = fit_inverse_temperature(z, y, None)  # perfectly separated: the loss falls towards 0 as b grows
    assert b > 30 and kdata.log_loss(kdata.softmax(b * z), y) < 1e-40
    cal = registry.kclass("temperature", {"score_kind": "logit"}).fit(-z, y)  # anti-correlated
    p = cal.predict(-z)
    assert np.all(np.isfinite(p)) and np.allclose(p, 0.5, atol=1e-9)


def test_extreme_and_zero_inputs_give_no_nan():
    z, y = kdata.logits(300, 4, seed=8)
    big = np.vstack([z, z * 1e300, np.full((1, 4), 1.7e308) * [1, -1, 1, -1]])
    cal = registry.kclass("temperature", {"score_kind": "logit"}).fit(big, np.r_[y, y, 0])
    p = cal.predict(big)
    assert np.all(np.isfinite(p)) and np.abs(p.sum(axis=1) - 1).max() <= 1e-12
    P = kdata.softmax(z)
    P[:, 0] = 0.0
    P /= P.sum(axis=1, keepdims=True)
    P[0] = [0.0, 5e-324, 1e-300, 1.0]
    cm = calibcli.fit(P, y, method="temperature", classes=[0, 1, 2, 3])
    q = cm.predict(P)
    assert np.all(np.isfinite(q)) and np.abs(q.sum(axis=1) - 1).max() <= 1e-12
