"""Tie pooling (`calibcli.pooling`) and the exact lookup (`calibcli._lookup`) against numpy's plain paths."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from calibcli import _lookup
from calibcli.pooling import unique_with_sums

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
