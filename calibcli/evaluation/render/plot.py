"""Reliability diagram as an image or an HTML report (`calib evaluate --plot reliability.png`).

Needs matplotlib, the optional extra `calibcli[plot]`; imported only when --plot names a
file, on the Agg backend with a private config directory. What the figure draws is in
`figures.py` (the CORP diagram by default, `--diagram binned` the bins of ECE), the HTML
page in `html.py`. The image format follows the extension (.png, .svg, .pdf, ...);
`.html` writes the self-contained page with the figure inline (SVG), for CI artefacts.
Files are written atomically through `io.targets.write_bytes_atomic`.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from calibcli.io.console import cell
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


def plain(text: object) -> str:
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
    """The reliability figure of every result of `report` (`figures.py`), encoded as `fmt`."""
    from calibcli.evaluation.render import figures

    return figures.figure_bytes(report, fmt, _pyplot(), plain)


def html_report(report) -> bytes:
    """The self-contained HTML report page (`html.py`) with one figure per result inline as SVG
    (so the page lays them side by side, or one under the other on a narrow screen)."""
    from calibcli.evaluation.render import figures
    from calibcli.evaluation.render import html as page

    plt = _pyplot()
    svgs = [figures.figure_bytes(report, "svg", plt, plain, results=[r], suptitle=False).decode("utf-8")
            for r in report.results]
    return page.html_page(report, svgs)


def save_reliability(report, path: str) -> None:
    """Write the reliability figure (or, for .html, the report page) of `report` to `path`."""
    fmt = check_target(path)
    data = html_report(report) if fmt == "html" else figure_bytes(report, fmt)
    targets.write_bytes_atomic(path, data)
