"""Where outputs go: the one output policy, atomic files, output formats, signal clean-up.

Policy (every `-o`, `--save-baseline`, `--plot` goes through `check_output` before any work,
then `atomic_output` / `atomic_output_dir` to write):

- An output that is, contains or lies inside a path the same command reads (inputs, the
  part files a glob matches, maps, baselines, summaries), compared after following symlinks
  and by inode (hard links, `./x`, `d/../x`, stdin redirected from it), is refused before
  any work, naming both paths.
- A directory of parts (`calib apply DIR -o OUT`) is written with a marker file
  `.calibcli-output` listing what calib wrote into it. An existing non-empty directory is
  replaced only with `--force`, and only when its marker is there and it holds nothing
  else than the files the marker lists (unchanged in size): anything else is refused.
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
from typing import IO, Iterator, Mapping, Sequence

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


def _inside(child_real: str, parent_real: str) -> bool:
    """True when the resolved path `child_real` lies strictly under `parent_real`."""
    return child_real.startswith(parent_real.rstrip(os.sep) + os.sep)


def _read_paths(read: str) -> list[str]:
    """The local paths a read argument names: itself, or every part file a glob matches
    (a URI other than file:// names no local path)."""
    from calibcli.io import paths  # here, not at import: start-up loads no pyarrow

    if paths.is_uri(read):
        if not read.startswith("file://"):
            return []
        read = read[len("file://"):]
    if set("*?[") & set(read):
        return [part for part, _ in paths.list_parts(read)]
    return [read]


def check_output(path: str, reads: Sequence[str | None] = (), *, directory: bool = False,
                 force: bool = False) -> None:
    """Refuse, before any work, an output the policy forbids (see the module docstring).

    `reads` are the paths the command reads (`-` is stdin); `directory` is for outputs that
    are directories of parts, which `force` may replace when calib wrote them.
    """
    from calibcli.io.paths import display_name  # here, not at import: start-up loads no pyarrow

    if path == "-":
        return
    if not path:
        raise UsageError("the output path is empty")
    target = _stat(path)
    real = os.path.realpath(path)
    for read in reads:
        if read is None:
            continue
        if read == "-":
            if _stdin_is_file() and _same(target, os.fstat(0)):
                raise UsageError(f"{path}: is the same file as the input <stdin>; refusing to overwrite "
                                 "a file this command reads", hint="write the output to another path")
            continue
        for each in _read_paths(read):
            source, source_real = _stat(each), os.path.realpath(each)
            if _same(target, source) or real == source_real:
                raise UsageError(f"{path}: is the same file as the input {display_name(read)}; refusing to "
                                 "overwrite a file this command reads", hint="write the output to another path")
            if source is not None and stat.S_ISDIR(source.st_mode) and _inside(real, source_real):
                raise UsageError(f"{path}: lies inside the input directory {read}; refusing to write "
                                 "where this command reads", hint="write the output outside the input directory")
            if _inside(source_real, real):
                raise UsageError(f"{path}: contains {display_name(each)}, which this command reads; "
                                 "refusing to write over it", hint="write the output to another path")
    if target is not None and stat.S_ISDIR(target.st_mode) and not directory:
        raise OutputError(f"{path}: is a directory, expected a file name for the output")
    if directory:
        check_output_dir(path, force)
    elif target is None:
        parent = os.path.dirname(real) or "."
        if not os.path.isdir(parent):
            raise OutputError(f"{path}: output directory {os.path.dirname(path) or '.'!r} does not exist")


# ---------------------------------------------------------------------------- output directories

MARKER = ".calibcli-output"
_MARKER_FORMAT = "calibcli.output"
_MARKER_LIMIT = 64 << 20


def check_output_dir(path: str, force: bool) -> None:
    """An output directory of parts may be new or empty; `force` replaces one calib wrote.

    Calib wrote a directory when its marker (`MARKER`) lists every file in it, each with its
    size; a directory without the marker, or holding anything more or changed, is refused.
    """
    target = Path(path)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise OutputError(f"{path}: exists and is not a directory; parts are written into a directory")
    if not target.exists():
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise OutputError(f"{path}: output directory {os.path.dirname(path) or '.'!r} does not exist")
        return
    try:
        empty = not any(target.iterdir())
    except OSError as exc:
        raise _os_error(path, exc) from None
    if empty:
        return
    if not force:
        raise UsageError(f"{path}: output directory already exists and is not empty",
                         hint="choose another -o, or add --force to replace a directory calib wrote")
    problem = _foreign(path)
    if problem is not None:
        raise UsageError(f"{path}: {problem}; --force replaces only a directory calib wrote "
                         f"(with its {MARKER} marker and nothing else)", hint="choose another -o")


def _foreign(path: str) -> str | None:
    """Why the directory `path` is not (only) calib's output, or None when it is."""
    marker = os.path.join(path, MARKER)
    try:
        st = os.lstat(marker)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MARKER_LIMIT:
            raise ValueError
        with open(marker, "rb") as fh:
            doc = json.loads(fh.read())
        files = doc["files"]
        if doc.get("format") != _MARKER_FORMAT or not isinstance(files, dict):
            raise ValueError
    except FileNotFoundError:
        return f"holds {_first_entry(path)} and no {MARKER} marker, so calib did not write it"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its {MARKER} marker is not one calib wrote"
    folders = {os.path.dirname(name) for name in files if isinstance(name, str)}
    folders = {parent for name in folders for parent in _parents(name)}
    for folder, dirs, names in os.walk(path):
        for name in dirs + names:
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode) and rel in folders:
                continue
            if rel == MARKER or (stat.S_ISREG(st.st_mode) and files.get(rel) == st.st_size):
                continue
            what = "changed" if rel in files else "not written by calib"
            return f"holds {rel} ({what})"
    return None


def _first_entry(path: str) -> str:
    """What is in the way in a non-empty directory: its first entry by name (a folder with a
    slash), and how many more there are."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return "files"
    first = names[0] + ("/" if os.path.isdir(os.path.join(path, names[0])) else "")
    more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
    return first + more


def _parents(rel: str) -> list[str]:
    """'a/b/c' -> ['a/b/c', 'a/b', 'a'] ('' -> [])."""
    out = []
    while rel:
        out.append(rel)
        rel = os.path.dirname(rel)
    return out


def _write_marker(directory: str, command: str, extra: Mapping[str, object]) -> None:
    """The marker listing every file calib wrote into `directory` (relative path -> size)."""
    files = {}
    for folder, _, names in os.walk(directory):
        for name in names:
            full = os.path.join(folder, name)
            files[os.path.relpath(full, directory)] = os.lstat(full).st_size
    doc = {"format": _MARKER_FORMAT, "version": 1, "command": command, **extra, "files": files}
    with open(os.path.join(directory, MARKER), "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


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


class OutputDir:
    """The temporary directory being filled (`path`) and what its marker will record (`extra`)."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.extra: dict[str, object] = {}


@contextlib.contextmanager
def atomic_output_dir(path: str, force: bool = False, command: str = "apply") -> Iterator[OutputDir]:
    """A temporary directory that becomes the directory `path` only if the block succeeds.

    `path` must be new or an empty directory, or with `force` a directory calib wrote
    (`check_output_dir`), replaced once the new one is complete; a failed run leaves
    nothing behind. The finished directory holds the marker and gets the umask's mode.
    """
    check_output_dir(path, force)
    target = Path(path)
    parent = os.path.dirname(os.path.abspath(path))
    try:
        tmp = _new_temp(parent, target.name, is_dir=True)
    except OSError as exc:
        raise _os_error(path, exc) from None
    old = None
    try:
        out = OutputDir(tmp)
        yield out
        _write_marker(tmp, command, out.extra)
        os.chmod(tmp, 0o777 & ~_umask())
        check_output_dir(path, force)  # again, just before the swap
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
