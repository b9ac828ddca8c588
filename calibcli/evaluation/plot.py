"""Reliability diagram as an image or an HTML report (`calib evaluate --plot reliability.png`).

Needs matplotlib, the optional extra `calibcli[plot]`; imported only when --plot names a
file. Every evaluated column and map goes on one figure: the top panel plots, per
equal-mass bin, the positive rate against the mean p with its 95% Wilson band (the
diagonal is perfect calibration); the bottom panel is the histogram of p (20 equal-width
bins) of each result. For K-class predictions the same diagram is the top-label one: the
confidence max_k p_k in place of p and whether the top class is right in place of y. The image format follows the extension (.png, .svg, .pdf, ...);
`.html` writes a self-contained page with the metric table and the figure inline (SVG), for
CI artefacts. Files are written atomically through `io.targets.write_bytes_atomic`.
"""

from __future__ import annotations

import atexit
import io as _io
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from calibcli.console import cell
from calibcli.io import targets
from calibcli.errors import UsageError, extra_hint


_private_config: str | None = None  # the MPLCONFIGDIR this process made for matplotlib


def _pyplot():
    """matplotlib's pyplot on the Agg backend, quiet: its config and font cache go to a private
    temporary MPLCONFIGDIR (unless the user set one), removed by `release`, so nothing is left
    in $TMPDIR or $HOME, and its log messages ("building the font cache") never reach stderr."""
    global _private_config
    if "matplotlib" not in sys.modules and "MPLCONFIGDIR" not in os.environ:
        _private_config = tempfile.mkdtemp(prefix="calibcli-mpl-")
        os.environ["MPLCONFIGDIR"] = _private_config
        atexit.register(release)
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    try:
        import matplotlib
    except ImportError:
        release()
        raise UsageError("--plot FILE needs matplotlib",
                         hint=extra_hint("plot") + ", or use --plot - for a text diagram") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def release() -> None:
    """Remove the private matplotlib config directory, if this process made one."""
    global _private_config
    if _private_config is not None:
        shutil.rmtree(_private_config, ignore_errors=True)
        if os.environ.get("MPLCONFIGDIR") == _private_config:
            del os.environ["MPLCONFIGDIR"]
        _private_config = None


def _plain(text: object) -> str:
    """User text as a matplotlib label shows it literally: `console.cell` escapes, every `$`
    escaped (no mathtext), and a leading `_` kept visible (legends hide such labels)."""
    shown = cell(text).replace("$", "\\$")
    return " " + shown if shown.startswith("_") else shown


def check_target(path: str) -> str:
    """The image format for `path` (`html` for a report); UsageError when matplotlib is
    missing or cannot write it. Called before the data is read, so a run never computes
    everything and then fails here.
    """
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    plt = _pyplot()
    if fmt in ("html", "htm"):
        return "html"
    fig = plt.figure()
    try:
        supported = fig.canvas.get_supported_filetypes()
    finally:
        plt.close(fig)
    if fmt not in supported:
        raise UsageError(f"--plot {path}: matplotlib cannot write .{fmt} images",
                         hint="use .png, .svg, .pdf or .html")
    return fmt


def figure_bytes(report, fmt: str) -> bytes:
    """The reliability figure of every result of `report`, encoded as `fmt` (png, svg, ...)."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 7.2), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    try:
        top.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfect")
        for r in report.results:
            bins = r.reliability or []
            x = [b["mean_p"] for b in bins]
            line, = top.plot(x, [b["positive_rate"] for b in bins], marker="o", label=_plain(r.name))
            top.fill_between(x, [b["rate_low"] for b in bins], [b["rate_high"] for b in bins],
                             color=line.get_color(), alpha=0.2, linewidth=0)
            counts = r.histogram or []
            edges = [k / len(counts) for k in range(len(counts) + 1)]
            bottom.stairs(counts, edges, color=line.get_color(), linewidth=1.5)
        top.set_ylabel(("top-label accuracy" if report.kclass else "positive rate") + " (95% band)")
        top.set_xlim(0, 1)
        top.set_ylim(0, 1)
        top.set_title(f"{_plain(report.input)}: {report.rows} rows, equal-mass bins")
        top.legend(loc="upper left", fontsize="small")
        bottom.set_xlabel("confidence (largest class probability)" if report.kclass else "predicted probability")
        bottom.set_ylabel("rows")
        bottom.set_ylim(bottom=0)
        fig.tight_layout()
        buf = _io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100)
    finally:
        plt.close(fig)
    return buf.getvalue()


def html_report(report) -> bytes:
    """A self-contained HTML page: the metric table (with intervals and gates) and the figure."""
    import html

    from calibcli.evaluation.metrics import ALL_METRICS as METRICS

    keys = report.metric_keys()
    head = "".join(f"<th>{html.escape(METRICS[k][0])}</th>" for k in keys)
    rows = []
    for r in report.results:
        cells = []
        for k in keys:
            v = r.metrics[k]
            text = "n/a" if v != v else f"{v:.4f}"
            if r.intervals and k in r.intervals:
                lo, hi = r.intervals[k]
                text += f"<br><small>[{lo:.4f}, {hi:.4f}]</small>"
            cells.append(f"<td>{text}</td>")
        rows.append(f"<tr><th>{html.escape(cell(r.name))}</th>{''.join(cells)}</tr>")
    gate = report.gate
    verdict = ""
    if gate is not None and gate.checks:
        failed = "".join(f"<li>{html.escape(c.describe())}</li>" for c in gate.failed)
        verdict = (f"<p class=ok>gates passed: {len(gate.checks)} checks</p>" if gate.passed else
                   f"<p class=fail>{len(gate.failed)} of {len(gate.checks)} gate checks failed</p><ul>{failed}</ul>")
    svg = figure_bytes(report, "svg").decode("utf-8")
    svg = svg[svg.index("<svg"):]
    title = html.escape(f"calib evaluate: {cell(report.input)}")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th:first-child{{text-align:left}}
.ok{{color:#070}}.fail{{color:#b00}}</style></head><body>
<h1>{title}</h1><p>{html.escape(report.headline)}</p>
<table><tr><th>probabilities</th>{head}</tr>{''.join(rows)}</table>{verdict}
<h2>Reliability</h2>{svg}</body></html>
"""
    return page.encode("utf-8")


def save_reliability(report, path: str) -> None:
    """Write the reliability figure (or, for .html, the report page) of `report` to `path`."""
    fmt = check_target(path)
    data = html_report(report) if fmt == "html" else figure_bytes(report, fmt)
    targets.write_bytes_atomic(path, data)
