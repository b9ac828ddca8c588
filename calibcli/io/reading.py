"""Whole-table reads: a score file, stdin or a dataset of Parquet parts in memory (fit needs
every row).

- A row longer than the read block (a cell or JSON line of megabytes) is read by reading
  the input again with larger blocks; stdin and pipes are kept in memory as they are read
  (`_Kept`), up to `MAX_PIPE_BLOCK` a row.
- `prefetching` reads a regular file in a background thread while the CLI imports the rest.

Opening and formats: `sources`; streaming: `batches`; Parquet: `parquet`; errors naming the
row: `readerrors`.
"""

from __future__ import annotations

import contextlib
import io as _io
import os
from typing import IO, Any, Iterator

import pyarrow as pa

from calibcli.io.parquet import dataset_table
from calibcli.io.parsers import MAX_BLOCK, cast_strings, larger_block, parse_text
from calibcli.io.paths import is_parts, is_uri
from calibcli.io.readerrors import arrow_error, check_header, text_error
from calibcli.io.sources import Source, open_source


_prefetched: dict[tuple, Any] = {}  # prefetch key -> Future of read_table's result


def _prefetch_key(path: str, fmt: str | None, string_columns: tuple[str, ...]) -> tuple | None:
    """What identifies a read of a regular local file (None for anything else)."""
    if path == "-" or is_uri(path) or not os.path.isfile(path):
        return None
    return os.path.abspath(path), fmt, tuple(string_columns)


@contextlib.contextmanager
def prefetching(path: str, fmt: str | None = None, string_columns: tuple[str, ...] = ()) -> Iterator[None]:
    """Read a regular score file in a background thread while the block runs; `read_table`
    with the same arguments inside the block takes that result (or its error). pyarrow
    reads without the GIL, so the CLI's remaining imports run meanwhile. Stdin, URIs, part
    folders and special files are left to `read_table`. An unused result is dropped on exit."""
    key = _prefetch_key(path, fmt, string_columns)
    if key is not None and key not in _prefetched:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1)
        _prefetched[key] = pool.submit(_read_table, path, fmt, tuple(string_columns))
        pool.shutdown(wait=False)
    try:
        yield
    finally:
        if key is not None:
            _prefetched.pop(key, None)


def read_table(path: str, fmt: str | None = None, string_columns: tuple[str, ...] = ()) -> pa.Table:
    """Read a whole score file (or dataset of Parquet parts) into memory (fit needs every row)."""
    key = _prefetch_key(path, fmt, string_columns) if _prefetched else None
    pending = _prefetched.pop(key, None) if key is not None else None
    if pending is not None:
        return pending.result()
    return _read_table(path, fmt, string_columns)


def _read_table(path: str, fmt: str | None, string_columns: tuple[str, ...]) -> pa.Table:
    if is_parts(path):
        return dataset_table(path, string_columns)
    source = open_source(path, fmt)
    try:
        if source.format == "parquet":
            import pyarrow.parquet as pq

            table = pq.ParquetFile(source.stream).read()  # read_table would import pyarrow.dataset
            table = cast_strings(table, string_columns)
        else:
            return _read_text_table(source, string_columns)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise arrow_error(source, exc) from None
    check_header(source, table.schema)
    return table


_BLOCK = {"csv": 1 << 20, "tsv": 1 << 20, "jsonl": 1 << 20}  # pyarrow's default block sizes
MAX_PIPE_BLOCK = 1 << 26  # stdin and pipes are kept in memory to be read again: /dev/zero never ends


class _Kept:
    """A stream whose bytes are kept as they are read, so it can be read again from the start
    (`open`): stdin and pipes, for a whole-table read (the table holds every row anyway)."""

    def __init__(self, stream: IO[bytes]):
        self.stream = stream
        self.data = bytearray()

    def open(self) -> IO[bytes]:
        return _io.BufferedReader(_KeptReader(self))


class _KeptReader(_io.RawIOBase):
    def __init__(self, kept: _Kept):
        self._kept = kept
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        kept = self._kept
        if self._pos >= len(kept.data):
            chunk = kept.stream.read(len(buf))
            if not chunk:
                return 0
            kept.data += chunk
        n = min(len(buf), len(kept.data) - self._pos)
        buf[:n] = kept.data[self._pos:self._pos + n]
        self._pos += n
        return n


def _read_text_table(source: Source, string_columns: tuple[str, ...]) -> pa.Table:
    """A whole CSV, TSV or JSON lines input; a row longer than the block size is read by
    reading again with larger blocks (up to `MAX_BLOCK`, `MAX_PIPE_BLOCK` for stdin and
    pipes, whose bytes are kept as they are read)."""
    limit = MAX_BLOCK
    if source.reopen is None:
        kept = _Kept(source.stream)
        source = Source(source.name, source.format, kept.open(), kept.open)
        limit = MAX_PIPE_BLOCK
    block = _BLOCK[source.format]
    while True:
        try:
            table = parse_text(source.stream, source.format, string_columns, block)
            break
        except (pa.ArrowException, OSError, EOFError) as exc:
            larger = larger_block(block, exc, limit)
            if larger is None:
                raise text_error(source, exc, 0, block, limit=limit) from None
            block, source.stream = larger, source.reopen()  # type: ignore[misc]
    check_header(source, table.schema)
    return table
