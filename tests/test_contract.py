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
# Methods whose fit resamples rows, so weights and duplicated rows agree only in distribution.
NOT_EXACT_WEIGHTS = {"boot-isotonic", "boot-binning", "field-aware"}

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
    if name in NOT_EXACT_WEIGHTS:
        pytest.skip(f"{name} resamples rows: weights match duplicates only in distribution")
    s, y = _data()
    contract.check_weights_as_duplicates(get(name), _params(name), s, y, atol=1e-7)


@pytest.mark.parametrize("name", METHODS)
def test_predict_before_fit_raises(name):
    contract.check_not_fitted(get(name), _params(name))


@pytest.mark.parametrize("name", METHODS)
def test_platt_correction_when_offered(name):
    cls = get(name)
    if "platt_correction" not in {p.name for p in cls.params}:
        pytest.skip(f"{name} has no platt_correction option")
    s, y = _data()
    plain = cls(**_params(name)).fit(s, y).predict(s)
    corrected = cls(**_params(name), platt_correction=True).fit(s, y).predict(s)
    assert np.all(np.isfinite(corrected))
    assert not np.array_equal(plain, corrected)


@pytest.mark.filterwarnings("ignore::calibcli.errors.CalibWarning")  # diagnostics on odd data
@pytest.mark.parametrize("name", METHODS)
def test_monotone_even_when_scores_are_inverted(name):
    """Higher scores meaning fewer positives must not make a monotone method decrease."""
    s, y = _data()
    contract.check_monotone(get(name), _params(name), 1.0 - s, y)
