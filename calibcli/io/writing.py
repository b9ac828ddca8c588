"""Batch writers: record batches as CSV, TSV, JSON lines or Parquet (optionally gzip'd).

Every column type the readers accept is written faithfully or refused up front, naming the
column and the format (`writable_schema`): Parquet keeps every type; CSV/TSV hold flat values
(bytes that are not UTF-8 are copied unchanged); JSON lines hold numbers as numbers, text as
escaped strings, lists and structs as JSON, NaN and ±inf as null. JSON lines are encoded column
by column with pyarrow compute, not row by row. Where the bytes go is `targets`' business.
"""

from __future__ import annotations

import contextlib

import json
import threading
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from calibcli.errors import UsageError
from calibcli.io.targets import atomic_output, refuse_binary_tty


def writable_schema(schema: pa.Schema, fmt: str) -> pa.Schema:
    """The schema as it will be written, or an UsageError naming a column the format cannot hold.

    CSV/TSV hold flat values only (binary columns are written byte for byte); JSON lines hold
    nested lists and structs but not bytes that are not UTF-8 (checked per batch).
    """
    for f in schema:
        typ = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        nested = pa.types.is_nested(typ)
        if fmt in ("csv", "tsv") and nested:
            raise UsageError(f"column {f.name!r} has type {f.type}, which {fmt.upper()} cannot hold",
                             hint="write Parquet or JSON lines with --output-format parquet|jsonl")
        if not _encodable(typ, fmt):
            raise UsageError(f"column {f.name!r} has type {f.type}, which calib cannot write as {fmt}",
                             hint="write Parquet with --output-format parquet")
    return schema


def _encodable(typ: pa.DataType, fmt: str) -> bool:
    if fmt == "parquet":
        return True
    if pa.types.is_dictionary(typ):
        return _encodable(typ.value_type, fmt)
    if pa.types.is_struct(typ):
        return fmt == "jsonl" and all(_encodable(typ.field(i).type, fmt) for i in range(typ.num_fields))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return fmt == "jsonl" and _encodable(typ.value_type, fmt)
    if pa.types.is_map(typ) or pa.types.is_union(typ) or isinstance(typ, pa.ExtensionType):
        return False
    return True


DICTIONARY_PAGE_LIMIT = 1 << 16


class BatchWriter:
    """Writes record batches as CSV, TSV, JSON lines or Parquet to an open binary handle.

    Parquet and CSV/TSV batches are encoded on a background thread (pyarrow releases the
    GIL), so reading and predicting the next batch overlaps writing this one; at most one
    batch waits in the queue (one more only adds a batch's memory: the writer never starves
    while the reader keeps one ready). `close` waits for the thread and re-raises its error.
    JSON lines are encoded column by column with pyarrow compute, not row by row.
    """

    def __init__(self, fh: IO[bytes], fmt: str, schema: pa.Schema, gzip: bool = False):
        self.fmt = fmt
        self.schema = writable_schema(schema, fmt)
        self._gz = None
        if gzip:
            import gzip as _gzip

            self._gz = _gzip.GzipFile(filename="", fileobj=fh, mode="wb", compresslevel=6, mtime=0)
            fh = self._gz  # type: ignore[assignment]
        self._fh = fh
        self._writer: Any = None
        self._queue: Any = None
        if fmt == "parquet":
            import pyarrow.parquet as pq

            # a column whose dictionary passes 64 KiB (continuous scores) is written plain at
            # once, not after a megabyte of hashing per row group; few-valued columns keep theirs
            self._writer = pq.ParquetWriter(fh, schema, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT)
        elif fmt in ("csv", "tsv"):
            import pyarrow.csv as pacsv

            opts = pacsv.WriteOptions(delimiter="\t" if fmt == "tsv" else ",")
            self._writer = pacsv.CSVWriter(fh, _as_text_schema(schema), write_options=opts)
        if self._writer is not None:
            import queue
            import weakref

            self._queue = queue.Queue(maxsize=1)
            self._errors: list[BaseException] = []
            self._thread = threading.Thread(target=_drain, args=(self._queue, self._writer, self._errors),
                                            name="calibcli-writer", daemon=True)
            self._thread.start()
            self._stop = weakref.finalize(self, self._queue.put, None)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self.fmt == "jsonl":
            self._fh.write(encode_jsonl(batch))
            return
        if self._errors:
            raise self._errors[0]
        if self.fmt in ("csv", "tsv"):
            batch = _as_text(batch)
        self._queue.put(batch)

    def abort(self) -> None:
        """Stop the writer thread after an error elsewhere (the output is being discarded)."""
        if self._writer is not None:
            self._stop()
            self._thread.join()
            # Closed now, while the handle is open: left to pyarrow's finaliser, the Parquet
            # footer would be written to a closed file (an error printed at exit).
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None

    def close(self) -> None:
        if self._writer is not None:
            self._stop()
            self._thread.join()
            if self._errors:
                raise self._errors[0]
            self._writer.close()
        if self._gz is not None:
            self._gz.close()


def _drain(q: Any, writer: Any, errors: list[BaseException]) -> None:
    """The writer thread: write queued batches in order until the None sentinel; keep the first error."""
    while True:
        batch = q.get()
        if batch is None:
            return
        if errors:
            continue
        try:
            if isinstance(batch, pa.Table):
                writer.write_table(batch)
            else:
                writer.write(batch)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(exc)


def _binary_as_text(typ: pa.DataType) -> pa.DataType:
    if pa.types.is_binary(typ) or pa.types.is_fixed_size_binary(typ):
        return pa.string()
    if pa.types.is_large_binary(typ):
        return pa.large_string()
    return typ


def _as_text_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_binary_as_text(f.type)) for f in schema])


def _as_text(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """Binary columns viewed as text without validation, so CSV gets their bytes unchanged."""
    cols = []
    for col in batch.columns:
        typ = _binary_as_text(col.type)
        if typ != col.type:
            if pa.types.is_fixed_size_binary(col.type):
                col = col.cast(pa.binary())
            col = (pa.chunked_array([c.view(typ) for c in col.chunks], typ) if isinstance(col, pa.ChunkedArray)
                   else col.view(typ))
        cols.append(col)
    return type(batch).from_arrays(cols, names=batch.schema.names)


_TEXT = pa.large_string()  # every JSON piece is large text, so joins never mix offset widths


def _lit(text: str) -> pa.Scalar:
    return pa.scalar(text, _TEXT)


def _json_string(arr: pa.Array) -> pa.Array:
    """Text values as JSON string literals (quotes, backslashes and control characters escaped)."""
    out = pc.replace_substring(arr.cast(_TEXT), "\\", "\\\\")
    out = pc.replace_substring(out, '"', '\\"')
    if pc.any(pc.match_substring_regex(out, "[\\x00-\\x1f\\x7f]")).as_py():
        for code in [*range(0x20), 0x7F]:
            out = pc.replace_substring(out, chr(code), f"\\u{code:04x}")
    return pc.binary_join_element_wise(_lit('"'), out, _lit('"'), _lit(""))


def _json_values(arr: pa.Array, column: str) -> pa.Array:
    """One JSON text per value (nulls stay null; the caller writes them as `null`)."""
    typ = arr.type
    if pa.types.is_dictionary(typ):
        return _json_values(arr.dictionary_decode(), column)
    if pa.types.is_null(typ):
        return pa.nulls(len(arr), _TEXT)
    if pa.types.is_boolean(typ):
        return pc.if_else(arr, _lit("true"), _lit("false"))
    if pa.types.is_floating(typ):
        return pc.if_else(pc.is_finite(arr), pc.cast(arr, _TEXT), pa.scalar(None, _TEXT))
    if pa.types.is_integer(typ) or pa.types.is_decimal(typ):
        return pc.cast(arr, _TEXT)
    if pa.types.is_duration(typ):
        return pc.cast(pc.cast(arr, pa.int64()), _TEXT)
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        try:
            text = pc.cast(arr.cast(pa.binary()) if pa.types.is_fixed_size_binary(typ) else arr,
                           pa.large_string() if pa.types.is_large_binary(typ) else pa.string())
        except pa.ArrowInvalid:
            raise UsageError(f"column {column!r} holds bytes that are not UTF-8 text, which JSON lines "
                             "cannot hold", hint="write CSV or Parquet with --output-format csv|parquet") from None
        return _json_string(text)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return _json_string(arr)
    if pa.types.is_struct(typ):
        pieces: list[Any] = []
        for i in range(typ.num_fields):
            child = _json_values(arr.field(i), column)
            pieces += [_lit("," if i else "{"), _lit(json.dumps(typ.field(i).name) + ":"),
                       pc.fill_null(child, _lit("null"))]
        text = (pc.binary_join_element_wise(*pieces, _lit("}"), _lit("")) if pieces
                else pa.array(["{}"] * len(arr), _TEXT))
        return pc.if_else(arr.is_null(), pa.scalar(None, _TEXT), text)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        if pa.types.is_fixed_size_list(typ):
            arr = arr.cast(pa.list_(typ.value_type))
        child = pc.fill_null(_json_values(arr.values, column), _lit("null"))
        lists = type(arr).from_arrays(arr.offsets, child)
        joined = pc.binary_join_element_wise(_lit("["), pc.binary_join(lists, _lit(",")), _lit("]"), _lit(""))
        return pc.if_else(arr.is_null(), pa.scalar(None, _TEXT), joined)
    # dates, times, timestamps: ISO text
    return _json_string(pc.cast(arr, pa.string()))


def encode_jsonl(batch: pa.RecordBatch | pa.Table) -> bytes:
    """A batch as JSON lines bytes, encoded per column (vectorised)."""
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else None
        if batch is None:
            return b""
    if batch.num_rows == 0:
        return b""
    pieces: list[Any] = []
    for i, (name, col) in enumerate(zip(batch.schema.names, batch.columns)):
        pieces += [_lit("," if i else "{"), _lit(json.dumps(name) + ":"),
                   pc.fill_null(_json_values(col, name), _lit("null"))]
    if not pieces:
        return b"{}\n" * batch.num_rows
    lines = pc.binary_join_element_wise(*pieces, _lit("}\n"), _lit(""))
    offsets, data = lines.buffers()[1], lines.buffers()[2]
    import numpy as np

    bounds = np.frombuffer(offsets, dtype=np.int64, count=len(lines) + 1, offset=lines.offset * 8)
    return data.to_pybytes()[int(bounds[0]):int(bounds[-1])]


def write_table(table: pa.Table, path: str, fmt: str, gzip: bool = False) -> None:
    """Write a whole table atomically (stdout for `-`)."""
    refuse_binary_tty(path, fmt)
    with atomic_output(path) as fh:
        writer = BatchWriter(fh, fmt, table.schema, gzip=gzip)
        try:
            writer.write(table)
        except BaseException:
            writer.abort()
            raise
        writer.close()
