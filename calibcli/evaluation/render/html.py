"""The HTML report of `calib evaluate --plot report.html`: one self-contained page (no script,
nothing fetched) for a reviewer and a CI artefact. In order:

1. the title (`--title`, else the input) and what made it (the command, calibcli's version, the
   date: `SOURCE_DATE_EPOCH` when set, else now, in UTC; the input and its rows);
2. the verdict of each column or map in plain words (`evaluation.verdict`);
3. the gates, every check with its result (passed ones too), when gates were given;
4. the few numbers that matter (`KEY_METRICS`), each with a one-line meaning (`GLOSSARY`);
5. the reliability figure (inline SVG) at its natural size, never wider than the page;
6. with interval columns (Venn-Abers), what the intervals guarantee and what not, their widths
   and the check of the guarantee on these rows (`intervals.py`);
7. folded (`<details>`): every metric, the CORP decomposition, the tests behind the verdict,
   the `--by-field` tables and the multicalibration segments (when present).

Wide tables scroll inside their own box, so the page never scrolls sideways, at a desktop's
1280 px or a phone's 390 px (tests/evaluation/test_html_layout.py checks both in Chromium).
Tables are `report.Grid`s, as the terminal shows them.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from calibcli.io.console import cell
from calibcli.evaluation.render import report as render
from calibcli.evaluation.render import html_sections as sections
from calibcli.evaluation.metrics.binary import ALL_METRICS
from calibcli.evaluation.verdict import LEVEL

STYLE = """*{box-sizing:border-box}html{-webkit-text-size-adjust:100%}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:72em;padding:.5em 1em 3em;
color:#222;line-height:1.45;overflow-wrap:break-word}
h1{font-size:1.5em;margin:.6em 0 .2em}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd}
h3{font-size:1em;margin:.2em 0}p{margin:.4em 0}code{overflow-wrap:anywhere;white-space:pre-wrap}
table{border-collapse:collapse;margin:.4em 0 1em}caption{text-align:left;font-weight:bold;padding:.3em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th:first-child,td:first-child,.meta td,.meta th,td.text{text-align:left}.meta th{background:#f4f4f4;font-weight:normal}
.ok{color:#070}.fail{color:#b00;font-weight:bold}small,.sub{color:#555}.sub{font-size:.9em}
.wide{overflow-x:auto;max-width:100%}.wide table{font-size:90%}
.verdict{border-left:6px solid #999;background:#f7f7f7;padding:.5em .8em;margin:.6em 0}
.verdict.good{border-color:#2a8a2a;background:#f1f8f1}.verdict.bad{border-color:#c0392b;background:#fcf2f1}
.verdict.unknown{border-color:#b58900;background:#fbf7ea}.verdict b.word{font-size:1.05em}
dl.glossary{margin:.3em 0 1em}dl.glossary dt{font-weight:bold;float:left;clear:left;margin-right:.4em}
dl.glossary dd{margin:0 0 .25em 0}
.figures{display:flex;flex-wrap:wrap;gap:.5em 1.5em;align-items:flex-start}
figure{margin:.3em 0;flex:1 1 22em;min-width:0}figure svg{width:100%;height:auto;display:block}
th{white-space:nowrap}
details{margin:.5em 0;border:1px solid #ddd;border-radius:4px;padding:.2em .8em}
details>summary{cursor:pointer;font-weight:bold;padding:.3em 0}
ul{padding-left:1.3em}"""
DIRECTIONS = "↓ lower is better, ↑ higher is better, ◎ best at its target (slope 1, intercept 0, z 0)"
DECOMPOSITION = sections.DECOMPOSITION
# The numbers that matter, in order (a report shows those its results have), with one line each.
KEY_METRICS = ("log_loss", "brier", "auc", "accuracy", "ece", "top_label_ece", "classwise_ece", "cal_slope",
               "cal_intercept", "field_rce")
GLOSSARY = {
    "log_loss": "the average surprise at the labels, −ln p of what happened; lower is better. Compare columns on "
                "the same rows: its size depends on the data.",
    "brier": "the mean squared gap between p and the 0/1 label; lower is better; 0.25 is a constant 0.5.",
    "auc": "how well p ranks positives above negatives (0.5: chance, 1: perfect). Calibration does not change it.",
    "accuracy": "the share of rows whose most probable class is the true one.",
    "ece": "the average |predicted − observed| over bins of p, weighted by their rows. Above 0 even for a "
           "calibrated model (each bin's noise): the verdict says whether the gap is more than noise.",
    "top_label_ece": "ECE of the confidence (the largest class probability) against whether the top class is right.",
    "classwise_ece": "the mean over classes of the ECE of each class's probability.",
    "cal_slope": "the slope b of logit P(y = 1) = a + b logit(p): 1 when calibrated, below 1 over-confident "
                 "(p too far from the middle), above 1 under-confident.",
    "cal_intercept": "a in the same fit: 0 when calibrated; above 0 the positives are more frequent than p says.",
    "field_rce": "the gap of each field value relative to its positives, averaged over rows (Pan et al. 2020).",
}


_e = sections.escape
grid_html = sections.grid_html


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
    return f'<div class="wide"><table class="meta">{body}</table></div>'


def _verdicts(report) -> str:
    parts = []
    for r in report.results:
        v = getattr(r, "verdict", None)
        if v is None:
            continue
        css = {True: "good", False: "bad", None: "unknown"}[v.calibrated]
        word, _, rest = v.text.partition(": ")
        parts.append(f'<div class="verdict {css}"><h3>{_e(cell(r.name))}</h3>'
                     f'<p><b class="word">{_e(word)}</b>{": " + _e(rest) if rest else ""}</p></div>')
    if not parts:
        return ""
    return ("<h2>Verdict</h2>" + "".join(parts) +
            f'<p class="sub">From a fixed family of tests adjusted together (Holm, {LEVEL:.0%} level); "The tests behind the '
            'verdict" below lists them.</p>')


GLOSSARY_KCLASS = {  # where K-class predictions read a metric differently
    "brier": "the mean over rows of the squared distance between the probabilities and the true class's one-hot "
             "vector (0 to 2); lower is better.",
    "auc": "how well each class's probability ranks its rows above the others' (one-vs-rest, averaged over "
           "classes). Calibration does not change it.",
}


def _key_numbers(report) -> str:
    keys = [k for k in KEY_METRICS if k in render.metric_keys(report)]
    if not keys:
        return ""
    meaning = {**GLOSSARY, **(GLOSSARY_KCLASS if report.kclass else {})}
    headers = ["probabilities", "verdict", *render._headers(keys)]
    rows = [[cell(r.name), render.verdict_label(r), *render.metric_cells(r, keys, "\n")] for r in report.results]
    glossary = "".join(f"<dt>{_e(ALL_METRICS[k][0])}</dt><dd>{_e(meaning[k])}</dd>" for k in keys)
    interval = f"; below each, its {report.bootstrap.level:.0%} bootstrap interval" if report.bootstrap else ""
    return (f"<h2>The numbers that matter</h2>{grid_html(render.Grid([], headers, rows, left=2), '')}"
            f'<p class="sub">{_e(DIRECTIONS)}{_e(interval)}.</p><dl class="glossary">{glossary}</dl>')


def _gates(report) -> str:
    gate = report.gate
    if gate is None or not gate.checks:
        return ""  # no gates: nothing for a reviewer to read
    head = ["result", "metric", "gate", "value", "compared", "limit", "outcome"]
    rows = []
    for c in gate.checks:
        outcome = "passed" if c.passed else "FAILED"  # the why below the table: a long cell would wrap a phone's row
        rows.append([cell(c.result), ALL_METRICS[c.metric][0], c.kind, render.fmt(c.value), render.fmt(c.compared),
                     render.fmt(c.limit), outcome])
    table = grid_html(render.Grid([], head, rows), "")
    for word, css in (("<td>passed</td>", "ok"), ("<td>FAILED", "fail")):
        table = table.replace(word, word.replace("<td>", f'<td class="{css} text">'))
    n = len(gate.checks)
    on = {"point": "the metric itself", "worst": "the end of its interval worst for the gate",
          "best": "the end of its interval best for the gate"}.get(gate.gate_on, gate.gate_on)
    verdict = (f'<p class="ok">gates passed: {n} check{"" if n == 1 else "s"}</p>' if gate.passed else
               f'<p class="fail">{len(gate.failed)} of {n} gate checks failed</p>')
    why = "".join(f'<li class="fail">{_e(c.describe())}</li>' for c in gate.checks if not c.passed)
    why = f"<ul>{why}</ul>" if why else ""
    return f'<h2>Gates</h2>{verdict}<p class="sub">Each check compares {_e(on)}.</p>{table}{why}'


def _figure(svg: str) -> str:
    """One figure at its natural size (the SVG's width in points) or up to a fifth larger, never
    wider than the page."""
    svg = svg[svg.index("<svg"):]
    head, rest = svg.split(">", 1)
    match = re.search(r'width="([0-9.]+)pt"', head)
    natural = float(match.group(1)) * 96 / 72 if match else 500.0
    head = " ".join(w for w in head.split(" ") if not w.startswith(("width=", "height=")))
    return f'<figure style="max-width:{natural * 1.2:.0f}px">{head}>{rest}</figure>'


def _figures(report, svgs) -> str:
    from calibcli.evaluation.render.figures import DIAGRAM_WORDS, diagram_of

    if isinstance(svgs, str):
        svgs = [svgs]
    what = DIAGRAM_WORDS[diagram_of(report.results)]
    axis = ("confidence (the largest class probability) against the top label's accuracy" if report.kclass
            else "predicted probability p against the observed rate")
    return (f'<h2>Reliability</h2><p class="sub">{_e(axis)}; {_e(what)}; below, the histogram of '
            f'{"the confidence" if report.kclass else "p"}.</p>'
            f'<div class="figures">{"".join(_figure(s) for s in svgs)}</div>')


def html_page(report, svg) -> bytes:
    """The page (module docstring); `svg`: the figure as SVG markup, or a list of them (one per result)."""
    heading = report.title or f"calib evaluate: {cell(report.input)}"
    title = _e(heading)
    fields = "".join(grid_html(g) for g in render.field_grids(report))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{STYLE}</style></head><body>
<h1>{title}</h1><p class="sub">{_e(cell(report.input))}: {_e(report.headline)}</p>
{_verdicts(report)}
{_gates(report)}
{_key_numbers(report)}
{_figures(report, svg)}
{sections.intervals(report)}
{sections.folded("Every metric", "<p>" + _e(DIRECTIONS) + "; MCE rows: the rows of the bin MCE comes from.</p>"
                 + grid_html(render.metrics_grid(report), ""))}
{sections.folded("Score decomposition (CORP)", sections.decomposition(report))}
{sections.folded("The tests behind the verdict", sections.tests(report))}
{sections.folded("By field", fields)}
{sections.folded("Worst segments (multicalibration)", sections.segments(report))}
{sections.folded("How this report was made", _meta(report), open_=True)}
</body></html>
"""
    return page.encode("utf-8")
