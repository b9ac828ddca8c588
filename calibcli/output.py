"""Writing outputs: the one output policy, atomic files, and the batch writers.

Policy (every `-o`, `--save-baseline`, `--plot` goes through `check_output` before any work,
then `atomic_output` / `atomic_output_dir` to write):

- An output that resolves to a file the same command reads (same path after following
  symlinks, or the same inode: hard links, `./x`, `d/../x`, stdin redirected from it) is
  refused, naming both paths. A directory output may not lie inside an input directory.
- `-` is stdout. An existing target that is not a regular file (a character device such as
  `/dev/null`, a FIFO, `/dev/stdout`) is written straight through: never renamed over.
- A regular file (or a new path) is written to a temporary file in the target's directory,
  fsynced and renamed into place; a symlink to a regular file keeps the link and replaces
  its target. The temporary file is removed on any error and on SIGTERM, SIGHUP and SIGINT
  (`install_signal_cleanup`).
- The format comes from an explicit option, else the extension (`.gz` = gzip); an unknown
  extension is refused rather than guessed.
- Any OSError while writing (EACCES, EISDIR, ENOSPC, EROFS) is an `OutputError`: one line,
  exit 2. A closed pipe on stdout (`| head`) is left to the CLI, which exits quietly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import IO, Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from calibcli.errors import OutputError, UsageError

# ---------------------------------------------------------------------------- temporary paths

_live_temps: set[str] = set()  # temporary files and directories to remove on a fatal signal
_signals_installed = False


def install_signal_cleanup() -> None:
    """Remove live temporary outputs and exit 128+N on SIGTERM, SIGHUP or SIGINT.

    The signals are blocked in every thread and taken by one watcher thread (`sigwait`), so
    cleanup happens even while the main thread waits inside pyarrow with the GIL released.
    Called once by the console script before any other thread starts.
    """
    global _signals_installed
    if _signals_installed or threading.current_thread() is not threading.main_thread():
        return
    _signals_installed = True
    caught = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, caught)

    def watch() -> None:
        signum = signal.sigwait(caught)
        remove_live_temps()
        os._exit(128 + signum)

    threading.Thread(target=watch, name="calibcli-signals", daemon=True).start()


def remove_live_temps() -> None:
    """Delete every temporary output this process created and has not yet renamed."""
    for path in list(_live_temps):
        _drop_temp(path)


def _new_temp(directory: str, name: str, *, is_dir: bool = False) -> str:
    """Create `.<name>.<random>.tmp` in `directory` (registered before it exists)."""
    for _ in range(100):
        path = os.path.join(directory, f".{name}.{os.urandom(4).hex()}.tmp")
        _live_temps.add(path)
        try:
            if is_dir:
                os.mkdir(path, 0o700)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return path
        except FileExistsError:
            _live_temps.discard(path)
        except OSError:
            _live_temps.discard(path)
            raise
    raise OutputError(f"{directory}: cannot create a temporary file")


def _drop_temp(path: str) -> None:
    """Delete one temporary file or directory of ours and forget it."""
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    _live_temps.discard(path)


# ---------------------------------------------------------------------------- the policy


def _shown(path: str) -> str:
    return "<stdout>" if path == "-" else str(path)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same(a: os.stat_result | None, b: os.stat_result | None) -> bool:
    return a is not None and b is not None and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _inside(child: str, parent: str) -> bool:
    child_real, parent_real = os.path.realpath(child), os.path.realpath(parent)
    return child_real == parent_real or child_real.startswith(parent_real.rstrip(os.sep) + os.sep)


def check_output(path: str, reads: Sequence[str] = (), *, directory: bool = False) -> None:
    """Refuse, before any work, an output the policy forbids (see the module docstring).

    `reads` are the paths the command reads (`-` is stdin); `directory` is for outputs that
    are directories of parts.
    """
    if path == "-":
        return
    if not path:
        raise UsageError("the output path is empty")
    target = _stat(path)
    for read in reads:
        if read is None:
            continue
        source = os.fstat(0) if read == "-" and _stdin_is_file() else _stat(read) if read != "-" else None
        if _same(target, source) or (read != "-" and os.path.realpath(path) == os.path.realpath(read)):
            raise UsageError(f"{path}: is the same file as the input {io_name(read)}; refusing to "
                             "overwrite a file this command reads", hint="write the output to another path")
        if read != "-" and source is not None and stat.S_ISDIR(source.st_mode) and _inside(path, read):
            raise UsageError(f"{path}: lies inside the input directory {read}; refusing to write "
                             "where this command reads", hint="write the output outside the input directory")
    if target is not None and stat.S_ISDIR(target.st_mode) and not directory:
        raise OutputError(f"{path}: is a directory, expected a file name for the output")
    if target is None:
        parent = os.path.dirname(os.path.realpath(path)) or "."
        if not os.path.isdir(parent):
            raise OutputError(f"{path}: output directory {os.path.dirname(path) or '.'!r} does not exist")


def io_name(path: str) -> str:
    return "<stdin>" if path == "-" else str(path)


def _stdin_is_file() -> bool:
    try:
        return stat.S_ISREG(os.fstat(0).st_mode)
    except OSError:
        return False


def is_special(path: str) -> bool:
    """True for an existing target that is not a regular file or directory (device, FIFO)."""
    st = _stat(path)
    return st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)


def _os_error(path: str, exc: OSError) -> OutputError:
    reason = exc.strerror or type(exc).__name__
    return OutputError(f"{_shown(path)}: cannot write ({reason})")


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """A binary handle whose content appears at `path` only if the block succeeds.

    `-` is stdout; an existing non-regular target is written straight through; anything
    else goes through a temporary file next to the (symlink-resolved) target.
    """
    if path == "-":
        try:
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _os_error(path, exc) from None
        return
    if is_special(path):
        try:
            with open(path, "wb") as fh:
                yield fh
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _os_error(path, exc) from None
        return
    real = os.path.realpath(path)
    existing = _stat(real)
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise OutputError(f"{path}: is a directory, expected a file name for the output")
    try:
        tmp = _new_temp(os.path.dirname(real) or ".", os.path.basename(real))
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_umask())
        os.replace(tmp, real)
        _live_temps.discard(tmp)
    except BaseException as exc:
        _drop_temp(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise _os_error(path, exc) from None
        raise


@contextlib.contextmanager
def atomic_output_dir(path: str, force: bool = False) -> Iterator[Path]:
    """A temporary directory that becomes the directory `path` only if the block succeeds.

    `path` must not exist or be an empty directory (with `force`, an existing directory is
    replaced once the new one is complete); a failed run leaves nothing behind.
    """
    target = Path(path)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise OutputError(f"{path}: exists and is not a directory; parts are written into a directory")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise UsageError(f"{path}: output directory already exists and is not empty",
                         hint="choose another -o, or add --force to replace it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OutputError(f"{path}: output directory {os.path.dirname(path) or '.'!r} does not exist")
    try:
        tmp = _new_temp(parent, target.name, is_dir=True)
    except OSError as exc:
        raise _os_error(path, exc) from None
    old = None
    try:
        yield Path(tmp)
        if target.is_dir():
            old = _new_temp(parent, target.name + ".old", is_dir=True)
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        _live_temps.discard(tmp)
    except BaseException as exc:
        _drop_temp(tmp)
        if old is not None and not target.exists():
            os.replace(old, target)
            _live_temps.discard(old)
            old = None
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise _os_error(path, exc) from None
        raise
    finally:
        if old is not None:
            _drop_temp(old)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write `data` to `path` (or stdout for `-`) in one atomic step."""
    with atomic_output(path) as fh:
        fh.write(data)


# ---------------------------------------------------------------------------- formats

DATA_FORMATS = ("csv", "tsv", "jsonl", "parquet")
DATA_EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet",
}


def output_format(path: str, explicit: str | None, default: str | None,
                  extensions: Mapping[str, str] = DATA_EXTENSIONS,
                  formats: Sequence[str] = DATA_FORMATS, flag: str = "--output-format"
                  ) -> tuple[str, bool]:
    """(format, gzip) for an output path: the explicit option, else the extension, else `default`.

    An extension that is not known is refused unless the format is given explicitly; `.gz`
    after a text format's extension means gzip (Parquet compresses itself).
    """
    if explicit is not None and explicit not in formats:
        raise UsageError(f"{flag} {explicit!r}: unknown format", hint="formats: " + ", ".join(formats))
    name = "" if path == "-" or is_special(path) else os.path.basename(path)
    suffixes = [s.lower() for s in Path(name).suffixes if s.strip(".")]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    if gz:
        suffixes = suffixes[:-1]
    by_ext = extensions.get(suffixes[-1]) if suffixes else None
    if suffixes and by_ext is None and explicit is None:
        known = ", ".join(sorted(extensions))
        raise UsageError(f"{path}: unknown output extension {suffixes[-1]!r}",
                         hint=f"use one of {known}{', optionally + .gz' if 'csv' in formats else ''}, "
                         f"or say what to write with {flag}")
    fmt = explicit or by_ext or default
    if fmt is None:
        raise UsageError(f"{path}: cannot tell which format to write", hint=f"add {flag}")
    if gz and fmt == "parquet":
        raise UsageError(f"{path}: Parquet output is not gzip'd by name (it compresses itself)",
                         hint="drop the .gz extension")
    return fmt, gz


def refuse_binary_tty(path: str, fmt: str) -> None:
    """Parquet is never written to a terminal."""
    if path == "-" and fmt == "parquet" and sys.stdout.isatty():
        raise UsageError("refusing to write Parquet to a terminal",
                         hint="use -o FILE.parquet, pipe the output, or --output-format csv")


# ---------------------------------------------------------------------------- batch writers


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


class BatchWriter:
    """Writes record batches as CSV, TSV, JSON lines or Parquet to an open binary handle.

    Parquet and CSV/TSV batches are encoded on a background thread (pyarrow releases the
    GIL), so reading and predicting the next batch overlaps writing this one; at most two
    batches wait in the queue. `close` waits for the thread and re-raises its error.
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

            self._writer = pq.ParquetWriter(fh, schema)
        elif fmt in ("csv", "tsv"):
            import pyarrow.csv as pacsv

            opts = pacsv.WriteOptions(delimiter="\t" if fmt == "tsv" else ",")
            self._writer = pacsv.CSVWriter(fh, _as_text_schema(schema), write_options=opts)
        if self._writer is not None:
            import queue
            import weakref

            self._queue = queue.Queue(maxsize=2)
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
