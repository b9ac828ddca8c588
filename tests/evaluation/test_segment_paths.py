"""The compiled kernels of the multicalibration error (`calib_segment_ranges`, `calib_cell_sums`,
`calib_order_keys`, `calib_order_unpack`, `calib_sorted_rows` in
calibcli/numeric/_kernels.c) give the numpy path's bytes: every segment's rows, ECCE, sigma,
ratio, p-value and rates, over random data with ties, zero weights (negative zeros), missing
values, small blocks and every option. (tests/evaluation/test_multicalibration.py checks both
against MCGrad and a row-by-row reference: it runs with the kernel, and under CALIBCLI_NO_KERNEL=1
without it.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from calibcli.evaluation.metrics import multicalibration as mc, segment_paths

pytestmark = pytest.mark.skipif(not segment_paths.has_kernel(),
                                reason="the compiled kernel is not built (no C compiler at install)")


def _both(monkeypatch, block, *args, **kwargs):
    """(kernel result, numpy result) of `multicalibration(*args, **kwargs)` with blocks of `block` rows."""
    monkeypatch.setattr(segment_paths, "BLOCK", block)
    with_kernel = mc.multicalibration(*args, **kwargs)
    monkeypatch.setattr(segment_paths, "_kernel", lambda: None)
    try:
        plain = mc.multicalibration(*args, **kwargs)
    finally:
        monkeypatch.undo()
    return with_kernel, plain


def _bytes(result: mc.MulticalResult) -> str:
    return repr((result.metrics(), [tuple(vars(s).values()) for s in result.segments]))


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 600), block=st.sampled_from([4, 16, 64, 1 << 15]),
       ties=st.sampled_from([None, 2, 1]), weighted=st.sampled_from([None, "dyadic", "zeros"]),
       bins=st.integers(1, 4), top=st.integers(1, 3), depth=st.integers(0, 3), min_rows=st.integers(1, 15))
@settings(max_examples=150, deadline=None)
def test_the_kernel_gives_the_numpy_paths_bytes(seed, n, block, ties, weighted, bins, top, depth, min_rows):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    if ties is not None:
        p = np.round(p, ties)
    p[rng.random(n) < 0.05] = 0.0
    y = (rng.random(n) < p).astype(np.uint8)
    w = None
    if weighted == "dyadic":
        w = rng.integers(0, 9, n) / 4.0
    elif weighted == "zeros":
        w = np.where(rng.random(n) < 0.5, 0.0, 1.0)  # w (y - p) is -0.0 on a negative of weight 0
    age = rng.normal(size=n)
    age[rng.random(n) < 0.1] = np.nan
    cols = {"a": rng.integers(0, 4, n), "b": rng.choice(["x", "y", "z", "u"], n), "age": age}
    options = mc.MulticalOptions(bins=bins, top=top, depth=depth, min_rows=min_rows)
    with pytest.MonkeyPatch.context() as monkeypatch:
        kernel, plain = _both(monkeypatch, block, y, p, cols, w, options)
    assert _bytes(kernel) == _bytes(plain)


def test_the_kernel_reads_the_paths_of_large_blocks_and_long_tie_runs(monkeypatch):
    """A tie run longer than a block (the block grows to hold it), on 50 000 rows."""
    rng = np.random.default_rng(4)
    n = 50_000
    p = rng.random(n)
    p[:20_000] = 0.5
    y = (rng.random(n) < p).astype(np.uint8)
    cols = {"g": rng.integers(0, 6, n), "h": rng.choice(["a", "b", "c"], n), "x": rng.random(n)}
    kernel, plain = _both(monkeypatch, 1 << 12, y, p, cols)
    assert _bytes(kernel) == _bytes(plain)
    assert kernel.segments[-1].ecce_sigma >= 0


def test_cell_sums_kernel_equals_bincount():
    rng = np.random.default_rng(1)
    n, ncell = 10_000, 37
    cells = rng.integers(0, ncell, n).astype(np.uint16)
    y = (rng.random(n) < 0.4).astype(np.uint8)
    p = rng.random(n)
    w = rng.random(n)
    for weights in (None, w):
        got = segment_paths.kernel_cell_sums(cells, ncell, y, p, weights)
        q = p * (1.0 - p)
        if weights is None:
            want = (np.bincount(cells, minlength=ncell).astype(float), np.bincount(cells, q, ncell),
                    np.bincount(cells, p, ncell), np.bincount(cells, y, ncell))
        else:
            q = q * weights * weights
            want = (np.bincount(cells, weights, ncell), np.bincount(cells, q, ncell),
                    np.bincount(cells, weights * p, ncell), np.bincount(cells, weights * y, ncell))
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
