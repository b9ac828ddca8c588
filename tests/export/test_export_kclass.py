"""`calib export --sql` of K-class maps (temperature, vector, dirichlet): a select list, one line
per class `<expression> AS "calibrated_<class>"`, that DuckDB runs as `SELECT <list> FROM t`
and that equals `calib apply` to 1e-12 (Spark SQL: tests/engines/test_spark.py)."""

import numpy as np
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.export.sql import quote_identifier
from kclass_sql_cases import CLASSES, COLUMNS, KCASES, build

duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install calibcli[dev])")
runner = CliRunner()


def run_duckdb(sql: str, queries) -> np.ndarray:
    con = duckdb.connect()
    con.register("t", queries)
    con.execute("CREATE TABLE victim (a INTEGER)")
    query = f"SELECT {sql} FROM t ORDER BY i"
    assert len(duckdb.extract_statements(query)) == 1
    out = con.sql(query).to_arrow_table()
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'victim'").fetchone() == (1,)
    assert out.column_names == [f"calibrated_{c}" for c in CLASSES]
    return np.column_stack([out.column(j).to_numpy() for j in range(len(CLASSES))])


@pytest.mark.parametrize("case", KCASES, ids=[c[0] for c in KCASES])
def test_select_list_in_duckdb_equals_calib_apply(tmp_path, case):
    map_path, queries, expected = build(tmp_path, case)
    result = runner.invoke(app, ["export", map_path, "--sql"])
    assert result.exit_code == 0, result.output
    sql = result.stdout.strip()
    lines = sql.splitlines()
    assert len(lines) == len(CLASSES)
    for line, c in zip(lines, CLASSES):
        assert line.endswith(f" AS {quote_identifier('calibrated_' + c)}" + ("," if c != CLASSES[-1] else ""))
    got = run_duckdb(sql, queries)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.all(np.abs(got.sum(axis=1) - 1) <= 1e-12) and np.all(got >= 0)


def test_score_cols_rename_the_columns_read(tmp_path):
    map_path, queries, expected = build(tmp_path, KCASES[0])
    renamed = queries.rename_columns([f"x{j}" for j in range(len(COLUMNS))] + ["i"])
    result = runner.invoke(app, ["export", map_path, "--sql", "--score-cols", ",".join(f"x{j}" for j in range(4))])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(run_duckdb(result.stdout, renamed), expected, rtol=0, atol=1e-12)


def test_refusals_are_one_line(tmp_path):
    map_path, _, _ = build(tmp_path, KCASES[0])
    for args, message in [
        (["--score-cols", "a,b"], "--score-cols 'a,b' gives 2 columns but the map has 4 classes"),
        (["--max-knots", "5"], "K-class maps have no knots"),
        (["--score-cols", "a,b,c,d", "--score-col", "s"], "cannot be combined with --score-col"),
    ]:
        result = runner.invoke(app, ["export", map_path, "--sql", *args])
        assert result.exit_code == 2 and message in result.stderr, result.stderr
    iso = tmp_path / "iso.json"
    cal = tmp_path / "temperature.parquet"
    result = runner.invoke(app, ["fit", str(cal), "--score-cols", ",".join(COLUMNS), "--classes", ",".join(CLASSES),
                                 "-m", "isotonic", "-o", str(iso)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["export", str(iso), "--sql"])
    assert result.exit_code == 2 and "isotonic K-class map cannot be exported as SQL" in result.stderr


@pytest.mark.parametrize("method, k, growth", [("dirichlet", 16, "K^4"), ("temperature", 40, "K^3")])
def test_size_warning_of_a_kclass_map_names_no_knots(tmp_path, method, k, growth):
    """Past 1 MB the warning says the size and how it grows with K: K-class maps have no knots
    and refuse --max-knots, so it must not offer them."""
    import warnings

    import calibcli
    import kdata
    from calibcli.errors import CalibWarning

    z, y = kdata.logits(300, k, seed=1)
    params = {"reg_lambda": 0.01, "reg_mu": 0.01} if method == "dirichlet" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibWarning)
        cm = calibcli.fit(z, y, method=method, score_kind="logit", score_cols=[f"x_{j}" for j in range(k)],
                          **params)
    path = tmp_path / "k.json"
    calibcli.save_map(cm, str(path))
    result = runner.invoke(app, ["export", str(path), "--sql"])
    assert result.exit_code == 0 and result.stdout.count(" AS ") == k
    warning = result.stderr.strip()
    assert warning.startswith("warning: the SQL is ") and " MB for the " in warning and len(warning.splitlines()) == 1
    assert f"{k} classes of this {method} map" in warning and f"grows as {growth}" in warning
    assert "knots" not in warning
    strict = runner.invoke(app, ["--strict", "export", str(path), "--sql"])
    assert strict.exit_code == 2 and "knots" not in strict.stderr and strict.stdout == ""


@pytest.mark.parametrize("spec", ["x_*", "x?,b,c,d", "a,b,c,[xy]"])
def test_a_score_cols_pattern_is_refused_export_reads_no_file(tmp_path, spec):
    """`--score-cols 'x_*'` was taken as one column named x_*: export has no schema to match a
    pattern against, so it asks for the K names as a comma list (the map's own as example)."""
    map_path, _, _ = build(tmp_path, KCASES[0])
    result = runner.invoke(app, ["export", map_path, "--sql", "--score-cols", spec])
    assert result.exit_code == 2 and result.stdout == ""
    pattern = next(item for item in spec.split(",") if set(item) & set("*?["))
    assert result.stderr.splitlines() == [
        f"error: {map_path}: --score-cols '{pattern}' is a pattern, but export reads no file to match it against: "
        f"give the map's {len(CLASSES)} score column names as a comma list",
        f"hint: e.g. --score-cols {','.join(COLUMNS)}"]
