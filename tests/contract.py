"""Shared checks every registered calibrator must pass (run by test_contract.py for each method).

Each check takes a calibrator *class*, fit parameters and a small data set, so a family's own
test file can call them with harder data too.
"""

from __future__ import annotations

import json

import numpy as np

from calibcli.maps import envelope as maps
from calibcli.calibrators import get
from calibcli.calibrators.base import Calibrator
from calibcli.errors import NotFittedError

# Small settings of the slow methods for the property tests (test_contract.py, test_extremes.py),
# which fit many tiny generated data sets; every other method runs with its defaults.
FAST = {
    "bayes-iso": {"samples": 200},
    "boot-isotonic": {"r": 3},
    "boot-binning": {"r": 3},
    "field-aware": {"epochs": 2, "K": 5, "hidden": 4, "layers": 1},
    "enir": {"models": 10},
    "ilps": {"K": 5},
}


def make(name: str, **extra) -> Calibrator:
    """An unfitted `name` with the FAST settings it declares, and `extra`."""
    cls = get(name)
    names = {p.name for p in cls.params}
    return cls(**{k: v for k, v in {**FAST.get(name, {}), **extra}.items() if k in names})


def takes_probabilities(cal: Calibrator) -> bool:
    """The map reads probabilities (scores in [0, 1]), by nature or by its score_kind."""
    return bool(cal.needs_probabilities) or cal.params.get("score_kind") == "probability"


def synthetic(n: int = 400, seed: int = 0, ties: bool = True):
    """Scores in (0, 1) with a miscalibrated positive rate, some tied scores, both classes."""
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    if ties:
        s[: n // 5] = np.round(s[: n // 5], 2)
    p = 1 / (1 + np.exp(-(4 * (s - 0.5) + 0.3)))
    y = (rng.random(n) < p).astype(np.float64)
    return s, y


def grid(s: np.ndarray) -> np.ndarray:
    """Sorted query points inside, on and outside the training range."""
    lo, hi = float(s.min()), float(s.max())
    return np.unique(np.concatenate([np.linspace(lo - 0.1, hi + 0.1, 301), s]))


def json_round_trip(cal: Calibrator) -> Calibrator:
    text = maps.envelope_to_json(maps.make_envelope(cal))
    env = maps.parse_map_bytes(text.encode(), "<test>")
    return maps.envelope_to_calibrator(json.loads(json.dumps(env)), "<test>")


def parquet_round_trip(cal: Calibrator) -> Calibrator:
    data = maps.envelope_to_parquet_bytes(maps.make_envelope(cal))
    return maps.envelope_to_calibrator(maps.parse_map_bytes(data, "<test>"), "<test>")


def check_fit_predict(cls, params, s, y, features=None):
    cal = cls(**params)
    assert cal.fit(s, y, features=features) is cal
    p = cal.predict(grid(s), features=None if features is None else _grid_features(features, grid(s)))
    assert np.all(np.isfinite(p))
    assert np.all((p >= 0) & (p <= 1))
    return cal


def _grid_features(features, g):
    return {k: np.resize(v, g.size) for k, v in features.items()}


def check_monotone(cls, params, s, y):
    if not cls.monotone:
        return
    p = cls(**params).fit(s, y).predict(grid(s))
    assert np.all(np.diff(p) >= -1e-12), "monotone method produced a decreasing map"


def check_round_trip(cls, params, s, y, features=None):
    cal = cls(**params).fit(s, y, features=features)
    g = grid(s)
    f = None if features is None else _grid_features(features, g)
    expected = cal.predict(g, features=f)
    for reloaded in (json_round_trip(cal), parquet_round_trip(cal)):
        got = reloaded.predict(g, features=f)
        assert np.array_equal(got, expected), "reloaded map does not predict bit-for-bit the same"


def check_seed_reproducible(cls, params, s, y):
    a = cls(**params).fit(s, y).get_state()
    b = cls(**params).fit(s, y).get_state()
    assert json.dumps(maps.to_plain(a), sort_keys=True) == json.dumps(maps.to_plain(b), sort_keys=True)


def check_permutation_invariant(cls, params, s, y, atol=1e-9):
    order = np.random.default_rng(1).permutation(s.size)
    g = grid(s)
    a = cls(**params).fit(s, y).predict(g)
    b = cls(**params).fit(s[order], y[order]).predict(g)
    np.testing.assert_allclose(a, b, atol=atol, rtol=0)


def check_weights_as_duplicates(cls, params, s, y, atol=1e-9):
    """Weight 2 on the first k rows equals those rows appearing twice."""
    k = s.size // 4
    w = np.ones_like(s)
    w[:k] = 2.0
    g = grid(s)
    a = cls(**params).fit(s, y, sample_weight=w).predict(g)
    b = cls(**params).fit(np.concatenate([s, s[:k]]), np.concatenate([y, y[:k]])).predict(g)
    np.testing.assert_allclose(a, b, atol=atol, rtol=0)


def check_importance_scale_invariant(cls, params, s, y, scales=(1e-6, 0.37, 1e6), atol=1e-12):
    """weight_kind="importance": multiplying every weight by c > 0 leaves the map unchanged."""
    w = np.random.default_rng(2).uniform(0.2, 3.0, s.size)
    g = grid(s)
    base = cls(**params).fit(s, y, sample_weight=w, weight_kind="importance").predict(g)
    for c in scales:
        got = cls(**params).fit(s, y, sample_weight=w * c, weight_kind="importance").predict(g)
        np.testing.assert_allclose(got, base, atol=atol, rtol=0, err_msg=f"weights scaled by {c:g}")


def check_platt_targets(cls, params, s, y):
    """With platt_correction=true, `_fit` receives (N+ + 1)/(N+ + 2) for positives and
    1/(N- + 2) for negatives, N+/N- the summed weights of each class (computed here by hand)."""
    seen = []

    class Spy(cls):
        def _fit(self, s_, y_, w_, *features):
            seen.append((y_.copy(), w_.copy()))
            super()._fit(s_, y_, w_, *features)

    w = np.random.default_rng(3).uniform(0.5, 2.0, s.size)  # fractional: rows are not expanded
    n_pos, n_neg = float(np.sum(w[y == 1])), float(np.sum(w[y == 0]))
    Spy(**params, platt_correction=True).fit(s, y, sample_weight=w)
    Spy(**params, platt_correction=False).fit(s, y, sample_weight=w)
    (t_on, w_on), (t_off, w_off) = seen
    expected = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    np.testing.assert_allclose(t_on, expected, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(t_off, y)
    np.testing.assert_array_equal(w_on, w)
    np.testing.assert_array_equal(w_off, w)


def check_not_fitted(cls, params):
    cal = cls(**params)
    try:
        cal.predict(np.array([0.5]))
    except NotFittedError:
        return
    raise AssertionError("predict before fit must raise NotFittedError")
