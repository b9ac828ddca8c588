"""The shared contract, run over every registered method (numcodecs/sklearn style): on one
synthetic data set, then as Hypothesis property tests on small generated data sets.

For any scores (ties, extremes), 0/1 labels with both classes and positive weights: predictions
are finite and in [0, 1], non-decreasing in the score for monotone methods, and a map reloaded
from JSON or Parquet predicts bit-for-bit the same; the same seed gives the same map; row
order does not matter; and an integer weight k equals the row repeated k times (for methods
that do not resample rows). The property tests run slow methods with small settings
(`contract.FAST`).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from calibcli.maps import envelope as maps
from calibcli.calibrators import available, get

import contract

# Fast settings for methods whose defaults are slow; everything else runs with defaults.
FAST_PARAMS: dict[str, dict] = {
    "bayes-iso": {"samples": 500},
    "boot-isotonic": {"r": 5},
    "boot-binning": {"r": 5},
    "field-aware": {"epochs": 3},
}
METHODS = available()


def _params(name):
    cls = get(name)
    names = {p.name for p in cls.params}
    return {k: v for k, v in FAST_PARAMS.get(name, {}).items() if k in names}


def _data():
    return contract.synthetic(300)


# Contract checks that run on _data() for every method: test id -> (check, keyword arguments).
CHECKS = {
    "fit_predict_in_unit_interval": (contract.check_fit_predict, {}),
    "monotone": (contract.check_monotone, {}),
    "round_trip_bit_exact": (contract.check_round_trip, {}),
    "same_seed_same_map": (contract.check_seed_reproducible, {}),
    "row_order_does_not_matter": (contract.check_permutation_invariant, {"atol": 1e-6}),
}


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("name", METHODS)
def test_contract_check(name, check):
    fn, kwargs = CHECKS[check]
    s, y = _data()
    fn(get(name), _params(name), s, y, **kwargs)


@pytest.mark.parametrize("name", METHODS)
def test_weights_equal_duplicates(name):
    """Frequency weights (the default kind): whole-number weights are duplicated rows. Methods
    that resample rows expand such weights into rows before drawing, so they agree exactly."""
    s, y = _data()
    atol = 0.0 if get(name).resamples_rows else 1e-7
    contract.check_weights_as_duplicates(get(name), _params(name), s, y, atol=atol)


@pytest.mark.parametrize("name", METHODS)
def test_importance_weights_are_scale_free(name):
    s, y = _data()
    contract.check_importance_scale_invariant(get(name), _params(name), s, y)


@pytest.mark.parametrize("name", METHODS)
def test_predict_before_fit_raises(name):
    contract.check_not_fitted(get(name), _params(name))


@pytest.mark.parametrize("name", METHODS)
def test_platt_correction_when_offered(name):
    cls = get(name)
    if "platt_correction" not in {p.name for p in cls.params}:
        pytest.skip(f"{name} has no platt_correction option")
    s, y = _data()
    contract.check_platt_targets(cls, _params(name), s, y)


@pytest.mark.filterwarnings("ignore::calibcli.errors.CalibWarning")  # diagnostics on odd data
@pytest.mark.parametrize("name", METHODS)
def test_monotone_even_when_scores_are_inverted(name):
    """Higher scores meaning fewer positives must not make a monotone method decrease."""
    s, y = _data()
    contract.check_monotone(get(name), _params(name), 1.0 - s, y)


@pytest.mark.filterwarnings("ignore::calibcli.errors.CalibWarning")
@pytest.mark.parametrize("name", METHODS)
def test_default_map_never_outputs_0_or_1(name):
    """Issue 14: no default map promises certainty. The Bayes-Iso paper's Table 1 generator
    (section 5.1) at 100 calibration rows, default parameters, fresh test scores (inside and
    beyond the calibration range), several seeds: every output lies strictly inside (0, 1).
    Also at the scores 0 and 1 themselves, except for the beta family, whose maps send 0 to
    0 and 1 to 1 whenever a, b > 0 (as the identity map does; documented in its extremes)."""
    from synthetic import section51

    ends = [] if name.startswith("beta") else [0.0, 1.0]
    for seed in range(6):
        s, y = section51(100, seed)
        st, _ = section51(20_000, 10_000 + seed)
        p = get(name)().fit(s, y).predict(np.concatenate([st, ends]))
        assert 0.0 < p.min() and p.max() < 1.0, (seed, p.min(), p.max())


@pytest.mark.parametrize("name", [m for m in METHODS if "platt_correction" in {p.name for p in get(m).params}])
def test_platt_default_matches_the_documented_extremes(name):
    """Every method states its behaviour at 0/1, and Platt-by-default ones name the way back."""
    cls = get(name)
    on = cls().params["platt_correction"]
    assert cls.default_extremes()
    assert on == ("platt_correction=false" in cls.default_extremes())


@pytest.mark.parametrize("name", [m for m in METHODS if not get(m).uses_features])
def test_score_only_methods_refuse_features(name):
    """A score-only method reads no feature column: given one, fit and predict say so rather
    than ignore it (and a fitted map still predicts without them)."""
    from calibcli.calibrators import ScoreCalibrator
    from calibcli.errors import UsageError

    cls = get(name)
    assert issubclass(cls, ScoreCalibrator)
    s, y = _data()
    feats = {"field": np.array(["a"] * s.size, dtype=object)}
    with pytest.raises(UsageError, match=f"method '{name}' reads no feature columns, got features \\(field\\)"):
        cls(**_params(name)).fit(s, y, features=feats)
    cal = cls(**_params(name)).fit(s, y)
    with pytest.raises(UsageError, match="reads no feature columns"):
        cal.predict(s, features=feats)
    assert np.all(np.isfinite(cal.predict(s)))


def test_feature_methods_are_feature_calibrators():
    from calibcli.calibrators import FeatureCalibrator

    for name in METHODS:
        assert issubclass(get(name), FeatureCalibrator) == get(name).uses_features, name


def test_register_refuses_a_class_of_neither_kind():
    from calibcli.calibrators import Calibrator, register

    class Bare(Calibrator):
        name = "bare-test-method"

    with pytest.raises(ValueError, match="must derive from ScoreCalibrator, FeatureCalibrator or ClassCalibrator"):
        register(Bare)
    assert "bare-test-method" not in available()


# Fits that draw rows: a permutation of the rows changes which rows each draw picks (their
# whole-number weights are expanded into rows first, so those equal duplicates exactly).
RESAMPLING = {"boot-isotonic", "boot-binning", "field-aware"}
# The property tests ignore diagnostics (an ESS warning on a tiny generated data set says nothing).
property_test = pytest.mark.filterwarnings("ignore::calibcli.errors.CalibWarning")
# Derandomized (the same examples on every CI run) and without shrinking, to keep the file
# fast; for a minimal failing example drop `phases` locally.
PROPERTY_SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                             phases=[Phase.explicit, Phase.generate],
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


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
    if contract.takes_probabilities(cal):
        g = np.unique(np.clip(g, 0.0, 1.0))
    return g


def fixed_field(cal, g, value="a"):
    return {"field": np.full(g.size, value, dtype=object)} if cal.uses_features else None


def run(name, check):
    """Run `check(cal_factory, s, y, w, fields)` on generated data suited to the method."""
    unit = contract.takes_probabilities(contract.make(name))

    @PROPERTY_SETTINGS
    @given(data=datasets(unit))
    def inner(data):
        check(lambda: contract.make(name), *data)

    inner()


@property_test
@pytest.mark.parametrize("name", METHODS)
def test_predictions_finite_and_in_unit_interval(name):
    def check(new, s, y, w, fields):
        cal = new().fit(s, y, sample_weight=w, features=features_for(new(), fields))
        on_train = cal.predict(s, features=features_for(cal, fields))
        assert np.all(np.isfinite(on_train)) and np.all((on_train >= 0) & (on_train <= 1))
        g = query(cal, s)
        p = cal.predict(g, features=fixed_field(cal, g))
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))

    run(name, check)


@property_test
@pytest.mark.parametrize("name", [m for m in METHODS if get(m).monotone])
def test_monotone_methods_never_decrease(name):
    def check(new, s, y, w, fields):
        cal = new().fit(s, y, sample_weight=w, features=features_for(new(), fields))
        g = query(cal, s)
        p = cal.predict(g, features=fixed_field(cal, g))
        assert np.all(np.diff(p) >= -1e-12), f"{name} decreases on {g} -> {p}"

    run(name, check)


@property_test
@pytest.mark.parametrize("name", METHODS)
def test_saved_map_predicts_bit_for_bit(name):
    def check(new, s, y, w, fields):
        cal = new().fit(s, y, sample_weight=w, features=features_for(new(), fields))
        g = query(cal, s)
        f = fixed_field(cal, g, "b")
        expected = cal.predict(g, features=f)
        for reloaded in (contract.json_round_trip(cal), contract.parquet_round_trip(cal)):
            assert np.array_equal(reloaded.predict(g, features=f), expected)

    run(name, check)


@property_test
@pytest.mark.parametrize("name", METHODS)
def test_same_seed_same_map(name):
    def check(new, s, y, w, fields):
        a = new().fit(s, y, sample_weight=w, features=features_for(new(), fields)).get_state()
        b = new().fit(s, y, sample_weight=w, features=features_for(new(), fields)).get_state()
        assert json.dumps(maps.to_plain(a), sort_keys=True) == json.dumps(maps.to_plain(b), sort_keys=True)

    run(name, check)


@property_test
@pytest.mark.parametrize("name", [m for m in METHODS if m not in RESAMPLING])
def test_row_order_does_not_matter(name):
    def check(new, s, y, w, fields):
        order = np.random.default_rng(s.size).permutation(s.size)
        a = new().fit(s, y, sample_weight=w, features=features_for(new(), fields))
        b = new().fit(s[order], y[order], sample_weight=w[order], features=features_for(new(), fields[order]))
        g = query(a, s)
        np.testing.assert_allclose(a.predict(g, features=fixed_field(a, g)),
                                   b.predict(g, features=fixed_field(b, g)), atol=1e-6, rtol=0)

    run(name, check)


@property_test
@pytest.mark.parametrize("name", METHODS)
def test_integer_weights_equal_repeated_rows(name):
    def check(new, s, y, w, fields):
        reps = w.astype(np.int64)
        a = new().fit(s, y, sample_weight=w, features=features_for(new(), fields))
        b = new().fit(np.repeat(s, reps), np.repeat(y, reps),
                      features=features_for(new(), np.repeat(fields, reps)))
        g = query(a, s)
        np.testing.assert_allclose(a.predict(g, features=fixed_field(a, g)),
                                   b.predict(g, features=fixed_field(b, g)), atol=1e-6, rtol=0)

    run(name, check)
