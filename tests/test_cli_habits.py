"""CLI habits: global flags anywhere, one meaning per option, reproducible maps, honest messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibcli.calibrators import registry
from calibcli.cli.app import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "examples" / "data"


@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_global_flags_work_after_the_subcommand(flag):
    before = runner.invoke(app, [flag, "fit", str(DATA / "cal.csv")])
    after = runner.invoke(app, ["fit", str(DATA / "cal.csv"), flag])
    assert before.exit_code == after.exit_code == 0
    assert before.stderr == after.stderr == ""
    strict = runner.invoke(app, ["fit", str(DATA / "cal.csv"), "--method", "field-aware", "--strict"])
    assert strict.exit_code == 2 and "an error with --strict" in strict.stderr


def test_format_is_the_input_and_output_format_the_output(tmp_path):
    fit = runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-o", str(tmp_path / "m.json")])
    assert fit.exit_code == 0, fit.stderr
    tsv = (DATA / "test.csv").read_text().replace(",", "\t")
    res = runner.invoke(app, ["apply", str(tmp_path / "m.json"), "-", "--format", "tsv", "--output-format", "jsonl"],
                        input=tsv)
    assert res.exit_code == 0, res.stderr
    first = json.loads(res.stdout.splitlines()[0])
    assert set(first) == {"id", "field", "score", "label", "calibrated"}
    bad = runner.invoke(app, ["fit", str(DATA / "cal.csv"), "--output-format", "xlsx"])
    assert bad.exit_code == 2 and "--output-format 'xlsx'" in bad.stderr


def test_seed_and_param_seed_together_are_an_error():
    res = runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-m", "bayes-iso", "--seed", "1", "-p", "seed=2"])
    assert res.exit_code == 2 and "--seed 1 and --param seed=2 both set the seed" in res.stderr


def test_field_aware_without_feature_columns_warns(tmp_path):
    res = runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-m", "field-aware", "-p", "epochs=1"])
    assert res.exit_code == 0
    assert "warning: field-aware without --field-col or --feature-col is ilps" in res.stderr


def test_a_fit_without_input_says_the_file_is_missing():
    res = runner.invoke(app, ["fit", "-m", "isotonic"])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == "error: missing the score file to fit on (or --from-summary FILE)"


def test_methods_json_lists_every_method_with_bounds():
    res = runner.invoke(app, ["methods", "--json"])
    doc = json.loads(res.stdout)
    assert [m["name"] for m in doc] == registry.names()  # binary and K-class methods
    assert {m["name"]: m["classes"] for m in doc}["temperature"] == "native"
    for m in doc:
        for p in m["params"]:
            if p["type"] in ("int", "float"):
                assert p["low"] is not None and p["high"] is not None, (m["name"], p["name"])


def test_source_date_epoch_makes_refits_byte_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    maps = []
    for i in range(2):
        out = tmp_path / f"m{i}.json"
        assert runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-m", "bayes-iso", "--seed", "3",
                                   "-o", str(out)]).exit_code == 0
        maps.append(out.read_bytes())
    assert maps[0] == maps[1] and b'"created": "2023-11-14T22:13:20+00:00"' in maps[0]


def test_force_replaces_an_output_directory_only_when_asked(tmp_path):
    import shutil

    parts = tmp_path / "parts" / "d=1"
    parts.mkdir(parents=True)
    shutil.copy(DATA / "test.parquet", parts / "p.parquet")
    assert runner.invoke(app, ["fit", str(DATA / "cal.csv"), "-o", str(tmp_path / "m.json")]).exit_code == 0
    args = ["apply", str(tmp_path / "m.json"), str(tmp_path / "parts"), "-o", str(tmp_path / "out")]
    assert runner.invoke(app, args).exit_code == 0
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "out", "parts"]


def test_shell_completion_is_offered():
    res = runner.invoke(app, ["--help"])
    assert "--install-completion" in res.stdout


def test_hints_name_an_install_command_that_works():
    proc = subprocess.run([sys.executable, "-c", "from calibcli.errors import UPGRADE_HINT, extra_hint;"
                           "print(UPGRADE_HINT); print(extra_hint('plot'))"], capture_output=True, text=True)
    assert "pip install -e ." in proc.stdout and "pip install -e '.[plot]'" in proc.stdout
