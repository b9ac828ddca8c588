"""Engine tests of maps that read field and feature columns (`multicalibration`, `field-aware`):
`engine.apply` gives the numbers `calib apply` gives, bit for bit, on text fields, text and
boolean (with nulls) categorical features, a numeric feature, and levels the fit never saw.

A test module imports these with the fixtures `engine`, `read(path) -> DataFrame` and
`collect(DataFrame) -> pyarrow.Table`, as `engine_contract` does."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app

runner = CliRunner()


def _table(n: int, seed: int, unseen: bool) -> pa.Table:
    rng = np.random.default_rng(seed)
    publishers = [f"p{k}" for k in range(12)] + (["p-new", "p-other"] if unseen else [])
    countries = ["DE", "FR", "US", "GB"] + (["XX"] if unseen else [])
    publisher = np.array(publishers, dtype=object)[rng.integers(0, len(publishers), n)]
    publisher[rng.random(n) < 0.02] = None  # a null field value: '' for the CLI and the engines alike
    country = np.array(countries, dtype=object)[rng.integers(0, len(countries), n)]
    flag = (rng.random(n) < 0.5).astype(object)
    flag[rng.random(n) < 0.03] = None
    s = rng.uniform(0.01, 0.99, n)
    z = np.log(s / (1 - s)) + 0.8 * (country == "DE") - 0.6 * (publisher == "p3") + 0.4 * (flag == True)  # noqa: E712
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.int64)
    return pa.table({"id": np.arange(n), "score": s, "label": y, "publisher": pa.array(publisher, pa.string()),
                     "country": pa.array(country, pa.string()), "flag": pa.array(flag, pa.bool_()),
                     "age": rng.normal(40, 9, n)})


@pytest.fixture(scope="module")
def feature_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    pq.write_table(_table(3000, 0, False), root / "fit.parquet")
    pq.write_table(_table(1000, 1, True), root / "new.parquet")
    return root


def _cli(*args: str) -> None:
    res = runner.invoke(app, ["-q", *args])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("method,extra", [("multicalibration", ("--param", "rounds=4")),
                                          ("field-aware", ("--param", "epochs=2"))])
def test_feature_maps_apply_as_calib_apply(engine, read, collect, feature_data, method, extra):
    map_path = feature_data / f"{method}.json"
    if not map_path.exists():
        _cli("fit", str(feature_data / "fit.parquet"), "--method", method, "--field-col", "publisher",
             "--feature-col", "country", "--feature-col", "flag", "--feature-col", "age", "-o", str(map_path), *extra)
    for name in ("fit.parquet", "new.parquet"):
        out = feature_data / f"{method}-{name}"
        _cli("apply", str(map_path), str(feature_data / name), "-o", str(out))
        want = pq.read_table(out).sort_by("id").column("calibrated").to_numpy()
        got = collect(engine.apply(read(str(feature_data / name)), str(map_path), "score", "p")).sort_by("id")
        p = got.column("p").to_numpy()
        assert np.all(np.isfinite(p)) and np.all((p > 0) & (p < 1))
        assert np.array_equal(p, want), (method, name, float(np.max(np.abs(p - want))))
