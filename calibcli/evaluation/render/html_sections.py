"""Sections of the HTML report (`html.py`): escaping and tables, folded sections, the CORP
decomposition, the tests behind the verdict, the probability intervals and what they
guarantee, and the multicalibration segments. Each returns HTML text ("" when it has nothing
to show)."""

from __future__ import annotations

import html

from calibcli.io.console import cell
from calibcli.evaluation.render import report as render
from calibcli.evaluation.verdict import LEVEL

DECOMPOSITION = (("brier_mcb", "Brier MCB ↓"), ("brier_dsc", "Brier DSC ↑"), ("brier_unc", "Brier UNC"),
                 ("log_loss_mcb", "log-loss MCB ↓"), ("log_loss_dsc", "log-loss DSC ↑"),
                 ("log_loss_unc", "log-loss UNC"))


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def grid_html(grid: render.Grid, caption: str | None = None) -> str:
    """A `report.Grid` as an HTML table (a line break in a cell stays one), in a box that scrolls
    sideways when the table is wider than the page; the text columns (`grid.left`) left-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in grid.headers)

    def cell_html(i: int, value: str) -> str:
        tag = "th" if i == 0 else "td"
        css = ' class="text"' if 0 < i < grid.left else ""
        parts = value.split("\n")
        inner = escape(parts[0]) + "".join(f"<br><small>{escape(p)}</small>" for p in parts[1:])
        return f"<{tag}{css}>{inner}</{tag}>"

    body = "".join("<tr>" + "".join(cell_html(i, v) for i, v in enumerate(row)) + "</tr>" for row in grid.rows)
    title = caption if caption is not None else " ".join(grid.title)
    caption_html = f"<caption>{escape(title)}</caption>" if title else ""
    return f'<div class="wide"><table>{caption_html}<tr>{head}</tr>{body}</table></div>'


def folded(summary: str, body: str, open_: bool = False) -> str:
    """A `<details>` section (nothing when `body` is empty)."""
    if not body:
        return ""
    return f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>{body}</details>"


def decomposition(report) -> str:
    """Per result: the CORP decomposition S(p) = MCB − DSC + UNC of Brier and log-loss, corp-p
    (the metrics of it that were computed: `--metrics` chooses)."""
    keys = [(k, h) for k, h in DECOMPOSITION if report.results and k in report.results[0].metrics]
    if not keys:
        return ""
    rows = [[cell(r.name), *(render.fmt(r.metrics[k]) for k, _ in keys),
             render.fmt(r.metrics.get("corp_p", (r.corp or {}).get("p_value")))] for r in report.results]
    grid = render.Grid([], ["probabilities", *(h for _, h in keys), "corp-p ↑"], rows)
    return ("<p>S(p) = MCB − DSC + UNC: miscalibration (what recalibrating p by PAV would save), "
            "discrimination, uncertainty; corp-p is the p-value of the resampling test of calibration "
            "(n/a without bands).</p>" + grid_html(grid, ""))


def _p(value) -> str:
    if value is None or value != value:
        return "n/a"
    return "<1e-4" if value < 1e-4 else f"{value:.4f}"


def tests(report) -> str:
    """Per result: every test of the verdict's family with its p-value, Holm-adjusted p-value and outcome."""
    out = []
    for r in report.results:
        v = getattr(r, "verdict", None)
        if v is None:
            continue
        rows = [[t["test"], t["what"], render.fmt(t.get("statistic")), _p(t.get("p_value")), _p(t.get("adjusted_p")),
                 "yes" if t.get("significant") else "no"] for t in v.evidence]
        grid = render.Grid([], ["test", "what it checks", "statistic", "p", "adjusted p (Holm)", "significant"],
                           rows, left=2)
        out.append(grid_html(grid, cell(r.name)))
    if not out:
        return ""
    return ("<p>The verdict is \"miscalibrated\" when a test's p-value, adjusted over the whole family by Holm's "
            f"method, is at most {LEVEL:g}; \"calibrated within noise\" otherwise; \"too few rows to tell\" when the rows "
            "carry too little information for the tests (sum of p(1 − p) below 10). Binary: calibration in the "
            "large (mean), the score test of calibration slope 1 (spread), Kuiper's test of the cumulative "
            "differences and the exact binomial test of each bin of ECE (Bonferroni over the bins); K classes: "
            "those four on the top label, and the mean and spread tests of each class. Where: the bin with the "
            "largest gap among those significant after Holm's adjustment over the bins.</p>" + "".join(out))


GUARANTEE = (
    "<p><b>What is guaranteed.</b> For intervals from an inductive Venn-Abers map (<code>calib fit --method "
    "venn-abers</code>, variant <code>ivap</code>, the default), when the calibration rows and these rows are "
    "exchangeable (drawn alike from one population, in any order): the end of each row's interval that was "
    "computed with its true label (the high end for a positive, the low end for a negative) is a perfectly "
    "calibrated probability. Among the rows where it is about q, a share q are positive, in expectation "
    "(Vovk &amp; Petej 2014, Theorem 1; Vovk, Petej &amp; Fedorova 2015). So one end of each interval is a "
    "calibrated probability of its row, and the point p, which lies between the ends, is within the interval's "
    "width of it.</p>"
    "<p><b>What is not.</b> The interval is not a confidence interval of the row's true probability: no share of "
    "rows is promised to have theirs inside it. The point p is not itself guaranteed calibrated (it is close to "
    "it when the intervals are narrow). Nothing holds when these rows differ from the calibration rows (a shift "
    "in time, a new population): the check below is one way to see it. Intervals of the cross variant "
    "(<code>cvap</code>) "
    "carry no guarantee.</p>"
    "<p><b>The check on these rows.</b> The label-side end (high for positives, low for negatives) is tested "
    "like any probability column, with the verdict's tests; its ECE and the smallest adjusted p-value are the "
    "metrics <i>label-side ECE</i> and <i>label-side p</i>. The guarantee is an average over the draw of the "
    "calibration rows as well: all these rows share one calibration set's sampling errors (a small step of the "
    "isotonic fit), so with many rows the label-side end can be found miscalibrated while the guarantee holds. "
    "Read such a result as: on these rows, this map's intervals are not calibrated (a shift since calibration, "
    "or too few calibration rows), not as a failed theorem. <b>Bin-rate coverage</b> (once called interval "
    "coverage) is only a proxy: the share of rows whose interval holds the observed positive rate of their bin "
    "of p. Venn-Abers intervals are about 1/(calibration rows) wide and a bin's rate mixes rows of many p, so "
    "a low value, even 0.09, is expected and no failure of the guarantee.</p>")


def intervals(report) -> str:
    """The probability-interval section: the guarantee, the widths and the label-side check."""
    with_view = [r for r in report.results if getattr(r, "interval", None)]
    if not with_view:
        return ""
    keys = ["mean", "q0", "q10", "q50", "q90", "q99", "q100"]
    heads = ["probabilities", "mean width", "min", "10%", "median", "90%", "99%", "max"]
    rows = [[cell(r.name), *(render.fmt(r.interval["width"].get(k)) for k in keys)] for r in with_view]
    checks = "".join(
        f'<li><b>{escape(cell(r.name))}</b>: label-side end, tested as a probability column: '
        f'{escape(r.interval["label_side"]["text"])} '
        f'(label-side ECE {render.fmt(r.metrics.get("interval_label_ece"))}, bin-rate coverage '
        f'{render.fmt(r.metrics.get("interval_coverage"))})</li>' for r in with_view)
    return ("<h2>Probability intervals</h2>" + GUARANTEE + f"<ul>{checks}</ul>"
            + grid_html(render.Grid([], heads, rows), "Interval widths (high − low), quantiles over the rows"))


def segments(report) -> str:
    """The worst segments of each result with --segment-col, as every other output shows them
    (`report.segment_grids`: rows, predicted and observed rates, ECCE, σ, ECCE/σ and p)."""
    return "".join(grid_html(g) for g in render.segment_grids(report))


__all__ = ["decomposition", "escape", "folded", "grid_html", "intervals", "segments", "tests"]
