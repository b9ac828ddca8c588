"""Saved maps: bit-exact round trips in both formats, and clear refusals of bad map files."""

import json

import numpy as np
import pytest

import contract
from calibcli.maps import envelope as maps
from calibcli.calibrators import create
from calibcli.errors import MapError


@pytest.fixture
def fitted():
    s, y = contract.synthetic(500, seed=3)
    return create("isotonic").fit(s, y), s


@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_file_round_trip_is_bit_exact(tmp_path, fitted, suffix):
    cal, s = fitted
    path = str(tmp_path / f"map{suffix}")
    maps.save_map(cal, path, {"rows": 500})
    loaded, envelope = maps.load_map(path)
    grid = contract.grid(s)
    assert np.array_equal(loaded.predict(grid), cal.predict(grid))
    assert envelope["schema_version"] == maps.SCHEMA_VERSION
    assert envelope["training"] == {"rows": 500}


def test_json_envelope_fields(fitted):
    cal, _ = fitted
    env = json.loads(maps.envelope_to_json(maps.make_envelope(cal, {"rows": 1})))
    assert env["format"] == "calibcli.map"
    assert env["method"] == "isotonic"
    assert env["params"] == {"platt_correction": True}  # the default since issue 14
    assert set(env["state"]) == {"x", "y"}


def _write(tmp_path, env):
    path = tmp_path / "map.json"
    path.write_text(json.dumps(env))
    return str(path)


def _envelope(fitted):
    return json.loads(maps.envelope_to_json(maps.make_envelope(fitted[0])))


def test_newer_schema_is_refused_with_upgrade_hint(tmp_path, fitted):
    env = _envelope(fitted)
    env["schema_version"] = 99
    with pytest.raises(MapError, match="newer") as err:
        maps.load_map(_write(tmp_path, env))
    assert "upgrade" in err.value.hint


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda e: e.update(method="no-such-method"), "does not have"),
        (lambda e: e["state"].pop("x"), "missing state field 'x'"),
        (lambda e: e.pop("params"), "missing the field 'params'"),
        (lambda e: e.update(format="other"), "not a calibcli map"),
        (lambda e: e.update(schema_version="1"), "unknown map schema version"),
        (lambda e: e["params"].update(platt_correction="maybe"), "platt_correction"),
    ],
)
def test_bad_envelopes(tmp_path, fitted, change, message):
    env = _envelope(fitted)
    change(env)
    with pytest.raises(MapError, match=message):
        maps.load_map(_write(tmp_path, env))


def test_corrupt_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "calibcli.map", ')
    with pytest.raises(MapError, match="invalid JSON"):
        maps.load_map(str(bad))
    with pytest.raises(MapError, match="no such map file"):
        maps.load_map(str(tmp_path / "absent.json"))


def test_truncated_parquet_map(tmp_path, fitted):
    data = maps.envelope_to_parquet_bytes(maps.make_envelope(fitted[0]))
    path = tmp_path / "map.parquet"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MapError):
        maps.load_map(str(path))


def test_non_finite_state_is_refused():
    env = {"format": "calibcli.map", "state": {"x": [0.5, 1.0, float("nan")]}}
    with pytest.raises(MapError, match=r"state\.x\[2\] is nan, and a map holds only finite numbers"):
        maps.envelope_to_json(env)
    env = {"format": "calibcli.map", "state": {"k": [[1, 2], [3, float("-inf")]]}, "training": {}}
    with pytest.raises(MapError, match=r"state\.k\[1\]\[1\] is -inf"):
        maps.envelope_to_json(env)
