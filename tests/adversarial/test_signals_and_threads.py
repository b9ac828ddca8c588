"""Signals mid-write leave no output and no temp file; errors stop the reader threads cleanly
(exit 2 with one line, never an abort with exit 134), however often the run is repeated.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from .harness import Guard, result_of, run_many, spawn
from .mutants import load_envelope, parquet_map

ROW = b"0.123456,a,0.5\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_signal_while_writing_parquet_leaves_nothing(work, sig):
    root = work.path
    work.put("isotonic.json", "m.json")
    guard = Guard(root, reads=["m.json"], output="out.parquet")
    proc = spawn(["apply", "m.json", "-", "--format", "csv", "-o", "out.parquet"], root,
                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        # feed until the output is open (the CSV reader infers types from its first blocks)
        proc.stdin.write(b"score,field,x\n")
        deadline = time.monotonic() + 30
        while not list(root.glob(".out.parquet.*")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()
            proc.stdin.write(ROW * 50_000)
            proc.stdin.flush()
            time.sleep(0.05)
        assert list(root.glob(".out.parquet.*")), "the run never created its temporary file"
        assert proc.poll() is None, "the run ended before the signal"
        proc.send_signal(sig)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    err = proc.stderr.read().decode()
    assert code != 0, err
    assert "Traceback" not in err, err
    assert not (root / "out.parquet").exists()
    guard.check(succeeded=False)


def _late_bad_csv(path, rows: int = 250_000) -> None:
    """About 4 MB of good rows, then one bad score, then a few more good rows."""
    path.write_bytes(b"score,field,x\n" + ROW * rows + b"0.5x,a,0.5\n" + ROW * 1000)


@pytest.fixture(scope="module")
def late_error_runs(tmp_path_factory, assets):
    """`calib apply m.json in.csv | cat` with a bad value late in the file, ten times."""
    root = tmp_path_factory.mktemp("late")
    (root / "m.json").write_bytes((assets / "isotonic.json").read_bytes())
    _late_bad_csv(root / "in.csv")
    jobs = {i: dict(args=["apply", "m.json", "in.csv"], root=root, reads=["m.json", "in.csv"])
            for i in range(10)}
    return run_many(jobs)


@pytest.mark.parametrize("attempt", range(10))
def test_late_bad_value_with_stdout_a_pipe_is_one_line(late_error_runs, attempt):
    run = result_of(late_error_runs, attempt)
    assert run.code != 134 and "terminate called" not in run.err, run
    assert run.code == 2, run
    assert len(run.lines) in (1, 2) and run.lines[0].startswith("error: "), run
    assert "'0.5x'" in run.lines[0] and "in.csv" in run.lines[0], run
    assert "Traceback" not in run.err and "internal error" not in run.err, run


@pytest.fixture(scope="module")
def zero_row_map_runs(tmp_path_factory, assets):
    """A Parquet map with zero rows, loaded twenty times."""
    root = tmp_path_factory.mktemp("zero-row")
    (root / "m.parquet").write_bytes(parquet_map(load_envelope(assets, "isotonic"), rows=0))
    (root / "grid.csv").write_bytes((assets / "grid.csv").read_bytes())
    jobs = {i: dict(args=["apply", "m.parquet", "grid.csv"], root=root, reads=["m.parquet", "grid.csv"])
            for i in range(20)}
    return run_many(jobs)


@pytest.mark.parametrize("attempt", range(20))
def test_zero_row_parquet_map_is_one_line_every_time(zero_row_map_runs, attempt):
    run = result_of(zero_row_map_runs, attempt)
    assert run.code != 134 and "terminate called" not in run.err, run
    run.refused("m.parquet")
