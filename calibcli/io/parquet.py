"""Parquet files and datasets of parts (a directory, glob or URI: `paths`): batches decoded a
row group at a time, one batch ahead; whole datasets; row counts from metadata."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pyarrow as pa

from calibcli.errors import InputError
from calibcli.io.parsers import cast_strings, cast_strings_batch
from calibcli.io.paths import display_name, is_parts, is_uri, list_parts, open_dataset
from calibcli.io.readerrors import check_header
from calibcli.io.sources import Source, format_from_path

# Parquet is read in batches of up to a million rows (a default row group), so that what apply
# writes keeps row groups of that size; docs/algorithms.md, "calib fit end to end", says why.
PARQUET_BATCH_ROWS = 1 << 20


def parquet_batches(pf: Any, batch_rows: int = PARQUET_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Record batches of a Parquet file, one row group at a time, decoded one batch ahead.

    A single `iter_batches` over the whole file keeps a few bytes a row allocated until it
    ends, so memory would grow with the file; a fresh iterator per row group stays flat. A
    worker thread decodes the next batch (pyarrow releases the GIL) while the caller works
    on this one.
    """
    from concurrent.futures import ThreadPoolExecutor

    def groups() -> Iterator[pa.RecordBatch]:
        for i in range(pf.num_row_groups):
            yield from pf.iter_batches(batch_size=batch_rows, row_groups=[i])

    decoded = groups()
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(next, decoded, None)
        while (batch := ahead.result()) is not None:
            ahead = pool.submit(next, decoded, None)
            yield batch


def dataset_batches(path: str, string_columns: tuple[str, ...], batch_rows: int = PARQUET_BATCH_ROWS
                     ) -> tuple[Source, pa.Schema, Iterator[pa.RecordBatch]]:
    dataset = open_dataset(path)
    source = Source(display_name(path), "parquet", dataset)
    check_header(source, dataset.schema)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in dataset.schema])

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in dataset.to_batches(batch_size=batch_rows, batch_readahead=1,
                                            fragment_readahead=1):
                yield cast_strings_batch(batch, string_columns)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{source.name}: cannot read the Parquet parts ({str(exc).splitlines()[0]})") from None

    return source, schema, batches()


def dataset_table(path: str, string_columns: tuple[str, ...]) -> pa.Table:
    """A whole dataset of Parquet parts in memory."""
    dataset = open_dataset(path)
    check_header(Source(display_name(path), "parquet", dataset), dataset.schema)
    try:
        return cast_strings(dataset.to_table(), string_columns)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{display_name(path)}: cannot read the Parquet parts ({str(exc).splitlines()[0]})") from None


def parquet_rows(path: str) -> int | None:
    """Row count from Parquet metadata (file, directory or glob of parts); None for other inputs."""
    import pyarrow.parquet as pq

    if path == "-" or is_uri(path):
        return None
    files = [p for p, _ in list_parts(path)] if is_parts(path) else [path]
    if any(format_from_path(f) != "parquet" or not os.path.isfile(f) for f in files):
        return None
    try:
        return sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    except (pa.ArrowException, OSError):
        return None
