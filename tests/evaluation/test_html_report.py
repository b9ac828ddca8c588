"""`calib evaluate --plot`: what the diagrams draw (checked against independent references)
and the HTML report, opened in a real headless browser (Debian's `chromium`)."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.evaluation.render import figures
from repo import REPO

runner = CliRunner()


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    """3 000 rows: `good` calibrated, `over` over-confident, `tied` rounded to 0.1 (heavy ties)."""
    rng = np.random.default_rng(11)
    n = 3000
    field = rng.choice(["a", "b", "c"], n)
    good = rng.uniform(0.02, 0.98, n)
    label = (rng.random(n) < good).astype(int)
    over = np.clip(0.5 + 1.6 * (good - 0.5), 0, 1)
    tied = np.round(good, 1)
    path = tmp_path_factory.mktemp("report") / "scores.csv"
    path.write_text("field,good,over,tied,label\n" + "".join(
        f"{f},{g!r},{o!r},{t!r},{y}\n" for f, g, o, t, y in zip(field, good.tolist(), over.tolist(),
                                                                  tied.tolist(), label.tolist())))
    return path, good, over, tied, label


def _bins(p, bins, strategy):
    """Each row's bin as ECE bins rows: min(floor(B p), B - 1), or (quantile) as scikit-learn's
    calibration_curve does, searchsorted on the inner percentiles of p."""
    if strategy == "uniform":
        return np.minimum((p * bins).astype(np.int64), bins - 1)
    return np.searchsorted(np.percentile(p, np.linspace(0, 100, bins + 1))[1:-1], p)


def test_binned_diagram_uses_the_bins_of_ece_and_never_splits_a_tie(scores):
    """Each bin's rows, mean p and positive rate by binning every row; ties stay whole."""
    path, good, _, tied, label = scores
    for strategy, bins in (("uniform", 10), ("quantile", 7), ("uniform", 13)):
        doc = json.loads(runner.invoke(app, ["evaluate", str(path), "--prob-col", "good", "--prob-col", "tied",
                                             "--plot", "-", "--ece-bins", str(bins), "--ece-strategy", strategy,
                                             "--json"]).stdout)
        for r, p in zip(doc["results"], (good, tied)):
            b = _bins(p, bins, strategy)
            rows = np.bincount(b, minlength=bins)
            keep = rows > 0
            got = r["reliability"]
            assert [g["rows"] for g in got] == rows[keep].tolist()
            assert [g["positive_rate"] for g in got] == pytest.approx(
                (np.bincount(b, weights=label, minlength=bins) / np.maximum(rows, 1))[keep], abs=1e-12)
            assert [g["mean_p"] for g in got] == pytest.approx(
                (np.bincount(b, weights=p, minlength=bins) / np.maximum(rows, 1))[keep], abs=1e-12)
            for g in got:  # every row with p in [p_min, p_max] is counted in this bin: no tie split
                assert g["rows"] == np.count_nonzero((p >= g["p_min"]) & (p <= g["p_max"]))
                assert g["rate_low"] <= g["positive_rate"] <= g["rate_high"]


def test_corp_figure_draws_the_isotonic_regression(scores):
    """The drawn curve is the isotonic regression of y on p (scikit-learn), within the band's
    rounds, and the decomposition in the table adds up to the Brier score."""
    from sklearn.isotonic import IsotonicRegression

    path, _, over, _, label = scores
    doc = json.loads(runner.invoke(app, ["evaluate", str(path), "--prob-col", "over", "--plot", "-", "--bands", "30",
                                         "--json"]).stdout)
    r = doc["results"][0]
    fitted = IsotonicRegression().fit(over, label).predict(np.array(r["corp"]["p"]))
    assert np.max(np.abs(np.array(r["corp"]["recalibrated"]) - fitted)) < 1e-12
    m = r["metrics"]
    assert m["brier_mcb"] - m["brier_dsc"] + m["brier_unc"] == pytest.approx(m["brier"], abs=1e-12)
    line = figures._decomposition_line(type("Row", (), {"metrics": m, "corp": r["corp"]})())
    assert line == (f"Brier MCB {m['brier_mcb']:.4f} DSC {m['brier_dsc']:.4f} UNC {m['brier_unc']:.4f}, "
                    f"corp-p {r['corp']['p_value']:.4f}")


@pytest.mark.parametrize("diagram", ["corp", "smooth", "binned"])
def test_each_diagram_draws_its_data(scores, tmp_path, diagram):
    """Every diagram's PNG shows its curve (the red of figures.CURVE_COLOR) or, binned, its points."""
    import matplotlib.image

    path, *_ = scores
    out = tmp_path / f"{diagram}.png"
    res = runner.invoke(app, ["evaluate", str(path), "--prob-col", "good", "--prob-col", "over", "--plot", str(out),
                              "--diagram", diagram, "--bands", "20"])
    assert res.exit_code == 0, res.stderr
    image = matplotlib.image.imread(out)[..., :3]
    color = figures.POINT_COLOR if diagram == "binned" else figures.CURVE_COLOR
    assert _pixels_of(image, color) > 300
    if diagram == "corp":  # and the consistency bands
        assert _pixels_of(image, figures.BAND_COLOR, alpha=figures.BAND_ALPHA) > 300


def _chromium(page, tmp_path):
    """(screenshot as an RGB array, the console messages) of `page` in headless chromium."""
    import matplotlib.image

    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    shot = tmp_path / f"{page.stem}.png"
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,4000", "--hide-scrollbars",
         f"--screenshot={shot}", "--enable-logging=stderr", "--v=0", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return matplotlib.image.imread(shot)[..., :3], console


def _pixels_of(image, hex_color, tol=0.06, alpha=1.0):
    """Pixels of `hex_color` (drawn with `alpha` over white)."""
    want = 1 - alpha * (1 - np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]))
    return int(np.count_nonzero(np.all(np.abs(image - want) < tol, axis=-1)))


def test_the_browser_check_sees_console_errors_and_blank_figures(tmp_path):
    """The check below can fail: a page that logs an error, and one without the figure."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("broken")</script></body></html>')
    image, console = _chromium(bad, tmp_path)
    assert any("broken" in line for line in console)
    assert _pixels_of(image, figures.CURVE_COLOR) == 0


def test_html_report_renders_in_chromium_with_every_part(scores, tmp_path):
    pytest.importorskip("matplotlib")
    path, *_ = scores
    out = tmp_path / "report.html"
    res = runner.invoke(app, ["evaluate", str(path), "--prob-col", "good", "--prob-col", "over", "--field-col",
                              "field", "--by-field", "--bootstrap", "20", "--fail-above", "ece=0.05",
                              "--fail-below", "auc=0.6", "--plot", str(out)])
    assert res.exit_code == 1, res.stderr  # `over` fails the ECE gate
    page = out.read_text()
    from calibcli import __version__

    for part in (f"calib evaluate {path} --prob-col good --prob-col over --field-col field", __version__,
                 "3000 rows", "ECE ↓", "AUC ↑", "slope ◎", "MCE rows", "Brier MCB", "log-loss DSC", "corp-p",
                 "<summary>By field</summary>", "the 3 of 3 values of", "passed", '<li class="fail">ECE of &#x27;over&#x27;',
                 "<svg", "UTC"):
        assert part in page, part
    assert page.count('class="ok text">passed</td>') == 3  # the passed checks are listed too
    assert "<script" not in page and "src=" not in page
    image, console = _chromium(out, tmp_path)
    assert console == []
    assert _pixels_of(image, figures.CURVE_COLOR) > 500  # the PAV curves are drawn
    assert _pixels_of(image, figures.BAND_COLOR, alpha=figures.BAND_ALPHA) > 500  # and their bands


@pytest.fixture
def drawn(monkeypatch):
    """The figures `calib evaluate --plot` draws, kept when pyplot closes them."""
    plt = pytest.importorskip("matplotlib.pyplot")
    kept = []
    close = plt.close

    def keep(fig=None):
        kept.append(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", keep)
    return kept


def _texts_inside(fig):
    """Every title of the figure lies within it (nothing clipped at either end)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a closed figure has lost its canvas: draw it again at the saved dpi
    fig.set_dpi(100)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    texts = [fig._suptitle] + [ax.title for ax in fig.axes]
    for text in texts:
        if text is not None and text.get_text():
            box = text.get_window_extent(renderer)
            assert box.x0 >= 0 and box.x1 <= width and box.y1 <= height, text.get_text()
    return [t.get_text() for t in texts if t is not None]


def test_titles_of_long_paths_and_names_fit_the_figure(tmp_path, drawn):
    """A long input path titles the figure by its file name (the HTML report keeps the path);
    a long column name is wrapped, not cut."""
    folder = tmp_path / ("a_rather_long_directory_name_" * 3) / "another_nested_directory"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 400)
    name = "probability_of_the_positive_class_from_the_newest_model_" * 2
    src = folder / "scores_of_the_model.csv"
    src.write_text(f"{name},label\n" + "".join(f"{a!r},{int(b)}\n" for a, b in zip(p.tolist(), rng.random(400) < p)))
    res = runner.invoke(app, ["evaluate", str(src), "--prob-col", name, "--plot", str(tmp_path / "long.png")])
    assert res.exit_code == 0, res.stderr
    texts = _texts_inside(drawn[-1])
    assert texts[0].startswith("scores_of_the_model.csv: 400 rows") and str(folder) not in texts[0]
    assert name.replace("\n", "") in "".join(texts[1].split("\n")[:-1])  # all of it, over several lines
    assert "Brier MCB" in texts[1]
    res = runner.invoke(app, ["evaluate", str(src), "--prob-col", name, "--plot", str(tmp_path / "long.html")])
    assert str(src) in (tmp_path / "long.html").read_text()  # the report names the whole path


def test_kclass_corp_figure_titles_the_top_label_decomposition(tmp_path, drawn):
    """The default K-class metrics have no decomposition: the CORP view carries the top label's,
    equal to the top-label metrics when they are asked for."""
    from pathlib import Path

    digits = REPO / "examples" / "data" / "digits_test.csv"
    res = runner.invoke(app, ["evaluate", str(digits), "--prob-cols", "p_*", "--plot", str(tmp_path / "k.png"),
                              "--bands", "10"])
    assert res.exit_code == 0, res.stderr
    texts = _texts_inside(drawn[-1])
    assert "top-label Brier MCB" in texts[1] and "DSC" in texts[1] and "UNC" in texts[1]
    doc = json.loads(runner.invoke(app, ["evaluate", str(digits), "--prob-cols", "p_*", "--plot", "-", "--bands", "10",
                                         "--metrics", "default,top-label-brier-mcb,top-label-brier-dsc,"
                                         "top-label-brier-unc", "--json"]).stdout)
    r = doc["results"][0]
    for k in ("mcb", "dsc", "unc"):
        assert r["corp"]["decomposition"][k] == pytest.approx(r["metrics"]["top_label_brier_" + k], abs=1e-12)


def test_smooth_curve_fades_where_p_has_no_rows(tmp_path, drawn):
    """p ~ Beta(2, 5) (none above 0.85): the smoothed curve is faint beyond the rows, in full
    where they are dense, as relplot draws it by the density of p."""
    from matplotlib.collections import LineCollection

    rng = np.random.default_rng(5)
    p = np.minimum(rng.beta(2, 5, 3000), 0.85)
    src = tmp_path / "beta.csv"
    src.write_text("p,label\n" + "".join(f"{a!r},{int(b)}\n" for a, b in zip(p.tolist(), rng.random(p.size) < p)))
    res = runner.invoke(app, ["evaluate", str(src), "--prob-col", "p", "--diagram", "smooth",
                              "--plot", str(tmp_path / "s.png")])
    assert res.exit_code == 0, res.stderr
    curve = next(c for ax in drawn[-1].axes for c in ax.collections if isinstance(c, LineCollection))
    x = np.array([seg[0][0] for seg in curve.get_segments()])
    alpha = curve.get_colors()[:, 3]
    assert np.all(alpha[x > 0.95] == figures.FAINT) and np.all(alpha[(x > 0.1) & (x < 0.4)] == 1.0)
    width = np.asarray(curve.get_linewidths())
    assert width[x > 0.95].max() < width[(x > 0.1) & (x < 0.4)].min()
    assert figures.fade([0.0, 0.01, 0.5, 1.0]) == [0.0, 0.0, 0.5, 1.0]
