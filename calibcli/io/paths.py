"""What an input path names: stdin (`-`), a file, a URI, or a directory or glob of Parquet parts.

- `display_name`: how a path appears in messages (`<stdin>` for `-`).
- URIs (`file://`, `s3://`, `gs://`, `hdfs://`, ...) are opened through `pyarrow.fs`.
- A directory (searched recursively, Hive-style `key=value/` folders kept) or a glob is a set
  of Parquet parts read as one `pyarrow.dataset`; Spark's bookkeeping (`_temporary/`,
  `_SUCCESS`, `.crc`, dot files) is skipped. `list_parts` is the one part lister: the
  readers here and `calibcli.fitting.summary` both use it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibcli.errors import InputError


def display_name(path: str) -> str:
    """How a path appears in messages: `<stdin>` for `-`."""
    return "<stdin>" if path == "-" else str(path)


_GLOB_CHARS = set("*?[")
PART_SUFFIXES = (".parquet", ".pq")


_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(path: str) -> bool:
    """True for `scheme://...` inputs (file://, s3://, gs://, hdfs://, ...), read through pyarrow.fs."""
    return bool(_URI.match(path))


def _filesystem(path: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) of a local path or a URI pyarrow resolves."""
    import pyarrow.fs as pafs

    if not is_uri(path):
        return pafs.LocalFileSystem(), os.path.abspath(path) + ("/" if path.endswith("/") else "")
    try:
        return pafs.FileSystem.from_uri(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot open this URI ({str(exc).splitlines()[0]})",
                         hint="file://, s3://, gs:// and hdfs:// work where pyarrow has that filesystem") from None


def open_uri(path: str) -> Any:
    fs, inner = _filesystem(path)
    try:
        return fs.open_input_file(inner)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: cannot read ({str(exc).splitlines()[0]})") from None


def skipped_part(relative: str) -> bool:
    """Files that are not data: anything under a hidden or `_`-prefixed folder (Spark's
    `_temporary/`), hidden or `_` files (`_SUCCESS`, `.part-0.crc`) and `.crc` checksums."""
    pieces = relative.replace("\\", "/").split("/")
    return any(piece.startswith((".", "_")) for piece in pieces) or relative.endswith(".crc")


def is_parts(path: str) -> bool:
    """True for a directory or a glob pattern (local or URI): an input made of Parquet part files."""
    if path == "-":
        return False
    if not is_uri(path) and os.path.lexists(path):
        return Path(path).is_dir()  # an existing path is taken literally, brackets and all
    if _GLOB_CHARS & set(path):
        return True
    if not is_uri(path):
        return False
    import pyarrow.fs as pafs

    fs, inner = _filesystem(path)
    try:
        return fs.get_file_info(inner).type == pafs.FileType.Directory
    except (pa.ArrowException, OSError):
        return False


def _split_glob(path: str, literal: bool = False) -> tuple[str, str | None]:
    """(root folder without wildcards, pattern relative to it or None); a `literal` path (one
    that exists) is its own root, whatever characters it holds."""
    if literal:
        return path.rstrip("/") or "/", None
    pieces = path.split("/")
    fixed = next((i for i, piece in enumerate(pieces) if _GLOB_CHARS & set(piece)), len(pieces))
    if fixed == len(pieces):
        return path.rstrip("/") or "/", None
    return "/".join(pieces[:fixed]) or ("/" if path.startswith("/") else "."), "/".join(pieces[fixed:])


def list_parts(path: str) -> list[tuple[str, str]]:
    """(part file, path relative to the input root) for every Parquet part, sorted.

    The one part lister (apply, the dataset reader and `summary.load` use it). A
    directory is searched recursively (Hive-style `key=value/` folders are kept in the
    relative paths); a glob's root is its longest leading folder without wildcards; a
    URI is listed through its pyarrow filesystem and its parts are returned as URIs.
    Spark's bookkeeping is skipped (`skipped_part`).
    """
    import fnmatch

    import pyarrow.fs as pafs

    uri = is_uri(path)
    fs, inner = _filesystem(path)
    root, pattern = _split_glob(inner, literal=not uri and os.path.lexists(path))
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except FileNotFoundError:
        raise InputError(f"{display_name(path)}: no such directory") from None
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{display_name(path)}: cannot list ({str(exc).splitlines()[0]})") from None
    base = root.rstrip("/") + "/"
    found = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        relative = info.path[len(base):] if info.path.startswith(base) else info.base_name
        if pattern is not None and not fnmatch.fnmatchcase(relative, pattern):
            continue
        if skipped_part(relative) or (pattern is None and not relative.lower().endswith(PART_SUFFIXES)):
            continue
        found.append((info.path, relative))
    if not found:
        raise InputError(f"{display_name(path)}: no Parquet part files (*.parquet, *.pq) found")
    prefix = path[:len(path) - len(inner)] if uri and path.endswith(inner) else ""
    return [(prefix + full if uri else full, relative) for full, relative in sorted(found)]


def open_dataset(path: str) -> Any:
    """The Parquet parts of a directory, glob or URI as one `pyarrow.dataset` (Hive
    `key=value` folders become columns)."""
    import pyarrow.dataset as pads

    fs, inner = _filesystem(path)
    root, _ = _split_glob(inner, literal=not is_uri(path) and os.path.lexists(path))
    files = [p for p, _ in list_parts(path)]
    if is_uri(path):
        files = [_filesystem(f)[1] for f in files]
    try:
        return pads.dataset(files, filesystem=fs, format="parquet", partitioning="hive",
                            partition_base_dir=root)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{display_name(path)}: cannot read the Parquet parts ({str(exc).splitlines()[0]})") from None
