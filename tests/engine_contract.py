"""What every engine module (`calibcli.engines.spark`, `.dask`) must do, checked against the CLI.

A test module imports these tests and defines the fixtures `engine` (the module), `read` (a
Parquet file or directory -> that engine's DataFrame), `collect` (DataFrame -> Arrow table)
and `native` (True when the engine applies SQL-exportable maps as native expressions). The single-process CLI on
the same file is the reference: summaries and maps must be bit-identical, applied
probabilities equal to `calib apply`, metrics equal to `calib evaluate` to 1e-12.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli.export import sql as export
from calibcli.maps import envelope as maps
from calibcli.fitting import summary
from calibcli.calibrators import registry
from calibcli.cli.app import app
from calibcli.errors import InputError

runner = CliRunner()
SUMMARY_METHODS = [m for m in registry.available() if not registry.get(m).uses_features]
EXACT_APPLY = {"isotonic", "binning", "enir", "near-isotonic", "venn-abers", "bbq"}  # native SQL reproduces them bit for bit


def make_rows(n: int = 5000, seed: int = 5) -> pa.Table:
    """Scores in [0, 1] with ties, labels, dyadic weights (sums exact in any order), 7 fields."""
    rng = np.random.default_rng(seed)
    field = rng.integers(0, 7, n)
    p = np.clip(rng.beta(2, 3, n) + 0.04 * (field - 3), 0.0, 1.0)
    y = (rng.random(n) < p ** 1.3).astype(np.int64)
    return pa.table({
        "id": np.arange(n),
        "score": np.round(p, 3),
        "label": y,
        "weight": rng.integers(0, 9, n) / 4.0,
        "field": pa.array([f"f{k}" for k in field]),
        "prob": np.round(rng.uniform(0.0, 1.0, n) * 0.5 + 0.5 * p, 4),
    })


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The rows as one Parquet file and as a Hive-partitioned tree (field=f0/...), with engine debris."""
    root = tmp_path_factory.mktemp("engine-data")
    table = make_rows()
    single = root / "rows.parquet"
    pq.write_table(table, single)
    tree = root / "tree"
    pq.write_to_dataset(table.drop_columns(["field"]).append_column(
        "part", pa.array([f"p{i % 3}" for i in range(table.num_rows)])), tree, partition_cols=["part"])
    (tree / "_SUCCESS").write_text("")
    return {"table": table, "single": str(single), "tree": str(tree), "root": root}


def cli(*args: str) -> str:
    result = runner.invoke(app, ["-q", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def cli_summary(path: str, tmp: Path, weight: bool = False, step: float | None = None) -> summary.ScoreSummary:
    out = tmp / f"summary-{weight}-{step}.json"
    cli("summarize", path, "-o", str(out), *(["--weight-col", "weight"] if weight else []),
        *(["--step", repr(step)] if step else []))
    return summary.load(str(out))


def cli_map_state(summary_path: str, method: str, tmp: Path) -> dict:
    out = tmp / f"map-{method}.json"
    cli("fit", "--from-summary", summary_path, "--method", method, "-o", str(out))
    return json.loads(out.read_text())


def assert_same_summary(got: summary.ScoreSummary, want: summary.ScoreSummary) -> None:
    for name in ("score", "n0", "n1"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert (got.rows, got.positives, got.score_range, got.weighted, got.step) == \
        (want.rows, want.positives, want.score_range, want.weighted, want.step)


@pytest.mark.parametrize("weight,step", [(False, None), (True, None), (False, 1e-2), (True, 0.05)])
def test_summarize_equals_cli(engine, read, data, tmp_path, weight, step):
    got = engine.summarize(read(data["single"]), weight_col="weight" if weight else None, step=step)
    assert_same_summary(got, cli_summary(data["single"], tmp_path, weight, step))


def test_summarize_reads_a_partitioned_parquet_tree(engine, read, data, tmp_path):
    got = engine.summarize(read(data["tree"]), weight_col="weight")
    assert_same_summary(got, cli_summary(data["tree"], tmp_path, weight=True))
    assert got.rows == data["table"].num_rows


@pytest.mark.parametrize("method", SUMMARY_METHODS)
def test_fit_is_bit_identical_to_cli_for_every_summary_method(engine, read, data, tmp_path, method):
    df = read(data["single"])
    params = {"models": 10} if method == "enir" else None
    result = engine.fit(df, method, params, weight_col="weight", output=str(tmp_path / "engine.json"))
    summary_path = tmp_path / "summary.json"
    cli("summarize", data["single"], "--weight-col", "weight", "-o", str(summary_path))
    out = tmp_path / "cli.json"
    cli("fit", "--from-summary", str(summary_path), "--method", method, "-o", str(out),
        *(["--param", "models=10"] if method == "enir" else []))
    want = json.loads(out.read_text())
    got = json.loads((tmp_path / "engine.json").read_text())
    assert got["state"] == want["state"] and got["params"] == want["params"]
    assert got["training"]["rows"] == want["training"]["rows"]
    assert got["training"]["after"] == want["training"]["after"]
    assert result.calibrator.name == method


def test_fit_with_step_equals_cli(engine, read, data, tmp_path):
    result = engine.fit(read(data["single"]), "logistic", step=0.01)
    summary_path = tmp_path / "s.json"
    cli("summarize", data["single"], "--step", "0.01", "-o", str(summary_path))
    want = cli_map_state(str(summary_path), "logistic", tmp_path)
    assert maps.to_plain(result.calibrator.get_state()) == want["state"]


def _cli_apply(map_path: str, data_path: str, tmp: Path) -> np.ndarray:
    out = tmp / "applied.parquet"
    cli("apply", map_path, data_path, "-o", str(out))
    return pq.read_table(out).sort_by("id").column("calibrated").to_numpy()


def _fit_cli_map(data, tmp: Path, method: str, *extra: str) -> str:
    """`calib fit` on the rows; maps are kept for the module (the same arguments fit once)."""
    path = data["root"] / ("-".join([method, *extra]).replace("=", "_").replace("--", "") + ".json")
    if not path.exists():
        cli("fit", data["single"], "--method", method, "-o", str(path), *extra)
    return str(path)


@pytest.mark.parametrize("method,extra", [
    ("isotonic", ()), ("binning", ("--param", "n_bins=12")), ("logistic", ()), ("beta", ()),
    ("ilps", ("--param", "K=20")), ("enir", ("--param", "models=8")),
    ("bayes-iso", ()), ("boot-binning", ()),
    ("venn-abers", ()), ("venn-abers", ("--param", "variant=cvap")),
    ("bbq", ()), ("bbq", ("--param", "variant=netcal")), ("spline", ()),
    ("field-aware", ("--field-col", "field", "--param", "epochs=3")),
])
def test_apply_equals_calib_apply(engine, read, collect, native, data, tmp_path, method, extra):
    map_path = _fit_cli_map(data, tmp_path, method, *extra)
    want = _cli_apply(map_path, data["single"], tmp_path)
    got = collect(engine.apply(read(data["single"]), map_path, "score", "p")).sort_by("id")
    assert got.column_names == [*data["table"].column_names, "p"]
    p = got.column("p").to_numpy()
    if method in EXACT_APPLY or not (native and method in export.SQL_METHODS):
        assert np.array_equal(p, want)
    else:
        np.testing.assert_allclose(p, want, rtol=0, atol=1e-12)


def test_apply_passes_null_and_nan_scores_through(engine, read, collect, data, tmp_path):
    map_path = _fit_cli_map(data, tmp_path, "isotonic")
    path = tmp_path / "holes.parquet"
    pq.write_table(pa.table({"id": [0, 1, 2], "score": pa.array([0.5, None, float("nan")], pa.float64())}), path)
    for m in (map_path, _fit_cli_map(data, tmp_path, "boot-binning")):
        got = collect(engine.apply(read(str(path)), m, "score", "p")).sort_by("id").column("p").to_pylist()
        assert got[0] == maps.load_map(m)[0].predict([0.5])[0]
        assert all(v is None or np.isnan(v) for v in got[1:])  # Spark keeps null and NaN apart: test_spark


def test_apply_gives_no_value_where_calib_apply_refuses_the_score(engine, read, collect, data, tmp_path):
    """A map fitted on probabilities (beta, ilps): `calib apply` refuses a score outside
    [0, 1]; an engine job cannot stop for one row, so it gives no value there (null, or NaN
    in pandas), as the exported SQL gives NULL; scores inside [0, 1] are calibrated as usual."""
    path = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"id": [0, 1, 2, 3], "score": pa.array([0.5, -0.2, 1.3, 1.0], pa.float64())}), path)
    for m in (_fit_cli_map(data, tmp_path, "beta"), _fit_cli_map(data, tmp_path, "ilps", "--param", "K=20")):
        got = collect(engine.apply(read(str(path)), m, "score", "p")).sort_by("id").column("p").to_pylist()
        cal = maps.load_map(m)[0]
        assert got[0] == pytest.approx(cal.predict([0.5])[0], abs=1e-12)
        assert got[3] == pytest.approx(cal.predict([1.0])[0], abs=1e-12)
        assert all(v is None or np.isnan(v) for v in got[1:3]), m


@pytest.mark.parametrize("columns,weight,message", [
    ({"score": [0.1, float("nan"), 0.3, float("inf")], "label": [0, 1, 1, 0]}, None,
     r"column 'score': 2 rows with a null, NaN or infinite score"),
    ({"score": [0.1, 0.2, 0.3], "label": [0, 2, 1]}, None, r"column 'label': 1 row with a label that is not 0 or 1"),
    ({"score": [0.1, 0.2, 0.3], "label": [0, 1, 1], "weight": [1.0, -2.0, 1.0]}, "weight",
     r"column 'weight': 1 row with a null, negative or non-finite weight"),
])
def test_invalid_rows_are_refused_like_the_cli(engine, read, tmp_path, columns, weight, message):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    with pytest.raises(InputError, match=message):
        engine.summarize(read(str(path)), weight_col=weight)
    with pytest.raises(InputError, match=message):
        engine.fit(read(str(path)), "isotonic", weight_col=weight)
    assert runner.invoke(app, ["fit", str(path), *(["--weight-col", weight] if weight else [])]).exit_code == 2


@pytest.mark.parametrize("window", [100, 7])
def test_evaluate_equals_calib_evaluate(engine, read, data, tmp_path, window):
    iso = _fit_cli_map(data, tmp_path, "isotonic")
    bayes = _fit_cli_map(data, tmp_path, "bayes-iso")
    want = json.loads(cli("evaluate", data["single"], "--prob-col", "score", "--prob-col", "prob",
                          "--map", iso, "--map", bayes, "--field-col", "field",
                          "--calbin-window", str(window), "--json"))
    got = engine.evaluate(read(data["single"]), ["score", "prob"], [iso, bayes], field_col="field",
                          calbin_window=window).to_json()
    assert (got["rows"], got["positives"], got["field_col"], got["calbin_window"]) == \
        (want["rows"], want["positives"], want["field_col"], want["calbin_window"])
    assert [(r["name"], r["kind"]) for r in got["results"]] == [(r["name"], r["kind"]) for r in want["results"]]
    for g, w in zip(got["results"], want["results"]):
        assert set(g["metrics"]) == set(w["metrics"])
        for metric, value in w["metrics"].items():
            assert g["metrics"][metric] == pytest.approx(value, rel=1e-12, abs=1e-12), (g["name"], metric)
    assert got["gate"]["passed"] is True


def test_evaluate_without_columns_evaluates_the_score_and_pools_ties(engine, read, tmp_path):
    """Worked case: p = (0.2, 0.2, 0.8, 0.8), y = (0, 1, 1, 1): AUC 5/6, log-loss by hand."""
    path = tmp_path / "ties.parquet"
    pq.write_table(pa.table({"score": [0.8, 0.2, 0.2, 0.8], "label": [1, 1, 0, 1]}), path)
    got = engine.evaluate(read(str(path))).to_json()["results"][0]["metrics"]
    assert got["auc"] == pytest.approx(5 / 6, abs=1e-15)
    assert got["log_loss"] == pytest.approx(-(np.log(0.2) + np.log(0.8) + 2 * np.log(0.8)) / 4, abs=1e-15)
    assert got["brier"] == pytest.approx((0.04 + 0.64 + 2 * 0.04) / 4, abs=1e-15)
    assert "field_ece" not in got


def test_evaluate_refuses_probabilities_outside_0_1(engine, read, tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"p": [0.1, 1.5, float("nan")], "label": [0, 1, 1]}), path)
    with pytest.raises(InputError, match=r"column 'p': 2 rows with a probability that is null, NaN or outside"):
        engine.evaluate(read(str(path)), ["p"])


def test_evaluate_with_weights_and_step_equals_calib_evaluate(engine, read, data):
    want = json.loads(cli("evaluate", data["single"], "--prob-col", "prob", "--field-col", "field",
                          "--weight-col", "weight", "--step", "0.01", "--json"))
    got = engine.evaluate(read(data["single"]), ["prob"], field_col="field", weight_col="weight",
                          step=0.01).to_json()
    assert (got["weight_col"], got["step"]) == ("weight", 0.01)
    g, w = got["results"][0], want["results"][0]
    assert set(g["metrics"]) == set(w["metrics"]) and g["step_bounds"] == pytest.approx(w["step_bounds"])
    for metric, value in w["metrics"].items():
        if value is None:  # n/a under --step (the slope and intercept)
            assert g["metrics"][metric] is None, metric
            continue
        assert g["metrics"][metric] == pytest.approx(value, rel=1e-12, abs=1e-12), metric


@pytest.mark.parametrize("extra", [[], ["--weight-col", "weight"], ["--step", "0.01"]])
def test_evaluate_every_metric_equals_calib_evaluate(engine, read, data, extra):
    """`--metrics all` with consistency-band rounds: the merged state gives the CLI's numbers."""
    want = json.loads(cli("evaluate", data["single"], "--prob-col", "prob", "--field-col", "field",
                          "--metrics", "all", "--bands", "20", "--seed", "3", "--hl-groups", "8", *extra, "--json"))
    kwargs = {"weight_col": "weight"} if "--weight-col" in extra else {"step": 0.01} if extra else {}
    got = engine.evaluate(read(data["single"]), ["prob"], field_col="field", metrics="all", bands=20, seed=3,
                          hl_groups=8, **kwargs).to_json()
    assert got["hl_groups"] == want["hl_groups"] == 8
    g, w = got["results"][0], want["results"][0]
    assert list(g["metrics"]) == list(w["metrics"]) and "corp_p" in w["metrics"] and "kuiper_p" in w["metrics"]
    assert g["step_bounds"] == w["step_bounds"]
    for metric, value in w["metrics"].items():
        if value is None:
            assert g["metrics"][metric] is None, metric
            continue
        assert g["metrics"][metric] == pytest.approx(value, rel=1e-12, abs=1e-12), metric


def read_in_parts(read, path: str):
    """The file as several partitions in its row order (Dask's `read` repartitions; Spark splits
    a file by bytes, here into pieces of a few row groups)."""
    df = read(path)
    session = getattr(df, "sparkSession", None)
    if session is None:
        assert df.npartitions > 1
        return df
    old = session.conf.get("spark.sql.files.maxPartitionBytes")
    session.conf.set("spark.sql.files.maxPartitionBytes", "40000")
    try:
        df = read(path)
        assert df.rdd.getNumPartitions() > 1
    finally:
        session.conf.set("spark.sql.files.maxPartitionBytes", old)
    return df


@pytest.mark.parametrize("weighted", [False, True])
def test_evaluate_multicalibration_equals_calib_evaluate_exactly(engine, read, data, tmp_path, weighted):
    """`segment_cols`: the partitions' rows merged in their order give the CLI's multicalibration
    error and worst segments bit for bit (text, integer and float segment columns, missing values,
    two probability columns sharing the columns), and the report records the segment options."""
    table = data["table"]
    n = table.num_rows
    rng = np.random.default_rng(8)
    income = rng.lognormal(10.0, 1.0, n)
    income[rng.random(n) < 0.1] = np.nan
    path = tmp_path / "segmented.parquet"
    pq.write_table(table.append_column("income", pa.array(income, from_pandas=True))
                   .append_column("member", pa.array(rng.random(n) < 0.3)), path, row_group_size=1200)
    flags = ["--segment-col", "field", "--segment-col", "income", "--segment-col", "id", "--segment-col", "member",
             "--segment-bins", "4", "--segment-min-rows", "20", "--segments", "50"]
    weight = ["--weight-col", "weight"] if weighted else []
    want = json.loads(cli("evaluate", str(path), "--prob-col", "prob", "--prob-col", "score", *flags, *weight,
                          "--json"))
    got = engine.evaluate(read_in_parts(read, str(path)), ["prob", "score"],
                          segment_cols=["field", "income", "id", "member"],
                          segment_bins=4, segment_min_rows=20, segments=50,
                          weight_col="weight" if weighted else None).to_json()
    for key in ("segment_cols", "segment_bins", "segment_top", "segment_depth", "segment_min_rows", "segment_max"):
        assert got[key] == want[key], key
    assert want["segment_cols"] == ["field", "income", "id", "member"] and want["segment_bins"] == 4
    for g, w in zip(got["results"], want["results"], strict=True):
        assert {k: g["metrics"][k] for k in ("multical", "multical_sigma", "multical_p")} == \
            {k: w["metrics"][k] for k in ("multical", "multical_sigma", "multical_p")}
        assert g["segments"] == w["segments"] and len(w["segments"]) == 50
        assert (g["segments_checked"], g["segments_capped"]) == (w["segments_checked"], False)
        assert w["segments"][0]["ecce_sigma"] == w["metrics"]["multical_sigma"]


def test_evaluate_refuses_a_missing_segment_column(engine, read, data):
    with pytest.raises(InputError, match="no column 'country' \\(segment_col 'country'\\)"):
        engine.evaluate(read(data["single"]), ["prob"], segment_cols=["country"])
