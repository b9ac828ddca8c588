"""Opening an input: a score file, stdin, a FIFO or device, or a URI, its format and compression.

- Format: `--format`, else the extension (`.csv`, `.tsv`/`.tab`, `.jsonl`/`.ndjson`,
  `.parquet`/`.pq`, each optionally `.gz` for the text formats), else sniffed from the
  first bytes: Parquet's `PAR1` magic, gzip's magic (then sniffed again), a `{` for JSON
  lines, otherwise CSV, or TSV when the header line has tabs and no commas.
- The bytes sniffed are kept and read again (`Source.stream` starts at the first byte), so a
  pipe is read once; a regular file or URI can be opened again (`Source.reopen`).
- UTF-16 text is refused in one line; `read_bytes` reads a whole small file (a map) capped.
"""

from __future__ import annotations

import gzip
import io as _io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable

import pyarrow as pa

from calibcli.errors import CalibError, InputError, UsageError, shown
from calibcli.io.paths import display_name, is_uri, open_uri

FORMATS = ("csv", "tsv", "jsonl", "parquet")
_EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet",
}
_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_BYTES = 1 << 16


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
