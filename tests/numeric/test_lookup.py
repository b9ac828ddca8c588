"""The compiled predict kernel (`calibcli/numeric/_kernels.c`) and the numpy path it replaces both give
`np.interp`'s bytes; the kernel is built wherever a C compiler was present at install."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibcli.numeric import lookup as _lookup


def test_kernel_is_built_where_a_compiler_is_present():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the install skipped the kernel, numpy serves")
    assert _lookup._kernel() is not None, "calibcli/numeric/_kernels.c was not built or does not load: reinstall with pip"


def test_the_kernel_can_be_switched_off():
    code = "from calibcli import _lookup; print(_lookup._kernel() is None)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"CALIBCLI_NO_KERNEL": "1", "PATH": ""})
    assert out.stdout.strip() == "True"


@pytest.fixture(params=["kernel", "numpy"])
def path(request, monkeypatch):
    """Run a test through the compiled kernel, then through the numpy path."""
    if request.param == "kernel" and _lookup._kernel() is None:
        pytest.skip("kernel not built")
    if request.param == "numpy":
        monkeypatch.setattr(_lookup, "_kernel", lambda: None)
    return request.param


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e-300, 1e300, -1e300])


def _knots(rng: np.random.Generator, k: int, scale: float, clustered: bool, flat: float):
    xp = rng.normal(size=k) * scale
    if clustered:  # most knots packed into a tiny stretch: cells hold many knots, or the grid gives up
        xp[: k // 2] = rng.normal(size=k // 2) * scale * 1e-9
    xp = np.unique(xp)
    fp = np.sort(rng.random(xp.size))
    fp[rng.random(xp.size) < flat] = 0.0  # runs of equal values, as isotonic maps have
    return xp, np.sort(fp)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 3000), scale=st.sampled_from([1e-6, 1.0, 1e3, 1e12]),
       clustered=st.booleans(), flat=st.sampled_from([0.0, 0.5, 0.9]), n=st.integers(4096, 20000))
def test_interp_equals_np_interp_bytes(path, seed, k, scale, clustered, flat, n):
    rng = np.random.default_rng(seed)
    xp, fp = _knots(rng, k, scale, clustered, flat)
    if xp.size < 2:
        return
    x = np.concatenate([rng.normal(size=n) * xp.std() * 1.5 + xp.mean(), xp, np.nextafter(xp, np.inf),
                        np.nextafter(xp, -np.inf), SPECIAL])
    rng.shuffle(x)
    assert _lookup.interp(x, xp, fp).tobytes() == np.interp(x, xp, fp).tobytes()


def test_interp_of_other_dtypes_and_shapes(path):
    rng = np.random.default_rng(3)
    xp = np.unique(rng.random(500))
    fp = np.sort(rng.random(xp.size))
    for x in (rng.random(10000).astype(np.float32), rng.integers(-2, 3, size=10000),
              rng.random((100, 100)), rng.random(20000)[::2]):
        assert _lookup.interp(x, xp, fp).tobytes() == np.interp(x, xp, fp).tobytes()


def test_isotonic_predictions_are_the_same_on_both_paths(monkeypatch):
    from calibcli.calibrators import create

    rng = np.random.default_rng(5)
    s = rng.random(50000)
    y = (rng.random(s.size) < s).astype(float)
    cal = create("isotonic").fit(s, y)
    q = np.concatenate([rng.random(30000) * 1.2 - 0.1, s[:1000]])
    fast = cal.predict(q)
    monkeypatch.setattr(_lookup, "_kernel", lambda: None)
    assert cal.predict(q).tobytes() == fast.tobytes()


@st.composite
def extreme_knots(draw):
    """Knots with subnormal gaps, gaps beyond the float64 range, or tiny value steps over huge
    gaps (subnormal slopes, where the grid lookup still serves)."""
    import extremes

    kind = draw(st.sampled_from(sorted(extremes.KINDS)))
    xp = np.unique(np.array(draw(st.lists(extremes.KINDS[kind](), min_size=2, max_size=60))))
    if xp.size < 2:
        xp = np.array([0.0, extremes.TINY])
    steps = draw(st.lists(st.sampled_from([0.0, 1e-300, 1e-200, 1e-12, 0.01, 0.3]), min_size=xp.size,
                          max_size=xp.size))
    fp = np.minimum(np.cumsum(steps), 1.0)
    return xp, fp


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(knots=extreme_knots(), seed=st.integers(0, 2**32 - 1))
def test_extreme_knots_give_the_same_bytes_on_both_paths_and_the_exact_value(path, knots, seed):
    """Kernel and numpy agree byte for byte; numpy's formula is kept on ordinary intervals and
    the value is exact to a few roundings on the extreme ones (no overflow to 0 or 1)."""
    from fractions import Fraction

    xp, fp = knots
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        x = np.concatenate([xp, np.nextafter(xp, np.inf), np.nextafter(xp, -np.inf),
                            xp[:-1] + (xp[1:] - xp[:-1]) * rng.random(xp.size - 1),
                            xp[:-1] * 0.5 + xp[1:] * 0.5, SPECIAL])
    x = np.resize(x[np.isfinite(x) | np.isnan(x)], 5000)  # above _MIN_QUERIES: the grid path runs
    got = _lookup.interp(x, xp, fp)
    assert np.all(np.isfinite(got[~np.isnan(x)]))
    with np.errstate(all="ignore"):
        plain = np.interp(x, xp, fp)
    extreme = np.zeros(xp.size, dtype=bool)
    extreme[_lookup.extreme_intervals(xp, fp)] = True
    j = np.searchsorted(xp, x, side="right") - 1
    inside = (j >= 0) & (j < xp.size - 1) & ~np.isnan(x)
    special = inside & extreme[np.clip(j, 0, xp.size - 1)]
    assert got[~special].tobytes() == plain[~special].tobytes()
    for i in np.flatnonzero(special)[:200]:
        k = j[i]
        x0, x1, y0, y1 = (Fraction(float(v)) for v in (xp[k], xp[k + 1], fp[k], fp[k + 1]))
        want = y0 + (y1 - y0) * (Fraction(float(x[i])) - x0) / (x1 - x0)
        assert abs(Fraction(float(got[i])) - want) <= Fraction(2.0 ** -50) * max(y1, Fraction(2.0 ** -1022))
