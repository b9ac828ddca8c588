"""The figure of `calib evaluate --plot`: one panel per evaluated column or map (small
multiples, up to three a row, so bands of different columns never cover each other), each
with the reliability diagram on top and the histogram of p below, sharing the p axis.

- `--diagram corp` (default): the CORP reliability diagram (Dimitriadis, Gneiting & Jordan
  2021; data from `corp.diagram`): the PAV recalibration of p (the conditional event
  probability at each p) as a line, the 90% consistency band of that line under
  calibration (`--bands` rounds) as a shaded area, the diagonal; the title holds the Brier
  score's MCB, DSC and UNC (when computed) and the p-value of the resampling test;
- `--diagram smooth`: the kernel-smoothed positive rate of smECE (`smooth.smooth_curve`),
  its width and opacity following the smoothed density of p as relplot draws it, and faint
  where that density is below `FADE_DENSITY` of its peak: there the curve is the kernel's
  reach from the nearest rows, not data;
- `--diagram binned`: the bins of ECE/MCE (`--ece-bins`, `--ece-strategy`), the positive
  rate against the mean p with 95% Wilson bars, each point labelled with its rows.

Drawn with matplotlib's object API on a figure from `plot._pyplot`; user text goes through
`plot.plain` (no mathtext). Titles never run past the figure: the input is named by its
file name (the HTML report and the JSON hold the full path) and long names are wrapped
(`TITLE_CHARS` characters a panel). K-class panels title the top label's decomposition.
"""

from __future__ import annotations

import io as _io
import math
import textwrap
from pathlib import PurePath

PANELS_PER_ROW = 3
BAND_COLOR = "#9ecae1"
BAND_ALPHA = 0.6
CURVE_COLOR = "#c0392b"
POINT_COLOR = "#1f4e79"
FULL_DENSITY = 0.1  # the smooth curve is opaque where the density of p is at least this share of its peak,
FADE_DENSITY = 0.02  # and faint (FAINT opacity, thinnest) under this share
FAINT = 0.15
TITLE_CHARS = 56  # characters a title line holds per panel (5.2 inches at the suptitle's size)


def figure_bytes(report, fmt: str, plt, plain, results=None, suptitle: bool = True) -> bytes:
    """Every result of `report` (or of `results`) as one figure encoded as `fmt` (png, svg, ...);
    `suptitle` False leaves out the figure's title (the HTML report says it in text)."""
    results = report.results if results is None else results
    n = max(len(results), 1)
    cols = min(n, PANELS_PER_ROW)
    rows = math.ceil(n / cols)
    fig = plt.figure(figsize=(5.2 * cols, 5.6 * rows + 0.6), layout="constrained")
    grid = fig.add_gridspec(2 * rows, cols, height_ratios=[3, 1] * rows)
    diagram = diagram_of(results)
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
                title += "\n" + _decomposition_line(r, report.kclass).replace("corp-p ", "corp-p\u00a0")  # kept whole
            top.set_title(_wrapped(title, TITLE_CHARS), fontsize="medium")
            _axes(top, bottom, report.kclass, diagram)
            _histogram(bottom, r)
        what = {"binned": f"bins of ECE ({report.ece_bins}, {report.ece_strategy})",
                "smooth": "smooth reliability diagram (smECE kernel)", "corp": "CORP reliability diagram"}[diagram]
        if suptitle:
            fig.suptitle(_wrapped(f"{plain(_file_name(report.input))}: {report.rows} rows, {what}",
                                  TITLE_CHARS * cols), fontsize="large")
        buf = _io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100)
    finally:
        plt.close(fig)
    return buf.getvalue()


def diagram_of(results) -> str:
    """What the figure draws: corp, smooth or binned (from the data the results carry)."""
    return "corp" if any(r.corp for r in results) else "smooth" if any(r.smooth for r in results) else "binned"


DIAGRAM_WORDS = {"binned": "the bins of ECE: positive rate against mean p, with 95% Wilson bars and each bin's rows",
                 "smooth": "the smooth reliability diagram (smECE's kernel), drawn lighter where p has few rows",
                 "corp": "the CORP reliability diagram: the PAV recalibration of p (red) and its 90% consistency band "
                         "under calibration (blue); where the red line leaves the band over rows of the histogram, "
                         "the gap is more than noise"}


def _corp(ax, r) -> None:
    view = r.corp or {}
    if view.get("band_p"):
        ax.fill_between(view["band_p"], view["band_lower"], view["band_upper"], color=BAND_COLOR, alpha=BAND_ALPHA,
                        linewidth=0, label=f"{view['level']:.0%} consistency band ({view['rounds']} rounds)")
    ax.plot(view.get("p", []), view.get("recalibrated", []), color=CURVE_COLOR, linewidth=2,
            label="CORP: PAV recalibration")


def _smooth(ax, r) -> None:
    """The smoothed rate as segments whose width (0.5 to 3 points) and opacity follow the
    density of p (`fade`): where rows are few the curve is the kernel's reach from the
    nearest rows, drawn light; where the density is negligible, barely."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba

    view = r.smooth or {}
    t, rate, density = (view.get(k, []) for k in ("p", "rate", "density"))
    if len(t) < 2:
        return
    share = fade(density)
    mid = [min(a, b) for a, b in zip(share, share[1:])]
    segments = [[(t[i], rate[i]), (t[i + 1], rate[i + 1])] for i in range(len(t) - 1)]
    ax.add_collection(LineCollection(
        segments, colors=[to_rgba(CURVE_COLOR, max(min(m / FULL_DENSITY, 1.0), FAINT)) for m in mid],
        linewidths=[0.5 + 2.5 * min(2 * m, 1.0) for m in mid],
        label="smoothed positive rate (width and shade: density of p)"))


def fade(density) -> list[float]:
    """The density of p at each point as a share of its peak: the curve is drawn in full
    where it is at least `FULL_DENSITY`, at `FAINT` opacity where it is under `FADE_DENSITY`."""
    peak = max(density, default=0.0)
    return [d / peak if peak > 0 and d >= FADE_DENSITY * peak else 0.0 for d in density]


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


def _wrapped(text: str, width: int) -> str:
    """`text` in lines of at most `width` characters (long words broken), its own lines kept."""
    return "\n".join(textwrap.fill(line, width, break_long_words=True, break_on_hyphens=False) or line
                     for line in text.split("\n"))


def _file_name(path: str) -> str:
    """The last part of an input path (`-` and names without a directory unchanged)."""
    return PurePath(path).name or path


def _decomposition_line(r, kclass: bool = False) -> str:
    """`Brier MCB 0.0012 DSC 0.0345 UNC 0.2456, corp-p 0.0300` (what was computed): a K-class
    row's top-label decomposition, from its metrics or else from its CORP view."""
    prefix = "top_label_brier_" if kclass else "brier_"
    found = {k: r.metrics[prefix + k] for k in ("mcb", "dsc", "unc") if prefix + k in r.metrics}
    found = found or {k: v for k, v in (r.corp or {}).get("decomposition", {}).items() if k in ("mcb", "dsc", "unc")}
    parts = [f"{k.upper()} {_num(v)}" for k, v in found.items()]
    text = ("top-label Brier " if kclass else "Brier ") + " ".join(parts) if parts else ""
    p_value = (r.corp or {}).get("p_value")
    if p_value is not None:
        text += (", " if text else "") + f"corp-p {_num(p_value)}"
    return text
