"""Reading score files: CSV, TSV, JSON lines and Parquet, from files, stdin, URIs or parts.

- Format: `--format`, else the extension (`.csv`, `.tsv`/`.tab`, `.jsonl`/`.ndjson`,
  `.parquet`/`.pq`, each optionally `.gz` for the text formats), else sniffed from the
  first bytes: Parquet's `PAR1` magic, gzip's magic (then sniffed again), a `{` for JSON
  lines, otherwise CSV, or TSV when the header line has tabs and no commas.
- UTF-8 BOM and CRLF line ends are accepted. Columns of any numeric or boolean type are
  read as float64.
- Errors name the file, the column and the 1-based data row (header not counted, counted
  across read blocks) and the offending value; they are `InputError`s, which the CLI prints
  as one line with exit 2. Column names must be unique (`_check_header`).
- A row longer than the read block (a cell or JSON line of megabytes) is read by reading
  the input again with larger blocks; stdin is kept in memory for whole-table reads.
- A directory, glob or URI of Parquet parts is read as one dataset (`paths`).
"""

from __future__ import annotations

import contextlib
import gzip
import io as _io
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

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
    """An opened input: its display name, format and a binary stream (or Parquet buffer).

    `reopen`, for text read from a regular file or URI, opens the same (decompressed) bytes
    again from the start: a read retried with a larger block size, or an error's row found.
    """

    name: str
    format: str
    stream: Any  # binary file-like for text formats; pyarrow buffer or path for Parquet
    reopen: Callable[[], IO[bytes]] | None = None
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
        return Source(name, fmt, _io.BufferedReader(_Prefixed(inner, stream)), _reopener(path, fmt), inner)
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
    return Source(name, fmt, _io.BufferedReader(_Prefixed(head, raw)), _reopener(path, fmt), head)


def _reopener(path: str, fmt: str) -> Callable[[], IO[bytes]] | None:
    """How to read a regular file or URI's text again (None for stdin, pipes and devices)."""
    if path == "-" or not (is_uri(path) or os.path.isfile(path)):
        return None
    return lambda: open_source(path, fmt).stream


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


def _late_type_error(source: Source, names: list[str], done: int, exc: Exception) -> InputError | None:
    """A streamed CSV whose column types came from the first block and a later value breaks them.

    pyarrow names neither the column nor the row; the input is read again to find the first
    row past the `done` rows already streamed that holds the value (`a row after row N` when
    it cannot be read again).
    """
    found = re.search(r"In CSV column #(\d+): CSV conversion error to (\w+): invalid value '(.*)'", str(exc))
    if not found:
        return None
    index, typ, value = int(found.group(1)), found.group(2), found.group(3)
    row = _find_row(source, done, lambda fields, header: len(fields) > index and fields[index] == value)
    names = names or _header(source)
    column = shown(names[index]) if index < len(names) else f"#{index + 1}"
    where = f"row {row}" if row is not None else f"a row after row {done}" if done else "a row"
    return InputError(f"{source.name}: column {column}, {where}: {shown(value)} is not "
                      f"{'a number' if typ in ('double', 'int64', 'float') else 'of type ' + typ}"
                      + (" like the rows before it" if done else ""),
                      hint="find it with: grep -n -F -- " + shlex.quote(value) + " "
                      + ("FILE" if source.name == "<stdin>" else shlex.quote(source.name)))


def _check_header(source: Source, schema: pa.Schema) -> None:
    """Column names must be UTF-8 (pyarrow only fails later, with a bare UnicodeDecodeError)
    and unique: a name given twice would make `--score-col` ambiguous and the rows `apply`
    passes through (JSON objects with a key twice), so it is refused for every command."""
    try:
        names = schema.names
    except UnicodeDecodeError:
        raise InputError(f"{source.name}: the header is not UTF-8 text",
                         hint="is it a text file? calib reads UTF-8 CSV, TSV, JSON lines and Parquet") from None
    if len(set(names)) != len(names):
        name = next(n for i, n in enumerate(names) if n in names[:i])
        raise InputError(f"{source.name}: column {shown(name)} appears {names.count(name)} times in the header",
                         hint="column names must be unique: rename or drop the copies")


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
        _check_header(Source(display_name(path), "parquet", dataset), dataset.schema)
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
        else:
            return _read_text_table(source, string_columns)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise _arrow_error(source, exc) from None
    _check_header(source, table.schema)
    return table


_BLOCK = {"csv": 1 << 20, "tsv": 1 << 20, "jsonl": 1 << 20}  # pyarrow's default block sizes
_STREAM_BLOCK = {"csv": 1 << 22, "tsv": 1 << 22, "jsonl": 1 << 20}
MAX_BLOCK = 1 << 30
MAX_PIPE_BLOCK = 1 << 26  # stdin and pipes are kept in memory to be read again: /dev/zero never ends


def _larger_block(block: int, exc: Exception, limit: int = MAX_BLOCK) -> int | None:
    """The block size to retry with when a row did not fit in one block (a cell or a JSON line
    of megabytes), or None for any other error or once past `limit`."""
    if "straddl" not in str(exc) or block >= limit:
        return None
    return min(block * 16, limit)


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
            table = _parse_text(source.stream, source.format, string_columns, block)
            break
        except (pa.ArrowException, OSError, EOFError) as exc:
            larger = _larger_block(block, exc, limit)
            if larger is None:
                raise _text_error(source, exc, 0, limit=limit) from None
            block, source.stream = larger, source.reopen()  # type: ignore[misc]
    _check_header(source, table.schema)
    return table


def _parse_text(stream: Any, fmt: str, string_columns: tuple[str, ...], block: int) -> pa.Table:
    if fmt == "jsonl":
        import pyarrow.json as pajson

        return _cast_strings(pajson.read_json(stream, read_options=pajson.ReadOptions(block_size=block)),
                             string_columns)
    import pyarrow.csv as pacsv

    read, parse, convert = _csv_options(fmt, string_columns, block_size=block)
    return pacsv.read_csv(stream, read_options=read, parse_options=parse, convert_options=convert)


def _open_text_reader(stream: Any, fmt: str, string_columns: tuple[str, ...], block: int,
                      fixed: pa.Schema | None = None, float_columns: tuple[str, ...] = (),
                      order: list[str] | None = None) -> Any:
    """A streaming CSV/TSV/JSON lines reader; `fixed` keeps the column types of a first read,
    `float_columns` are read as numbers whatever the first block holds, and a JSON reader
    gives its columns in `order` (the first line's keys) when it has one."""
    if fmt == "jsonl":
        import pyarrow.json as pajson

        if fixed is not None:
            parse = pajson.ParseOptions(explicit_schema=fixed, unexpected_field_behavior="error")
        elif float_columns:
            parse = pajson.ParseOptions(explicit_schema=pa.schema([(c, pa.float64()) for c in float_columns]),
                                        unexpected_field_behavior="infer")
        else:
            parse = None
        reader = pajson.open_json(stream, read_options=pajson.ReadOptions(block_size=block), parse_options=parse)
        # pyarrow puts the explicit fields first: back into the file's order, batch by batch
        return _reordered(reader, order) if order is not None and (fixed is not None or float_columns) else reader
    import pyarrow.csv as pacsv

    read, parse, convert = _csv_options(fmt, string_columns, block_size=block, float_columns=float_columns)
    if fixed is not None:
        convert.column_types = {f.name: f.type for f in fixed}
    return pacsv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert)


def _data_rows(stream: IO[bytes], fmt: str) -> Iterator[tuple[int, Any]]:
    """(1-based data row, its fields or JSON text) of a text input, as pyarrow counts rows
    (empty lines skipped); for CSV/TSV the header comes first as row 0. Error path only."""
    text = _io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")
    row = 0
    if fmt == "jsonl":
        for line in text:
            if line.strip():
                row += 1
                yield row, line
        return
    import csv

    csv.field_size_limit(max(csv.field_size_limit(), (1 << 31) - 1))
    for fields in csv.reader(text, delimiter="\t" if fmt == "tsv" else ","):
        if fields or row == 0:
            yield row, fields
            row += 1


def _find_row(source: Source, after: int, bad: Callable[[Any, Any], bool]) -> int | None:
    """The first data row past `after` for which `bad(fields, header)` holds, reading the input
    again (None when it cannot be read again or no row matches)."""
    if source.reopen is None:
        return None
    import csv

    try:
        rows = _data_rows(source.reopen(), source.format)
        header = None if source.format == "jsonl" else next(rows)[1]
        for row, fields in rows:
            if row > after and bad(fields, header):
                return row
    except (OSError, EOFError, ValueError, csv.Error, InputError):
        return None
    return None


def _header(source: Source) -> list[str]:
    """The header row of a CSV/TSV input: read again, else from its first bytes ([] when
    neither can give it)."""
    try:
        stream = source.reopen() if source.reopen is not None else _io.BytesIO(source.head)
        return list(next(_data_rows(stream, source.format))[1])
    except (OSError, EOFError, ValueError, StopIteration):
        return []


def _bad_json(line: str, header: Any) -> bool:
    try:
        return not isinstance(json.loads(line), dict)
    except ValueError:
        return True


def _text_error(source: Source, exc: Exception, done: int, block_start: int | None = None,
                names: list[str] | None = None, limit: int = MAX_BLOCK) -> InputError:
    """A CSV/TSV/JSON lines read error naming the true 1-based data row when it can be found.

    pyarrow counts JSON rows from 0 within a block (`block_start`: the rows before the
    failing block, when streaming) and names no row for a ragged CSV row or a late
    conversion error; the row is then found by reading the input again.
    """
    text = str(exc)
    if "straddl" in text:
        if source.reopen is None:
            return InputError(f"{source.name}: a row after row {done} does not fit in a read block of "
                              f"{_STREAM_BLOCK[source.format] >> 20} MiB, and a pipe cannot be read again "
                              "with a larger one", hint="give the file's path instead of a pipe")
        return InputError(f"{source.name}: a row after row {done} is longer than {limit >> 20} MiB"
                          + (", the longest read from a pipe" if limit < MAX_BLOCK else ""),
                          hint="is it a text file? check the quoting of that row")
    if source.format == "jsonl":
        found = re.search(r"^(JSON parse error: .*?) in row (\d+)$", text.strip().splitlines()[0] if text.strip() else "")
        if found:
            row = (block_start + int(found.group(2)) + 1 if block_start is not None
                   else _find_row(source, done, _bad_json))
            where = f"row {row}" if row is not None else f"a row after row {done}"
            return InputError(f"{source.name}: {where}: {found.group(1)}")
        if "unexpected field" in text and names:
            known = set(names)
            row = _find_row(source, done, lambda line, header: not _bad_json(line, header)
                            and not set(json.loads(line)) <= known)
            where = f"row {row}" if row is not None else f"a row after row {done}"
            return InputError(f"{source.name}: {where} has a key the first rows do not have",
                              hint="calib streams JSON lines with the keys of the first rows: "
                              "give every row the same keys")
        return _arrow_error(source, exc)
    late = _late_type_error(source, names or [], done, exc)
    if late is not None:
        return late
    error = _arrow_error(source, exc)
    if re.search(r"Expected \d+ columns, got \d+", text):
        row = _find_row(source, done, lambda fields, header: len(fields) != len(header))
        where = f"row {row}" if row is not None else f"a row after row {done}" if done else None
        if where is not None:
            error = InputError(error.message.replace(f"{source.name}: a row has", f"{source.name}: {where} has", 1),
                               hint=error.hint)
    return error


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
        else:
            return _text_batches(source, string_columns, float_columns)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise _arrow_error(source, exc) from None
    _check_header(source, schema)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in schema])

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from (_cast_strings_batch(batch, string_columns) for batch in reader)
        except (pa.ArrowException, OSError, EOFError) as exc:
            raise _arrow_error(source, exc) from None
        finally:
            _close_reader(reader)

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
            reader = _open_text_reader(source.stream, source.format, string_columns, block,
                                       float_columns=float_columns, order=order)
            break
        except (pa.ArrowException, OSError, EOFError) as exc:
            larger = _larger_block(block, exc) if source.reopen is not None else None
            if larger is None:
                raise _text_error(source, exc, 0, block_start=0) from None
            block, source.stream = larger, source.reopen()  # type: ignore[misc]
    raw_schema = reader.schema
    _check_header(source, raw_schema)
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in string_columns else f
                        for f in raw_schema])

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal reader, block
        done = read = skip = 0  # rows streamed; rows the current reader gave; rows to skip
        try:
            while True:
                try:
                    if reader is None:
                        reader = _open_text_reader(source.reopen(), source.format,  # type: ignore[misc]
                                                   string_columns, block, fixed=raw_schema, order=order)
                    for batch in reader:
                        read += batch.num_rows
                        if skip >= batch.num_rows:
                            skip -= batch.num_rows
                            continue
                        if skip:
                            batch, skip = batch.slice(skip), 0
                        yield _cast_strings_batch(batch, string_columns)
                        done += batch.num_rows
                    return
                except (pa.ArrowException, OSError, EOFError) as exc:
                    larger = _larger_block(block, exc) if source.reopen is not None else None
                    if larger is None:
                        raise _text_error(source, exc, done, block_start=read, names=raw_schema.names) from None
                    _close_reader(reader)
                    block, skip, read, reader = larger, done, 0, None
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
    _check_header(source, dataset.schema)
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
