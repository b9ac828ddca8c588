"""Run the real `calib` executable in a subprocess and check what every adversarial case shares.

`calib(args, root, ...)` snapshots the tree under `root` (every case works in its own
directory) and the sha256 of every file the command only reads, runs the command with real
pipes, and afterwards asserts that no read file changed (content, type, symlink target) and
that no file or directory appeared other than the expected output (a leftover `.<name>.*.tmp`
from the atomic writer fails here). `Run.refused()` then checks the refusal contract: exit 2,
one `error: ` line optionally followed by one `hint: ` line, no traceback, nothing on stdout,
and the output path not created (or unchanged when it existed).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

_EXE = Path(sys.executable).parent / "calib"
CALIB = [str(_EXE)] if _EXE.exists() else [sys.executable, "-m", "calibcli"]
TIMEOUT = 60.0
# Address-space cap of every run (a normal run peaks under 1 GB of virtual memory): a run that
# reads forever fails here instead of taking the shared machine's memory.
MEMORY_LIMIT = 3 << 30
_PRLIMIT = shutil.which("prlimit")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(path: Path) -> tuple | None:
    """(file type, symlink target, sha256 of a regular file's content), None when absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    kind = stat.S_IFMT(st.st_mode)
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    target = path.resolve() if link is not None else path
    digest = sha256(target) if target.is_file() and not stat.S_ISFIFO(os.stat(target).st_mode) else None
    return kind, link, digest


def tree(root: Path) -> set[str]:
    """Every path under `root` (files, directories, links), relative, symlinks not followed."""
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


class Guard:
    """Snapshot before a run; `check` asserts reads unchanged and nothing unexpected left behind."""

    def __init__(self, root: Path, cwd: Path | None = None, reads: Iterable[str | Path] = (),
                 output: str | Path | None = None):
        self.root = Path(root).resolve()
        self.cwd = Path(cwd or root)
        self.reads = {str(p): fingerprint(self._abs(p)) for p in reads}
        for name, fp in self.reads.items():
            assert fp is not None, f"test setup: read file {name} does not exist"
        self.output = self._abs(output) if output not in (None, "-") else None
        self.output_before = fingerprint(self.output) if self._watched(self.output) else None
        self.before = tree(self.root)

    def _abs(self, p: str | Path) -> Path:
        p = Path(p)
        return p if p.is_absolute() else self.cwd / p

    def _watched(self, p: Path | None) -> bool:
        if p is None:
            return False
        parent = p.parent.resolve()
        return parent == self.root or self.root in parent.parents

    def _allowed(self, rel: str) -> bool:
        if not self._watched(self.output):
            return False
        out = os.path.relpath(self.output.parent.resolve() / self.output.name, self.root)
        return rel == out or rel.startswith(out + os.sep)

    def check(self, succeeded: bool) -> None:
        for name, before in self.reads.items():
            assert fingerprint(self._abs(name)) == before, f"{name} is only read, but it changed"
        after = tree(self.root)
        gone = sorted(self.before - after)
        assert not gone, f"files disappeared: {gone}"
        new = sorted(after - self.before)
        stray = [n for n in new if not (succeeded and self._allowed(n))]
        assert not stray, f"left behind: {stray}"
        if not succeeded and self._watched(self.output):
            assert fingerprint(self.output) == self.output_before, \
                f"a refused run touched its output {self.output}"


@dataclass
class Run:
    args: list[str]
    code: int
    out: bytes
    err: str
    seconds: float
    maxrss_kb: int = 0
    timed_out: bool = False
    lines: list[str] = field(init=False)

    def __post_init__(self):
        self.lines = self.err.strip("\n").split("\n") if self.err.strip() else []

    def __repr__(self) -> str:  # what pytest prints when an assertion fails
        return (f"Run(calib {' '.join(self.args)!s}: exit {self.code}, {self.seconds:.1f}s, "
                f"stderr={self.err[:800]!r}, stdout={self.out[:200]!r})")

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace")

    def refused(self, *parts: str) -> "Run":
        """Exit 2 with exactly `error: ...` (+ optional `hint: ...`), nothing else anywhere."""
        assert not self.timed_out, f"timed out: {self!r}"
        assert self.code == 2, self
        assert "Traceback" not in self.err and "internal error" not in self.err, self
        assert "terminate called" not in self.err, self
        assert self.out == b"", self
        assert 1 <= len(self.lines) <= 2, self
        assert self.lines[0].startswith("error: "), self
        if len(self.lines) == 2:
            assert self.lines[1].startswith("hint: "), self
        for part in parts:
            assert part in self.lines[0], f"{part!r} not in the error line: {self!r}"
        return self

    def ok(self) -> "Run":
        assert not self.timed_out, f"timed out: {self!r}"
        assert self.code == 0, self
        assert "Traceback" not in self.err and "internal error" not in self.err, self
        return self


def spawn(args: Sequence[str], cwd: Path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
          env: dict | None = None) -> subprocess.Popen:
    """Start `calib args` in `cwd` with stderr piped (for the cases that drive the process)."""
    full_env = {**os.environ, **(env or {})}
    prefix = [_PRLIMIT, f"--as={MEMORY_LIMIT}", "--"] if _PRLIMIT else []
    return subprocess.Popen([*prefix, *CALIB, *map(str, args)], cwd=cwd, stdin=stdin, stdout=stdout,
                            stderr=subprocess.PIPE, env=full_env, preexec_fn=None if _PRLIMIT else _limited)


def execute(args: Sequence[str], cwd: Path, stdin: bytes | None = None, timeout: float = TIMEOUT,
            stdout=subprocess.PIPE, env: dict | None = None) -> Run:
    """Run `calib args`; returns exit code, output and the child's peak resident memory."""
    proc = spawn(args, cwd, subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout, env)
    out: list[bytes] = []
    err: list[bytes] = []
    pumps = [threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)]
    if proc.stdout is not None:
        pumps.append(threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True))
    if stdin is not None:
        def feed():
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except OSError:
                pass
        pumps.append(threading.Thread(target=feed, daemon=True))
    for t in pumps:
        t.start()
    timed_out = []
    timer = threading.Timer(timeout, lambda: (timed_out.append(True), proc.send_signal(signal.SIGKILL)))
    start = time.monotonic()
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in pumps:
        t.join(10)
    return Run([str(a) for a in args], proc.returncode, b"".join(out),
               b"".join(err).decode("utf-8", "replace"), seconds, usage.ru_maxrss, bool(timed_out))


def calib(args: Sequence[str], root: Path, *, reads: Iterable[str | Path] = (),
          output: str | Path | None = None, cwd: Path | None = None, stdin: bytes | None = None,
          timeout: float = TIMEOUT, stdout=subprocess.PIPE, env: dict | None = None) -> Run:
    """`execute` inside a `Guard`: read files unchanged and nothing but `output` left behind."""
    guard = Guard(root, cwd, reads, output)
    run = execute(args, Path(cwd or root), stdin, timeout, stdout, env)
    try:
        guard.check(run.code == 0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{run!r}") from None
    return run


def run_many(jobs: dict, workers: int = 2) -> dict:
    """Run `calib(**kwargs)` for each key concurrently; {key: Run or the exception it raised}."""
    def one(kwargs):
        try:
            return calib(**kwargs)
        except AssertionError as exc:
            return exc

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {key: pool.submit(one, kwargs) for key, kwargs in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


def result_of(results: dict, key) -> Run:
    """The Run of a `run_many` job; a guard failure is re-raised in the case that owns it."""
    run = results[key]
    if isinstance(run, AssertionError):
        raise run
    return run
