"""Reversed intervals are refused, not measured (issue #33): a row whose interval's low end is
above its high end stops `calib evaluate` (the columns named by `--interval-cols` or found as
`<col>_low`/`<col>_high`) naming file, column and row, and `calibcli.evaluate(interval=...)`
naming the row; intervals in order always give a width >= 0."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import calibcli
from calibcli.errors import UsageError

CALIB = [sys.executable, "-m", "calibcli"]


@st.composite
def intervals(draw):
    n = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = rng.random(n)
    y = (rng.random(n) < p).astype(int)
    half = rng.random(n) * 0.1
    low, high = np.clip(p - half, 0, 1), np.clip(p + half, 0, 1)
    flipped = draw(st.lists(st.integers(0, n - 1), max_size=n, unique=True))
    flipped = [i for i in flipped if low[i] < high[i]]  # a zero-width interval is in order either way
    low[flipped], high[flipped] = high[flipped].copy(), low[flipped].copy()
    return p, y, low, high, min(flipped) if flipped else None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=intervals(), named=st.booleans())
def test_evaluate_refuses_the_first_reversed_row(tmp_path_factory, data, named):
    p, y, low, high, first = data
    path = tmp_path_factory.mktemp("iv") / "iv.csv"
    path.write_text("score,label,score_low,score_high\n" + "".join(
        f"{float(a)!r},{b},{float(c)!r},{float(d)!r}\n" for a, b, c, d in zip(p, y, low, high)))
    extra = ["--interval-cols", "score_low,score_high"] if named else []
    run = subprocess.run([*CALIB, "evaluate", str(path), "--prob-col", "score", *extra, "--json"],
                         capture_output=True, text=True)
    if first is None:
        assert run.returncode == 0, run.stderr
        import json

        assert json.loads(run.stdout)["results"][0]["metrics"]["interval_width"] >= 0
        return
    assert run.returncode == 2 and run.stdout == ""
    line = run.stderr.splitlines()[0]
    assert line.startswith(f"error: {path}: column 'score_high', row {first + 1}: ") and "'score_low'" in line, line
    with pytest.raises(UsageError, match=f"interval row {first}:"):
        calibcli.evaluate(y, p, interval=(low, high))


def test_columns_given_the_wrong_way_round_are_named_so(tmp_path):
    path = tmp_path / "iv.csv"
    path.write_text("score,label,lo,hi\n0.3,0,0.2,0.4\n0.6,1,0.5,0.7\n")
    run = subprocess.run([*CALIB, "evaluate", str(path), "--prob-col", "score", "--interval-cols", "hi,lo"],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "row 1" in run.stderr and "wrong way round" in run.stderr
