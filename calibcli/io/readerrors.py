"""Read errors as one line naming the file, the column and the true 1-based data row.

pyarrow names no row for a ragged CSV row or a late conversion error, and counts JSON rows
from 0 within a block: the row is then found by reading the input again (`_find_row`),
counted across read blocks, header not counted. Errors are `InputError`s, which the CLI
prints as one line with exit 2. Column names must be UTF-8 and unique (`check_header`).
"""

from __future__ import annotations

import io as _io
import json
import re
import shlex
from typing import IO, Any, Callable, Iterator

import pyarrow as pa

from calibcli.errors import InputError, shown
from calibcli.io.parsers import MAX_BLOCK
from calibcli.io.sources import Source


def arrow_error(source: Source, exc: Exception) -> InputError:
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


def check_header(source: Source, schema: pa.Schema) -> None:
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


_JSON_KINDS = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string",
               list: "array", dict: "object"}


def _json_type_is(path: str, kind: str) -> Callable[[Any, Any], bool]:
    """A `_find_row` test: the JSON line is an object whose value at `path` (pyarrow's
    "/key/inner") has the JSON type `kind` (a column that changed type: the first such row is
    the one to name)."""
    keys = [k for k in path.split("/") if k]

    def bad(line: str, header: Any) -> bool:
        try:
            value: Any = json.loads(line)
        except ValueError:
            return True
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return False
            value = value[key]
        return _JSON_KINDS.get(type(value)) == kind

    return bad


def text_error(source: Source, exc: Exception, done: int, block: int, block_start: int | None = None,
                names: list[str] | None = None, limit: int = MAX_BLOCK) -> InputError:
    """A CSV/TSV/JSON lines read error naming the true 1-based data row when it can be found.

    `block` is the read block size the row did not fit in. pyarrow counts JSON rows from 0
    within a block (`block_start`: the rows before the failing block, when streaming) and names no row for a ragged CSV row or a late
    conversion error; the row is then found by reading the input again.
    """
    text = str(exc)
    if "straddl" in text:
        if source.reopen is None:
            return InputError(f"{source.name}: a row after row {done} does not fit in a read block of "
                              f"{block >> 20} MiB, and a pipe cannot be read again "
                              "with a larger one", hint="give the file's path instead of a pipe")
        return InputError(f"{source.name}: a row after row {done} is longer than {limit >> 20} MiB"
                          + (", the longest read from a pipe" if limit < MAX_BLOCK else ""),
                          hint="is it a text file? check the quoting of that row")
    if source.format == "jsonl":
        found = re.search(r"^(JSON parse error: .*?) in row (\d+)$", text.strip().splitlines()[0] if text.strip() else "")
        if found:
            changed = re.search(r"Column\((/[^)]*)\) changed from (\w+) to (\w+)", found.group(1))
            bad = _bad_json if changed is None else _json_type_is(changed.group(1), changed.group(3))
            row = (block_start + int(found.group(2)) + 1 if block_start is not None
                   else _find_row(source, done, bad))
            where = f"row {row}" if row is not None else f"a row after row {done}"
            if changed is not None:  # a value of another JSON type than the rows before it
                key = shown(changed.group(1).strip("/").replace("/", "."))
                return InputError(f"{source.name}: {where}: key {key} holds a {changed.group(3)} where the rows "
                                  f"before it hold a {changed.group(2)}",
                                  hint="give a key one type in every row (numbers unquoted, e.g. 0.25, not \"0.25\")")
            return InputError(f"{source.name}: {where}: {found.group(1)}")
        if "unexpected field" in text and names:
            known = set(names)
            row = _find_row(source, done, lambda line, header: not _bad_json(line, header)
                            and not set(json.loads(line)) <= known)
            where = f"row {row}" if row is not None else f"a row after row {done}"
            return InputError(f"{source.name}: {where} has a key the first rows do not have",
                              hint="calib streams JSON lines with the keys of the first rows: "
                              "give every row the same keys")
        return arrow_error(source, exc)
    late = _late_type_error(source, names or [], done, exc)
    if late is not None:
        return late
    error = arrow_error(source, exc)
    if re.search(r"Expected \d+ columns, got \d+", text):
        row = _find_row(source, done, lambda fields, header: len(fields) != len(header))
        where = f"row {row}" if row is not None else f"a row after row {done}" if done else None
        if where is not None:
            error = InputError(error.message.replace(f"{source.name}: a row has", f"{source.name}: {where} has", 1),
                               hint=error.hint)
    return error
