"""calibcli.engines.dask applying maps that read field and feature columns, against `calib apply`."""

import pyarrow as pa
import pytest

dd = pytest.importorskip("dask.dataframe", reason="dask[dataframe] is not installed (pip install calibcli[dask])")

from engine_features_contract import *  # noqa: E402,F401,F403 - the shared feature-map engine tests

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
    return lambda path: dd.read_parquet(path, split_row_groups=False).repartition(npartitions=4)


@pytest.fixture
def collect():
    return lambda df: pa.Table.from_pandas(df.compute(), preserve_index=False)
