"""CalBin of weighted rows whose total is huge (a weight of w counts as w rows): the windows
inside one run of tied p are added in closed form, so the cost follows the windows that cross
runs, not the total weight (a 500-row file with weights 1e10 took hours before, issue #33)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from calibcli.evaluation.metrics import kernels


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), groups=st.integers(1, 25), window=st.integers(1, 60),
       whole=st.booleans())
def test_long_runs_equal_the_expanded_rows(seed, groups, window, whole):
    rng = np.random.default_rng(seed)
    v = np.unique(rng.random(groups))
    c = rng.integers(window * 4 + 2, window * 12 + 40, v.size).astype(np.float64)
    n1 = np.floor(c * rng.random(v.size))
    if not whole:
        c = c + rng.random(v.size)
    n0 = c - n1
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "LONG_WINDOWS", 0)
        fast = kernels._calbin_long_runs(v, n0, n1, window)
        assert fast is not None  # the runs are long: the closed form is taken
        mp.setattr(kernels, "LONG_WINDOWS", 1 << 62)
        slow = kernels.calbin_counts(v, n0, n1, window)
    assert fast == pytest.approx(slow, rel=1e-12, abs=1e-14)
    if whole:  # and the rows themselves, expanded
        rate = n1 / c
        ps, ys = np.repeat(v, c.astype(np.int64)), np.repeat(rate, c.astype(np.int64))
        assert fast == pytest.approx(kernels.calbin_sorted(ps, ys, window), rel=1e-12, abs=1e-14)


def test_a_huge_total_weight_takes_time_in_the_runs_not_the_weight():
    """500 distinct p with 1e10 rows each: 5e12 windows, computed as 500 runs (no timing
    asserted: the old path did not finish in an hour; this one is a few ms)."""
    rng = np.random.default_rng(0)
    v = np.sort(rng.random(500))
    n1 = np.floor(rng.random(500) * 1e10)
    n0 = 1e10 - n1
    value = kernels._calbin_long_runs(v, n0, n1, 100)
    assert value is not None
    rate = n1 / 1e10
    exact_inside = float(np.sum(np.abs(v - rate))) / 500  # every window but a few is inside a run
    assert value == pytest.approx(exact_inside, abs=1e-6)
