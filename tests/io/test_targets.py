"""The output policy and writers (`calibcli.io.targets`, `calibcli.io.writing`): generated inputs;
what `--force` may replace (a directory holding calib's marker and exactly the files it lists)."""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibcli.io import targets, writing
from calibcli.errors import OutputError, UsageError
from calibcli.errors import CalibError


def calib_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "calib"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "calibcli"]


# ---------------------------------------------------------------------------- JSON lines

_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none())
_texts = st.one_of(st.text(max_size=12), st.none())
_ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.none())


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(_floats, _texts, _ints, st.one_of(st.booleans(), st.none()),
                               st.one_of(st.lists(_ints, max_size=3), st.none()),
                               st.one_of(st.fixed_dictionaries({"a": _floats, "b": _texts}), st.none())),
                     min_size=1, max_size=20),
       name=st.text(min_size=1, max_size=8))
def test_jsonl_encoder_matches_json_module(rows, name):
    """Every line is valid JSON and holds the values (NaN and inf as null), whatever the text."""
    cols = list(zip(*rows))
    table = pa.table({
        "f": pa.array(cols[0], pa.float64()), name + "_s": pa.array(cols[1], pa.string()),
        "i": pa.array(cols[2], pa.int64()), "b": pa.array(cols[3], pa.bool_()),
        "l": pa.array(cols[4], pa.list_(pa.int64())),
        "st": pa.array(cols[5], pa.struct([("a", pa.float64()), ("b", pa.string())])),
    })
    lines = writing.encode_jsonl(table.to_batches()[0]).decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == len(rows) + 1

    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    for line, row in zip(lines, rows):
        got = json.loads(line)
        assert list(got) == ["f", name + "_s", "i", "b", "l", "st"]
        assert list(got.values()) == [clean(v) for v in row]


def test_jsonl_decimals_are_numbers_and_bytes_that_are_not_utf8_are_refused():
    import decimal

    batch = pa.record_batch({"d": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2)),
                             "t": pa.array([b"Paris", None], pa.binary())})
    assert writing.encode_jsonl(batch) == b'{"d":1.25,"t":"Paris"}\n{"d":null,"t":null}\n'
    bad = pa.record_batch({"city": pa.array([b"Z\xfcrich"], pa.binary())})
    with pytest.raises(UsageError, match="column 'city'.*not UTF-8.*JSON lines"):
        writing.encode_jsonl(bad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.binary(max_size=10).filter(lambda b: b"\r" not in b), min_size=1, max_size=10))
def test_csv_copies_bytes_that_are_not_utf8_unchanged(values, tmp_path):
    path = tmp_path / "out.csv"
    table = pa.table({"raw": pa.array(values, pa.binary())})
    writing.write_table(table, str(path), "csv")
    back = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types={"raw": pa.binary()},
                                                                     strings_can_be_null=False))
    assert back.column("raw").to_pylist() == values


def test_nested_columns_are_refused_up_front_for_csv():
    schema = pa.schema([("score", pa.float64()), ("tags", pa.list_(pa.string()))])
    for fmt in ("csv", "tsv"):
        with pytest.raises(UsageError, match=f"column 'tags'.*{fmt.upper()} cannot hold"):
            writing.writable_schema(schema, fmt)
    assert writing.writable_schema(schema, "jsonl") is schema


# ---------------------------------------------------------------------------- formats

@settings(max_examples=100, deadline=None)
@given(stem=st.text("abcxyz", min_size=1, max_size=5), ext=st.text("abcdefghijklmnopqrstuvwxyz0123456789",
                                                                   min_size=1, max_size=6))
def test_unknown_extensions_are_refused_unless_the_format_is_given(stem, ext):
    path = f"{stem}.{ext}"
    known = targets.DATA_EXTENSIONS.get("." + ext)
    if known is None and ext != "gz":
        with pytest.raises(UsageError, match="unknown output extension"):
            targets.output_format(path, None, "csv")
        assert targets.output_format(path, "parquet", "csv") == ("parquet", False)
    elif known is not None:
        assert targets.output_format(path, None, "csv") == (known, False)


def test_gz_suffix_means_gzip_for_text_formats_only():
    assert targets.output_format("x.csv.gz", None, None) == ("csv", True)
    assert targets.output_format("x.jsonl.gz", None, None) == ("jsonl", True)
    with pytest.raises(UsageError, match="Parquet"):
        targets.output_format("x.parquet.gz", None, None)
    assert targets.output_format("-", None, "tsv") == ("tsv", False)
    assert targets.output_format("/dev/null", None, "parquet") == ("parquet", False)


# ---------------------------------------------------------------------------- targets

def _aliases(tmp_path: Path, target: Path) -> list[str]:
    (tmp_path / "d").mkdir(exist_ok=True)
    link = tmp_path / "link"
    link.symlink_to(target)
    hard = tmp_path / "hard"
    os.link(target, hard)
    return [str(target), str(link), str(hard), str(tmp_path / "d" / ".." / target.name),
            os.path.relpath(target)]


def test_every_alias_of_an_input_is_refused_and_other_paths_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "in.csv"
    src.write_text("score,label\n0.1,0\n")
    for alias in _aliases(tmp_path, src):
        with pytest.raises(UsageError, match="same file as the input"):
            targets.check_output(alias, [str(src)])
    targets.check_output(str(tmp_path / "other.csv"), [str(src)])
    (tmp_path / "dir").mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        targets.check_output(str(tmp_path / "dir"), [str(src)])
    with pytest.raises(OutputError, match="does not exist"):
        targets.check_output(str(tmp_path / "nope" / "x.csv"), [str(src)])
    with pytest.raises(UsageError, match="inside the input directory"):
        targets.check_output(str(tmp_path / "dir" / "out"), [str(tmp_path / "dir")], directory=True)


def test_special_targets_are_written_through_and_symlinks_kept(tmp_path):
    targets.write_bytes_atomic("/dev/null", b"x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    real = tmp_path / "real.json"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    targets.write_bytes_atomic(str(link), b"new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640  # the replaced file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_a_failed_write_leaves_neither_output_nor_temp_file(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError):
        with targets.atomic_output(str(target)) as fh:
            fh.write(b"partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == [] and not targets._live_temps
    with pytest.raises(OutputError, match="No space left"):
        targets.write_bytes_atomic("/dev/full", b"x" * 100_000)


def test_fifo_output_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    targets.write_bytes_atomic(str(fifo), b"hello\n")
    assert reader.communicate(timeout=10)[0] == b"hello\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signals_remove_the_temp_file(tmp_path, sig):
    """A run stopped mid-stream by a signal exits 128+N and leaves no output, no temp file."""
    rng = np.random.default_rng(0)
    s = rng.random(3000)
    csv = "score,label\n" + "".join(f"{v:.6f},{int(v > 0.5)}\n" for v in s)
    (tmp_path / "cal.csv").write_text(csv)
    subprocess.run([*calib_cmd(), "fit", "cal.csv", "-o", "m.json"], cwd=tmp_path, check=True,
                   capture_output=True)
    proc = subprocess.Popen([*calib_cmd(), "apply", "m.json", "-", "-o", "out.parquet"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    row = "0.5,1\n".encode()
    proc.stdin.write(b"score,label\n" + row * 1_500_000)  # > one 4 MB block: the temp file exists
    proc.stdin.flush()
    deadline = time.time() + 30
    while time.time() < deadline and not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
        time.sleep(0.05)
    assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir()), "the run never started writing"
    proc.send_signal(sig)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 128 + sig
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cal.csv", "m.json"]


def test_closed_pipe_is_quiet_but_gates_still_decide(tmp_path):
    rng = np.random.default_rng(1)
    p = rng.random(20000)
    y = (rng.random(20000) < p).astype(int)
    lines = "".join(f"{a:.6f},{b},f{i % 50}\n" for i, (a, b) in enumerate(zip(p, y)))
    (tmp_path / "t.csv").write_text("p,label,field\n" + lines)
    base = [*calib_cmd(), "evaluate", "t.csv", "--prob-col", "p", "--field-col", "field", "--by-field"]
    for extra, code in (([], 0), (["--fail-below", "auc=0.99"], 1)):
        proc = subprocess.run(f"set -o pipefail; {' '.join(base + extra)} | head -c 1 >/dev/null",
                              shell=True, cwd=tmp_path, capture_output=True, executable="/bin/bash")
        assert proc.returncode == code, proc.stderr
        assert b"Traceback" not in proc.stderr and b"Broken pipe" not in proc.stderr


# `io.targets`' output directories: what `--force` may replace (a directory holding calib's

def _written(tmp_path):
    """An output directory the way `atomic_output_dir` leaves it."""
    out = tmp_path / "out"
    with targets.atomic_output_dir(str(out)) as tmp:
        (tmp.path / "k=1").mkdir()
        (tmp.path / "k=1" / "p.parquet").write_bytes(b"PAR1 data PAR1")
        (tmp.path / "q.csv").write_text("score\n0.5\n")
        tmp.extra["rows"] = 1
    return out


def test_marker_lists_what_was_written(tmp_path):
    out = _written(tmp_path)
    doc = json.loads((out / targets.MARKER).read_text())
    assert doc["format"] == "calibcli.output" and doc["rows"] == 1
    assert doc["files"] == {"k=1/p.parquet": 14, "q.csv": 10}
    targets.check_output_dir(str(out), force=True)
    with pytest.raises(CalibError, match="already exists and is not empty"):
        targets.check_output_dir(str(out), force=False)


def _added_file(out):
    (out / "notes.txt").write_text("mine")


def _added_folder(out):
    (out / "empty").mkdir()


def _changed_size(out):
    (out / "q.csv").write_text("score\n0.5\n0.6\n")


def _link_to_elsewhere(out):
    os.symlink("/etc", out / "etc")


def _marker_garbage(out):
    (out / targets.MARKER).write_text("not json")


def _marker_symlink(out):
    real = out.parent / "marker.json"
    real.write_bytes((out / targets.MARKER).read_bytes())
    (out / targets.MARKER).unlink()
    os.symlink(real, out / targets.MARKER)


def _marker_gone(out):
    (out / targets.MARKER).unlink()


def _wrong_format(out):
    doc = json.loads((out / targets.MARKER).read_text())
    doc["format"] = "something.else"
    (out / targets.MARKER).write_text(json.dumps(doc))


@pytest.mark.parametrize("spoil", [_added_file, _added_folder, _changed_size, _link_to_elsewhere,
                                   _marker_garbage, _marker_symlink, _marker_gone, _wrong_format])
def test_force_refuses_a_directory_that_is_not_only_calibs(tmp_path, spoil):
    out = _written(tmp_path)
    spoil(out)
    before = sorted(os.walk(out))
    with pytest.raises(CalibError, match=r"--force replaces only a directory calib wrote"):
        targets.check_output_dir(str(out), force=True)
    with pytest.raises(CalibError):
        with targets.atomic_output_dir(str(out), force=True):
            raise AssertionError("must not start")
    assert sorted(os.walk(out)) == before


def test_force_replaces_calibs_directory(tmp_path):
    out = _written(tmp_path)
    with targets.atomic_output_dir(str(out), force=True) as tmp:
        (tmp.path / "new.csv").write_text("x\n")
    assert sorted(p.name for p in out.iterdir()) == [targets.MARKER, "new.csv"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
