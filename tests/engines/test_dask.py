"""calibcli.engines.dask with the threaded scheduler, against the single-process CLI.

Skipped, with the reason shown by `pytest -ra`, when dask (calibcli[dask]) is missing.
"""

import pyarrow as pa
import pytest

dd = pytest.importorskip("dask.dataframe", reason="dask[dataframe] is not installed (pip install calibcli[dask])")

from engine_contract import *  # noqa: E402,F401,F403 - the shared engine tests
from engine_contract import data  # noqa: E402,F401
from engine_kclass_contract import *  # noqa: E402,F401,F403 - the K-class engine tests
from engine_features_contract import *  # noqa: E402,F401,F403 - maps that read field and feature columns
from repo import REPO

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:The inplace keyword")


@pytest.fixture(scope="module", autouse=True)
def threaded():
    import dask

    with dask.config.set(scheduler="threads", num_workers=2):
        yield


@pytest.fixture
def engine():
    from calibcli.engines import dask as module

    return module


@pytest.fixture
def read():
    # Small partitions so that every test merges several partial summaries.
    return lambda path: dd.read_parquet(path, split_row_groups=False).repartition(npartitions=5)


@pytest.fixture
def collect():
    return lambda df: pa.Table.from_pandas(df.compute(), preserve_index=False)


@pytest.fixture
def native():
    return False


def test_import_calibcli_does_not_import_the_engines():
    import subprocess
    import sys

    code = ("import sys, calibcli, calibcli.cli.app, calibcli.engines; "
            "print(sorted(m for m in ('pyspark', 'dask') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_example_job_runs_end_to_end(tmp_path, capsys):
    """examples/dask_job.py: calibration improves log-loss, ECE and Field-RCE on the test split."""
    import importlib.util
    import json
    from pathlib import Path

    path = REPO / "examples" / "dask_job.py"
    spec = importlib.util.spec_from_file_location("dask_job", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    report = job.main(["--rows", "20000", "--partitions", "4", "--out", str(tmp_path)])
    raw, calibrated = (r["metrics"] for r in report["results"])
    assert 3000 < report["rows"] < 5000 and (tmp_path / "map.json").exists()
    for metric in ("log_loss", "ece", "field_rce"):
        assert calibrated[metric] < raw[metric], metric
    assert json.loads(capsys.readouterr().out)["calibrated"] == calibrated
