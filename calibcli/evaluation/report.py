"""How `calib evaluate` looks in a terminal: the metric table, the per-field view and a
compact text reliability diagram. Renders an `Evaluation` as text; decides nothing.
"""

from __future__ import annotations

import csv
import io as _io
import math
import os
import sys
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

from calibcli.console import data_console
from calibcli.evaluation.metrics import METRICS

BAR_WIDTH = 40
_ARROWS = {"lower": "↓", "higher": "↑", "target": "◎"}  # ◎: best at its target (slope 1, z 0)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.4f}"


def _console() -> Console:
    """The stdout console: the terminal's width, else $COLUMNS, else 200 (files and pipes)."""
    tty = sys.stdout.isatty()
    columns = os.environ.get("COLUMNS", "")
    width = None if tty else int(columns) if columns.isdigit() and int(columns) > 0 else 200
    return data_console(no_color=not tty or None, width=width, highlight=False, soft_wrap=False)


def metrics_table(report) -> Table:
    """One row per column/map, one column per metric; with --bootstrap the interval below."""
    keys = _keys(report)
    table = Table(title=_title(report), title_justify="left")
    table.add_column("probabilities")
    for k in keys:
        label, direction = METRICS[k]
        table.add_column(f"{label} {_ARROWS[direction]}", justify="right")
    for r in report.results:
        table.add_row(r.name, *_cells(r, keys, "\n"))
    return table


def _cells(result, keys: list[str], gap: str) -> list[str]:
    """Each metric to 4 decimals, with its bootstrap interval after `gap` when there is one."""
    cells = []
    for k in keys:
        cell = _fmt(result.metrics[k])
        if result.intervals is not None:
            lo, hi = result.intervals.get(k, (None, None))
            cell += f"{gap}[{_fmt(lo)}, {_fmt(hi)}]"
        cells.append(cell)
    return cells


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


def _keys(report) -> list[str]:
    return [k for k in METRICS if k in report.results[0].metrics]


def _title(report) -> str:
    title = f"{report.input}: {report.rows} rows, {report.positives} positive"
    if report.bootstrap:
        title += f"; {report.bootstrap.level:.0%} intervals from {report.bootstrap.replicates} resamples"
    return title


def stacked_text(report) -> str:
    """The metric table as one block per column/map: for terminals too narrow for the table."""
    lines = [_title(report)]
    for r in report.results:
        lines.append(f"{r.name} ({r.kind})")
        for k in _keys(report):
            label, direction = METRICS[k]
            cell = f"  {label + ' ' + _ARROWS[direction]:<18} {_fmt(r.metrics[k]):>8}"
            if r.intervals is not None:
                lo, hi = r.intervals[k]
                cell += f"  [{_fmt(lo)}, {_fmt(hi)}]"
            lines.append(cell)
    return "\n".join(lines)


def _flat_rows(report) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the metric table as plain strings (metrics at full precision)."""
    keys = _keys(report)
    header = ["name", "kind", *keys]
    with_intervals = any(r.intervals is not None for r in report.results)
    if with_intervals:
        header += [f"{k}_{end}" for k in keys for end in ("low", "high")]
    rows = []
    for r in report.results:
        row = [r.name, r.kind, *("" if r.metrics[k] != r.metrics[k] else repr(r.metrics[k]) for k in keys)]
        if with_intervals:
            row += ["" if v != v else repr(v) for k in keys for v in (r.intervals or {}).get(k, (math.nan,) * 2)]
        rows.append(row)
    return header, rows


def csv_text(report) -> str:
    """The metric table as CSV: one row per column/map, full precision, empty for n/a."""
    out = _io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header, rows = _flat_rows(report)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def markdown_text(report) -> str:
    """The metric table as a Markdown (GitHub) table, 4 decimals, for CI comments."""
    keys = _keys(report)
    head = ["probabilities", *(METRICS[k][0] for k in keys)]
    lines = [f"**{_title(report)}**", "", "| " + " | ".join(head) + " |",
             "|" + "---|" + "---:|" * len(keys)]
    for r in report.results:
        name = r.name.replace("|", "\\|")
        lines.append(f"| {name} | " + " | ".join(_cells(r, keys, " ")) + " |")
    return "\n".join(lines) + "\n"


def print_report(report, reliability: bool = False) -> None:
    """Everything `calib evaluate` prints on stdout as tables: the metric table when it fits the
    terminal, else one block per column/map (never a truncated number or merged headers)."""
    console = _console()
    table = metrics_table(report)
    if _squeezed(console, table):
        console.print(stacked_text(report), markup=False, highlight=False)
    else:
        console.print(table)
    for table in field_tables(report):
        console.print(table)
    if reliability:
        for r in report.results:
            console.print(reliability_text(r.name, r.reliability or []), markup=False, highlight=False)


def _squeezed(console: Console, table: Table) -> bool:
    """True when rich would have to wrap or cut a cell to fit the table in the terminal."""
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    return natural > console.width


__all__ = ["csv_text", "field_tables", "markdown_text", "metrics_table", "print_report", "reliability_text",
           "stacked_text"]
