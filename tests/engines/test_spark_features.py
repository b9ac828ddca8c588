"""calibcli.engines.spark applying maps that read field and feature columns (mapInArrow: a
multicalibration or field-aware map has no SQL form), against `calib apply`."""

import os
import sys

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install calibcli[spark])")

from engine_features_contract import *  # noqa: E402,F401,F403 - the shared feature-map engine tests

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this interpreter (with calibcli)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("calibcli-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session


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
