"""Output targets: never overwrite what the command reads, write through special files,
keep symlinks, pick the format from the extension (or refuse), and turn every OSError into
one line with exit 2.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import subprocess
import threading
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from .harness import calib, spawn

GATE = ["--max-regression", "log-loss=0.5"]

# (id, args, files the command reads, the output argument)
SAME_FILE = [
    ("fit-over-input", ["fit", "in.csv", "-o", "in.csv"], ["in.csv"], "in.csv"),
    ("apply-over-map", ["apply", "m.json", "in.csv", "-o", "m.json"], ["m.json", "in.csv"], "m.json"),
    ("apply-over-input", ["apply", "m.json", "in.csv", "-o", "in.csv"], ["m.json", "in.csv"], "in.csv"),
    ("evaluate-baseline-over-input", ["evaluate", "in.csv", "--save-baseline", "in.csv"], ["in.csv"], "in.csv"),
    ("evaluate-baseline-over-map", ["evaluate", "in.csv", "--map", "m.json", "--save-baseline", "m.json"],
     ["in.csv", "m.json"], "m.json"),
    ("evaluate-baseline-over-baseline",
     ["evaluate", "in.csv", "--field-col", "field", "--baseline", "b.json", *GATE, "--save-baseline", "b.json"],
     ["in.csv", "b.json"], "b.json"),
    ("summarize-over-input", ["summarize", "in.csv", "-o", "in.csv"], ["in.csv"], "in.csv"),
    ("fit-from-summary-over-summary", ["fit", "--from-summary", "s.json", "-o", "s.json"], ["s.json"], "s.json"),
    ("apply-parquet-over-input", ["apply", "m.json", "in.parquet", "-o", "in.parquet"],
     ["m.json", "in.parquet"], "in.parquet"),
]


def _same_file_work(work) -> Path:
    work.put("small.csv", "in.csv")
    work.put("isotonic.json", "m.json")
    work.put("baseline.json", "b.json")
    work.put("summary.json", "s.json")
    pq.write_table(pacsv.read_csv(work.path / "in.csv"), work.path / "in.parquet")
    return work.path


@pytest.mark.parametrize("args, reads, out", [c[1:] for c in SAME_FILE], ids=[c[0] for c in SAME_FILE])
def test_output_that_is_an_input_is_refused(work, args, reads, out):
    root = _same_file_work(work)
    run = calib(args, root, reads=reads + [out], output=out)
    run.refused(out)


# Another spelling of the same file: (id, how to make it, the -o argument).
def _symlink(root: Path) -> str:
    (root / "link.csv").symlink_to("in.csv")
    return "link.csv"


def _hardlink(root: Path) -> str:
    os.link(root / "in.csv", root / "hard.csv")
    return "hard.csv"


def _dotslash(root: Path) -> str:
    return "./in.csv"


def _dotdot(root: Path) -> str:
    (root / "d").mkdir()
    return "d/../in.csv"


def _absolute(root: Path) -> str:
    return str(root / "in.csv")


SPELLINGS = {"symlink": _symlink, "hard-link": _hardlink, "dot-slash": _dotslash,
             "dot-dot": _dotdot, "absolute": _absolute}
TO_TARGET = {
    "apply": lambda o: ["apply", "m.json", "in.csv", "-o", o],
    "fit": lambda o: ["fit", "in.csv", "-o", o],
    "summarize": lambda o: ["summarize", "in.csv", "-o", o],
    "evaluate": lambda o: ["evaluate", "in.csv", "--save-baseline", o],
}


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("command", ["apply", "fit"])
def test_output_spelled_differently_from_the_input_is_refused(work, command, spelling):
    root = _same_file_work(work)
    out = SPELLINGS[spelling](root)
    run = calib(TO_TARGET[command](out), root, reads=["in.csv", "m.json", out], output=out)
    run.refused(out, "in.csv")


@pytest.mark.parametrize("spelling", ["symlink", "hard-link", "absolute"])
def test_input_spelled_differently_from_the_output_is_refused(work, spelling):
    root = _same_file_work(work)
    alias = SPELLINGS[spelling](root)
    run = calib(["apply", "m.json", alias, "-o", "in.csv"], root, reads=["in.csv", "m.json", alias],
                output="in.csv")
    run.refused("in.csv")


def test_output_that_is_redirected_stdin_is_refused(work):
    """`calib apply m.json - -o in.csv < in.csv`: stdin is the same inode as the output."""
    root = _same_file_work(work)
    before = (root / "in.csv").read_bytes()
    with open(root / "in.csv", "rb") as fh:
        proc = spawn(["apply", "m.json", "-", "-o", "in.csv"], root, stdin=fh)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == b"", err
    assert err.decode().startswith("error: ") and "in.csv" in err.decode(), err
    assert (root / "in.csv").read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["b.json", "in.csv", "in.parquet", "m.json", "s.json"]


# ---------------------------------------------------------------------------- special targets


def _device(path: str) -> tuple[int, int]:
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_rdev


@pytest.mark.parametrize("command", TO_TARGET)
def test_dev_null_is_written_through(work, protect_dev, command):
    root = _same_file_work(work)
    before = _device("/dev/null")
    run = calib(TO_TARGET[command]("/dev/null"), root, reads=["in.csv", "m.json"])
    assert _device("/dev/null") == before and stat.S_ISCHR(before[0]), "/dev/null was replaced"
    run.ok()


@pytest.mark.parametrize("command", ["apply", "fit", "summarize"])
def test_dev_stdout_writes_to_stdout_and_keeps_the_link(work, protect_dev, command):
    root = _same_file_work(work)
    link = os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None
    run = calib(TO_TARGET[command]("/dev/stdout"), root, reads=["in.csv", "m.json"]).ok()
    assert (os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None) == link
    if command == "apply":
        table = pacsv.read_csv(io.BytesIO(run.out))
        assert table.column_names == ["score", "label", "field", "x", "calibrated"]
        assert table.num_rows == 40
    else:
        doc = json.loads(run.out)
        assert doc.get("format") in ("calibcli.map", "calibcli.fitting.summary") or "score" in doc


@pytest.mark.parametrize("command", ["apply", "fit", "evaluate"])
def test_symlink_output_replaces_the_target_and_keeps_the_link(work, command):
    root = _same_file_work(work)
    (root / "real").mkdir()
    (root / "real" / "target.out").write_text("old\n")
    link = "out.csv" if command == "apply" else "out.json"
    (root / link).symlink_to("real/target.out")
    run = calib(TO_TARGET[command](link), root, reads=["in.csv", "m.json"], output="real/target.out")
    run.ok()
    assert (root / link).is_symlink() and os.readlink(root / link) == "real/target.out"
    content = (root / "real" / "target.out").read_bytes()
    assert content != b"old\n" and len(content) > 20
    assert sorted(p.name for p in (root / "real").iterdir()) == ["target.out"]


def _drain_fifo(path: Path, sink: list) -> threading.Thread:
    def read():
        with open(path, "rb") as fh:
            sink.append(fh.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("command", ["apply", "fit", "summarize"])
def test_fifo_output_receives_the_data_and_stays_a_fifo(work, command):
    root = _same_file_work(work)
    os.mkfifo(root / "pipe")
    got: list[bytes] = []
    reader = _drain_fifo(root / "pipe", got)
    run = calib(TO_TARGET[command]("pipe"), root, reads=["in.csv", "m.json"], timeout=30)
    if reader.is_alive():  # unblock the reader if nothing ever opened the FIFO
        with open(root / "pipe", "wb"):
            pass
    reader.join(10)
    run.ok()
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode), "the FIFO was replaced"
    data = got[0] if got else b""
    if command == "apply":
        assert pacsv.read_csv(io.BytesIO(data)).num_rows == 40
    else:
        assert isinstance(json.loads(data), dict)


@pytest.mark.parametrize("command", ["apply", "evaluate"])
def test_fifo_input_streams(work, command):
    root = _same_file_work(work)
    os.mkfifo(root / "in.fifo")
    payload = (root / "in.csv").read_bytes()

    def feed():
        with open(root / "in.fifo", "wb") as fh:
            fh.write(payload)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    args = (["apply", "m.json", "in.fifo", "--format", "csv"] if command == "apply"
            else ["evaluate", "in.fifo", "--format", "csv", "--json"])
    run = calib(args, root, reads=["m.json"], timeout=30)
    if writer.is_alive():  # the run never opened the FIFO: let the writer finish
        with open(root / "in.fifo", "rb") as fh:
            fh.read()
    writer.join(10)
    run.ok()
    if command == "apply":
        assert pacsv.read_csv(io.BytesIO(run.out)).num_rows == 40
    else:
        assert json.loads(run.out)["rows"] == 40


FIFO_PARQUET = {
    "apply": ["apply", "m.json", "{fifo}", "--output-format", "csv"],
    "evaluate": ["evaluate", "{fifo}", "--json"],
    "fit": ["fit", "{fifo}"],
    "summarize": ["summarize", "{fifo}"],
}


@pytest.mark.parametrize("name", ["pipe.parquet", "pipe"])
@pytest.mark.parametrize("command", FIFO_PARQUET)
def test_fifo_parquet_input_is_read_once_not_hung_on(work, command, name):
    """A named pipe of Parquet bytes cannot be reopened or seeked: it is read whole, once."""
    root = _same_file_work(work)
    os.mkfifo(root / name)
    payload = (root / "in.parquet").read_bytes()

    def feed():
        with open(root / name, "wb") as fh:
            fh.write(payload)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    args = [a.replace("{fifo}", name) for a in FIFO_PARQUET[command]]
    run = calib(args, root, reads=["m.json"], timeout=30)
    if writer.is_alive():  # the run never opened the FIFO: let the writer finish
        with open(root / name, "rb") as fh:
            fh.read()
    writer.join(10)
    run.ok()
    assert run.seconds < 20, run
    if command == "apply":
        assert pacsv.read_csv(io.BytesIO(run.out)).num_rows == 40
    elif command == "evaluate":
        assert json.loads(run.out)["rows"] == 40
    else:
        assert isinstance(json.loads(run.out), dict)


@pytest.mark.parametrize("command", TO_TARGET)
def test_existing_directory_as_output_is_one_line(work, command):
    root = _same_file_work(work)
    (root / "outdir").mkdir()
    run = calib(TO_TARGET[command]("outdir"), root, reads=["in.csv", "m.json"])
    run.refused("outdir")
    assert list((root / "outdir").iterdir()) == []


@pytest.mark.parametrize("target", ["/proc/version", "/proc/calib-new-file.json", "/sys/calib.json"])
def test_unwritable_target_is_one_line(work, target):
    """Paths even root cannot write (EACCES/EIO/ENOENT/EROFS under /proc and /sys)."""
    root = _same_file_work(work)
    run = calib(TO_TARGET["fit"](target), root, reads=["in.csv"])
    run.refused()


def test_read_only_directory_is_one_line(work):
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions (covered by the /proc and /sys targets)")
    root = _same_file_work(work)
    (root / "ro").mkdir()
    os.chmod(root / "ro", 0o555)
    try:
        run = calib(TO_TARGET["apply"]("ro/out.csv"), root, reads=["in.csv", "m.json"])
    finally:
        os.chmod(root / "ro", 0o755)
    run.refused("ro/out.csv")


@pytest.mark.parametrize("command", ["apply", "fit", "evaluate"])
def test_full_device_is_one_line(work, protect_dev, command):
    root = _same_file_work(work)
    before = _device("/dev/full")
    run = calib(TO_TARGET[command]("/dev/full"), root, reads=["in.csv", "m.json"])
    assert _device("/dev/full") == before, "/dev/full was replaced"
    run.refused()


@pytest.mark.parametrize("command", ["apply", "fit"])
def test_stdout_on_a_full_device_is_one_line(work, command):
    root = _same_file_work(work)
    args = ["apply", "m.json", "in.csv"] if command == "apply" else ["fit", "in.csv"]
    with open("/dev/full", "wb") as full:
        run = calib(args, root, reads=["in.csv", "m.json"], stdout=full)
    assert run.code == 2, run
    assert len(run.lines) in (1, 2) and run.lines[0].startswith("error: "), run
    assert "Traceback" not in run.err and "internal error" not in run.err, run


# ---------------------------------------------------------------------------- closed pipes

def _big(root: Path, rows: int = 20_000) -> None:
    """Output well past a pipe's 64 KiB buffer, so `| head -1` closes it mid-write."""
    from .conftest import write_scores

    write_scores(root / "big.csv", rows, seed=3)


def _closed_pipe(args, root) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone (what `| head -1` becomes)."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = spawn(args, root, stdout=w)
    finally:
        os.close(w)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err.decode()


def _head_1(args, root) -> tuple[int, bytes, str]:
    """`calib ... | head -1`: read one line, then close the pipe."""
    proc = spawn(args, root, stdout=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(60)
    return proc.returncode, first, err.decode()


EPIPE_CASES = {
    "apply": ["apply", "m.json", "big.csv"],
    "apply-jsonl": ["apply", "m.json", "big.csv", "--output-format", "jsonl"],
    "evaluate-by-field": ["evaluate", "big.csv", "--field-col", "field", "--by-field"],
    "evaluate-json": ["evaluate", "big.csv", "--field-col", "field", "--by-field", "--json"],
    "fit": ["fit", "big.csv"],
}


@pytest.mark.parametrize("case", EPIPE_CASES)
def test_closed_pipe_on_stdout_is_quiet_exit_0(work, case):
    root = _same_file_work(work)
    _big(root)
    code, err = _closed_pipe(EPIPE_CASES[case], root)
    assert code == 0, err
    assert "Traceback" not in err and "error" not in err, err


@pytest.mark.parametrize("case", ["apply", "evaluate-by-field"])
def test_head_1_is_quiet_exit_0(work, case):
    root = _same_file_work(work)
    _big(root)
    code, first, err = _head_1(EPIPE_CASES[case], root)
    assert first, err
    assert code == 0, err
    assert "Traceback" not in err and "error" not in err, err


# ---------------------------------------------------------------------------- extensions

@pytest.mark.parametrize("args, out", [
    (["apply", "m.json", "in.csv", "-o", "out.xlsx"], "out.xlsx"),
    (["apply", "m.json", "in.csv", "-o", "out.csv.bak"], "out.csv.bak"),
    (["fit", "in.csv", "-o", "map.xlsx"], "map.xlsx"),
    (["summarize", "in.csv", "-o", "s.xlsx"], "s.xlsx"),
], ids=["apply-xlsx", "apply-bak", "fit-xlsx", "summarize-xlsx"])
def test_unknown_output_extension_is_refused(work, args, out):
    root = _same_file_work(work)
    calib(args, root, reads=["in.csv", "m.json"], output=out).refused(out)


def test_unknown_extension_with_an_explicit_format_writes_it(work):
    root = _same_file_work(work)
    run = calib(["apply", "m.json", "in.csv", "-o", "out.xlsx", "--output-format", "csv"], root,
                reads=["in.csv", "m.json"], output="out.xlsx").ok()
    assert pacsv.read_csv(root / "out.xlsx").num_rows == 40, run


def _apply_to(root: Path, out: str):
    return calib(["apply", "m.json", "in.csv", "-o", out], root, reads=["in.csv", "m.json"], output=out).ok()


def test_gz_output_is_gzip_of_the_csv(work):
    root = _same_file_work(work)
    _apply_to(root, "out.csv")
    _apply_to(root, "out.csv.gz")
    raw = (root / "out.csv.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b", "not gzip"
    assert gzip.decompress(raw) == (root / "out.csv").read_bytes()


@pytest.mark.parametrize("ext", ["tsv", "jsonl", "parquet"])
def test_extension_picks_the_format(work, ext):
    root = _same_file_work(work)
    _apply_to(root, f"out.{ext}")
    path = root / f"out.{ext}"
    if ext == "parquet":
        assert path.read_bytes()[:4] == b"PAR1"
        table = pq.read_table(path)
    elif ext == "tsv":
        assert "\t" in path.read_text().splitlines()[0]
        table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter="\t"))
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert all(type(r["calibrated"]) in (int, float) and 0 <= r["calibrated"] <= 1 for r in rows)
        assert len(rows) == 40
        return
    assert table.num_rows == 40 and table.column_names[-1] == "calibrated"
