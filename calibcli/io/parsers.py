"""pyarrow's readers as calib uses them: CSV/TSV/JSON lines options, whole-table parses and
streaming readers, the block-size rule for rows longer than a block, and text columns cast
to strings.

- Columns of any numeric or boolean type are read as float64; only an empty cell is
  missing ("NaN"/"NA" stay visible in messages).
- A streamed JSON reader gives its columns in the first line's order (`_reordered`).
- Streaming readers are closed as soon as they are done with (`close_reader`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import pyarrow as pa

MAX_BLOCK = 1 << 30


def _pc():
    """pyarrow.compute, imported on first use: its import costs ~0.05 s that numeric Parquet
    columns never need."""
    import pyarrow.compute as pc

    return pc


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


def larger_block(block: int, exc: Exception, limit: int = MAX_BLOCK) -> int | None:
    """The block size to retry with when a row did not fit in one block (a cell or a JSON line
    of megabytes), or None for any other error or once past `limit`."""
    if "straddl" not in str(exc) or block >= limit:
        return None
    return min(block * 16, limit)


def parse_text(stream: Any, fmt: str, string_columns: tuple[str, ...], block: int) -> pa.Table:
    if fmt == "jsonl":
        import pyarrow.json as pajson

        return cast_strings(pajson.read_json(stream, read_options=pajson.ReadOptions(block_size=block)),
                             string_columns)
    import pyarrow.csv as pacsv

    read, parse, convert = _csv_options(fmt, string_columns, block_size=block)
    return pacsv.read_csv(stream, read_options=read, parse_options=parse, convert_options=convert)


def open_text_reader(stream: Any, fmt: str, string_columns: tuple[str, ...], block: int,
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
        close_reader(self._reader)


def close_reader(reader: Any) -> None:
    """Stop a streaming reader's background threads now, not at interpreter exit (where a
    still-running reader thread aborts the process)."""
    with contextlib.suppress(Exception):
        close = getattr(reader, "close", None)
        if close is not None:
            close()


def cast_strings(table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    for name in columns:
        if name in table.column_names and table.schema.field(name).type != pa.string():
            i = table.column_names.index(name)
            table = table.set_column(i, name, _pc().cast(table.column(name), pa.string()))
    return table


def cast_strings_batch(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    if not any(c in batch.schema.names for c in columns):
        return batch
    return pa.RecordBatch.from_arrays(
        [_pc().cast(col, pa.string()) if name in columns and col.type != pa.string() else col
         for name, col in zip(batch.schema.names, batch.columns)],
        names=batch.schema.names,
    )
