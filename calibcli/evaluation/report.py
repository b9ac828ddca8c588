"""How `calib evaluate` looks in a terminal: the metric table, the per-field view and a
compact text reliability diagram. Renders an `Evaluation` as text; decides nothing.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

from calibcli.console import DataConsole
from calibcli.evaluation.metrics import METRICS

BAR_WIDTH = 40


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.4f}"


def _console() -> Console:
    tty = sys.stdout.isatty()
    return DataConsole(no_color=not tty or None, width=None if tty else 200, highlight=False,
                   soft_wrap=False)


def metrics_table(report) -> Table:
    """One row per column/map, one column per metric; with --bootstrap the interval below."""
    keys = [k for k in METRICS if k in report.results[0].metrics]
    title = f"{report.input}: {report.rows} rows, {report.positives} positive"
    if report.bootstrap:
        title += f"; {report.bootstrap.level:.0%} intervals from {report.bootstrap.replicates} resamples"
    table = Table(title=title, title_justify="left")
    table.add_column("probabilities")
    for k in keys:
        label, direction = METRICS[k]
        table.add_column(f"{label} {'↓' if direction == 'lower' else '↑'}", justify="right")
    for r in report.results:
        cells = []
        for k in keys:
            cell = _fmt(r.metrics[k])
            if r.intervals is not None:
                lo, hi = r.intervals[k]
                cell += f"\n[{_fmt(lo)}, {_fmt(hi)}]"
            cells.append(cell)
        table.add_row(r.name, *cells)
    return table


def field_tables(report) -> Iterable[Table]:
    """For each column/map: the fields with the largest |bias| and largest |relative bias|."""
    for r in report.results:
        if r.by_field is None:
            continue
        bf = r.by_field
        for key, what in (("by_bias", "bias Σ(y−p)"), ("by_relative_bias", "relative bias Σ(y−p)/Σ(y+0.01)")):
            table = Table(title=f"{r.name!r}: top {min(bf['top'], bf['fields'])} of {bf['fields']} "
                          f"values of {report.field_col!r} by |{what}|", title_justify="left")
            for head in ("field", "rows", "positives", "mean p", "positive rate", "bias", "relative bias"):
                table.add_column(head, justify="left" if head == "field" else "right")
            for f in bf[key]:
                table.add_row(f["field"], str(f["rows"]), str(f["positives"]), _fmt(f["mean_p"]),
                              _fmt(f["positive_rate"]), f"{f['bias']:+.2f}", f"{f['relative_bias']:+.1%}")
            yield table


def reliability_text(name: str, bins: list[dict[str, Any]], width: int = BAR_WIDTH) -> str:
    """A reliability diagram in plain text: one line per equal-mass bin.

    The bar is the observed positive rate on a 0..1 scale of `width` characters; `|` marks
    the mean predicted p, where the bar would end if the bin were perfectly calibrated.
    """
    lines = [f"reliability of {name!r}: {len(bins)} equal-mass bins (bar: positive rate, | mean p)",
             f"{'mean p':>8} {'rate':>7} {'rows':>8}  0{' ' * (width - 2)}1"]
    for b in bins:
        cells = ["█"] * round(b["positive_rate"] * width) + [" "] * width
        cells = cells[:width]
        mark = min(int(b["mean_p"] * width), width - 1)
        cells[mark] = "|"
        lines.append(f"{b['mean_p']:8.4f} {b['positive_rate']:7.4f} {b['rows']:8d}  {''.join(cells)}")
    return "\n".join(lines)


def print_report(report, reliability: bool = False) -> None:
    """Everything `calib evaluate` prints on stdout without --json."""
    console = _console()
    console.print(metrics_table(report))
    for table in field_tables(report):
        console.print(table)
    if reliability:
        for r in report.results:
            console.print(reliability_text(r.name, r.reliability or []), markup=False, highlight=False)


__all__ = ["field_tables", "metrics_table", "print_report", "reliability_text"]
