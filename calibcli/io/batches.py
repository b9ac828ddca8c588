"""Streaming record batches, for `apply` and `summarize` on data larger than memory.

A text row longer than the read block is read by opening the input again with larger
blocks, the column types of the first read kept and the rows already streamed skipped;
errors name the true row, counted across batches.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from calibcli.io.parquet import PARQUET_BATCH_ROWS, dataset_batches, parquet_batches
from calibcli.io.parsers import cast_strings_batch, close_reader, larger_block, open_text_reader
from calibcli.io.paths import is_parts
from calibcli.io.readerrors import arrow_error, check_header, text_error
from calibcli.io.sources import Source, open_source

BATCH_ROWS = 1 << 17
_STREAM_BLOCK = {"csv": 1 << 22, "tsv": 1 << 22, "jsonl": 1 << 20}


def iter_batches(path: str, fmt: str | None = None, string_columns: tuple[str, ...] = (),
                 dictionary_columns: tuple[str, ...] = (), float_columns: tuple[str, ...] = (),
                 batch_rows: int | None = None) -> tuple[Source, pa.Schema, Iterator[pa.RecordBatch]]:
    """Stream record batches from a score file or stdin, for `apply` on data larger than memory.

    The reader is opened (and the header parsed) before returning, so a bad header fails
    before any output is created. A directory, glob or URI of Parquet parts is read as one
    dataset (`open_dataset`). `dictionary_columns` (among `string_columns`) may come as
    dictionary arrays: a single Parquet file's text columns are read as their stored
    dictionary, which `columns.field_codes` turns into codes without hashing every value.
    `float_columns` of CSV/TSV are read as numbers whatever the first block holds (a block
    of empty cells would otherwise type the column null for the whole stream). `batch_rows`
    caps the rows of a Parquet batch (wide outputs: `calib apply` with K-class maps).
    """
    rows = PARQUET_BATCH_ROWS if batch_rows is None else batch_rows
    if is_parts(path):
        return dataset_batches(path, string_columns, rows)
    source = open_source(path, fmt)
    try:
        if source.format == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(source.stream)
            as_dictionary = [c for c in dictionary_columns if c in pf.schema_arrow.names]
            if as_dictionary:
                pf = pq.ParquetFile(source.stream, read_dictionary=as_dictionary)
                string_columns = tuple(c for c in string_columns if c not in as_dictionary)
            reader: Any = parquet_batches(pf, rows)
            schema = pf.schema_arrow
        else:
            return _text_batches(source, string_columns, float_columns)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise arrow_error(source, exc) from None
    check_header(source, schema)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in schema])

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from (cast_strings_batch(batch, string_columns) for batch in reader)
        except (pa.ArrowException, OSError, EOFError) as exc:
            raise arrow_error(source, exc) from None
        finally:
            close_reader(reader)

    return source, schema, batches()


def _text_batches(source: Source, string_columns: tuple[str, ...], float_columns: tuple[str, ...] = ()
                  ) -> tuple[Source, pa.Schema, Iterator[pa.RecordBatch]]:
    """Stream CSV/TSV/JSON lines. A row longer than the block size (a cell or a JSON line of
    megabytes) is read by opening the input again with larger blocks, the column types of the
    first read kept and the rows already streamed skipped; errors name the true row."""
    block = _STREAM_BLOCK[source.format]
    order = _first_keys(source.head) if source.format == "jsonl" and float_columns else None
    while True:
        try:
            reader = open_text_reader(source.stream, source.format, string_columns, block,
                                       float_columns=float_columns, order=order)
            break
        except (pa.ArrowException, OSError, EOFError) as exc:
            larger = larger_block(block, exc) if source.reopen is not None else None
            if larger is None:
                raise text_error(source, exc, 0, block, block_start=0) from None
            block, source.stream = larger, source.reopen()  # type: ignore[misc]
    raw_schema = reader.schema
    check_header(source, raw_schema)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in raw_schema])

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal reader, block
        done = read = skip = 0  # rows streamed; rows the current reader gave; rows to skip
        try:
            while True:
                try:
                    if reader is None:
                        reader = open_text_reader(source.reopen(), source.format,  # type: ignore[misc]
                                                   string_columns, block, fixed=raw_schema, order=order)
                    for batch in reader:
                        read += batch.num_rows
                        if skip >= batch.num_rows:
                            skip -= batch.num_rows
                            continue
                        if skip:
                            batch, skip = batch.slice(skip), 0
                        yield cast_strings_batch(batch, string_columns)
                        done += batch.num_rows
                    return
                except (pa.ArrowException, OSError, EOFError) as exc:
                    larger = larger_block(block, exc) if source.reopen is not None else None
                    if larger is None:
                        raise text_error(source, exc, done, block, block_start=read,
                                          names=raw_schema.names) from None
                    close_reader(reader)
                    block, skip, read, reader = larger, done, 0, None
        finally:
            close_reader(reader)

    return source, schema, batches()


def _first_keys(head: bytes) -> list[str] | None:
    """The keys of the first JSON line, in order (None when it does not parse as an object)."""
    import json

    try:
        first = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return None
    return list(first) if isinstance(first, dict) else None
