"""`calib export --sql`: the SQL expression, run in DuckDB, equals `calib apply` to 1e-12."""

import json

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from calibcli import export
from calibcli.calibrators import registry
from calibcli.cli import app
from sql_cases import CASES, build

duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install calibcli[dev])")
runner = CliRunner()


def run_duckdb(sql: str, scores: np.ndarray, column: str = "score") -> np.ndarray:
    con = duckdb.connect()
    con.register("queries", pa.table({column: scores, "i": np.arange(scores.size)}))
    out = con.sql(f"SELECT {sql} AS p FROM queries ORDER BY i").to_arrow_table()
    return out.column("p").to_numpy(zero_copy_only=False)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_sql_in_duckdb_equals_calib_apply(tmp_path, case):
    map_path, cal, scores, expected = build(tmp_path, case)
    result = runner.invoke(app, ["export", map_path, "--sql"])
    assert result.exit_code == 0, result.output
    sql = result.stdout.strip()
    assert "\n" not in sql
    got = run_duckdb(sql, scores)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.all((got >= 0) & (got <= 1))


def test_piecewise_linear_maps_are_bit_exact_in_duckdb(tmp_path):
    """Knot and bin maps use numpy's own arithmetic: DuckDB's doubles give the same bits."""
    for case in CASES:
        if case[1] in {"isotonic", "binning", "enir", "bbq"}:
            map_path, _, scores, expected = build(tmp_path, case)
            got = run_duckdb(export.export_sql(map_path), scores)
            assert np.array_equal(got, expected), case[0]


def test_worked_isotonic_case_by_hand():
    """Knots (0, 0.2), (1, 0.6), (3, 1): closed-form values below, on, between and above knots."""
    cal = registry.get("isotonic").from_state({}, {"x": [0.0, 1.0, 3.0], "y": [0.2, 0.6, 1.0]})
    scores = np.array([-5.0, 0.0, 0.5, 1.0, 2.0, 3.0, 7.0])
    got = run_duckdb(export.sql_expression(cal), scores)
    np.testing.assert_allclose(got, [0.2, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0], rtol=0, atol=1e-15)


def test_worked_binning_case_edges_belong_to_the_bin_below():
    cal = registry.get("binning").from_state({}, {"edges": [0.3, 0.6], "values": [0.1, 0.5, 0.9]})
    got = run_duckdb(export.sql_expression(cal), np.array([0.0, 0.3, 0.30000001, 0.6, 0.61, 5.0]))
    assert got.tolist() == [0.1, 0.1, 0.5, 0.5, 0.9, 0.9]


def test_logistic_extremes_do_not_overflow():
    cal = registry.get("logistic").from_state({}, {"a": 50.0, "b": -1.0})
    got = run_duckdb(export.sql_expression(cal), np.array([-1e10, -20.0, 0.02, 20.0, 1e10]))
    from scipy.special import expit

    np.testing.assert_allclose(got, expit([-1e10 * 50 - 1, -1001.0, 0.0, 999.0, 1e10 * 50 - 1]), rtol=1e-15, atol=0)


def test_null_scores_give_null_and_quoted_columns_work(tmp_path):
    cal = registry.get("isotonic").from_state({}, {"x": [0.0, 1.0], "y": [0.1, 0.9]})
    con = duckdb.connect()
    con.register("t", pa.table({"my score": pa.array([0.5, None, 2.0], pa.float64())}))
    sql = export.sql_expression(cal, '"my score"')
    assert con.execute(f"SELECT {sql} FROM t").fetchall() == [(0.5,), (None,), (0.9,)]


@pytest.mark.parametrize("method,params", [("beta", {}), ("ilps", {"K": "20"})])
def test_probability_maps_give_null_where_calib_apply_refuses(tmp_path, method, params):
    """Beta and ilps maps fitted on probabilities: SQL gives NULL for a score outside [0, 1]
    (`calib apply` refuses it) and the map's value inside, both ends included; with
    score_kind=logit every finite score has a value."""
    rng = np.random.default_rng(5)
    s = rng.uniform(0.02, 0.98, 3000)
    y = (rng.random(3000) < s).astype(float)
    cal = registry.get(method).from_cli(params).fit(s, y)
    scores = np.array([-0.2, 0.0, 0.5, 1.0, 1.3])
    got = run_duckdb(export.sql_expression(cal), scores)
    assert np.isnan(got[[0, 4]]).all()
    np.testing.assert_allclose(got[1:4], cal.predict(scores[1:4]), rtol=0, atol=1e-12)
    logit = registry.get(method).from_cli({**params, "score_kind": "logit"}).fit(np.log(s / (1 - s)), y)
    assert not np.isnan(run_duckdb(export.sql_expression(logit), scores)).any()


def test_literals_parse_back_to_the_same_bits():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200),
                             [0.0, -0.0, 1.0, 0.1, 1e-12, 1 - 1e-12, 5e-324, 1.7976931348623157e308]])
    sql = ", ".join(f"{export.literal(v)} AS c{i}" for i, v in enumerate(values))
    row = duckdb.connect().execute(f"SELECT {sql}").fetchone()
    assert np.array_equal(np.array(row, dtype=np.float64), values)
    assert all(export.literal(v).rstrip(")").upper().count("E") == 1 for v in values)


@pytest.mark.parametrize("method", ["bayes-iso", "boot-isotonic"])
def test_other_methods_are_refused_with_one_line(tmp_path, method):
    from sql_cases import training_table
    import pyarrow.parquet as pq

    train = tmp_path / "t.parquet"
    pq.write_table(training_table(False, n=400), train)
    m = tmp_path / "m.json"
    assert runner.invoke(app, ["-q", "fit", str(train), "-m", method, "-o", str(m)]).exit_code == 0
    result = runner.invoke(app, ["export", str(m), "--sql"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[0].endswith(f"m.json: a {method} map cannot be exported as SQL")
    assert lines[1].startswith("hint: SQL export supports isotonic")


def test_export_needs_a_format_and_a_valid_map(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    result = runner.invoke(app, ["export", str(bad), "--sql"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    result = runner.invoke(app, ["export", str(bad)])
    assert result.exit_code == 2 and "choose an export format" in result.stderr
