"""calibcli.engines.spark on a real local[2] SparkSession, against the single-process CLI.

Skipped, with the reason shown by `pytest -ra`, when pyspark (calibcli[spark]) or Java is
missing. The session is shared by the module (small shuffle partitions, no UI).
"""

import os
import shutil
import sys

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install calibcli[spark])")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Java is not installed: the Spark tests need a JVM (Java 17)", allow_module_level=True)

from engine_contract import *  # noqa: E402,F401,F403 - the shared engine tests
from engine_contract import data  # noqa: E402,F401
from engine_kclass_contract import *  # noqa: E402,F401,F403 - the K-class engine tests
from engine_features_contract import *  # noqa: E402,F401,F403 - maps that read field and feature columns
from sql_cases import CASES, build  # noqa: E402

from calibcli.export import sql as export  # noqa: E402
from calibcli.errors import UsageError  # noqa: E402
from repo import REPO

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this interpreter (with calibcli)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("calibcli-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def engine(spark):
    from calibcli.engines import spark as module

    return module


@pytest.fixture
def read(spark):
    return lambda path: spark.read.parquet(path)


@pytest.fixture
def collect():
    return lambda df: df.toArrow()


@pytest.fixture
def native():
    return True


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_sql_exportable_maps_apply_without_a_python_worker(engine, read, data, tmp_path):
    from engine_contract import _fit_cli_map

    for method in ("isotonic", "logistic", "beta", "ilps", "binning", "bayes-iso"):
        plan = _plan(engine.apply(read(data["single"]), _fit_cli_map(data, tmp_path, method), "score", "p"))
        assert "Python" not in plan and "Arrow" not in plan, method
    plan = _plan(engine.apply(read(data["single"]), _fit_cli_map(data, tmp_path, "boot-binning"), "score", "p"))
    assert "MapInArrow" in plan
    plan = _plan(engine.apply(read(data["single"]), _fit_cli_map(data, tmp_path, "isotonic"), "score", "p",
                              native=False))
    assert "MapInArrow" in plan
    with pytest.raises(UsageError, match="native=True"):
        engine.apply(read(data["single"]), _fit_cli_map(data, tmp_path, "boot-binning"), native=True)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_sql_export_in_spark_sql_equals_calib_apply(spark, tmp_path, case):
    map_path, _, scores, expected = build(tmp_path, case)
    spark.createDataFrame(pa.table({"score": scores, "i": np.arange(scores.size)})).createOrReplaceTempView("q")
    sql = export.export_sql(map_path, dialect="spark").sql
    got = spark.sql(f"SELECT {sql} AS p FROM q ORDER BY i").toArrow().column("p").to_numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    if case[1] in {"isotonic", "binning", "enir", "near-isotonic"}:
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in {"isotonic", "binning-quantile", "logistic", "beta", "ilps-logit"}],
                         ids=lambda c: c[0])
def test_sql_export_in_spark_sql_quotes_hostile_columns_and_gives_null_for_nan(spark, tmp_path, case):
    """`--dialect spark`: a column named to break out of the SQL is just a name, the query stays
    one statement (the `victim` view survives), and NULL, NaN, ±inf, subnormal and ±1e308
    scores give `predict`'s value or, where it has none or `calib apply` refuses, NULL."""
    from typer.testing import CliRunner

    from calibcli.cli.app import app
    from sql_cases import EXTREME_SCORES, HOSTILE_COLUMNS, HOSTILE_EXPRESSIONS

    map_path, cal, _, _ = build(tmp_path, case)
    s = np.array([np.nan if v is None else v for v in EXTREME_SCORES])
    with np.errstate(all="ignore"):
        want = cal.predict(s)
    none = np.isnan(s) | np.isnan(want) | (cal.needs_probabilities & ((s < 0) | (s > 1)))
    spark.createDataFrame(pa.table({"a": [1]})).createOrReplaceTempView("victim")
    for name in HOSTILE_COLUMNS:
        result = CliRunner().invoke(app, ["export", map_path, "--sql", "--dialect", "spark", "--score-col", name])
        assert result.exit_code == 0, result.output
        table = pa.table({name: pa.array(EXTREME_SCORES, pa.float64()), "i": np.arange(s.size)})
        spark.createDataFrame(table).createOrReplaceTempView("q")
        got = spark.sql(f"SELECT {result.stdout.strip()} AS p FROM q ORDER BY i").toArrow().column("p").to_pylist()
        assert spark.catalog.tableExists("victim")
        for g, w, n, v in zip(got, want, none, EXTREME_SCORES):
            if n:
                assert g is None or np.isnan(g), (name, v, g)
            else:
                assert g == pytest.approx(w, rel=1e-12, abs=0), (name, v)
    for expr in HOSTILE_EXPRESSIONS:
        result = CliRunner().invoke(app, ["export", map_path, "--sql", "--dialect", "spark", "--score-expr", expr])
        assert result.exit_code == 2 and result.stdout == "", expr
    result = CliRunner().invoke(app, ["export", map_path, "--sql", "--dialect", "spark", "--score-expr",
                                      "coalesce(`i` * 0 + score, 0) + length('a;b--c/*''d\"') * 0"])
    assert result.exit_code == 0, result.output
    spark.createDataFrame(pa.table({"score": [0.25, 0.75], "i": [0, 1]})).createOrReplaceTempView("q")
    got = spark.sql(f"SELECT {result.stdout.strip()} AS p FROM q ORDER BY i").toArrow().column("p").to_numpy()
    np.testing.assert_allclose(got, cal.predict(np.array([0.25, 0.75])), rtol=1e-12, atol=0)


def test_apply_keeps_null_and_nan_apart(engine, spark, tmp_path, data):
    from engine_contract import _fit_cli_map

    df = spark.createDataFrame(pa.table({"id": [0, 1], "score": pa.array([None, float("nan")], pa.float64())}))
    for method in ("isotonic", "boot-binning"):  # native expression and mapInArrow
        got = engine.apply(df, _fit_cli_map(data, tmp_path, method), "score", "p").toArrow()
        p = got.sort_by("id").column("p").to_pylist()
        assert p[0] is None and np.isnan(p[1]), method


def test_refused_scores_are_null_natively_and_through_arrow(engine, spark, tmp_path, data):
    from engine_contract import _fit_cli_map

    df = spark.createDataFrame(pa.table({"id": [0, 1, 2], "score": pa.array([-0.2, 1.3, float("nan")], pa.float64())}))
    for native in (True, False):
        got = engine.apply(df, _fit_cli_map(data, tmp_path, "beta"), "score", "p", native=native).toArrow()
        p = got.sort_by("id").column("p").to_pylist()
        assert p[0] is None and p[1] is None and np.isnan(p[2]), native


def test_example_job_runs_end_to_end(spark, tmp_path):
    """examples/spark_job.py on the test session: calibration improves log-loss, ECE and Field-RCE."""
    import importlib.util
    from pathlib import Path

    path = REPO / "examples" / "spark_job.py"
    spec = importlib.util.spec_from_file_location("spark_job", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    report = job.run(spark, 20_000, "isotonic", tmp_path)
    raw, calibrated = (r["metrics"] for r in report["results"])
    assert report["rows"] == 4000 and (tmp_path / "map.json").exists()
    for metric in ("log_loss", "ece", "field_rce"):
        assert calibrated[metric] < raw[metric], metric


def test_state_schema_lists_the_state_columns_in_order():
    """mapInArrow reads columns by position: the declared schema must follow EvalState.to_arrow."""
    from calibcli.engines.spark import _STATE_SCHEMA
    from calibcli.evaluation.state.binary import EvalState

    names = [field.strip().split()[0] for field in _STATE_SCHEMA.split(",") if field.strip()[:1].isalpha()]
    state = EvalState.from_arrays(np.array([0.0, 1.0]), np.array([0.2, 0.7]))
    assert names == [*state.to_arrow().column_names, "column", "bad", "part", "segments"]


@pytest.mark.parametrize("case", __import__("kclass_sql_cases").KCASES, ids=lambda c: c[0])
def test_kclass_select_list_in_spark_sql_equals_calib_apply(spark, tmp_path, case):
    """A K-class map's select list (`--dialect spark`: backtick-quoted columns with quotes in
    their names) runs as `SELECT <list> FROM q` and equals `calib apply` to 1e-12."""
    from kclass_sql_cases import CLASSES, build

    map_path, queries, expected = build(tmp_path, case)
    from calibcli.export import dispatch as export_kclass

    spark.createDataFrame(queries).createOrReplaceTempView("q")
    sql = export_kclass.export_sql(map_path, dialect="spark").sql
    out = spark.sql(f"SELECT {sql} FROM q ORDER BY i").toArrow()
    assert out.column_names == [f"calibrated_{c}" for c in CLASSES]
    got = np.column_stack([out.column(j).to_numpy() for j in range(len(CLASSES))])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
