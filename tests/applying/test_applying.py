"""`calib apply` over directories and globs of Parquet parts (`calibcli.applying.stream`)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
from synthetic import rounded_scores, write_parquet
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.io import parquet

runner = CliRunner()


def test_apply_directory_of_parts_mirrors_them(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "PARQUET_BATCH_ROWS", 700)  # several batches per part through the writer thread
    s, y = rounded_scores(4000)
    write_parquet(tmp_path / "parts" / "day=1" / "a.parquet", s[:1500], y[:1500])
    write_parquet(tmp_path / "parts" / "day=2" / "b.parquet", s[1500:], y[1500:])
    (tmp_path / "parts" / "_SUCCESS").write_text("")
    assert runner.invoke(app, ["fit", str(tmp_path / "parts" / "day=1" / "a.parquet"),
                               "-o", str(tmp_path / "map.json")]).exit_code == 0
    res = runner.invoke(app, ["apply", str(tmp_path / "map.json"), str(tmp_path / "parts"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert res.stderr == ""  # stderr is not a terminal: no progress bar
    outs = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.parquet"))
    assert outs == ["day=1/a.parquet", "day=2/b.parquet"]
    from calibcli.maps import envelope as maps

    cal, _ = maps.load_map(str(tmp_path / "map.json"))
    got = pq.read_table(tmp_path / "out" / "day=2" / "b.parquet")
    assert got.column_names == ["score", "label", "calibrated"]
    assert np.asarray(got.column("calibrated")).tobytes() == cal.predict(s[1500:]).tobytes()
    res = runner.invoke(app, ["apply", str(tmp_path / "map.json"), str(tmp_path / "parts" / "*" / "*.parquet"),
                              "-o", str(tmp_path / "out_csv"), "--output-format", "csv"])
    assert res.exit_code == 0 and (tmp_path / "out_csv" / "day=1" / "a.csv").exists()
    # an existing non-empty output directory is refused; stdout is refused
    res = runner.invoke(app, ["apply", str(tmp_path / "map.json"), str(tmp_path / "parts"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2 and "already exists and is not empty" in res.stderr
    res = runner.invoke(app, ["apply", str(tmp_path / "map.json"), str(tmp_path / "parts")])
    assert res.exit_code == 2 and "needs -o DIR" in res.stderr


def test_apply_parts_failure_leaves_no_output_directory(tmp_path):
    s, y = rounded_scores(200)
    write_parquet(tmp_path / "parts" / "a.parquet", s, y)
    bad = s.copy()
    bad[17] = np.nan
    write_parquet(tmp_path / "parts" / "b.parquet", bad, y)
    assert runner.invoke(app, ["fit", str(tmp_path / "parts" / "a.parquet"), "-o", str(tmp_path / "m.json")]).exit_code == 0
    res = runner.invoke(app, ["apply", str(tmp_path / "m.json"), str(tmp_path / "parts"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert f"{tmp_path / 'parts' / 'b.parquet'}: column 'score', row 18" in res.stderr
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
