"""`--bootstrap` intervals hold their estimate, lie in their metric's range and cover the true
value: a small seeded run of the simulation in `benchmarks/bootstrap_coverage.py` (which runs
400 data sets of each design, 200 resamples each); the withheld metrics get none."""

import math
import sys
from pathlib import Path

from repo import REPO
import numpy as np
import pytest

from repo import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import bootstrap_coverage as sim  # noqa: E402

from calibcli.evaluation import bootstrap
from calibcli.evaluation.metrics import binary as metrics, selection  # noqa: E402

SETS = 25


def test_every_metric_is_in_exactly_one_range_class():
    classes = [members for members, _ in bootstrap.RANGES]
    for key in (*metrics.METRICS, *metrics.KCLASS_METRICS):
        assert sum(key in members for members in classes) == 1, key
        low, high = bootstrap.metric_range(key)
        assert low < high
    assert set().union(*classes) <= set(metrics.METRICS) | set(metrics.KCLASS_METRICS)
    assert bootstrap.metric_range("brier") == (0.0, 1.0) and bootstrap.metric_range("brier", kclass=True) == (0.0, 2.0)
    assert bootstrap.metric_range("log_loss_unc") == (0.0, math.log(2)) and bootstrap.metric_range("brier_unc")[1] == 0.25
    for key in bootstrap.NO_INTERVAL:  # every withheld metric says why
        assert key in metrics.ALL_METRICS and bootstrap.withheld_reason(key)
    for key in selection.TESTS:  # the p-values of the tests have no interval
        assert key in bootstrap.NO_INTERVAL and metrics.TOP_LABEL + key in bootstrap.NO_INTERVAL


@pytest.fixture(scope="module")
def audit_data(tmp_path_factory):
    """1 000 rows, p ~ Beta(2, 5), labels at the true rate of the benchmark's miscalibrated design."""
    rng = np.random.default_rng(7)
    p, q, _ = sim.draw(rng, 1000)
    y = (rng.random(p.size) < q).astype(int)
    return p, y


def test_each_reported_interval_holds_its_estimate_in_range_and_withheld_are_null(audit_data, tmp_path):
    """`calib evaluate --metrics all --bootstrap`: every interval holds its estimate and lies in
    the metric's range (the audit found ece-debiased, hl-stat below 0 and Brier UNC above 1/4);
    the withheld metrics and the tests' p-values are null, Spiegelhalter's p is not."""
    import json

    from typer.testing import CliRunner

    from calibcli.cli.app import app

    p, y = audit_data
    path = tmp_path / "c.csv"
    path.write_text("p,label\n" + "".join(f"{a!r},{b}\n" for a, b in zip(p.tolist(), y.tolist())))
    res = CliRunner().invoke(app, ["evaluate", str(path), "--prob-col", "p", "--metrics", "all", "--bands", "20",
                                   "--bootstrap", "100", "--json"])
    assert res.exit_code == 0, res.stderr
    r = json.loads(res.stdout)["results"][0]
    reported = 0
    for key, value in r["metrics"].items():
        lo, hi = r["intervals"][key]
        if key in bootstrap.NO_INTERVAL:
            assert lo is None and hi is None, key
            continue
        low, high = bootstrap.metric_range(key)
        assert low <= lo <= value <= hi <= high, (key, lo, value, hi)
        reported += 1
    assert reported == len(r["metrics"]) - len(set(r["metrics"]) & bootstrap.NO_INTERVAL) >= 12
    assert r["intervals"]["spiegelhalter_p"][0] is not None and r["intervals"]["corp_p"] == [None, None]


def test_kclass_intervals_hold_their_estimates_in_range():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), 400)
    y = (rng.random(400)[:, None] > P.cumsum(1)).sum(1)
    choice = selection.MetricChoice.parse("all").without_tests()
    reps, point = bootstrap.kclass_replicates(y, P, bootstrap.BootstrapPlan(40, 0), choice=choice)
    got = bootstrap.recentred_intervals(reps, point, kclass=True)
    assert set(got) == set(point)
    for key, (lo, hi) in got.items():
        if key in bootstrap.NO_INTERVAL:
            assert math.isnan(lo) and math.isnan(hi), key
        else:
            low, high = bootstrap.metric_range(key, kclass=True)
            assert low <= lo <= point[key] <= hi <= high, key
    assert "top_label_smece" not in reps  # withheld metrics are not resampled
    assert np.isnan(got["top_label_mce"]).all() and np.isfinite(got["top_label_brier_dsc"]).all()


@pytest.mark.parametrize("design", sim.DESIGNS)
def test_coverage_on_a_few_data_sets(design):
    """Both designs, few sets and resamples (the benchmark runs 400 x 200): every reported
    interval holds its estimate and covers the truth in most sets; the half-sampled DSCs too."""
    truth = sim.truth(sim.ROWS, rows=100_000, sets=30, design=design)
    got = sim.coverage(SETS, replicates=40, truth_values=truth, design=design, evidence=("brier_mcb",))
    for key, row in got.items():
        assert row["contains_estimate"] == 1.0 and row["in_range"] == 1.0, key
        if row["interval"] and key not in ("ece", "field_ece", "field_rce"):
            assert row["coverage"] >= 0.7, (key, row)  # loose: 25 sets, 40 resamples (ends drawn in)
    assert got["brier_mcb"]["coverage"] < 0.5 and not got["brier_mcb"]["interval"]  # why MCB is withheld


def test_recentred_interval_by_hand():
    reps = {"calbin": np.array([0.05, 0.06, 0.07, 0.08, 0.09]), "spiegelhalter_z": np.array([-1.0, 0.5, 1, 2, 3.0]),
            "spiegelhalter_p": np.zeros(5), "ece": np.array([0.0, 0.01, 0.02, 0.03, 0.2]),
            "brier_dsc": np.array([0.05, 0.06, 0.07, 0.08, 0.09]), "hl_stat": np.arange(5.0)}
    point = {"calbin": 0.04, "spiegelhalter_z": 1.5, "spiegelhalter_p": 0.13, "ece": 0.001, "brier_dsc": 0.06,
             "hl_stat": 2.0, "hl_p": 0.3}
    out = bootstrap.recentred_intervals(reps, point, level=0.5)  # quartiles: 25 % and 75 %
    assert out["calbin"] == pytest.approx((0.06 - 0.03, 0.08 - 0.03))  # moved down by median - estimate
    assert out["spiegelhalter_z"] == pytest.approx((0.5 + 0.5, 2 + 0.5))
    from math import erfc, sqrt

    assert out["spiegelhalter_p"] == pytest.approx((erfc(2.5 / sqrt(2)), erfc(1.0 / sqrt(2))))
    assert out["ece"] == pytest.approx((0.0, 0.03 - 0.019))  # clipped at 0
    f = bootstrap.HALF_SAMPLED["brier_dsc"]  # half-sampled: past the estimate by the extrapolated bias
    centre = 0.06 - f * (0.07 - 0.06)
    assert f == pytest.approx(1 / (2 ** (2 / 3) - 1))
    assert out["brier_dsc"] == pytest.approx((centre - 0.01, 0.06))  # widened to hold the estimate
    assert all(math.isnan(e) for k in ("hl_stat", "hl_p") for e in out[k])  # withheld; a p-value without replicates
    reps["mce"] = reps["ece"]
    assert np.isnan(bootstrap.recentred_intervals(reps, {**point, "mce": 0.001}, level=0.5)["mce"]).all()
