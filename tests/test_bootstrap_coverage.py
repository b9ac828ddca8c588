"""`--bootstrap` intervals hold their estimate and cover the true value: a small seeded run of
the simulation in `benchmarks/bootstrap_coverage.py` (which runs the full 1 000 data sets)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bootstrap_coverage as sim  # noqa: E402

from calibcli.evaluation import bootstrap  # noqa: E402

SETS = 60


@pytest.fixture(scope="module")
def truth():
    return sim.truth(sim.ROWS, rows=400_000, sets=200)


def test_every_interval_holds_its_estimate_and_covers_the_truth(truth):
    got = sim.coverage(SETS, replicates=100, truth_values=truth)
    for key, row in got.items():
        assert row["contains_estimate"] == 1.0, key
        if key not in bootstrap.NO_INTERVAL:
            assert row["coverage"] >= 0.85, (key, row)
    # why MCE gets none: a maximum over bins of a few rows, biased up beyond what re-centring corrects
    assert got["mce"]["coverage"] < 0.6


def test_mce_gets_no_interval_and_the_others_do():
    state = sim.data_set(10_000_000)
    got = bootstrap.state_intervals(state, 100, bootstrap.BootstrapPlan(20, 0))
    assert np.isnan(got["mce"]).all()
    assert all(np.isfinite(v).all() for k, v in got.items() if k != "mce")
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), 300)
    y = (rng.random(300)[:, None] > P.cumsum(1)).sum(1)
    k = bootstrap.kclass_intervals(y, P, bootstrap.BootstrapPlan(20, 0))
    assert np.isnan(k["top_label_mce"]).all() and np.isfinite(k["top_label_ece"]).all()


def test_plain_percentile_intervals_of_calbin_miss_what_the_recentred_ones_cover(truth):
    """The case that misled: resamples push CalBin up, so its percentile interval misses."""
    plain = recentred = holds = 0
    for s in range(SETS):
        state = sim.data_set(10_000_000 + s)
        point = state.metrics()["calbin"]
        reps = bootstrap.state_replicates(state, 100, bootstrap.BootstrapPlan(100, s))
        lo, hi = bootstrap.percentile_intervals(reps)["calbin"]
        plain += lo <= truth["calbin"] <= hi
        holds += lo <= point <= hi
        lo, hi = bootstrap.recentred_intervals(reps, state.metrics())["calbin"]
        recentred += lo <= truth["calbin"] <= hi
    assert plain / SETS < 0.8 and holds < SETS
    assert recentred / SETS >= 0.88


def test_recentred_interval_by_hand():
    reps = {"calbin": np.array([0.05, 0.06, 0.07, 0.08, 0.09]), "spiegelhalter_z": np.array([-1.0, 0.5, 1, 2, 3.0]),
            "spiegelhalter_p": np.zeros(5), "ece": np.array([0.0, 0.01, 0.02, 0.03, 0.2])}
    point = {"calbin": 0.04, "spiegelhalter_z": 1.5, "spiegelhalter_p": 0.13, "ece": 0.001}
    out = bootstrap.recentred_intervals(reps, point, level=0.5)  # quartiles: 25 % and 75 %
    assert out["calbin"] == pytest.approx((0.06 - 0.03, 0.08 - 0.03))  # moved down by median - estimate
    assert out["spiegelhalter_z"] == pytest.approx((0.5 + 0.5, 2 + 0.5))
    from math import erfc, sqrt

    assert out["spiegelhalter_p"] == pytest.approx((erfc(2.5 / sqrt(2)), erfc(1.0 / sqrt(2))))
    assert out["ece"] == pytest.approx((0.0, 0.03 - 0.019))  # clipped at 0
    reps["mce"] = reps["ece"]
    assert np.isnan(bootstrap.recentred_intervals(reps, {**point, "mce": 0.001}, level=0.5)["mce"]).all()
