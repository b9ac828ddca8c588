"""The strict loader on K-class maps: every damaged map is one MapError line (K mismatches,
non-finite or wrongly shaped state, duplicate or mixed classes, a broken one-vs-rest state),
and what it accepts predicts rows of probabilities."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import calibcli
import kdata
from calibcli.maps import envelope as maps
from calibcli.errors import MapError


def _envelope(method, **kw):
    P, y = kdata.probabilities(300, 3, seed=11)
    cm = calibcli.fit(P, np.array(["a", "b", "c"])[y], method=method, **kw)
    return json.loads(maps.envelope_to_json(maps.make_envelope(cm)))


ENVELOPES = {**{m: _envelope(m) for m in ("temperature", "isotonic")},
             "dirichlet": _envelope("dirichlet", reg_lambda=0.01, reg_mu=0.01)}


def _load(env):
    return maps.envelope_to_calibrator(maps.parse_map_bytes(json.dumps(env).encode(), "m.json"), "m.json")


def _mutated(method, change):
    env = copy.deepcopy(ENVELOPES[method])
    change(env)
    return env


def test_valid_maps_load():
    for env in ENVELOPES.values():
        cm = _load(env)
        assert cm.classes_.tolist() == ["a", "b", "c"]
        assert np.abs(cm.predict(np.eye(3)).sum(axis=1) - 1).max() <= 1e-12


@pytest.mark.parametrize("method, change, message", [
    ("temperature", lambda e: e["state"].update(n_classes=4), "3 classes but its state has n_classes = 4"),
    ("temperature", lambda e: e.update(classes=["a", "b", "a"]), "class name 'a' appears twice"),
    ("temperature", lambda e: e.update(classes=["a", 1, "c"]), "mixes strings and integers"),
    ("temperature", lambda e: e.update(classes=["a", None, "c"]), r"classes\[1\] = None"),
    ("temperature", lambda e: e.update(classes="abc"), "must be a list"),
    ("temperature", lambda e: e.update(classes=["a"]), "must be a list of 2"),
    ("temperature", lambda e: e.update(score_kind="odds"), "score_kind"),
    ("temperature", lambda e: e["params"].update(score_kind="logit"), "differs"),
    ("temperature", lambda e: e.update(score_cols=["p_a", "p_b"]), "score_cols"),
    ("temperature", lambda e: e.update(score_cols=["p_a", "p_a", "p_c"]), "score_cols"),
    ("temperature", lambda e: e["state"].update(temperature=-1.0), "temperature"),
    ("temperature", lambda e: e["state"].update(temperature="2"), "not a number"),
    ("temperature", lambda e: e["state"].pop("temperature"), "missing state field 'temperature'"),
    ("temperature", lambda e: e["state"].update(w=[1.0]), "not a field"),
    ("temperature", lambda e: e.update(one_vs_rest=True), "one-vs-rest"),
    ("temperature", lambda e: e.update(one_vs_rest="yes"), "one_vs_rest"),
    ("dirichlet", lambda e: e["state"].update(w=e["state"]["w"][:-1]), "'w' has 8 values, expected 9"),
    ("dirichlet", lambda e: e["state"].update(b=e["state"]["b"] + [0.0]), "'b' has 4 values, expected 3"),
    ("dirichlet", lambda e: e["state"].update(w=[[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]), r"'w'\[0\] = \[1.0, 0, 0\] is not a number"),
    ("dirichlet", lambda e: e["state"].update(n_classes=4), "n_classes = 4"),
    ("dirichlet", lambda e: e["params"].update(reg_lambda=-1.0), "reg_lambda"),
    ("dirichlet", lambda e: e["params"].update(folds=1), "folds"),
    ("isotonic", lambda e: e.pop("one_vs_rest"), "binary"),
    ("isotonic", lambda e: e["state"].update(n_classes=2), "n_classes"),
    ("isotonic", lambda e: e["state"].pop("k1.x"), "class 1: .*missing state field 'x'"),
    ("isotonic", lambda e: e["state"].update({"k1.y": [0.5] * (len(e["state"]["k1.x"]) + 1)}), "same length"),
    ("isotonic", lambda e: e["state"].update({"k3.x": [0.5]}), "k3.x"),
    ("isotonic", lambda e: e["state"].update({"k2": 0.5}), "both"),
    ("isotonic", lambda e: e["state"].update({"k0.y": [2.0] * len(e["state"]["k0.y"])}), "class 0"),
    ("isotonic", lambda e: e["state"].update(n_classes=True), "n_classes"),
])
def test_damaged_maps_are_refused(method, change, message):
    with pytest.raises(MapError, match=message) as err:
        _load(_mutated(method, change))
    assert "\n" not in err.value.message


@pytest.mark.parametrize("method, field", [("temperature", "temperature"), ("dirichlet", "w"), ("dirichlet", "b")])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1e999999"])
def test_non_finite_state_is_refused(method, field, bad):
    def change(e):
        if isinstance(e["state"][field], list):
            e["state"][field][1] = bad
        else:
            e["state"][field] = bad
    text = json.dumps(_mutated(method, change)).replace('"1e999999"', "1e999999").encode()
    with pytest.raises(MapError):
        maps.envelope_to_calibrator(maps.parse_map_bytes(text, "m.json"), "m.json")


def test_parquet_refuses_non_finite_state():
    env = _mutated("dirichlet", lambda e: e["state"]["w"].__setitem__(0, float("nan")))
    with pytest.raises(MapError, match="finite"):
        maps.envelope_to_parquet_bytes(env)


def test_huge_coefficients_still_predict_probability_rows():
    env = _mutated("dirichlet", lambda e: e["state"].update(w=[1e300, -1e300, 1e300, 0.0, 1e300, -1e300, 5.0, 0.0, 1e300]))
    cm = _load(env)
    p = cm.predict(np.vstack([np.eye(3), np.full((1, 3), 1 / 3), [[1e-300, 5e-324, 1.0]]]))
    assert np.all(np.isfinite(p)) and np.abs(p.sum(axis=1) - 1).max() <= 1e-12


def test_a_constant_class_round_trips(tmp_path):
    P, y = kdata.probabilities(200, 3, seed=2)
    with pytest.warns(Warning):
        cm = calibcli.fit(P, np.where(y == 1, 0, y), method="isotonic", classes=[0, 1, 2])
    for suffix in (".json", ".parquet"):
        path = str(tmp_path / f"m{suffix}")
        calibcli.save_map(cm, path)
        assert np.array_equal(calibcli.load_map(path).predict(P), cm.predict(P))
    env = json.loads(maps.envelope_to_json(maps.make_envelope(cm)))
    env["state"]["k1"] = 1.5
    with pytest.raises(MapError, match="not a probability"):
        _load(env)


def test_class_names_that_cannot_be_saved(tmp_path):
    P, y = kdata.probabilities(100, 2, seed=1)
    cm = calibcli.fit(P, y + 0.5, method="temperature")
    with pytest.raises(MapError, match="strings or integers"):
        calibcli.save_map(cm, str(tmp_path / "m.json"))
