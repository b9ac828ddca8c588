"""`--step` states or bounds every metric (issue #33): for random rows, weights and steps from
the smallest allowed (1e-12) to 1, each metric of the bucketed state is within its
`step_bounds` of the exact value (0: equal to rounding), or n/a (null bound, NaN value, gate
refused); Brier MCB stays above -step; steps float64 cannot carry are refused by every door."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from calibcli.errors import UsageError
from calibcli.evaluation.metrics.selection import MetricChoice
from calibcli.evaluation.state.binary import EvalState
from calibcli.requests import EvaluateOptions, step_option
from calibcli.requests.metrics import STEP_NA

CALIB = [sys.executable, "-m", "calibcli"]
ALL = MetricChoice.parse("all")


@st.composite
def rows(draw):
    n = draw(st.integers(2, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = draw(st.sampled_from(["beta", "ties", "extremes", "separated"]))
    if shape == "beta":
        p = rng.beta(0.5, 0.5, n)
    elif shape == "ties":
        p = rng.choice(np.round(rng.random(7), 3), n)
    elif shape == "extremes":
        p = rng.choice([0.0, 5e-324, 1e-300, 1e-13, 0.5, 1 - 1e-13, 1.0], n)
    else:
        p = np.sort(rng.random(n))
    y = (rng.random(n) < p).astype(float) if shape != "separated" else (p > 0.5).astype(float)
    w = None if draw(st.booleans()) else np.exp(rng.uniform(-3, 3, n))
    step = 10.0 ** draw(st.floats(-12, 0))
    return y, p, w, max(step, 1e-12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rows())
def test_every_metric_is_exact_bounded_or_na_under_step(data):
    y, p, w, step = data
    exact = EvalState.from_arrays(y, p, sample_weight=w).metrics(choice=ALL)
    state = EvalState.from_arrays(y, p, sample_weight=w, step=step)
    got = state.metrics(choice=ALL)
    bounds = state.step_bounds(choice=ALL)
    assert set(bounds) == set(got)
    for key, bound in bounds.items():
        if bound is None:
            assert key in STEP_NA and math.isnan(got[key]), key
            continue
        if math.isnan(exact[key]) or math.isnan(bound):
            assert math.isnan(got[key]) == math.isnan(exact[key]), key
            continue
        # bound 0: exact, to the rounding of sums taken in another order (1e-9; Spiegelhalter's z
        # of rows at p = 1 is a ratio of two sums of rounding errors: 1e-6)
        slack = 1e-6 if key.startswith("spiegelhalter") else 1e-9
        assert abs(got[key] - exact[key]) <= bound + slack * max(1.0, abs(exact[key])), (key, got[key], exact[key], bound)
    if not math.isnan(got["brier_mcb"]):
        assert got["brier_mcb"] >= -step - 1e-12
        assert got["brier_mcb"] <= exact["brier_mcb"] + 1e-12  # the buckets' PAV can only fit worse


@pytest.mark.parametrize("step", [1e-13, 1e-310, 5e-324, 0.0, -1.0, float("inf"), float("nan")])
def test_every_door_refuses_a_step_float64_cannot_carry(step, tmp_path):
    with pytest.raises(UsageError, match="--step"):
        step_option(step)
    with pytest.raises(UsageError, match="--step"):
        EvaluateOptions.build(step=step)
    src = tmp_path / "s.csv"
    src.write_text("score,label\n0.2,0\n0.7,1\n")
    for command in (["evaluate", str(src)], ["summarize", str(src)]):
        run = subprocess.run([*CALIB, *command, "--step", repr(step)], capture_output=True, text=True)
        assert run.returncode == 2 and run.stderr.startswith("error: --step "), run.stderr
        assert run.stdout == ""


@pytest.mark.parametrize("metric", [m.replace("_", "-") for m in STEP_NA])
def test_a_gate_on_a_metric_na_under_step_is_refused(metric):
    with pytest.raises(UsageError, match="n/a with --step"):
        EvaluateOptions.build(step=0.01, fail_above=[f"{metric}=0.5"])


def test_summary_buckets_stay_finite_for_scores_far_beyond_the_step(tmp_path):
    """`calib summarize --step` of logits up to 1.5e308: a score 2^52 steps from 0 or more is
    its own bucket (s / step would overflow), and the summary's JSON holds only numbers."""
    src = tmp_path / "h.csv"
    src.write_text("score,label\n1e300,1\n-1e300,0\n1.5e308,1\n0.5,0\n0.5000000000001,1\n")
    run = subprocess.run([*CALIB, "summarize", str(src), "--step", "1e-12"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    import json

    doc = json.loads(run.stdout)
    assert doc["score"][0] == -1e300 and doc["score"][-1] == 1.5e308 and doc["score"][-2] == 1e300
    assert all(math.isfinite(x) for x in doc["score"])
