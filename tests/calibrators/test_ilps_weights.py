"""ilps and field-aware under weights at the extremes (issue #33): scale-free as every method
is (calibrators/fitdata.py rescales by powers of two): multiplying every weight by 2^k, for
any k that keeps them finite and non-zero, gives the same map bit for bit (ilps: frequency or
importance weights, its loss is a weighted mean; field-aware: importance weights, as frequency
weights are counts of rows it expands), with weights spread over hundreds of binary orders;
by any c > 0 (not a power of two), importance weights give the same map to 1e-12."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import calibcli

GRID = np.concatenate([[0.0, 1e-300, 1e-12], np.linspace(0.001, 0.999, 15), [1 - 1e-12, 1.0]])


def _fit(method, s, y, w, kind, features=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extra = {"epochs": 2, "hidden": 4} if method == "field-aware" else {}
        cal = calibcli.fit(s, y, method=method, sample_weight=w, weight_kind=kind, features=features, **extra)
    return cal.predict(GRID, features=None if features is None else {k: v[:GRID.size] for k, v in features.items()}) \
        if method == "field-aware" else cal.predict(GRID)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(20, 150), spread=st.sampled_from([0, 20, 200, 500]),
       k=st.integers(-1000, 1000), kind=st.sampled_from(["frequency", "importance"]),
       method=st.sampled_from(["ilps", "field-aware"]))
def test_powers_of_two_leave_the_map_unchanged(seed, n, spread, k, kind, method):
    if method == "field-aware":
        kind = "importance"  # frequency weights are counts of rows to field-aware (it expands them)
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    y = (rng.random(n) < s).astype(float)
    y[:2] = [0.0, 1.0]
    w = np.exp2(rng.uniform(-spread, 0, n))
    scaled = np.ldexp(w, k)
    if np.any(scaled == 0) or not np.all(np.isfinite(scaled)) or np.any(np.ldexp(scaled, -k) != w):
        return  # not the same ratios in float64
    features = None
    if method == "field-aware":
        f = rng.choice(["a", "b"], n + GRID.size)
        features = {"f": f}
        features_fit = {"f": f[:n]}
    a = _fit(method, s, y, w, kind, None if features is None else features_fit)
    b = _fit(method, s, y, scaled, kind, None if features is None else features_fit)
    assert np.array_equal(a, b)
    assert np.all((a >= 0) & (a <= 1)) and np.all(np.diff(a) >= 0) if method == "ilps" else True


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), c=st.floats(1e-250, 1e250), method=st.sampled_from(["ilps", "field-aware"]))
def test_importance_weights_are_scale_free(seed, c, method):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, 120)
    y = (rng.random(120) < s).astype(float)
    w = np.exp(rng.uniform(-20, 20, 120))
    if not np.all(np.isfinite(w * c)) or np.any(w * c == 0):
        return
    a = _fit(method, s, y, w, "importance")
    b = _fit(method, s, y, w * c, "importance")
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
