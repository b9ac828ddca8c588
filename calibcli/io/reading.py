"""Reading score files: CSV, TSV, JSON lines and Parquet, from files, stdin, URIs or parts.

- Format: `--format`, else the extension (`.csv`, `.tsv`/`.tab`, `.jsonl`/`.ndjson`,
  `.parquet`/`.pq`, each optionally `.gz` for the text formats), else sniffed from the
  first bytes: Parquet's `PAR1` magic, gzip's magic (then sniffed again), a `{` for JSON
  lines, otherwise CSV, or TSV when the header line has tabs and no commas.
- UTF-8 BOM and CRLF line ends are accepted. Columns of any numeric or boolean type are
  read as float64.
- Errors name the file, the column and the 1-based data row (header not counted) and the
  offending value; they are `InputError`s, which the CLI prints as one line with exit 2.
- A directory, glob or URI of Parquet parts is read as one dataset (`paths`).
"""

from __future__ import annotations

import contextlib
import gzip
import io as _io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

import pyarrow as pa

from calibcli.errors import CalibError, InputError, UsageError, shown
from calibcli.io.paths import display_name, is_parts, is_uri, list_parts, open_dataset, open_uri

FORMATS = ("csv", "tsv", "jsonl", "parquet")
_EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet",
}
_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_BYTES = 1 << 16
BATCH_ROWS = 1 << 17
# Parquet is read in batches of up to a million rows (a default row group): smaller batches
# make small row groups on write and cost 2x in time; 3 float64 columns are ~25 MB a batch.
PARQUET_BATCH_ROWS = 1 << 20


def _pc():
    """pyarrow.compute, imported on first use: its import costs ~0.05 s that numeric Parquet
    columns never need."""
    import pyarrow.compute as pc

    return pc


def format_from_path(path: str) -> str | None:
    """The format an extension implies (`.csv.gz` -> csv), or None."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return _EXTENSIONS.get(suffixes[-1]) if suffixes else None


def check_format(fmt: str | None) -> str | None:
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown format {shown(fmt)}", hint="formats: " + ", ".join(FORMATS))
    return fmt


def sniff_format(head: bytes) -> str:
    """Guess the format of (decompressed) leading bytes."""
    if head[:4] == _PARQUET_MAGIC:
        return "parquet"
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text[:1] == b"{":
        return "jsonl"
    first_line = text.split(b"\n", 1)[0]
    if b"\t" in first_line and b"," not in first_line:
        return "tsv"
    return "csv"


# ---------------------------------------------------------------------------- raw bytes


def read_bytes(path: str, noun: str = "file", error: type[CalibError] = InputError,
               limit: int | None = None) -> bytes:
    """All bytes of a file or of stdin, at most `limit` (a device such as /dev/zero never ends).

    `noun` names the file in messages ("map file"); `error` is the exception class to raise
    for a missing, unreadable or oversized file (MapError for maps).
    """
    fh = sys.stdin.buffer if path == "-" else _open_binary(path, noun, error)
    try:
        data = fh.read() if limit is None else fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{display_name(path)}: cannot read ({exc.strerror})") from None
    finally:
        if path != "-":
            fh.close()
    if limit is not None and len(data) > limit:
        raise error(f"{display_name(path)}: more than {limit >> 20} MiB, the most a {noun} may hold")
    return data


def _open_binary(path: str, noun: str = "file", error: type[CalibError] = InputError) -> IO[bytes]:
    """Open a file for reading; a missing or unreadable file is `error`."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise error(f"{path}: no such {noun}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected a {noun}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None


# ---------------------------------------------------------------------------- opening


class _Prefixed(_io.RawIOBase):
    """A read-only stream: already-read `prefix` bytes, then the rest of `stream`."""

    def __init__(self, prefix: bytes, stream: IO[bytes]):
        self._prefix = memoryview(prefix)
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self._prefix:
            n = min(len(buf), len(self._prefix))
            buf[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._stream.read(len(buf))
        buf[: len(data)] = data
        return len(data)


@dataclass
class Source:
    """An opened input: its display name, format and a binary stream (or Parquet buffer)."""

    name: str
    format: str
    stream: Any  # binary file-like for text formats; pyarrow buffer or path for Parquet
    head: bytes = b""  # the first bytes of a text format (decompressed)


def _read_head(fh: IO[bytes]) -> bytes:
    chunks, size = [], 0
    while size < _SNIFF_BYTES:
        chunk = fh.read(_SNIFF_BYTES - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _refuse_utf16(name: str, head: bytes) -> None:
    """UTF-16 text (Excel's "Unicode text" export) would parse as garbage: say so instead."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(f"{name}: the file is UTF-16 text, calib reads UTF-8",
                         hint="convert it, e.g. `iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8.csv`")


def open_source(path: str, fmt: str | None = None) -> Source:
    """Open a score file or stdin for reading, deciding its format and compression."""
    name = display_name(path)
    fmt = check_format(fmt) or (format_from_path(path) if path != "-" else None)
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    elif is_uri(path):
        raw = open_uri(path)
    else:
        raw = _open_binary(path)
    head = _read_head(raw)
    if not head:
        raise InputError(f"{name}: empty input (no header, no rows)")
    if head[:2] == _GZIP_MAGIC:
        stream: IO[bytes] = gzip.GzipFile(fileobj=_Prefixed(head, raw))  # type: ignore[arg-type]
        try:
            inner = _read_head(stream)
        except (OSError, EOFError) as exc:
            raise InputError(f"{name}: corrupt gzip data ({exc})") from None
        if not inner:
            raise InputError(f"{name}: empty input (no header, no rows)")
        _refuse_utf16(name, inner)
        fmt = fmt or sniff_format(inner)
        return Source(name, fmt, _io.BufferedReader(_Prefixed(inner, stream)), inner)
    _refuse_utf16(name, head)
    fmt = fmt or sniff_format(head)
    if fmt == "parquet":
        if path != "-" and (is_uri(path) or os.path.isfile(path)):
            raw.close()
            return Source(name, fmt, open_uri(path) if is_uri(path) else path)
        # stdin, a FIFO or a device cannot be read twice or seeked: read it whole, once
        try:
            rest = raw.read()
        except OSError as exc:
            raise InputError(f"{name}: cannot read ({exc.strerror})") from None
        finally:
            if path != "-":
                raw.close()
        return Source(name, fmt, pa.py_buffer(head + rest))
    return Source(name, fmt, _io.BufferedReader(_Prefixed(head, raw)), head)


# ---------------------------------------------------------------------------- tables


def _csv_options(fmt: str, string_columns: tuple[str, ...], block_size: int | None = None,
                 float_columns: tuple[str, ...] = ()):
    import pyarrow.csv as pacsv

    read = pacsv.ReadOptions(block_size=block_size) if block_size else pacsv.ReadOptions()
    parse = pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",")
    convert = pacsv.ConvertOptions(
        column_types={**{c: pa.float64() for c in float_columns}, **{c: pa.string() for c in string_columns}},
        true_values=["true", "True", "TRUE"],
        false_values=["false", "False", "FALSE"],
        null_values=[""],  # only an empty cell is missing: "NaN"/"NA" stay visible in messages
    )
    return read, parse, convert


def _arrow_error(source: Source, exc: Exception) -> InputError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if source.format == "parquet":
        return InputError(f"{source.name}: not a readable Parquet file ({text})")
    if "Empty CSV file" in text:
        return InputError(f"{source.name}: empty input (no header, no rows)")
    ragged = re.search(r"Expected (\d+) columns, got (\d+): (.*)", text)
    if ragged:
        want, got, row = ragged.groups()
        other = next((d for d in ";|" if d in row), None)
        hint = (f"is the file delimited by {shown(other)}? calib reads comma-separated CSV and tab-separated TSV"
                if other else "check the delimiter and quoting of that row")
        return InputError(f"{source.name}: a row has {got} fields but the header has {want}: {shown(row[:80])}",
                          hint=hint)
    return InputError(f"{source.name}: cannot parse as {source.format.upper()}: {text}")


def _header(source: Source) -> list[str]:
    """The column names on the first line of a CSV/TSV (for messages before pyarrow has them)."""
    import csv

    line = source.head.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r")
    return next(csv.reader([line], delimiter="\t" if source.format == "tsv" else ","), [])


def _late_type_error(source: Source, names: list[str], done: int, exc: Exception) -> InputError | None:
    """A streamed CSV whose column types came from the first block and a later value breaks them.

    pyarrow names neither the column nor the row; we know the column and that the row lies after
    the `done` rows already streamed.
    """
    found = re.search(r"In CSV column #(\d+): CSV conversion error to (\w+): invalid value '(.*)'", str(exc))
    if not found:
        return None
    index, typ, value = int(found.group(1)), found.group(2), found.group(3)
    column = repr(names[index]) if index < len(names) else f"#{index + 1}"
    where = f"a row after row {done}" if done else "a row"
    return InputError(f"{source.name}: column {column}, {where}: {shown(value)} is not "
                      f"{'a number' if typ in ('double', 'int64', 'float') else 'of type ' + typ}"
                      + (" like the rows before it" if done else ""),
                      hint="find it with: grep -n -F -- " + shlex.quote(value) + " "
                      + ("FILE" if source.name == "<stdin>" else shlex.quote(source.name)))


def _check_header(source: Source, schema: pa.Schema) -> None:
    """Column names must be UTF-8 (pyarrow only fails later, with a bare UnicodeDecodeError)."""
    try:
        schema.names
    except UnicodeDecodeError:
        raise InputError(f"{source.name}: the header is not UTF-8 text",
                         hint="is it a text file? calib reads UTF-8 CSV, TSV, JSON lines and Parquet") from None


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
        dataset = open_dataset(path)
        try:
            return _cast_strings(dataset.to_table(), string_columns)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{display_name(path)}: cannot read the Parquet parts ({str(exc).splitlines()[0]})") from None
    source = open_source(path, fmt)
    try:
        if source.format == "parquet":
            import pyarrow.parquet as pq

            table = pq.ParquetFile(source.stream).read()  # read_table would import pyarrow.dataset (0.3 s)
            table = _cast_strings(table, string_columns)
        elif source.format == "jsonl":
            import pyarrow.json as pajson

            table = _cast_strings(pajson.read_json(source.stream), string_columns)
        else:
            import pyarrow.csv as pacsv

            read, parse, convert = _csv_options(source.format, string_columns)
            table = pacsv.read_csv(source.stream, read_options=read, parse_options=parse,
                                   convert_options=convert)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise _arrow_error(source, exc) from None
    _check_header(source, table.schema)
    return table


def iter_batches(path: str, fmt: str | None = None, string_columns: tuple[str, ...] = (),
                 dictionary_columns: tuple[str, ...] = (), float_columns: tuple[str, ...] = ()
                 ) -> tuple[Source, pa.Schema, Iterator[pa.RecordBatch]]:
    """Stream record batches from a score file or stdin, for `apply` on data larger than memory.

    The reader is opened (and the header parsed) before returning, so a bad header fails
    before any output is created. A directory, glob or URI of Parquet parts is read as one
    dataset (`open_dataset`). `dictionary_columns` (among `string_columns`) may come as
    dictionary arrays: a single Parquet file's text columns are read as their stored
    dictionary, which `columns.field_codes` turns into codes without hashing every value.
    `float_columns` of CSV/TSV are read as numbers whatever the first block holds (a block
    of empty cells would otherwise type the column null for the whole stream).
    """
    if is_parts(path):
        return _dataset_batches(path, string_columns)
    source = open_source(path, fmt)
    try:
        if source.format == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(source.stream)
            as_dictionary = [c for c in dictionary_columns if c in pf.schema_arrow.names]
            if as_dictionary:
                pf = pq.ParquetFile(source.stream, read_dictionary=as_dictionary)
                string_columns = tuple(c for c in string_columns if c not in as_dictionary)
            reader: Any = _parquet_batches(pf)
            schema = pf.schema_arrow
        elif source.format == "jsonl":
            import pyarrow.json as pajson

            order = _first_keys(source.head) if float_columns else None
            if order is None:
                reader = pajson.open_json(source.stream)
            else:  # pyarrow puts the explicit fields first: back into the file's order, batch by batch
                parse = pajson.ParseOptions(explicit_schema=pa.schema([(c, pa.float64()) for c in float_columns]),
                                            unexpected_field_behavior="infer")
                reader = _reordered(pajson.open_json(source.stream, parse_options=parse), order)
            schema = reader.schema
        else:
            import pyarrow.csv as pacsv

            read, parse, convert = _csv_options(source.format, string_columns, block_size=1 << 22,
                                                float_columns=float_columns)
            reader = pacsv.open_csv(source.stream, read_options=read, parse_options=parse,
                                    convert_options=convert)
            schema = reader.schema
    except (pa.ArrowException, OSError, EOFError) as exc:
        typed = _late_type_error(source, _header(source), 0, exc) if float_columns else None
        raise typed or _arrow_error(source, exc) from None
    _check_header(source, schema)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in schema])

    def batches() -> Iterator[pa.RecordBatch]:
        done = 0
        try:
            for batch in reader:
                yield _cast_strings_batch(batch, string_columns)
                done += batch.num_rows
        except (pa.ArrowException, OSError, EOFError) as exc:
            raise _late_type_error(source, schema.names, done, exc) or _arrow_error(source, exc) from None
        finally:
            _close_reader(reader)

    return source, schema, batches()


def _first_keys(head: bytes) -> list[str] | None:
    """The keys of the first JSON line, in order (None when it does not parse as an object)."""
    import json

    try:
        first = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return None
    return list(first) if isinstance(first, dict) else None


class _reordered:
    """A JSON batch reader whose columns come in `order` (the first line's), others after."""

    def __init__(self, reader: Any, order: list[str]):
        self._reader = reader
        names = reader.schema.names
        self._names = [n for n in order if n in names] + [n for n in names if n not in order]
        self.schema = pa.schema([reader.schema.field(n) for n in self._names])

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self._reader:
            yield batch.select(self._names)

    def close(self) -> None:
        _close_reader(self._reader)


def _close_reader(reader: Any) -> None:
    """Stop a streaming reader's background threads now, not at interpreter exit (where a
    still-running reader thread aborts the process)."""
    with contextlib.suppress(Exception):
        close = getattr(reader, "close", None)
        if close is not None:
            close()


def _parquet_batches(pf: Any) -> Iterator[pa.RecordBatch]:
    """Record batches of a Parquet file, one row group at a time, decoded one batch ahead.

    A single `iter_batches` over the whole file keeps a few bytes a row allocated until it
    ends, so memory would grow with the file; a fresh iterator per row group stays flat. A
    worker thread decodes the next batch (pyarrow releases the GIL) while the caller works
    on this one.
    """
    from concurrent.futures import ThreadPoolExecutor

    def groups() -> Iterator[pa.RecordBatch]:
        for i in range(pf.num_row_groups):
            yield from pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=[i])

    decoded = groups()
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(next, decoded, None)
        while (batch := ahead.result()) is not None:
            ahead = pool.submit(next, decoded, None)
            yield batch

def _cast_strings(table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    for name in columns:
        if name in table.column_names and table.schema.field(name).type != pa.string():
            i = table.column_names.index(name)
            table = table.set_column(i, name, _pc().cast(table.column(name), pa.string()))
    return table


def _cast_strings_batch(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    if not any(c in batch.schema.names for c in columns):
        return batch
    return pa.RecordBatch.from_arrays(
        [_pc().cast(col, pa.string()) if name in columns and col.type != pa.string() else col
         for name, col in zip(batch.schema.names, batch.columns)],
        names=batch.schema.names,
    )


def _dataset_batches(path: str, string_columns: tuple[str, ...]
                     ) -> tuple[Source, pa.Schema, Iterator[pa.RecordBatch]]:
    dataset = open_dataset(path)
    source = Source(display_name(path), "parquet", dataset)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in dataset.schema])

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in dataset.to_batches(batch_size=PARQUET_BATCH_ROWS, batch_readahead=1,
                                            fragment_readahead=1):
                yield _cast_strings_batch(batch, string_columns)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{source.name}: cannot read the Parquet parts ({str(exc).splitlines()[0]})") from None

    return source, schema, batches()


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
