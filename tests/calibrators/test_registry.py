"""The registry: aliases (`sigmoid`, `platt` for `logistic`) accepted everywhere a method name
is, a map recording the canonical name; every method's declared complexity and what it fits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.calibrators import registry
from calibcli.calibrators.base import ScoreCalibrator
from calibcli.cli.app import app
from calibcli.errors import UsageError

runner = CliRunner()


def _data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    return s, (rng.random(n) < s ** 2).astype(float)


def test_aliases_resolve_to_logistic():
    assert registry.aliases("logistic") == ["platt", "sigmoid"]
    for alias in ("sigmoid", "platt"):
        assert registry.canonical(alias) == "logistic" and registry.get(alias) is registry.get("logistic")
        assert registry.kclass(alias).name == "logistic"
    assert "sigmoid" not in registry.names() and "platt" not in registry.available()


@pytest.mark.parametrize("alias", ["sigmoid", "platt"])
def test_a_map_fitted_under_an_alias_records_the_canonical_name(alias, tmp_path):
    s, y = _data()
    fitted = calibcli.fit(s, y, method=alias)
    assert fitted.name == "logistic"
    assert fitted.predict(s).tobytes() == calibcli.fit(s, y, method="logistic").predict(s).tobytes()
    path = tmp_path / "cal.csv"
    path.write_text("score,label\n" + "".join(f"{float(a)!r},{int(b)}\n" for a, b in zip(s, y)))
    res = runner.invoke(app, ["fit", str(path), "--method", alias, "-o", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.stderr
    assert json.loads((tmp_path / "m.json").read_text())["method"] == "logistic"
    P = np.column_stack([1 - s, s])
    cm = calibcli.fit(P, y.astype(int), method=alias)
    assert cm.name == "logistic" and cm.envelope_fields()["one_vs_rest"]
    from calibcli.sklearn import Calibrator

    est = Calibrator(alias).fit(s, y)
    assert est.get_params()["method"] == alias and est.calibrator_.name == "logistic"


def test_methods_lists_aliases_and_complexity():
    doc = json.loads(runner.invoke(app, ["methods", "--json"]).stdout)
    by = {m["name"]: m for m in doc}
    assert by["logistic"]["aliases"] == ["platt", "sigmoid"]
    assert all(m["aliases"] == [] for name, m in by.items() if name != "logistic")
    for name, m in by.items():
        assert isinstance(m["complexity"], int) and m["complexity"] >= 1 and m["fitted"], name
    text = runner.invoke(app, ["methods"]).stdout
    assert "aliases: platt, sigmoid" in text and "fitted: 2 numbers: slope a, intercept b (complexity 2)" in text


def test_complexity_orders_fixed_shapes_below_maps_that_grow_with_the_data():
    """The declared order: parametric maps count their fitted numbers per class column; maps whose
    size grows with the data rank above every one of them."""
    c = {name: registry.get(name).complexity for name in registry.names()}
    assert c["temperature"] == 1 and c["logistic"] == c["beta-am"] == c["beta-ab"] == c["vector"] == 2
    assert c["beta"] == 3 and c["dirichlet"] == 4 and c["binning"] == registry.get("binning").params[0].default
    growing = ["isotonic", "near-isotonic", "venn-abers", "bbq", "enir", "boot-isotonic", "boot-binning", "bayes-iso",
               "field-aware", "multicalibration"]
    assert min(c[m] for m in growing) > max(v for m, v in c.items() if m not in growing)


def test_register_refuses_a_method_without_complexity_or_with_a_taken_alias():
    class Bare(ScoreCalibrator):
        name = "bare-test-method"
        fitted = "nothing"

    with pytest.raises(ValueError, match="declares no complexity"):
        registry.register(Bare)

    class Clash(ScoreCalibrator):
        name = "clash-test-method"
        fitted = "nothing"
        complexity = 1
        aliases = ("platt",)

    with pytest.raises(ValueError, match="alias 'platt' of 'clash-test-method' is already a method name or alias"):
        registry.register(Clash)
    Clash.aliases = ("none",)
    with pytest.raises(ValueError, match="'none' is the uncalibrated scores' row"):
        registry.register(Clash)
    assert "bare-test-method" not in registry.names() and "clash-test-method" not in registry.names()


def test_unknown_method_hint_knows_the_aliases():
    with pytest.raises(UsageError) as exc:
        registry.get("sigmiod")
    assert "did you mean 'sigmoid'?" in exc.value.hint
