"""The metrics beyond the first set through the real CLI: --metrics, --bands, --hl-groups,
--diagram, gates and baselines on them, --bootstrap, --step, and the same numbers as
`calibcli.evaluate` on the rows."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.cli.app import app
from calibcli.evaluation.metrics import selection

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(21)
    n = 3000
    p = np.round(rng.uniform(0.02, 0.98, n), 4)
    y = (rng.random(n) < p ** 1.3).astype(int)
    path = tmp_path_factory.mktemp("eval_metrics") / "scores.csv"
    path.write_text("p,label\n" + "".join(f"{a},{b}\n" for a, b in zip(p, y)))
    return str(path), y, p


def run(*args):
    return runner.invoke(app, ["evaluate", *map(str, args)])


def report(*args):
    result = run(*args, "--json")
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_every_metric_equals_the_python_api(data):
    path, y, p = data
    doc = report(path, "--prob-col", "p", "--metrics", "all", "--bands", "30", "--seed", "4", "--hl-groups", "7")
    got = doc["results"][0]["metrics"]
    assert list(got) == [k for k in selection.ALL if not k.startswith("field_")]
    want = calibcli.evaluate(y, p, metrics="all", bands=30, seed=4, hl_groups=7)
    for key, value in got.items():
        assert value == pytest.approx(want[key], rel=1e-12, abs=1e-12), key
    assert doc["schema_version"] == 4 and doc["hl_groups"] == 7


def test_default_set_is_the_first_set_and_the_decomposition(data):
    path, _, _ = data
    got = report(path, "--prob-col", "p")["results"][0]["metrics"]
    assert list(got) == [k for k in selection.DEFAULT if not k.startswith("field_")]
    assert got["brier_mcb"] - got["brier_dsc"] + got["brier_unc"] == pytest.approx(got["brier"], abs=1e-12)
    assert got["log_loss_mcb"] - got["log_loss_dsc"] + got["log_loss_unc"] == pytest.approx(got["log_loss"], abs=1e-12)


def test_a_list_chooses_and_a_gate_adds_its_metric(data):
    path, _, _ = data
    result = run(path, "--prob-col", "p", "--metrics", "brier,smece", "--fail-above", "ks=0.01", "--json")
    assert result.exit_code == 1
    assert list(json.loads(result.stdout)["results"][0]["metrics"]) == ["brier", "smece", "ks"]
    assert "gate failed: KS of 'p' is" in result.stderr


def test_gates_follow_each_direction(data):
    path, _, _ = data
    got = report(path, "--prob-col", "p", "--metrics", "default,corp-p,hl-p", "--bands", "20")["results"][0]["metrics"]
    assert run(path, "--prob-col", "p", "--fail-above", f"brier-mcb={got['brier_mcb'] * 0.9}").exit_code == 1
    assert run(path, "--prob-col", "p", "--fail-above", f"brier-mcb={got['brier_mcb'] * 1.1}").exit_code == 0
    assert run(path, "--prob-col", "p", "--fail-below", f"brier-dsc={got['brier_dsc'] * 1.1}").exit_code == 1
    assert run(path, "--prob-col", "p", "--bands", "20", "--fail-below", "corp-p=0.5").exit_code == 1


def test_baseline_regressions_on_new_metrics(data, tmp_path):
    path, _, _ = data
    base = tmp_path / "base.json"
    assert run(path, "--prob-col", "p", "--metrics", "all", "--save-baseline", base).exit_code == 0
    ok = run(path, "--prob-col", "p", "--baseline", base, "--max-regression", "log-loss-mcb=0.002",
             "--max-regression", "smece=5%")
    assert ok.exit_code == 0, ok.stderr
    other = run(path, "--prob-col", "p", "--ece-bins", "20", "--baseline", base, "--max-regression", "ece-debiased=0.1")
    assert other.exit_code == 2 and "--ece-bins" in other.stderr


@pytest.mark.parametrize("args, message", [
    (["--metrics", "nope"], "--metrics: unknown metric 'nope'"),
    (["--metrics", "corp-p", "--bands", "0"], "corp-p is a resampling test"),
    (["--diagram", "pie"], "--diagram 'pie'"),
    (["--hl-groups", "2"], "--hl-groups 2 is out of range"),
    (["--bands", "-1"], "--bands -1 is out of range"),
    (["--baseline", "b.json", "--max-regression", "brier-unc=0.1"], "brier-unc is a property of the labels"),
])
def test_bad_options_exit_2_in_one_line(data, args, message):
    path, _, _ = data
    result = run(path, "--prob-col", "p", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_corp_p_is_seeded(data):
    path, _, _ = data
    values = [report(path, "--prob-col", "p", "--metrics", "corp-p", "--bands", "40", "--seed", str(s))
              ["results"][0]["metrics"]["corp_p"] for s in (1, 1, 2)]
    assert values[0] == values[1] and 0 < values[0] <= 1 and values[0] * 41 == pytest.approx(round(values[0] * 41))


def test_bootstrap_gives_intervals_but_not_to_p_values(data):
    """The withheld metrics (`bootstrap.WITHHELD`: MCB, smECE, KS and the tests' p-values) are
    null; the DSC and UNC have intervals in their range."""
    from calibcli.evaluation.bootstrap import NO_INTERVAL

    path, _, _ = data
    doc = report(path, "--prob-col", "p", "--metrics", "brier-mcb,brier-dsc,brier-unc,smece,ks,ks-p", "--bootstrap", "15")
    intervals = doc["results"][0]["intervals"]
    for key in ("brier_mcb", "smece", "ks", "ks_p"):
        assert key in NO_INTERVAL and intervals[key] == [None, None], key
    lo, hi = intervals["brier_dsc"]
    assert 0 <= lo <= hi <= intervals["brier_unc"][1] <= 0.25


def test_step_keeps_the_uncertainty_exact_bounds_the_decomposition_and_drops_the_tests(data):
    """Under --step: UNC exact, MCB and DSC within their bound (and only falling), the tests
    and smECE n/a (tests/test_stepbounds.py checks every metric on random rows)."""
    path, _, _ = data
    exact = report(path, "--prob-col", "p", "--metrics", "all")["results"][0]["metrics"]
    stepped = report(path, "--prob-col", "p", "--metrics", "all", "--step", "0.01")["results"][0]
    bounds = stepped["step_bounds"]
    assert bounds["brier_unc"] == 0 and bounds["log_loss_unc"] == 0
    assert bounds["smece"] is None and bounds["ks_p"] is None and 0 <= bounds["brier_mcb"] < 1
    m = stepped["metrics"]
    assert m["smece"] is None and m["ks_p"] is None and m["hl_stat"] is None
    assert m["brier_unc"] == pytest.approx(exact["brier_unc"], abs=1e-15)
    assert m["brier_mcb"] <= exact["brier_mcb"] + 1e-12 and m["brier_mcb"] >= -0.01  # can only fall, above -step
    assert exact["brier_mcb"] - m["brier_mcb"] <= bounds["brier_mcb"]
    assert m["brier_dsc"] <= exact["brier_dsc"] + 1e-12
    assert exact["log_loss_dsc"] - m["log_loss_dsc"] <= bounds["log_loss_dsc"]


def test_plot_data_in_the_json(data, tmp_path):
    path, _, _ = data
    doc = report(path, "--prob-col", "p", "--plot", tmp_path / "d.png", "--bands", "25")
    corp = doc["results"][0]["corp"]
    assert corp is not None and corp["rounds"] == 25
    assert np.all(np.diff(corp["recalibrated"]) >= 0) and len(corp["band_p"]) == len(corp["band_lower"])
    smooth = report(path, "--prob-col", "p", "--plot", tmp_path / "s.png", "--diagram", "smooth")["results"][0]
    assert len(smooth["smooth"]["p"]) == 200 and smooth["corp"] is None
