"""Score summaries (`calibcli.fitting.summary`): map/reduce, save/load, `calib summarize`, `fit --from-summary`."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synthetic import rounded_scores, write_parquet
from typer.testing import CliRunner

from calibcli.fitting import summary
from calibcli.calibrators import create
from calibcli.cli.app import app
from calibcli.io import parquet

runner = CliRunner()



def test_merge_of_chunk_summaries_equals_summary_of_all_rows():
    s, y = rounded_scores()
    whole = summary.summarize(s, y)
    rng = np.random.default_rng(1)
    cuts = np.sort(rng.choice(np.arange(1, s.size), 6, replace=False))
    chunks = list(zip(np.split(s, cuts), np.split(y, cuts)))
    rng.shuffle(chunks)
    # The map/reduce a Dask or Spark job runs, in plain Python with the same public functions.
    merged = functools.reduce(lambda a, b: summary.merge([a, b]),
                              map(lambda c: summary.summarize(*c), chunks))
    for name in ("score", "n0", "n1"):
        assert np.array_equal(getattr(whole, name), getattr(merged, name))
    assert (merged.rows, merged.positives, merged.score_range) == (whole.rows, whole.positives, whole.score_range)
    assert whole.n0.sum() + whole.n1.sum() == s.size and whole.n1.sum() == y.sum()


@pytest.mark.parametrize("method", ["isotonic", "binning"])
def test_fit_on_summary_rows_is_bit_identical(method):
    """Bit-identical with 0/1 targets; Platt's targets (the default) are fractional, so the
    pooled sums depend on the summation order and the maps agree to rounding."""
    s, y = rounded_scores()
    classical = {"platt_correction": False}
    direct = create(method, classical).fit(s, y)
    from_summary = create(method, classical).fit(*summary.fit_rows(summary.summarize(s, y)))
    for key, value in direct.get_state().items():
        assert np.asarray(value).tobytes() == np.asarray(from_summary.get_state()[key]).tobytes()
    direct = create(method).fit(s, y)
    from_summary = create(method).fit(*summary.fit_rows(summary.summarize(s, y)))
    g = np.linspace(-0.1, 1.1, 2001)
    np.testing.assert_allclose(from_summary.predict(g), direct.predict(g), rtol=0, atol=1e-14)


def test_logistic_on_summary_matches_rows():
    s, y = rounded_scores()
    direct = create("logistic").fit(s, y)
    ss, yy, ww = summary.fit_rows(summary.summarize(s, y))
    fitted = create("logistic").fit(ss, yy, sample_weight=ww)
    assert fitted.a_ == pytest.approx(direct.a_, rel=1e-7) and fitted.b_ == pytest.approx(direct.b_, rel=1e-7)


def test_bucketed_summary_moves_scores_at_most_half_a_step():
    rng = np.random.default_rng(2)
    s = rng.normal(size=20000)
    y = (rng.random(s.size) < 0.3).astype(float)
    step = 1e-3
    b = summary.summarize(s, y, step=step)
    assert b.size <= (s.max() - s.min()) / step + 2
    assert b.n0.sum() + b.n1.sum() == s.size
    # every row's representative is within step/2 (plus rounding) of its score
    rep = b.score[np.searchsorted(b.score, np.rint(s / step) * step)]
    assert np.max(np.abs(rep - s)) <= step / 2 * (1 + 1e-9)
    with pytest.raises(Exception, match="different steps"):
        summary.merge([b, summary.summarize(s, y)])


def test_save_load_parquet_and_json_round_trip(tmp_path):
    s, y = rounded_scores()
    w = np.random.default_rng(4).random(s.size)
    original = summary.summarize(s, y, w)
    for name in ("s.parquet", "s.json"):
        summary.save(original, str(tmp_path / name))
        back = summary.load(str(tmp_path / name))
        assert back.score.tobytes() == original.score.tobytes()
        assert back.n0.tobytes() == original.n0.tobytes() and back.n1.tobytes() == original.n1.tobytes()
        assert (back.rows, back.positives, back.weighted) == (original.rows, original.positives, True)



def test_cli_summarize_then_fit_from_summary_gives_the_same_map(tmp_path):
    s, y = rounded_scores(8000)
    write_parquet(tmp_path / "cal.parquet", s, y)
    direct = runner.invoke(app, ["fit", str(tmp_path / "cal.parquet"), "-p", "platt_correction=false"])
    assert direct.exit_code == 0, direct.output
    res = runner.invoke(app, ["summarize", str(tmp_path / "cal.parquet"), "-o", str(tmp_path / "sum.parquet")])
    assert res.exit_code == 0 and "8000 rows" in res.stderr
    res = runner.invoke(app, ["fit", "--from-summary", str(tmp_path / "sum.parquet"), "-p", "platt_correction=false"])
    assert res.exit_code == 0, res.output
    a, b = json.loads(direct.stdout), json.loads(res.stdout)
    assert a["state"] == b["state"]
    assert a["training"]["rows"] == b["training"]["rows"] == 8000
    assert b["training"]["after"]["log_loss"] == pytest.approx(a["training"]["after"]["log_loss"], rel=1e-12)
    assert "8000 rows" in res.stderr


def test_spark_style_summary_directory_fits(tmp_path):
    """What the README's Spark job writes: a directory of parts with score, n0, n1 and no
    calibcli metadata, scores repeated across parts. Emulated with pyarrow's group_by."""
    s, y = rounded_scores(6000)
    import pyarrow.compute as pc

    table = pa.table({"score": s, "label": y})
    (tmp_path / "summary").mkdir()
    for i, part in enumerate((table.slice(0, 2500), table.slice(2500))):
        agg = part.group_by("score").aggregate([("label", "sum"), ("label", "count")])
        n1 = agg.column("label_sum")
        n0 = pc.subtract(agg.column("label_count").cast(pa.float64()), n1)
        pq.write_table(pa.table({"score": agg.column("score"), "n0": n0, "n1": n1}),
                       tmp_path / "summary" / f"part-{i}.parquet")
    (tmp_path / "summary" / "_SUCCESS").write_text("")
    write_parquet(tmp_path / "cal.parquet", s, y)
    exact = ["-m", "isotonic", "-p", "platt_correction=false"]  # 0/1 targets: bit-identical sums
    res = runner.invoke(app, ["fit", "--from-summary", str(tmp_path / "summary"), *exact])
    direct = runner.invoke(app, ["fit", str(tmp_path / "cal.parquet"), *exact])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["state"] == json.loads(direct.stdout)["state"]
    assert json.loads(res.stdout)["training"]["rows"] == 6000


def test_fit_from_summary_errors(tmp_path):
    res = runner.invoke(app, ["fit"])
    assert res.exit_code == 2 and "missing the score file to fit on (or --from-summary FILE)" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    res = runner.invoke(app, ["fit", "--from-summary", str(bad)])
    assert res.exit_code == 2 and f"error: {bad}: not a calibcli summary" in res.stderr
    pq.write_table(pa.table({"score": [0.1, 0.2], "n0": [1.0, -1.0], "n1": [1.0, 1.0]}), tmp_path / "neg.parquet")
    res = runner.invoke(app, ["fit", "--from-summary", str(tmp_path / "neg.parquet")])
    assert res.exit_code == 2 and "column 'n0', row 2" in res.stderr
    res = runner.invoke(app, ["fit", "--from-summary", str(bad), "--weight-col", "w"])
    assert res.exit_code == 2 and "give them to `calib summarize`" in res.stderr


def test_summarize_reports_the_row_of_a_bad_label_in_a_later_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "PARQUET_BATCH_ROWS", 1000)
    s, y = rounded_scores(3000)
    y[2500] = 2.0
    write_parquet(tmp_path / "cal.parquet", s, y)
    res = runner.invoke(app, ["summarize", str(tmp_path / "cal.parquet"), "-o", str(tmp_path / "s.json")])
    assert res.exit_code == 2 and "column 'label', row 2501: label 2.0 is not 0 or 1" in res.stderr
    assert not (tmp_path / "s.json").exists()


def test_subprocess_fit_from_summary_on_stdin(tmp_path):
    s, y = rounded_scores(3000)
    write_parquet(tmp_path / "cal.parquet", s, y)
    res = runner.invoke(app, ["summarize", str(tmp_path / "cal.parquet")])
    assert res.exit_code == 0 and json.loads(res.stdout)["format"] == "calibcli.fitting.summary"
    fit = subprocess.run([sys.executable, "-m", "calibcli", "fit", "--from-summary", "-", "-m", "logistic"],
                         input=res.stdout, capture_output=True, text=True)
    assert fit.returncode == 0 and "on 3000 rows" in fit.stderr
    # these scores are close to calibrated: Platt's sigmoid of the raw score fits them worse, and says so
    assert all(line.startswith(("fitted logistic", "  ", "warning: logistic: the map's training log-loss"))
               for line in fit.stderr.splitlines())
    envelope = json.loads(fit.stdout)
    assert envelope["method"] == "logistic" and envelope["training"]["from_summary"]["entries"] == np.unique(s).size


@pytest.mark.parametrize("kind", ["frequency", "importance"])
def test_weighted_fit_records_the_same_training_quality_as_from_its_summary(tmp_path, kind):
    """The training block weighs its log-loss and Brier by --weight-col on both paths."""
    s, y = rounded_scores(6000)
    w = np.random.default_rng(5).integers(1, 6, s.size).astype(float)
    pq.write_table(pa.table({"score": s, "label": y, "w": w}), tmp_path / "cal.parquet")
    args = ["-p", "platt_correction=false", "--weight-col", "w", "--weight-kind", kind]
    direct = runner.invoke(app, ["fit", str(tmp_path / "cal.parquet"), *args])
    assert direct.exit_code == 0, direct.output
    res = runner.invoke(app, ["summarize", str(tmp_path / "cal.parquet"), "--weight-col", "w",
                              "-o", str(tmp_path / "sum.parquet")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["fit", "--from-summary", str(tmp_path / "sum.parquet"), *args[:2],
                              "--weight-kind", kind])
    assert res.exit_code == 0, res.output
    a, b = json.loads(direct.stdout)["training"], json.loads(res.stdout)["training"]
    for when in ("before", "after"):
        for metric in ("log_loss", "brier"):
            assert b[when][metric] == pytest.approx(a[when][metric], rel=1e-12)
    # and they are the weighted means, not the row means
    p = create("isotonic", {"platt_correction": False}).fit(s, y, sample_weight=w).predict(s)
    ll = -np.sum(w * np.log(np.clip(np.where(y == 1, p, 1 - p), 1e-15, None))) / w.sum()
    assert a["after"]["log_loss"] == pytest.approx(ll, rel=1e-12)
