"""The HTML report a reviewer reads (evaluation/render/html.py): the verdict first, then the
numbers with their meaning, then the diagram, the rest folded; the Venn-Abers section; and
no sideways scrolling at a desktop's 1280 px or a phone's 390 px, measured in headless Chromium
(the page in a same-origin iframe of that width: the window itself cannot be narrower than
500 px in headless mode)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess

import numpy as np
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app

runner = CliRunner()


def _write(path, columns: dict) -> None:
    names = list(columns)
    values = [np.asarray(columns[n]).tolist() for n in names]
    path.write_text(",".join(names) + "\n" + "".join(",".join(map(str, row)) + "\n" for row in zip(*values)))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Three reports: binary (two columns, a field, a long field value), K classes, Venn-Abers intervals."""
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("layout")
    rng = np.random.default_rng(4)
    n = 3000
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < p).astype(int)
    field = rng.choice(["north", "south", "a-very-long-field-value-that-could-push-a-table-sideways-" * 2], n)
    _write(tmp / "b.csv", {"label": y, "calibrated": p, "over": 1 / (1 + np.exp(-2 * np.log(p / (1 - p)))),
                           "region": field})
    out = {}
    res = runner.invoke(app, ["evaluate", str(tmp / "b.csv"), "--prob-col", "calibrated", "--prob-col", "over",
                              "--field-col", "region", "--by-field", "--bootstrap", "20", "--fail-above", "ece=0.05",
                              "--title", "Weekly model check", "--plot", str(tmp / "binary.html")])
    assert res.exit_code == 1, res.stderr
    out["binary"] = tmp / "binary.html"
    z = rng.normal(size=(n, 3)) * 1.5
    P = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    k = (rng.random((n, 1)) > P.cumsum(1)).sum(1).clip(0, 2)
    _write(tmp / "k.csv", {"label": np.array(["cat", "dog", "bird"])[k], "p_cat": P[:, 0], "p_dog": P[:, 1],
                           "p_bird": P[:, 2]})
    res = runner.invoke(app, ["evaluate", str(tmp / "k.csv"), "--prob-cols", "p_*", "--plot", str(tmp / "k.html")])
    assert res.exit_code == 0, res.stderr
    out["kclass"] = tmp / "k.html"
    s = rng.random(2 * n)
    _write(tmp / "cal.csv", {"score": s[:n], "label": (rng.random(n) < s[:n] ** 1.5).astype(int)})
    _write(tmp / "test.csv", {"score": s[n:], "label": (rng.random(n) < s[n:] ** 1.5).astype(int)})
    assert runner.invoke(app, ["fit", str(tmp / "cal.csv"), "--method", "venn-abers", "-o", str(tmp / "va.json")]
                         ).exit_code == 0
    assert runner.invoke(app, ["apply", str(tmp / "va.json"), str(tmp / "test.csv"), "-o", str(tmp / "va.csv"),
                               "--interval"]).exit_code == 0
    res = runner.invoke(app, ["evaluate", str(tmp / "va.csv"), "--prob-col", "calibrated", "--plot",
                              str(tmp / "va.html")])
    assert res.exit_code == 0, res.stderr
    out["venn-abers"] = tmp / "va.html"
    return out


def test_the_page_reads_verdict_then_numbers_then_diagram_and_folds_the_rest(reports):
    page = reports["binary"].read_text()
    assert "<title>Weekly model check</title>" in page and "<h1>Weekly model check</h1>" in page
    order = [page.index(h) for h in ("<h2>Verdict</h2>", "<h2>The numbers that matter</h2>", "<h2>Reliability</h2>")]
    assert order == sorted(order)
    assert "calibrated within noise" in page and "over-confident" in page
    assert '<dl class="glossary">' in page and "<dt>ECE" in page
    for folded in ("Score decomposition (CORP)", "The tests behind the verdict", "By field"):
        found = re.search(r"<details[^>]*><summary>" + re.escape(folded), page)
        assert found and found.start() > page.index("<h2>Reliability</h2>"), folded
    kpage = reports["kclass"].read_text()
    assert kpage.index("<h2>Verdict</h2>") < kpage.index("<h2>The numbers that matter</h2>")
    assert "one-vs-rest" in kpage  # the K-class meaning of AUC in the glossary


def test_venn_abers_section_says_what_is_and_is_not_guaranteed(reports):
    page = html.unescape(reports["venn-abers"].read_text())
    assert "<h2>Probability intervals</h2>" in page
    for words in ("What is guaranteed", "exchangeable", "What is not", "not a confidence interval",
                  "only a proxy", "Interval widths"):
        assert words in page, words
    assert page.index("<h2>Verdict</h2>") < page.index("<h2>Probability intervals</h2>")


def _scroll_width(page, width, tmp_path):
    """(document scroll width, window width) of `page` shown `width` px wide in Chromium."""
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    probe = tmp_path / f"probe-{page.stem}-{width}.html"
    probe.write_text(
        f'<!DOCTYPE html><html><body style="margin:0"><iframe id="f" style="width:{width}px;height:900px;border:0" '
        f'srcdoc="{html.escape(page.read_text(), quote=True)}"></iframe><script>'
        "document.getElementById('f').addEventListener('load', function () {"
        "document.body.setAttribute('data-width', this.contentDocument.documentElement.scrollWidth + 'x' "
        "+ this.contentWindow.innerWidth); });</script></body></html>")
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000", "--virtual-time-budget=5000",
         "--dump-dom", probe.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-width="(\d+)x(\d+)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    return int(found.group(1)), int(found.group(2))


def test_the_probe_sees_a_page_that_overflows(tmp_path):
    wide = tmp_path / "wide.html"
    wide.write_text('<!DOCTYPE html><html><body><div style="width:900px">x</div></body></html>')
    scroll, window = _scroll_width(wide, 390, tmp_path)
    assert window == 390 and scroll > window


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("name", ["binary", "kclass", "venn-abers"])
def test_no_sideways_scrolling(reports, tmp_path, name, width):
    assert _scroll_width(reports[name], width, tmp_path) == (width, width)
