"""`save_map` writes only maps `load_map` reads: whatever it accepts loads and predicts the
same bytes; anything else is refused with the loader's message and no file is written."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_maps_loader import FAST, GRID, METHODS, _features, grid_features

import contract
from calibcli.maps import envelope as maps
from calibcli.calibrators import registry
from calibcli.errors import CalibError, CalibWarning, MapError

_VALUES = [np.nan, np.inf, -np.inf, 1e308, -1e308, -1.0, 0.0, 2.0, 0.5, 1e-300, 5e-324]


def _fitted(method: str):
    s, y = contract.synthetic(300, seed=5)
    cls = registry.get(method)
    features = _features(s.size, np.random.default_rng(0)) if cls.uses_features else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibWarning)
        return cls(**FAST.get(method, {})).fit(s, y, features=features)


_CACHE: dict[str, object] = {}


def fitted(method: str):
    if method not in _CACHE:
        _CACHE[method] = _fitted(method)
    return _CACHE[method]


def _corrupt(cal, state: dict):
    """A calibrator of the same method holding `state` as if it had been fitted to it."""
    bad = type(cal)(**dict(cal.params))
    bad._set_state(state)
    bad._fitted = True
    return bad


@st.composite
def corrupted_states(draw, method: str):
    state = copy.deepcopy(fitted(method).get_state())
    keys = sorted(k for k, v in state.items() if isinstance(v, (np.ndarray, float, int)) and not isinstance(v, bool))
    for _ in range(draw(st.integers(0, 2))):
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        value = state[key]
        if isinstance(value, np.ndarray) and value.size and value.dtype.kind == "f":
            arr = value.astype(np.float64).copy()
            i = draw(st.integers(0, arr.size - 1))
            action = draw(st.sampled_from(["set", "swap", "drop", "scale"]))
            if action == "set":
                arr.flat[i] = draw(st.sampled_from(_VALUES))
            elif action == "swap" and arr.size > 1:
                j = (i + 1) % arr.size
                arr.flat[i], arr.flat[j] = arr.flat[j], arr.flat[i]
            elif action == "drop" and arr.ndim == 1:
                arr = np.delete(arr, i)
            else:
                arr = arr * draw(st.sampled_from([-1.0, 1e300, 0.0, 1 + 1e-9]))
            state[key] = arr
        elif isinstance(value, float):
            state[key] = draw(st.sampled_from(_VALUES))
    return state


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_what_save_map_accepts_load_map_reads_and_predicts_the_same(tmp_path, method, data):
    state = data.draw(corrupted_states(method))
    try:
        cal = _corrupt(fitted(method), state)
    except (CalibError, ValueError, TypeError, IndexError, KeyError):
        return  # the calibrator itself cannot hold this state: nothing to save
    try:
        with np.errstate(all="ignore"):
            expected = cal.predict(GRID, features=grid_features(method))
    except (CalibError, ValueError, TypeError, IndexError):
        expected = None  # a map that cannot predict must not be saved
    for suffix in (".json", ".parquet"):
        path = tmp_path / f"m{suffix}"
        path.unlink(missing_ok=True)
        try:
            maps.save_map(cal, str(path))
        except MapError as exc:
            assert exc.message.startswith("cannot save the map: ") and "\n" not in exc.message
            assert not path.exists()
            continue
        loaded, _ = maps.load_map(str(path))
        assert expected is not None, f"{method}{suffix}: saved a map that cannot predict"
        got = loaded.predict(GRID, features=grid_features(method))
        assert _same(got, expected), f"{method}{suffix}: the reloaded map predicts differently"


@pytest.mark.parametrize("method", METHODS)
def test_fitted_maps_save_and_reload_bit_for_bit(tmp_path, method):
    cal = fitted(method)
    expected = cal.predict(GRID, features=grid_features(method))
    for suffix in (".json", ".parquet"):
        maps.save_map(cal, str(tmp_path / f"m{suffix}"))
        loaded, _ = maps.load_map(str(tmp_path / f"m{suffix}"))
        assert _same(loaded.predict(GRID, features=grid_features(method)), expected)


def test_a_map_the_loader_would_refuse_is_not_saved(tmp_path):
    cal = fitted("isotonic")
    state = cal.get_state()
    state["y"] = state["y"].copy()
    state["y"][1] = 1.5
    bad = _corrupt(cal, state)
    with pytest.raises(MapError, match=r"^cannot save the map: isotonic map state 'y'\[1\] = 1.5 is not a probability"):
        maps.save_map(bad, str(tmp_path / "m.json"))
    assert not (tmp_path / "m.json").exists()
    state["y"][1] = np.nan
    with pytest.raises(MapError, match=r"^cannot save the map: state\.y\[1\] is nan"):
        maps.save_map(_corrupt(cal, state), str(tmp_path / "m.parquet"))
    assert list(tmp_path.iterdir()) == []
