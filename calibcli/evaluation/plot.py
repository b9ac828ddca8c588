"""Reliability diagram as an image (`calib evaluate --plot reliability.png`).

Needs matplotlib, the optional extra `calibcli[plot]`; imported only when --plot names a
file. Every evaluated column and map goes on one figure: the top panel plots, per
equal-mass bin, the positive rate against the mean p (the diagonal is perfect calibration),
the bottom panel the rows in each bin. The image format follows the extension
(.png, .svg, .pdf, ...); the file is written atomically through `output.write_bytes_atomic`.
"""

from __future__ import annotations

import io as _io
from pathlib import Path

from calibcli import output
from calibcli.errors import UsageError, extra_hint


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot FILE needs matplotlib",
                         hint=extra_hint("plot") + ", or use --plot - for a text diagram") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_target(path: str) -> str:
    """The image format for `path`; UsageError when matplotlib is missing or cannot write it.

    Called before the data is read, so a run never computes everything and then fails here.
    """
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    plt = _pyplot()
    fig = plt.figure()
    try:
        supported = fig.canvas.get_supported_filetypes()
    finally:
        plt.close(fig)
    if fmt not in supported:
        raise UsageError(f"--plot {path}: matplotlib cannot write .{fmt} images",
                         hint="use .png, .svg or .pdf")
    return fmt


def save_reliability(report, path: str) -> None:
    """Draw the reliability bins of every result of `report` into the image file `path`."""
    fmt = check_target(path)
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 7.2), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    try:
        top.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfect")
        for r in report.results:
            bins = r.reliability or []
            x = [b["mean_p"] for b in bins]
            line, = top.plot(x, [b["positive_rate"] for b in bins], marker="o", label=r.name)
            bottom.plot(x, [b["rows"] for b in bins], marker="o", color=line.get_color())
        top.set_ylabel("positive rate")
        top.set_xlim(0, 1)
        top.set_ylim(0, 1)
        top.set_title(f"{report.input}: {report.rows} rows, equal-mass bins")
        top.legend(loc="upper left", fontsize="small")
        bottom.set_xlabel("mean predicted probability")
        bottom.set_ylabel("rows per bin")
        bottom.set_ylim(bottom=0)
        fig.tight_layout()
        buf = _io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100)
    finally:
        plt.close(fig)
    output.write_bytes_atomic(path, buf.getvalue())
