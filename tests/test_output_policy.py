"""`io.targets`' output directories: what `--force` may replace (a directory holding calib's
marker and exactly the files it lists) and what it must refuse, in-process."""

from __future__ import annotations

import json
import os

import pytest

from calibcli.errors import CalibError
from calibcli.io import targets


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
