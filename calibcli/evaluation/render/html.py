"""The HTML report of `calib evaluate --plot report.html`: one self-contained page (no script,
nothing fetched) for a CI artefact. It says what made it (the command, calibcli's version,
the date: `SOURCE_DATE_EPOCH` when set, else now, in UTC; the input and its rows), then
the metric table with each metric's direction (↓ lower is better, ↑ higher, ◎ best at a
target) and bootstrap intervals, the CORP score decomposition, every gate check with its
result (passed ones too), the `--by-field` tables, and the figure (inline SVG) at the
page's width. Tables are `report.Grid`s, as the terminal shows them.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone

from calibcli.io.console import cell
from calibcli.evaluation.render import report as render
from calibcli.evaluation.metrics.binary import ALL_METRICS

STYLE = """body{font-family:sans-serif;margin:1.5em auto;max-width:80em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.2em}caption{text-align:left;font-weight:bold;padding:.3em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th:first-child,td:first-child,.meta td,.meta th{text-align:left}.meta th{background:#f4f4f4}
.ok{color:#070}.fail{color:#b00;font-weight:bold}small{color:#555}.wide{overflow-x:auto}
figure{margin:0}figure svg{width:100%;height:auto;display:block}.wide table{font-size:90%}"""
DIRECTIONS = "↓ lower is better, ↑ higher is better, ◎ best at its target (slope 1, intercept 0, z 0)"
DECOMPOSITION = (("brier_mcb", "Brier MCB ↓"), ("brier_dsc", "Brier DSC ↑"), ("brier_unc", "Brier UNC"),
                 ("log_loss_mcb", "log-loss MCB ↓"), ("log_loss_dsc", "log-loss DSC ↑"),
                 ("log_loss_unc", "log-loss UNC"))


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def grid_html(grid: render.Grid, caption: str | None = None) -> str:
    """A `report.Grid` as an HTML table (a line break in a cell stays one)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in grid.headers)
    body = "".join("<tr>" + "".join(
        f"<{'th' if i == 0 else 'td'}>{'<br><small>'.join(_e(part) for part in value.split(chr(10)))}"
        f"{'</small>' if chr(10) in value else ''}</{'th' if i == 0 else 'td'}>"
        for i, value in enumerate(row)) + "</tr>" for row in grid.rows)
    title = caption if caption is not None else " ".join(grid.title)
    return f'<div class="wide"><table><caption>{_e(title)}</caption><tr>{head}</tr>{body}</table></div>'


def _date() -> str:
    from calibcli.maps.envelope import source_date_epoch  # the same reading of SOURCE_DATE_EPOCH as saved maps

    epoch = source_date_epoch()
    when = datetime.now(timezone.utc) if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _meta(report) -> str:
    from calibcli._version import __version__

    rows = [("command", report.command or "calib evaluate"), ("calibcli version", __version__),
            ("date", _date()), ("input", cell(report.input)), ("rows", report.headline),
            ("bins of ECE/MCE", f"{report.ece_bins} ({report.ece_strategy})")]
    if report.bootstrap:
        rows.append(("bootstrap", f"{report.bootstrap.level:.0%} intervals from {report.bootstrap.replicates} "
                                  f"resamples, seed {report.bootstrap.seed}"))
    body = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" if k == "command"
                   else f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="meta">{body}</table>'


def _decomposition(report) -> str:
    """Per result: the CORP decomposition S(p) = MCB − DSC + UNC of Brier and log-loss, corp-p
    (the metrics of it that were computed: `--metrics` chooses)."""
    keys = [(k, h) for k, h in DECOMPOSITION if report.results and k in report.results[0].metrics]
    if not keys:
        return ""
    rows = [[cell(r.name), *(render.fmt(r.metrics[k]) for k, _ in keys),
             render.fmt(r.metrics.get("corp_p", (r.corp or {}).get("p_value")))] for r in report.results]
    grid = render.Grid([], ["probabilities", *(h for _, h in keys), "corp-p ↑"], rows)
    return ("<h2>Score decomposition (CORP)</h2><p>S(p) = MCB − DSC + UNC: miscalibration (what "
            "recalibrating p by PAV would save), discrimination, uncertainty; corp-p is the p-value of the "
            "resampling test of calibration (n/a without bands).</p>" + grid_html(grid, ""))


def _gates(report) -> str:
    gate = report.gate
    if gate is None or not gate.checks:
        return "<h2>Gates</h2><p>No gate options were given.</p>"
    head = ["result", "metric", "gate", "value", "compared", "limit", "outcome"]
    rows = []
    for c in gate.checks:
        outcome = "passed" if c.passed else "FAILED: " + c.describe()
        rows.append([cell(c.result), ALL_METRICS[c.metric][0], c.kind, render.fmt(c.value), render.fmt(c.compared),
                     render.fmt(c.limit), outcome])
    table = grid_html(render.Grid([], head, rows), "")
    for word, css in (("<td>passed</td>", "ok"), ("<td>FAILED", "fail")):
        table = table.replace(word, word.replace("<td>", f'<td class="{css}">'))
    n = len(gate.checks)
    verdict = (f'<p class="ok">gates passed: {n} check{"" if n == 1 else "s"}</p>' if gate.passed else
               f'<p class="fail">{len(gate.failed)} of {n} gate checks failed</p>')
    return f"<h2>Gates</h2>{verdict}{table}"


def html_page(report, svg: str) -> bytes:
    """The page (module docstring); `svg`: the figure as SVG markup."""
    svg = svg[svg.index("<svg"):]
    head, rest = svg.split(">", 1)  # the figure takes the page's width: its size lives in the viewBox
    head = " ".join(w for w in head.split(" ") if not w.startswith(("width=", "height=")))
    title = _e(f"calib evaluate: {cell(report.input)}")
    fields = "".join(grid_html(g) for g in render.field_grids(report))
    segments = "".join(grid_html(g) for g in render.segment_grids(report))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{STYLE}</style></head><body>
<h1>{title}</h1>{_meta(report)}
<h2>Metrics</h2><p>{_e(DIRECTIONS)}; MCE rows: the rows of the bin MCE comes from.</p>
{grid_html(render.metrics_grid(report), "")}
{_decomposition(report)}
{_gates(report)}
{"<h2>By field</h2>" + fields if fields else ""}
{"<h2>Worst segments</h2>" + segments if segments else ""}
<h2>Reliability</h2><figure>{head}>{rest}</figure>
</body></html>
"""
    return page.encode("utf-8")
