"""The figure of `calib evaluate --plot`: one panel per evaluated column or map (small
multiples, up to three a row, so bands of different columns never cover each other), each
with the reliability diagram on top and the histogram of p below, sharing the p axis.

- `--diagram corp` (default): the CORP reliability diagram (Dimitriadis, Gneiting & Jordan
  2021; data from `corp.diagram`): the PAV recalibration of p (the conditional event
  probability at each p) as a line, the 90% consistency band of that line under
  calibration (`--bands` rounds) as a shaded area, the diagonal; the title holds the Brier
  score's MCB, DSC and UNC (when computed) and the p-value of the resampling test;
- `--diagram smooth`: the kernel-smoothed positive rate of smECE (`smooth.smooth_curve`);
- `--diagram binned`: the bins of ECE/MCE (`--ece-bins`, `--ece-strategy`), the positive
  rate against the mean p with 95% Wilson bars, each point labelled with its rows.

Drawn with matplotlib's object API on a figure from `plot._pyplot`; user text goes through
`plot.plain` (no mathtext).
"""

from __future__ import annotations

import io as _io
import math

PANELS_PER_ROW = 3
BAND_COLOR = "#9ecae1"
BAND_ALPHA = 0.6
CURVE_COLOR = "#c0392b"
POINT_COLOR = "#1f4e79"


def figure_bytes(report, fmt: str, plt, plain) -> bytes:
    """Every result of `report` as one figure encoded as `fmt` (png, svg, ...)."""
    results = report.results
    n = max(len(results), 1)
    cols = min(n, PANELS_PER_ROW)
    rows = math.ceil(n / cols)
    fig = plt.figure(figsize=(5.2 * cols, 5.6 * rows + 0.6), layout="constrained")
    grid = fig.add_gridspec(2 * rows, cols, height_ratios=[3, 1] * rows)
    diagram = "corp" if any(r.corp for r in results) else "smooth" if any(r.smooth for r in results) else "binned"
    try:
        for i, r in enumerate(results):
            top = fig.add_subplot(grid[2 * (i // cols), i % cols])
            bottom = fig.add_subplot(grid[2 * (i // cols) + 1, i % cols], sharex=top)
            title = plain(r.name)
            if diagram == "binned":
                _binned(top, r)
            elif diagram == "smooth":
                _smooth(top, r)
                title += f"\nsmECE {_num(r.metrics['smece'])}" if "smece" in r.metrics else ""
            else:
                _corp(top, r)
                title += f"\n{_decomposition_line(r)}"
            top.set_title(title, fontsize="medium")
            _axes(top, bottom, report.kclass, diagram)
            _histogram(bottom, r)
        what = {"binned": f"bins of ECE ({report.ece_bins}, {report.ece_strategy})",
                "smooth": "smooth reliability diagram (smECE kernel)", "corp": "CORP reliability diagram"}[diagram]
        fig.suptitle(f"{plain(report.input)}: {report.rows} rows, {what}", fontsize="large")
        buf = _io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100)
    finally:
        plt.close(fig)
    return buf.getvalue()


def _corp(ax, r) -> None:
    view = r.corp or {}
    if view.get("band_p"):
        ax.fill_between(view["band_p"], view["band_lower"], view["band_upper"], color=BAND_COLOR, alpha=BAND_ALPHA,
                        linewidth=0, label=f"{view['level']:.0%} consistency band ({view['rounds']} rounds)")
    ax.plot(view.get("p", []), view.get("recalibrated", []), color=CURVE_COLOR, linewidth=2,
            label="CORP: PAV recalibration")


def _smooth(ax, r) -> None:
    view = r.smooth or {}
    ax.plot(view.get("p", []), view.get("rate", []), color=CURVE_COLOR, linewidth=2,
            label="smoothed positive rate (smECE kernel)")


def _binned(ax, r) -> None:
    bins = r.reliability or []
    x = [b["mean_p"] for b in bins]
    y = [b["positive_rate"] for b in bins]
    err = [[max(b["positive_rate"] - b["rate_low"], 0.0) for b in bins],  # a Wilson end may round past the rate
           [max(b["rate_high"] - b["positive_rate"], 0.0) for b in bins]]
    ax.errorbar(x, y, yerr=err, color=POINT_COLOR, marker="o", markersize=4, linewidth=1, capsize=3,
                label="bin: positive rate (95% Wilson)")
    for b in bins:  # each bin's rows, upright beside its bar: narrow enough for neighbouring bins
        low = b["positive_rate"] > 0.75
        ax.annotate(str(b["rows"]), (b["mean_p"], b["rate_low"] if low else b["rate_high"]),
                    textcoords="offset points", xytext=(0, -3 if low else 3), rotation=90, fontsize=7,
                    color="0.3", ha="center", va="top" if low else "bottom")


def _axes(top, bottom, kclass: bool, diagram: str) -> None:
    top.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=1, label="calibrated")
    top.set_xlim(-0.01, 1.01)
    top.set_ylim(0, 1)
    top.set_aspect("auto")
    if kclass:
        top.set_ylabel("top-label accuracy")
    else:
        top.set_ylabel({"binned": "positive rate (bin's rows beside it)", "smooth": "smoothed positive rate",
                        "corp": "conditional event probability"}[diagram])
    top.legend(loc="upper left", fontsize="x-small", framealpha=0.85)
    top.tick_params(labelbottom=False)
    bottom.set_xlabel("confidence (largest class probability)" if kclass else "predicted probability p")
    bottom.set_ylabel("rows")


def _histogram(ax, r) -> None:
    counts = r.histogram or []
    edges = [k / len(counts) for k in range(len(counts) + 1)]
    if counts:
        ax.stairs(counts, edges, color="0.35", fill=True, alpha=0.5)
    ax.set_ylim(bottom=0)


def _num(v) -> str:
    return "n/a" if v is None or v != v else f"{v:.4f}"


def _decomposition_line(r) -> str:
    """`Brier MCB 0.0012 DSC 0.0345 UNC 0.2456, corp-p 0.0300` (what was computed)."""
    parts = [f"{k.upper()} {_num(r.metrics['brier_' + k])}" for k in ("mcb", "dsc", "unc")
             if "brier_" + k in r.metrics]
    text = "Brier " + " ".join(parts) if parts else ""
    p_value = (r.corp or {}).get("p_value")
    if p_value is not None:
        text += (", " if text else "") + f"corp-p {_num(p_value)}"
    return text
