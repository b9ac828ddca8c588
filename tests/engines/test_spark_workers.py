"""The Spark engine's check of its Python workers' interpreter (no Spark session needed):
a session whose workers cannot import pyarrow fails with one clear line, not deep in a worker."""

from __future__ import annotations

import os
import stat
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install calibcli[spark])")

from calibcli.engines import spark as cs  # noqa: E402
from calibcli.errors import UsageError  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_checks(monkeypatch):
    monkeypatch.setattr(cs, "_WORKER_CHECKS", {})


def _without_site(tmp_path):
    """An interpreter that exists but cannot import pyarrow: this Python without site-packages."""
    script = tmp_path / "bare-python"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _df(master: str, python: str | None, conf: dict | None = None):
    context = SimpleNamespace(master=master, pythonExec=python,
                              getConf=lambda: SimpleNamespace(get=lambda key: (conf or {}).get(key)))
    return SimpleNamespace(sparkSession=SimpleNamespace(sparkContext=context))


def test_this_interpreter_passes():
    assert cs.worker_python_problem(sys.executable) is None


def test_an_interpreter_without_pyarrow_is_named(tmp_path):
    problem = cs.worker_python_problem(_without_site(tmp_path))
    assert problem is not None and "pyarrow" in problem and "\n" not in problem


def test_a_missing_interpreter_is_named(tmp_path):
    assert cs.worker_python_problem(str(tmp_path / "no-such-python")) == "which does not exist"


def test_the_default_python3_is_checked_when_nothing_is_set(tmp_path, monkeypatch):
    """No PYSPARK_PYTHON: pyspark starts workers with `python3` from PATH; here one without pyarrow."""
    (tmp_path / "python3").symlink_to(_without_site(tmp_path))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(UsageError) as caught:
        cs.check_python_workers(_df("local[2]", "python3"))
    message = caught.value.message
    assert "'python3'" in message and "pyarrow" in message and "\n" not in message
    assert "PYSPARK_PYTHON" in caught.value.hint


def test_spark_pyspark_python_wins_over_the_environment(tmp_path):
    bare = _without_site(tmp_path)
    with pytest.raises(UsageError, match="bare-python"):
        cs.check_python_workers(_df("local[*]", sys.executable, {"spark.pyspark.python": bare}))
    cs.check_python_workers(_df("local[*]", bare, {"spark.pyspark.python": sys.executable}))


def test_a_good_interpreter_and_a_cluster_master_pass(tmp_path):
    cs.check_python_workers(_df("local[2]", sys.executable))
    cs.check_python_workers(_df("spark://cluster:7077", _without_site(tmp_path)))  # executors not visible here
