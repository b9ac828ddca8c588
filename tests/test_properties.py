"""Hypothesis property tests over every registered calibrator, on small generated data sets.

For any scores (ties, extremes), 0/1 labels with both classes and positive weights: predictions
are finite and in [0, 1], non-decreasing in the score for monotone methods, and a map reloaded
from JSON or Parquet predicts bit-for-bit the same; the same seed gives the same map; row
order does not matter; and an integer weight k equals the row repeated k times (for methods
that do not resample rows). Slow methods run with small settings (FAST below).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import contract
from calibcli import maps
from calibcli.calibrators import available, get

FAST = {
    "bayes-iso": {"samples": 200},
    "boot-isotonic": {"r": 3},
    "boot-binning": {"r": 3},
    "field-aware": {"epochs": 2, "K": 5, "hidden": 4, "layers": 1},
    "enir": {"models": 10},
    "ilps": {"K": 5},
}
# Fits that draw rows: a permutation of the rows changes which rows each draw picks (their
# whole-number weights are expanded into rows first, so those equal duplicates exactly).
RESAMPLING = {"boot-isotonic", "boot-binning", "field-aware"}
METHODS = available()
pytestmark = pytest.mark.filterwarnings("ignore::calibcli.errors.CalibWarning")
# Derandomized (the same examples on every CI run) and without shrinking, to keep the file
# fast; for a minimal failing example drop `phases` locally.
PROPERTY_SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                             phases=[Phase.explicit, Phase.generate],
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def make(name):
    cls = get(name)
    names = {p.name for p in cls.params}
    return cls(**{k: v for k, v in FAST.get(name, {}).items() if k in names})


def takes_probabilities(cal) -> bool:
    return bool(cal.needs_probabilities) or cal.params.get("score_kind") == "probability"


@st.composite
def datasets(draw, unit: bool):
    """(scores, labels, integer weights, field values); both classes, not separable by a threshold."""
    n = draw(st.integers(2, 30))
    lo, hi = (0.0, 1.0) if unit else (-30.0, 30.0)
    value = st.one_of(
        st.floats(lo, hi, allow_nan=False, allow_infinity=False),
        st.sampled_from([lo, hi, (lo + hi) / 2]),  # ties and the ends of the range
    )
    s = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=np.float64)
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.float64)
    # A positive at the lowest score and a negative at the highest: both classes, and no
    # threshold separates them, so every maximum-likelihood fit has a finite optimum.
    s = np.concatenate([s, [s.min(), s.max()]])
    y = np.concatenate([y, [1.0, 0.0]])
    w = np.array(draw(st.lists(st.integers(1, 3), min_size=s.size, max_size=s.size)), dtype=np.float64)
    fields = np.array(draw(st.lists(st.sampled_from(["a", "b"]), min_size=s.size, max_size=s.size)), dtype=object)
    return s, y, w, fields


def features_for(cal, fields):
    return {"field": fields} if cal.uses_features else None


def query(cal, s):
    """Sorted query points in and around the training range (inside [0, 1] for probabilities)."""
    g = contract.grid(s)
    if takes_probabilities(cal):
        g = np.unique(np.clip(g, 0.0, 1.0))
    return g


def fixed_field(cal, g, value="a"):
    return {"field": np.full(g.size, value, dtype=object)} if cal.uses_features else None


def run(name, check):
    """Run `check(cal_factory, s, y, w, fields)` on generated data suited to the method."""
    unit = takes_probabilities(make(name))

    @PROPERTY_SETTINGS
    @given(data=datasets(unit))
    def inner(data):
        check(lambda: make(name), *data)

    inner()


@pytest.mark.parametrize("name", METHODS)
def test_predictions_finite_and_in_unit_interval(name):
    def check(new, s, y, w, fields):
        cal = new().fit(s, y, weights=w, features=features_for(new(), fields))
        on_train = cal.predict(s, features=features_for(cal, fields))
        assert np.all(np.isfinite(on_train)) and np.all((on_train >= 0) & (on_train <= 1))
        g = query(cal, s)
        p = cal.predict(g, features=fixed_field(cal, g))
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))

    run(name, check)


@pytest.mark.parametrize("name", [m for m in METHODS if get(m).monotone])
def test_monotone_methods_never_decrease(name):
    def check(new, s, y, w, fields):
        cal = new().fit(s, y, weights=w, features=features_for(new(), fields))
        g = query(cal, s)
        p = cal.predict(g, features=fixed_field(cal, g))
        assert np.all(np.diff(p) >= -1e-12), f"{name} decreases on {g} -> {p}"

    run(name, check)


@pytest.mark.parametrize("name", METHODS)
def test_saved_map_predicts_bit_for_bit(name):
    def check(new, s, y, w, fields):
        cal = new().fit(s, y, weights=w, features=features_for(new(), fields))
        g = query(cal, s)
        f = fixed_field(cal, g, "b")
        expected = cal.predict(g, features=f)
        for reloaded in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
            assert np.array_equal(reloaded.predict(g, features=f), expected)

    run(name, check)


@pytest.mark.parametrize("name", METHODS)
def test_same_seed_same_map(name):
    def check(new, s, y, w, fields):
        a = new().fit(s, y, weights=w, features=features_for(new(), fields)).get_state()
        b = new().fit(s, y, weights=w, features=features_for(new(), fields)).get_state()
        assert json.dumps(maps.to_plain(a), sort_keys=True) == json.dumps(maps.to_plain(b), sort_keys=True)

    run(name, check)


@pytest.mark.parametrize("name", [m for m in METHODS if m not in RESAMPLING])
def test_row_order_does_not_matter(name):
    def check(new, s, y, w, fields):
        order = np.random.default_rng(s.size).permutation(s.size)
        a = new().fit(s, y, weights=w, features=features_for(new(), fields))
        b = new().fit(s[order], y[order], weights=w[order], features=features_for(new(), fields[order]))
        g = query(a, s)
        np.testing.assert_allclose(a.predict(g, features=fixed_field(a, g)),
                                   b.predict(g, features=fixed_field(b, g)), atol=1e-6, rtol=0)

    run(name, check)


@pytest.mark.parametrize("name", METHODS)
def test_integer_weights_equal_repeated_rows(name):
    def check(new, s, y, w, fields):
        reps = w.astype(np.int64)
        a = new().fit(s, y, weights=w, features=features_for(new(), fields))
        b = new().fit(np.repeat(s, reps), np.repeat(y, reps),
                      features=features_for(new(), np.repeat(fields, reps)))
        g = query(a, s)
        np.testing.assert_allclose(a.predict(g, features=fixed_field(a, g)),
                                   b.predict(g, features=fixed_field(b, g)), atol=1e-6, rtol=0)

    run(name, check)
