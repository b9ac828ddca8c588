"""Messages that say what happened and what to do (issue #33): a blank column name refused by
every command, `export --score-col` on a K-class map refused, `compare` naming a K-class
method and a fold without one class, `--force` naming what is in the way."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from calibcli.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("msg")
    rng = np.random.default_rng(0)
    s = rng.random(300)
    y = (rng.random(300) < s).astype(int)
    (d / "b.csv").write_text("score,label,w,f\n" + "".join(f"{a},{b},1,x\n" for a, b in zip(s, y)))
    P = rng.dirichlet([1, 1, 1], 300)
    k = (P.cumsum(axis=1) < rng.random(300)[:, None]).sum(axis=1).clip(0, 2)
    (d / "k.csv").write_text("p_a,p_b,p_c,label\n" + "".join(f"{a},{b},{c},{['a', 'b', 'c'][j]}\n"
                                                             for (a, b, c), j in zip(P, k)))
    assert runner.invoke(app, ["-q", "fit", str(d / "b.csv"), "-o", str(d / "b.json")]).exit_code == 0
    res = runner.invoke(app, ["-q", "fit", str(d / "k.csv"), "--score-cols", "p_*", "-m", "temperature",
                              "-o", str(d / "k.json")])
    assert res.exit_code == 0, res.stderr
    return d


def _commands(d, flag: str, name: str):
    b = str(d / "b.csv")
    return {
        "fit": ["fit", b, flag, name, "-o", str(d / "x.json")],
        "apply": ["apply", str(d / "b.json"), b, flag, name, "-o", str(d / "x.csv")],
        "evaluate": ["evaluate", b, flag, name],
        "summarize": ["summarize", b, flag, name],
        "compare": ["compare", b, flag, name, "-m", "isotonic"],
        "export": ["export", str(d / "b.json"), "--sql", flag, name],
    }


FLAGS = {"fit": ["--score-col", "--label-col", "--weight-col"], "apply": ["--score-col", "--output-col"],
         "evaluate": ["--score-col", "--label-col", "--weight-col", "--field-col"],
         "summarize": ["--score-col", "--label-col", "--weight-col"], "compare": ["--score-col", "--label-col"],
         "export": ["--score-col"]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(FLAGS)), data=st.data(),
       blank=st.sampled_from(["", " ", "  ", "\t", " \u00a0 ", "\u3000"]))
def test_a_blank_column_name_is_refused_by_every_command(files, command, data, blank):
    flag = data.draw(st.sampled_from(FLAGS[command]))
    res = runner.invoke(app, _commands(files, flag, blank)[command])
    assert res.exit_code == 2, (command, flag, res.stdout, res.stderr)
    first = res.stderr.splitlines()[0]
    assert first.startswith(f"error: {flag} must name a column, got the blank name"), first
    assert res.stdout == ""


def test_export_refuses_score_col_on_a_kclass_map(files):
    for args in (["--score-col", "p_a"], ["--score-col", "score"]):
        res = runner.invoke(app, ["export", str(files / "k.json"), "--sql", *args])
        assert res.exit_code == 2 and res.stdout == ""
        assert res.stderr.startswith("error: --score-col is for binary maps: a K-class map reads --score-cols"), res.stderr


@pytest.mark.parametrize("method", ["temperature", "vector", "dirichlet"])
def test_compare_names_a_kclass_method_on_binary_scores(files, method):
    res = runner.invoke(app, ["compare", str(files / "b.csv"), "-m", "isotonic", "-m", method])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"error: method {method!r} calibrates K class scores, not one score column",
                                       "hint: give the K score columns with --score-cols"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(12, 60), minority=st.integers(1, 3), folds=st.integers(2, 6), seed=st.integers(0, 50),
       flip=st.booleans())
def test_a_fold_without_one_class_is_named_with_what_to_do(tmp_path_factory, n, minority, folds, seed, flip):
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=int)
    y[rng.choice(n, minority, replace=False)] = 1
    if flip:
        y = 1 - y
    path = tmp_path_factory.mktemp("f") / "few.csv"
    path.write_text("score,label\n" + "".join(f"{a!r},{b}\n" for a, b in zip(rng.random(n).tolist(), y)))
    res = runner.invoke(app, ["compare", str(path), "-m", "isotonic", "--folds", str(folds), "--seed", str(seed)])
    if res.exit_code == 0:
        return
    first = res.stderr.splitlines()[0]
    assert "every label is" not in first, first  # the file has both: the fold does not
    name = "negatives" if flip else "positives"
    assert f"of {folds}: its training rows (the other folds) have no {name}" in first, first
    assert ("add rows" in first) if minority == 1 else ("--seed" in first and "--folds" in first), first


def test_force_names_the_file_in_the_way(tmp_path, files):
    import shutil

    parts = tmp_path / "parts"
    parts.mkdir()
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"score": [0.2, 0.7], "label": [0, 1]}), parts / "a.parquet")
    for content in (["notes.txt"], ["b.txt", "a.txt"], ["sub/"]):
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        for name in content:
            (out / name.rstrip("/")).mkdir() if name.endswith("/") else (out / name).write_text("x")
        res = runner.invoke(app, ["apply", str(files / "b.json"), str(parts), "-o", str(out), "--force"])
        assert res.exit_code == 2
        first = sorted(content)[0]
        more = f" (and {len(content) - 1} more)" if len(content) > 1 else ""
        assert f"holds {first}{more} and no .calibcli-output marker" in res.stderr, res.stderr
        assert sorted(p.name for p in out.iterdir()) == sorted(c.rstrip("/") for c in content)  # nothing touched


@pytest.mark.parametrize("closed", [1, 2])
def test_a_closed_output_stream_is_nobody_reading_not_a_traceback(files, tmp_path, closed):
    """`calib ... >&-` or `2>&-`: Python starts with sys.stdout/sys.stderr None; the command runs as
    after a broken pipe (what it would have written goes nowhere), its exit code unchanged."""
    import os
    import subprocess
    import sys

    calib = [sys.executable, "-c", "from calibcli.cli.app import main; main()"]
    other = tmp_path / "other.txt"
    with open(other, "w") as sink:
        def run(*args):
            return subprocess.run([*calib, *args], stdin=subprocess.DEVNULL,
                                  stdout=sink if closed == 2 else None, stderr=sink if closed == 1 else None,
                                  preexec_fn=lambda: os.close(closed), timeout=120)

        assert run("methods").returncode == 0
        assert run("fit", str(files / "b.csv"), "-o", str(tmp_path / "m.json")).returncode == 0
        assert (tmp_path / "m.json").is_file()
        assert run("evaluate", str(files / "b.csv"), "--prob-col", "nope").returncode == 2
    assert "Traceback" not in other.read_text()
