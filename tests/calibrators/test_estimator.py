"""The contract both kinds of calibrator keep, one suite parametrised over every binary method
and every method that takes K columns (native and one-vs-rest): parameters and the seed reach a
calibrator by one path (`Estimator.configured`), predictions are probabilities (in [0, 1]; K-class
rows summing to 1), a map reloaded from JSON or Parquet predicts bit for bit, and a fixed seed
gives the same map. Each kind's own properties: tests/test_contract.py (binary: monotone maps,
Platt's targets, weights) and tests/calibrators/test_kclass.py (K classes: score kinds, absent classes)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import calibcli
import kdata
from calibcli.calibrators import registry
from calibcli.errors import CalibError, CalibWarning, NotFittedError, ParamError
from calibcli.kinds import BINARY, KCLASS
from calibcli.maps import envelope as maps

FAST = {"bayes-iso": {"samples": 200}, "boot-isotonic": {"r": 3}, "boot-binning": {"r": 3}, "enir": {"models": 10},
        "ilps": {"K": 5}, "spline": {"folds": 2}, "field-aware": {"epochs": 2, "K": 5, "hidden": 4, "layers": 1}}
CASES = [(BINARY, m) for m in registry.available()] + \
        [(KCLASS, m) for m in registry.names() if registry.classes(m) != "binary-only"]
IDS = [f"{kind}-{method}" for kind, method in CASES]


def _data(kind: str):
    if kind == KCLASS:
        return kdata.probabilities(240, 3, seed=5)
    rng = np.random.default_rng(5)
    s = rng.uniform(0.01, 0.99, 240)
    return s, (rng.random(240) < s ** 1.5).astype(float)


def _fast(method: str, kind: str) -> dict:
    cal = registry.calibrator(method, kind)
    return {k: v for k, v in FAST.get(method, {}).items() if k in cal.params}


def _fit(kind: str, method: str, **extra):
    scores, labels = _data(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibWarning)
        return calibcli.fit(scores, labels, method=method, **{**_fast(method, kind), **extra})


def _probabilities(kind: str, p: np.ndarray, n: int) -> None:
    if kind == KCLASS:
        assert p.shape == (n, 3) and np.abs(p.sum(axis=1) - 1).max() <= 1e-12
    else:
        assert p.shape == (n,)
    assert p.dtype == np.float64 and np.all((p >= 0) & (p <= 1))


@pytest.mark.parametrize("kind, method", CASES, ids=IDS)
def test_fitted_maps_give_probabilities_and_reload_bit_for_bit(tmp_path, kind, method):
    fitted = _fit(kind, method)
    scores, _ = _data(kind)
    p = fitted.predict(scores)
    _probabilities(kind, p, len(scores))
    for suffix in (".json", ".parquet"):
        path = str(tmp_path / f"map{suffix}")
        calibcli.save_map(fitted, path)
        np.testing.assert_array_equal(calibcli.load_map(path).predict(scores), p)


@pytest.mark.parametrize("kind, method", CASES, ids=IDS)
def test_a_fixed_seed_gives_the_same_map(kind, method):
    seed = {"seed": 11} if "seed" in registry.calibrator(method, kind).params else {}
    one, two = _fit(kind, method, **seed), _fit(kind, method, **seed)
    assert json.dumps(maps.to_plain(one.get_state())) == json.dumps(maps.to_plain(two.get_state()))


@pytest.mark.parametrize("kind, method", CASES, ids=IDS)
def test_parameters_and_the_seed_take_one_path(kind, method):
    """`--param` texts and typed values give the same calibrator; the seed lands in its params
    where the method samples and is refused where it does not; unknown names are refused."""
    typed = registry.calibrator(method, kind)
    for name, value in typed.params.items():
        if value is None or name == "score_kind":
            continue
        text = str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, float) else str(value)
        assert registry.calibrator(method, kind, {name: text}, texts=True).params == \
            registry.calibrator(method, kind, {name: value}).params, name
    if "seed" in typed.params:
        assert registry.calibrator(method, kind, seed=5).params["seed"] == 5
    else:
        with pytest.raises(CalibError, match="is deterministic and takes no --seed"):
            registry.calibrator(method, kind, seed=5)
    with pytest.raises(ParamError, match=rf"method '{method}' has no parameter 'nonsense'"):
        registry.calibrator(method, kind, {"nonsense": "1"}, texts=True)


@pytest.mark.parametrize("kind, method", CASES, ids=IDS)
def test_predict_before_fit_is_refused(kind, method):
    scores, _ = _data(kind)
    with pytest.raises(NotFittedError):
        registry.calibrator(method, kind).predict(scores)
