"""The shared contract, run over every registered method (numcodecs/sklearn style)."""

from __future__ import annotations

import numpy as np
import pytest

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

    with pytest.raises(ValueError, match="must derive from ScoreCalibrator or FeatureCalibrator"):
        register(Bare)
    assert "bare-test-method" not in available()
