"""What --weight-col means (issue 14): frequency weights by default, importance weights with
`--weight-kind importance`; the invariants for every method are in test_contract.py."""

import json
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import contract
from calibcli.maps import envelope as maps
from calibcli.calibrators import available, base, create, get
from calibcli.cli.app import app
from calibcli.errors import CalibWarning, UsageError

runner = CliRunner()
FAST = {"bayes-iso": {"samples": 500}, "boot-isotonic": {"r": 5}, "boot-binning": {"r": 5},
        "field-aware": {"epochs": 3}}


def _params(name):
    return {k: v for k, v in FAST.get(name, {}).items() if k in {p.name for p in get(name).params}}


@pytest.mark.parametrize("name", available())
def test_weights_summing_to_one_are_no_weights_as_importance(name):
    """The issue's case: weights normalised to sum to 1 gave Bayes-Iso a map near its prior
    and boot-isotonic a constant. As importance weights they are the unweighted fit."""
    s, y = contract.synthetic(300)
    g = contract.grid(s)
    plain = create(name, _params(name)).fit(s, y).predict(g)
    w = np.full(s.size, 1.0 / s.size)
    got = create(name, _params(name)).fit(s, y, sample_weight=w, weight_kind="importance").predict(g)
    np.testing.assert_allclose(got, plain, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["bayes-iso", "enir", "isotonic"])
def test_frequency_weights_are_counts(name):
    """As frequency weights (the default), 1/n per row is a data set of one row in total, so
    the map is not the unweighted one: the scale of frequency weights is information."""
    s, y = contract.synthetic(300)
    g = np.linspace(0.05, 0.95, 19)
    plain = create(name, _params(name)).fit(s, y).predict(g)
    tiny = create(name, _params(name)).fit(s, y, sample_weight=np.full(s.size, 1 / s.size)).predict(g)
    assert np.max(np.abs(tiny - plain)) > 0.02


def test_unknown_weight_kind_is_refused_at_the_door():
    import calibcli

    s, y = contract.synthetic(50)
    with pytest.raises(UsageError, match="--weight-kind must be one of frequency, importance, got 'counts'"):
        calibcli.fit(s, y, "isotonic", sample_weight=np.ones_like(s), weight_kind="counts")


def test_expansion_limit_falls_back_to_weighted_draws(monkeypatch):
    s, y = contract.synthetic(200)
    w = np.random.default_rng(0).integers(1, 4, s.size).astype(float)
    monkeypatch.setattr(base, "EXPAND_LIMIT", 100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        create("boot-isotonic", {"r": 5}).fit(s, y, sample_weight=w)
    assert any(issubclass(c.category, CalibWarning) and "resampled in proportion" in str(c.message)
               for c in caught)


def _write(path, s, y, w):
    path.write_text("score,label,w\n" + "".join(f"{float(a)!r},{int(b)},{float(c)!r}\n" for a, b, c in zip(s, y, w)))


def test_cli_importance_weights_ignore_scale_and_are_recorded(tmp_path):
    s, y = contract.synthetic(200)
    w = np.random.default_rng(1).uniform(0.5, 2.0, s.size)
    _write(tmp_path / "a.csv", s, y, w)
    _write(tmp_path / "b.csv", s, y, w * 1000.0)
    out = {}
    for name in ("a", "b"):
        res = runner.invoke(app, ["fit", str(tmp_path / f"{name}.csv"), "-m", "enir", "--weight-col", "w",
                                  "--weight-kind", "importance"])
        assert res.exit_code == 0, res.output
        out[name] = json.loads(res.stdout)
    assert out["a"]["training"]["weight_kind"] == "importance"
    assert out["a"]["training"]["weight_col"] == "w"
    g = contract.grid(s)
    pa, pb = (maps.envelope_to_calibrator(out[k], k).predict(g) for k in ("a", "b"))
    np.testing.assert_allclose(pa, pb, rtol=0, atol=1e-12)
    res = runner.invoke(app, ["fit", str(tmp_path / "a.csv"), "--weight-col", "w"])
    assert json.loads(res.stdout)["training"]["weight_kind"] == "frequency"


@pytest.mark.parametrize("args, message", [
    (["--weight-col", "w", "--weight-kind", "counts"], "--weight-kind must be one of frequency, importance"),
    (["--weight-kind", "importance"], "--weight-kind needs --weight-col"),
])
def test_cli_bad_weight_kind_is_a_usage_error(tmp_path, args, message):
    s, y = contract.synthetic(50)
    _write(tmp_path / "a.csv", s, y, np.ones_like(s))
    res = runner.invoke(app, ["fit", str(tmp_path / "a.csv"), *args])
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.output


def test_python_api_takes_the_weight_kind():
    import calibcli.api

    s, y = contract.synthetic(200)
    w = np.random.default_rng(4).uniform(0.5, 2.0, s.size)
    a = calibcli.api.fit(s, y, "bayes-iso", sample_weight=w, weight_kind="importance", samples=300)
    b = calibcli.api.fit(s, y, "bayes-iso", sample_weight=w * 1e-3, weight_kind="importance", samples=300)
    g = contract.grid(s)
    np.testing.assert_allclose(a.predict(g), b.predict(g), rtol=0, atol=1e-12)
