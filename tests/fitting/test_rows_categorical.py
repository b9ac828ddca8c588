"""Categorical `--feature-col` columns (text, true/false, Parquet booleans) read by `binary_rows`
as the `--field-col` columns are, fitted by `multicalibration` and `field-aware`, and read the
same way by `calib apply`: same levels, unseen values to the map's fallback, reloads bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.fitting.rows import read_rows
from calibcli.maps import envelope as maps
from calibcli.requests import Columns

runner = CliRunner()
COUNTRIES = np.array(["DE", "FR", "GB", "US", "IT", "ES", "NL", "PL"])


def table(n: int = 3000, seed: int = 0) -> pa.Table:
    """Scores miscalibrated by country (text), by a true/false flag and by publisher (a field)."""
    rng = np.random.default_rng(seed)
    country = COUNTRIES[rng.integers(0, COUNTRIES.size, n)]
    publisher = np.array([f"p{k}" for k in rng.integers(0, 25, n)])
    flag = rng.random(n) < 0.4
    s = rng.uniform(0.02, 0.98, n)
    z = np.log(s / (1 - s)) + 0.9 * (country == "DE") - 0.7 * (publisher == "p3") + 0.5 * flag
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.int64)
    return pa.table({"score": s, "label": y, "publisher": publisher, "country": country,
                     "flag": pa.array(flag), "age": rng.normal(40, 10, n).round(1)})


def write_csv(t: pa.Table, path, flag_words=("True", "False")) -> None:
    """CSV with the flag written as the words given (pyarrow infers booleans from them)."""
    words = np.where(t.column("flag").to_numpy(zero_copy_only=False), *flag_words)
    pacsv.write_csv(t.set_column(t.column_names.index("flag"), "flag", pa.array(words)), str(path))


def fit(path, out, method="multicalibration", *extra):
    res = runner.invoke(app, ["fit", str(path), "--method", method, "--field-col", "publisher",
                              "--feature-col", "country", "--feature-col", "flag", "--feature-col", "age",
                              "-o", str(out), *extra])
    assert res.exit_code == 0, res.output
    return res


def applied(map_path, data_path, tmp_path) -> np.ndarray:
    out = tmp_path / "applied.parquet"
    res = runner.invoke(app, ["apply", str(map_path), str(data_path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return pq.read_table(out).column("calibrated").to_numpy()


def test_text_and_boolean_features_are_categorical_and_the_rest_numeric(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(table(), path)
    rows = read_rows(str(path), Columns(fields=("publisher",), features=("country", "flag", "age")), None, "binary")
    assert rows.features["country"].dtype == object and rows.features["flag"].dtype == object
    assert rows.features["age"].dtype == np.float64
    assert set(rows.features["flag"]) == {"True", "False"}  # the file's words, as `calib apply` reads them
    assert rows.training["feature_cols"] == {"country": "categorical", "flag": "categorical", "age": "numeric"}
    assert rows.training["field_cols"] == ["publisher"]


@pytest.mark.parametrize("words", [("True", "False"), ("true", "false"), ("TRUE", "FALSE")])
def test_csv_fit_then_apply_reads_the_same_levels(tmp_path, words):
    """The fit reads a true/false column as the file's words (read again as text), so `calib
    apply`, which reads it as text, finds every level: its output equals the map's prediction
    on the fit's own arrays, bit for bit, and no row falls to the unseen-level fallback."""
    path = tmp_path / "d.csv"
    write_csv(table(), path, words)
    fit(path, tmp_path / "m.json")
    cal, _ = maps.load_map(str(tmp_path / "m.json"))
    state = cal.get_state()
    assert state["categorical"] == ["country", "flag", "publisher"] and state["numeric"] == ["age"]
    assert list(state["vocab"][1]) == sorted(words)
    rows = read_rows(str(path), Columns(fields=("publisher",), features=("country", "flag", "age")), None, "binary")
    want = cal.predict(rows.scores, features=rows.features)
    assert np.array_equal(applied(tmp_path / "m.json", path, tmp_path), want)


def test_parquet_booleans_fit_and_apply_as_true_false(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(table(), path)
    fit(path, tmp_path / "m.parquet")
    cal, _ = maps.load_map(str(tmp_path / "m.parquet"))
    assert list(cal.get_state()["vocab"][1]) == ["false", "true"]
    got = applied(tmp_path / "m.parquet", path, tmp_path)
    t = table()
    feats = {"publisher": t.column("publisher").to_numpy(zero_copy_only=False),
             "country": t.column("country").to_numpy(zero_copy_only=False),
             "flag": np.where(t.column("flag").to_numpy(zero_copy_only=False), "true", "false"),
             "age": t.column("age").to_numpy()}
    assert np.array_equal(got, cal.predict(t.column("score").to_numpy(), features=feats))


def test_unseen_values_map_to_the_fallback_never_nan(tmp_path):
    """A country, flag word or publisher the fit never saw gets the unseen level (shift 0,
    the 'other' side of every split): finite, in (0, 1), and the same for any unseen word."""
    path = tmp_path / "d.csv"
    t = table()
    write_csv(t, path)
    fit(path, tmp_path / "m.json")
    n = 50
    rng = np.random.default_rng(1)
    base = {"score": rng.uniform(0, 1, n), "label": np.zeros(n, dtype=np.int64), "age": rng.normal(40, 10, n)}
    one = pa.table({**base, "publisher": ["p-new"] * n, "country": ["XX"] * n, "flag": ["maybe"] * n})
    two = pa.table({**base, "publisher": [""] * n, "country": ["ZZ top"] * n, "flag": ["?"] * n})
    pacsv.write_csv(one, str(tmp_path / "one.csv"))
    pq.write_table(two, tmp_path / "two.parquet")
    p1 = applied(tmp_path / "m.json", tmp_path / "one.csv", tmp_path)
    p2 = applied(tmp_path / "m.json", tmp_path / "two.parquet", tmp_path)
    assert np.all(np.isfinite(p1)) and np.all((p1 > 0) & (p1 < 1))
    assert np.array_equal(p1, p2)


@pytest.mark.parametrize("method", ["multicalibration", "field-aware"])
def test_maps_with_categorical_features_reload_bit_for_bit(tmp_path, method):
    path = tmp_path / "d.csv"
    write_csv(table(1500), path)
    extra = ("--param", "epochs=2") if method == "field-aware" else ("--param", "rounds=3")
    fit(path, tmp_path / "m.json", method, *extra)
    fit(path, tmp_path / "m.parquet", method, *extra)
    from_json = applied(tmp_path / "m.json", path, tmp_path)
    from_parquet = applied(tmp_path / "m.parquet", path, tmp_path)
    assert np.array_equal(from_json, from_parquet)
    cal, _ = maps.load_map(str(tmp_path / "m.json"))
    again = maps.envelope_to_calibrator(json.loads(maps.envelope_to_json(maps.make_envelope(cal))), "<test>")
    rows = read_rows(str(path), Columns(fields=("publisher",), features=("country", "flag", "age")), None, "binary")
    assert np.array_equal(again.predict(rows.scores, features=rows.features), from_json)
    assert "country" in cal.input_features()[0] and "flag" in cal.input_features()[0]


def test_sql_export_of_a_map_with_categorical_features_is_refused_in_one_line(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(table(1500), path)
    fit(path, tmp_path / "m.json", "multicalibration", "--param", "rounds=2")
    res = runner.invoke(app, ["export", str(tmp_path / "m.json"), "--sql"])
    assert res.exit_code == 2
    assert "cannot be exported as SQL" in res.stderr and "Traceback" not in res.output


def test_a_text_feature_column_missing_at_apply_is_named(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(table(1500), path)
    fit(path, tmp_path / "m.json", "multicalibration", "--param", "rounds=2")
    pacsv.write_csv(table(20).drop_columns(["country"]), str(tmp_path / "nocountry.csv"))
    res = runner.invoke(app, ["apply", str(tmp_path / "m.json"), str(tmp_path / "nocountry.csv")])
    assert res.exit_code == 2 and "'country'" in res.stderr


def test_a_true_false_column_from_a_stream_is_said_not_silently_respelled(tmp_path):
    """stdin cannot be read twice: the levels are true/false and the fit says so on stderr."""
    path = tmp_path / "d.csv"
    write_csv(table(800), path)
    res = runner.invoke(app, ["fit", "-", "--method", "multicalibration", "--feature-col", "flag",
                              "--param", "rounds=1", "-o", str(tmp_path / "s.json")], input=path.read_bytes())
    assert res.exit_code == 0, res.output
    assert "'flag' read from a stream as true/false" in res.stderr
    cal, _ = maps.load_map(str(tmp_path / "s.json"))
    assert [list(v) for v in cal.get_state()["vocab"]] == [["false", "true"]]
