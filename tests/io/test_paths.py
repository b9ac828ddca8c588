"""Every command reads a file, a directory, a glob, a Hive-partitioned tree or a file:// URI
of Parquet parts, skipping Spark's bookkeeping (`_temporary/`, `_SUCCESS`, `.crc`)."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli import io
from calibcli.cli.app import app

runner = CliRunner()
N = 3000


def _table(seed=0, n=N):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    return pa.table({"score": p, "label": (rng.random(n) < p).astype(np.int8),
                     "field": rng.choice(["a", "b", "c"], n)})


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The same 3 000 rows as one file, a Spark output folder, and a Hive tree by field."""
    root = tmp_path_factory.mktemp("datasets")
    table = _table()
    single = root / "all.parquet"
    pq.write_table(table, single)
    spark = root / "spark"
    (spark / "_temporary" / "0" / "_temporary" / "attempt_1").mkdir(parents=True)
    for i, (a, b) in enumerate([(0, 1000), (1000, 2200), (2200, N)]):
        pq.write_table(table.slice(a, b - a), spark / f"part-{i:05d}-x.snappy.parquet")
        (spark / f".part-{i:05d}-x.snappy.parquet.crc").write_bytes(b"crc")
    pq.write_table(_table(9, 4352), spark / "_temporary" / "0" / "_temporary" / "attempt_1" / "part-00000.parquet")
    (spark / "_SUCCESS").write_bytes(b"")
    hive = root / "hive"
    for value in ("a", "b", "c"):
        part = table.filter(pa.compute.equal(table["field"], value)).drop_columns(["field"])
        (hive / f"field={value}").mkdir(parents=True)
        pq.write_table(part, hive / f"field={value}" / "part-0.parquet")
    return {"single": str(single), "spark": str(spark), "hive": str(hive), "root": root}


def run(*args):
    result = runner.invoke(app, list(map(str, args)))
    return result


def evaluated(path, *extra):
    result = run("evaluate", path, "--field-col", "field", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_lister_skips_spark_bookkeeping(layouts):
    parts = io.list_parts(layouts["spark"])
    assert [rel for _, rel in parts] == [f"part-{i:05d}-x.snappy.parquet" for i in range(3)]
    assert io.skipped_part("_temporary/0/part-1.parquet") and io.skipped_part("_SUCCESS")
    assert io.skipped_part(".part-1.parquet.crc") and not io.skipped_part("field=a/part-0.parquet")


@pytest.mark.parametrize("form", ["spark", "spark_glob", "hive", "file_uri_dir", "file_uri_file"])
def test_evaluate_reads_every_layout_like_the_single_file(layouts, form):
    path = {"spark": layouts["spark"], "spark_glob": layouts["spark"] + "/part-*.parquet",
            "hive": layouts["hive"], "file_uri_dir": "file://" + layouts["spark"],
            "file_uri_file": "file://" + layouts["single"]}[form]
    expected = evaluated(layouts["single"])
    got = evaluated(path)
    assert got["rows"] == N  # not 7 352: _temporary is not data
    for key, value in expected["results"][0]["metrics"].items():
        assert got["results"][0]["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def test_summarize_and_fit_read_the_spark_folder(layouts, tmp_path):
    s = run("summarize", layouts["spark"], "-o", tmp_path / "s.json")
    assert s.exit_code == 0, s.stderr
    assert json.loads((tmp_path / "s.json").read_text())["rows"] == N
    a = run("fit", layouts["spark"], "--method", "isotonic", "-o", tmp_path / "a.json")
    b = run("fit", layouts["single"], "--method", "isotonic", "-o", tmp_path / "b.json")
    assert a.exit_code == 0 and b.exit_code == 0, a.stderr + b.stderr
    ma, mb = (json.loads((tmp_path / f"{k}.json").read_text()) for k in "ab")
    assert ma["state"] == mb["state"] and ma["training"]["rows"] == N


def test_fit_from_a_summary_folder_skips_temporary(layouts, tmp_path):
    from calibcli.fitting import summary

    folder = tmp_path / "summary"
    (folder / "_temporary").mkdir(parents=True)
    whole = summary.summarize(np.array([0.1, 0.2, 0.2]), np.array([0, 1, 0]))
    pq.write_table(whole.to_table().replace_schema_metadata(None), folder / "part-0.parquet")
    pq.write_table(whole.to_table().replace_schema_metadata(None), folder / "_temporary" / "part-0.parquet")
    loaded = summary.load(str(folder))
    assert loaded.rows == 3 and loaded.n0.tolist() == [1, 1]


def test_apply_directory_output_is_read_back_by_evaluate(layouts, tmp_path):
    fit = run("fit", layouts["single"], "--method", "isotonic", "-o", tmp_path / "m.json")
    assert fit.exit_code == 0, fit.stderr
    applied = run("apply", tmp_path / "m.json", layouts["spark"], "-o", tmp_path / "out")
    assert applied.exit_code == 0, applied.stderr
    back = evaluated(str(tmp_path / "out"), "--prob-col", "calibrated")
    direct = evaluated(layouts["single"], "--map", tmp_path / "m.json")
    assert back["rows"] == N
    for key, value in direct["results"][0]["metrics"].items():
        assert back["results"][0]["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def test_missing_uri_and_empty_folder_are_one_line_errors(layouts, tmp_path):
    (tmp_path / "empty").mkdir()
    for path, message in [("file://" + str(tmp_path / "nope.parquet"), "no such file"),
                          (str(tmp_path / "empty"), "no Parquet part files")]:
        result = run("evaluate", path)
        assert result.exit_code == 2 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
