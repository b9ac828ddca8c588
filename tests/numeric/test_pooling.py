"""Tie pooling (`calibcli.numeric.pooling`) and the exact lookup (`calibcli.numeric.lookup`) against numpy's plain paths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from calibcli.numeric import lookup as _lookup, pooling
from calibcli.numeric.pooling import unique_with_sums

runner = CliRunner()


def _old_unique_with_sums(s, y, w):
    xs, inv = np.unique(s, return_inverse=True)
    return xs, np.bincount(inv, weights=w, minlength=xs.size), np.bincount(inv, weights=w * y, minlength=xs.size)


@pytest.mark.parametrize("weights", ["unit", "counts", "fractional", "platt"])
def test_unique_with_sums_is_bit_identical_to_np_unique(weights):
    rng = np.random.default_rng(7)
    for trial in range(30):
        n = int(rng.integers(1, 2000))
        s = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
        if trial % 2:
            s[rng.random(n) < 0.1] = -0.0  # np.unique keeps whichever zero its sort puts first
        y = (rng.random(n) < 0.4).astype(float)
        w = {"unit": np.ones(n), "counts": rng.integers(0, 4, n).astype(float),
             "fractional": rng.random(n) * 3, "platt": np.ones(n)}[weights]
        if weights == "platt":
            y = np.where(y == 1, 0.97, 0.013)
        for old, new in zip(_old_unique_with_sums(s, y, w), unique_with_sums(s, y, w)):
            assert old.tobytes() == new.tobytes()


def test_lookup_is_bit_identical_to_np_interp():
    rng = np.random.default_rng(3)
    for trial in range(40):
        k = int(rng.integers(2, 2000))
        xp = np.unique(np.sort(rng.normal(size=k) ** 3 if trial % 2 else rng.random(k)))
        fp = np.sort(rng.random(xp.size)) if trial % 3 else rng.normal(size=xp.size) * 100
        n = 6000
        x = np.concatenate([rng.choice(xp, n // 3), rng.uniform(xp[0] - 1, xp[-1] + 1, n // 3),
                            rng.uniform(xp[0], xp[-1], n // 3)])
        assert _lookup.interp(x, xp, fp).tobytes() == np.interp(x, xp, fp).tobytes()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 3000), st.sampled_from([1, 3, 64, 1 << 18]),
       st.sampled_from([2, 30, 10**6]))
def test_compact_counts_of_keys_equal_counts_of_keys(seed, n, chunk, levels):
    """The chunked, in-place run-length encoding gives counts_of_keys' scores and counts, in
    the smallest unsigned dtype that holds them, whatever the chunk boundaries cut."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, levels, n) / levels
    positive = rng.random(n) < 0.3
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pooling, "_KEY_CHUNK", chunk)
        xs, n0, n1 = pooling.compact_counts_of_keys(pooling.packed_keys(s, positive))
    if n == 0:
        assert xs.size == n0.size == n1.size == 0
        return
    ref_x, rows, pos = pooling.counts_of_keys(pooling.packed_keys(s, positive))
    assert xs.tobytes() == ref_x.tobytes()
    assert np.array_equal(n1.astype(np.float64), pos) and np.array_equal(n0.astype(np.float64), rows - pos)
    top = max(int(n0.max()), int(n1.max()))
    assert n0.dtype == n1.dtype == (np.uint8 if top <= 255 else np.min_scalar_type(top))
