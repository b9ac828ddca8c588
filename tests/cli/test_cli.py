"""The real `calib` command: the documented pipe, stdout purity, exit codes, no partial files."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from repo import REPO

DATA = REPO / "examples" / "data"
runner = CliRunner()


def calib_bin():
    exe = Path(sys.executable).parent / "calib"
    return str(exe) if exe.exists() else shutil.which("calib")


def test_documented_pipe_runs(tmp_path):
    m = tmp_path / "m.json"
    cmd = (f"'{calib_bin()}' fit --method isotonic cal.csv -o '{m}' && cat test.csv | "
           f"'{calib_bin()}' apply '{m}' - | '{calib_bin()}' evaluate - --prob-col calibrated "
           f"--field-col field --json")
    out = subprocess.run(cmd, shell=True, cwd=DATA, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["rows"] == 10000
    metrics = report["results"][0]["metrics"]
    assert set(metrics) >= {"log_loss", "brier", "auc", "ece", "calbin", "field_ece", "field_rce"}
    # The example scores are miscalibrated: isotonic must improve log-loss over the raw score.
    raw = json.loads(subprocess.run([calib_bin(), "evaluate", "test.csv", "--json"], cwd=DATA,
                                    capture_output=True, text=True, timeout=60).stdout)
    assert metrics["log_loss"] < raw["results"][0]["metrics"]["log_loss"]


def test_fit_without_output_writes_json_map_to_stdout_and_summary_to_stderr():
    result = runner.invoke(app, ["fit", str(DATA / "cal.csv"), "--method", "logistic"])
    assert result.exit_code == 0, result.output
    env = json.loads(result.stdout)
    assert env["method"] == "logistic" and env["format"] == "calibcli.map"
    assert "fitted logistic" in result.stderr
    assert "log-loss" in result.stderr


@pytest.mark.parametrize("suffix", ["json", "parquet"])
def test_apply_adds_column_and_keeps_others(tmp_path, suffix):
    m = tmp_path / f"m.{suffix}"
    assert runner.invoke(app, ["fit", str(DATA / "cal.parquet"), "-o", str(m)]).exit_code == 0
    out = tmp_path / "out.parquet"
    result = runner.invoke(app, ["apply", str(m), str(DATA / "test.csv"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert table.column_names == ["id", "field", "score", "label", "calibrated"]
    p = table.column("calibrated").to_numpy()
    assert table.num_rows == 10000 and p.min() >= 0 and p.max() <= 1


def test_apply_csv_to_stdout():
    m = runner.invoke(app, ["fit", str(DATA / "cal.csv")]).stdout
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(m)
    try:
        result = runner.invoke(app, ["apply", fh.name, "-"], input="score,x\n0.2,a\n0.9,b\n")
    finally:
        os.unlink(fh.name)
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == '"score","x","calibrated"'
    assert len(lines) == 3


def test_evaluate_table_and_json_agree():
    table = runner.invoke(app, ["evaluate", str(DATA / "test.csv"), "--prob-col", "score"])
    assert table.exit_code == 0
    assert "CalBin" in table.stdout and "Field-ECE" not in table.stdout
    js = json.loads(runner.invoke(app, ["evaluate", str(DATA / "test.csv"), "--json"]).stdout)
    assert f"{js['results'][0]['metrics']['brier']:.4f}" in table.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["fit", "missing.csv"], "missing.csv: no such file"),
        (["fit", str(DATA / "cal.csv"), "--score-col", "scroe"], "no column 'scroe'"),
        (["fit", str(DATA / "cal.csv"), "--method", "isotonik"], "unknown method 'isotonik'"),
        (["fit", str(DATA / "cal.csv"), "--param", "bogus=1"], "no parameter 'bogus'"),
        (["fit", str(DATA / "cal.csv"), "--param", "platt_correction=perhaps"], "must be true or false"),
        (["fit", str(DATA / "cal.csv"), "--seed", "3"], "takes no --seed"),
        (["evaluate", str(DATA / "test.csv"), "--prob-col", "id"], "not a probability"),
    ],
)
def test_errors_are_one_line_with_exit_2(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")


@pytest.mark.parametrize(
    "content, message",
    [
        ("score,label\n0.1,0\nnan,1\n", "row 2: score nan is not finite"),
        ("score,label\n0.1,0\n0.2,2\n", "row 2: label 2 is not 0 or 1"),
        ("score,label\n0.1,0\n0.2,0\n", "both classes"),
        ("score,label\n", "no data rows"),
        ("", "empty input"),
        ("score,label\n0.1,yes\n0.3,1\n", "row 1: label 'yes'"),
        ("score,label\n0.1,0\n,1\n", "row 2: empty value"),
    ],
)
def test_bad_input_leaves_no_output(tmp_path, content, message):
    src = tmp_path / "in.csv"
    src.write_text(content)
    out = tmp_path / "map.json"
    result = runner.invoke(app, ["fit", str(src), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert str(src) in result.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.csv"]


def test_apply_failure_midway_leaves_no_output(tmp_path):
    m = tmp_path / "m.json"
    runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-o", str(m)])
    src = tmp_path / "in.csv"
    src.write_text("score\n0.1\n0.5\ninf\n")
    out = tmp_path / "out.csv"
    result = runner.invoke(app, ["apply", str(m), str(src), "-o", str(out)])
    assert result.exit_code == 2
    assert "row 3" in result.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "m.json"]


def test_methods_and_help():
    result = runner.invoke(app, ["methods"])
    assert result.exit_code == 0
    for name in ("isotonic", "logistic", "binning"):
        assert f"{name}:" in result.stdout
    assert runner.invoke(app, ["-h"]).exit_code == 0
    proc = subprocess.run([sys.executable, "-m", "calibcli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("calib ")


def test_usage_error_exit_code_is_2():
    assert runner.invoke(app, ["fit"]).exit_code == 2
    assert runner.invoke(app, ["fit", "x.csv", "--no-such-flag"]).exit_code == 2
