"""Weights at the extremes in `calib evaluate` and `calibcli.evaluate` (issue #33): a column of
zeros or a total above 2^53 rows is refused with one line (binary and K classes); any total
in (0, 2^53] gives the metrics of the same rows at unit scale for every metric that does not
count rows (weights down to 2^-990, about 1e-298, whose products with p stay normal floats;
subnormal weights keep fewer digits), with no crash and no raw numpy warning."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import calibcli
from calibcli.errors import UsageError
from calibcli.evaluation.weighttotal import MAX_TOTAL

CALIB = [sys.executable, "-m", "calibcli"]
# metrics that are weighted means or ratios: unchanged when every weight is multiplied by c
SCALE_FREE = ("log_loss", "brier", "auc", "ece", "mce", "cal_slope", "cal_intercept", "brier_mcb", "brier_dsc",
              "brier_unc", "log_loss_mcb", "log_loss_dsc", "log_loss_unc", "field_ece", "field_rce")


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(1.0, abs(a))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(5, 300), exponent=st.integers(-990, 40),
       spread=st.sampled_from([0.0, 1.0, 20.0]))
def test_any_total_up_to_2_53_gives_the_unit_scale_metrics(seed, n, exponent, spread):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    y = (rng.random(n) < p).astype(float)
    fields = rng.choice(["a", "b", "c"], n)
    w = np.exp(rng.uniform(-spread, spread, n))
    w /= w.max()
    scaled = np.ldexp(w, exponent)
    if np.any((scaled == 0) | (np.ldexp(scaled, -exponent) != w)) or scaled.sum() > MAX_TOTAL:
        return  # the scaled weights are not the same ratios (underflow), or not allowed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no raw RuntimeWarning
        ref = calibcli.evaluate(y, p, sample_weight=w, fields=fields, metrics="all")
        got = calibcli.evaluate(y, p, sample_weight=scaled, fields=fields, metrics="all")
    for key in SCALE_FREE:
        assert _close(ref[key], got[key]), (key, ref[key], got[key])
    for key, value in got.items():
        assert value is None or isinstance(value, float), key


@pytest.mark.parametrize("weights, said", [
    (np.zeros(6), "all weights are zero"),
    (np.full(6, 1e308), "more than the 2^53"),
    (np.full(6, 2.0**51), "more than the 2^53"),
])
def test_python_evaluate_refuses_the_totals_the_cli_refuses(weights, said):
    y = np.array([0, 1, 0, 1, 1, 0.0])
    p = np.array([0.2, 0.7, 0.4, 0.9, 0.6, 0.1])
    with pytest.raises(UsageError, match=re.escape(said)):
        calibcli.evaluate(y, p, sample_weight=weights)
    P = np.column_stack([1 - p, p])
    with pytest.raises(UsageError, match=re.escape(said)):
        calibcli.evaluate(y.astype(int), P, sample_weight=weights)


def _file(tmp_path, weight: str, kclass: bool) -> str:
    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, 50)
    y = (rng.random(50) < p).astype(int)
    path = tmp_path / ("k.csv" if kclass else "b.csv")
    if kclass:
        path.write_text("p_a,p_b,label,w\n" + "".join(f"{float(1 - a)!r},{float(a)!r},{b},{weight}\n" for a, b in zip(p, y)))
    else:
        path.write_text("score,label,w\n" + "".join(f"{float(a)!r},{b},{weight}\n" for a, b in zip(p, y)))
    return str(path)


@pytest.mark.parametrize("kclass", [False, True])
@pytest.mark.parametrize("weight, said", [("0", "all weights are zero: evaluation needs weighted rows"),
                                          ("1e308", "more than the 2^53"), ("3e14", "more than the 2^53")])
def test_calib_evaluate_refuses_with_one_line(tmp_path, kclass, weight, said):
    path = _file(tmp_path, weight, kclass)
    cols = ["--prob-cols", "p_*"] if kclass else ["--prob-col", "score"]
    run = subprocess.run([*CALIB, "evaluate", path, *cols, "--weight-col", "w", "--json"], capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and said in lines[0] and "column 'w'" in lines[0], lines
    assert all(line.startswith(("error: ", "hint: ")) for line in lines) and len(lines) <= 2
    assert run.stdout == ""


@pytest.mark.parametrize("kclass", [False, True])
def test_calib_evaluate_takes_tiny_weights(tmp_path, kclass):
    """A total far below one row (1e-300 each) is allowed and exact."""
    path = _file(tmp_path, "1e-300", kclass)
    cols = ["--prob-cols", "p_*"] if kclass else ["--prob-col", "score"]
    run = subprocess.run([*CALIB, "evaluate", path, *cols, "--weight-col", "w", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
