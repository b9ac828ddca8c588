"""K-class SQL at the ends of float64 (issue #33): for temperature, vector and dirichlet maps of
any scale (coefficients from 1e-3 to 1e3), on rows of logits up to +-1.8e308 (and
probabilities down to 0), the select list run in DuckDB equals `calib apply`'s prediction
(`ClassMap.predict`) to 1e-12, never NaN; and the map's prediction is the limit along the
row's direction where a logit could overflow."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import calibcli
from calibcli.export import kclass as export_kclass

duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install calibcli[dev])")
MAX = float(np.finfo(np.float64).max)
EXTREME = st.sampled_from([MAX, -MAX, 1e308, -1e308, 1e300, -1e300, 1e154, 0.0, 5e-324, -3.5, 7.25, 700.0, -700.0])
PARAMS = {"temperature": {}, "vector": {"reg_mu": 0.01}, "dirichlet": {"reg_lambda": 0.01, "reg_mu": 0.01}}


def _map(method: str, k: int, scale: float, kind: str, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (200, k))
    y = (z + rng.gumbel(size=(200, k))).argmax(axis=1)
    if np.unique(y).size < k:
        y[:k] = np.arange(k)
    scores = z * scale  # a map fitted on scores of this scale has coefficients of about 1 / scale
    if kind == "probability":
        scores = np.exp(scores - scores.max(axis=1, keepdims=True))
        scores /= scores.sum(axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = calibcli.fit(scores, y, method=method, score_kind=kind, classes=list(range(k)), **PARAMS[method])
    return cm


def _duckdb(sql: str, rows: np.ndarray) -> np.ndarray:
    con = duckdb.connect()
    k = rows.shape[1]
    con.execute("CREATE TABLE t (" + ", ".join(f"s{j} DOUBLE" for j in range(k)) + ", i INTEGER)")
    con.executemany("INSERT INTO t VALUES (" + ", ".join("?" * (k + 1)) + ")",
                    [[*map(float, r), i] for i, r in enumerate(rows)])
    return np.array(con.execute(f"SELECT {sql} FROM t ORDER BY i").fetchall(), dtype=np.float64)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(sorted(PARAMS)), k=st.integers(2, 4), scale=st.sampled_from([1e-3, 0.1, 1.0, 30.0, 1e3]),
       seed=st.integers(0, 2**16), data=st.data())
def test_select_list_equals_apply_at_the_extremes(method, k, scale, seed, data):
    cm = _map(method, k, scale, "logit", seed)
    rows = np.array(data.draw(st.lists(st.lists(EXTREME, min_size=k, max_size=k), min_size=1, max_size=6)),
                    dtype=np.float64)
    sql = export_kclass.select_list(cm, [f"s{j}" for j in range(k)])
    got = _duckdb(sql, rows)
    expected = cm.predict(rows)
    assert not np.isnan(got).any(), (rows, got)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_probability_maps_take_zeros_and_one_hot_rows(method):
    cm = _map(method, 3, 30.0, "probability", 1)
    rows = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [5e-324, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    got = _duckdb(export_kclass.select_list(cm, ["s0", "s1", "s2"]), rows)
    np.testing.assert_allclose(got, cm.predict(rows), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_an_overflowing_row_is_the_limit_along_its_direction(method):
    """Scaling a row's logits up by powers of two until they pass the overflow bound: the
    prediction there is the limit of the finite predictions (one-hot on the largest linear
    term, ties shared), and a row of +-1.8e308 gives the same."""
    cm = _map(method, 3, 30.0, "logit", 2)
    row = np.array([[1.0, -0.5, 0.25]])
    far = cm.predict(row * 2.0**1000)
    near = cm.predict(row * 2.0**60)
    np.testing.assert_allclose(far, near, rtol=0, atol=1e-12)
    assert np.isin(far, (0.0, 1.0)).all()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(sorted(PARAMS)), k=st.integers(2, 7), scale=st.sampled_from([1e-3, 1.0, 30.0]),
       kind=st.sampled_from(["logit", "probability"]), seed=st.integers(0, 2**16))
def test_the_planned_size_is_the_built_size(method, k, scale, kind, seed):
    """The size checked before building is the size built, byte for byte."""
    cm = _map(method, k, scale, kind, seed)
    cols = [f"s'{j}" for j in range(k)]
    names = [export_kclass.quote_identifier(f"calibrated_{c}") for c in cm.classes_.tolist()]
    planned = export_kclass.planned_bytes(export_kclass.logits_sql(cm, cols), names)
    assert planned == len(export_kclass.select_list(cm, cols).encode())


def test_a_select_list_too_large_to_build_is_refused_with_its_size(tmp_path):
    """K = 500 would be gigabytes (the issue's 14 GB build): refused before it is built, one
    line with the size, exit 2, nothing on stdout."""
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    k = 500
    z = rng.normal(size=(1000, k))
    y = np.arange(1000) % k
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = calibcli.fit(z, y, method="temperature", score_kind="logit", score_cols=[f"x{j}" for j in range(k)])
    path = tmp_path / "big.json"
    calibcli.save_map(cm, str(path))
    run = subprocess.run([sys.executable, "-m", "calibcli", "export", str(path), "--sql"], capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("error: ") and " MB (it grows as K^3" in run.stderr and "at most 64 MiB" in run.stderr
