"""How `calib evaluate` looks in a terminal: the metric table, the per-field view and a
compact text reliability diagram. Renders an `Evaluation` as text; decides nothing.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from calibcli.io.console import cell, data_console
from calibcli.evaluation.metrics.binary import ALL_METRICS as METRICS

BAR_WIDTH = 40
_ARROWS = {"lower": "↓", "higher": "↑", "target": "◎", "data": "·"}  # ◎: best at its target (slope 1, z 0); ·: of the labels alone


def fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.4f}"


def stdout_console() -> Console:
    """The stdout console: the terminal's width, else $COLUMNS, else 200 (files and pipes)."""
    tty = sys.stdout.isatty()
    columns = os.environ.get("COLUMNS", "")
    width = None if tty else int(columns) if columns.isdigit() and int(columns) > 0 else 200
    return data_console(no_color=not tty or None, width=width, highlight=False, soft_wrap=False,
                        emoji=False, markup=False)


@dataclass
class Grid:
    """A table of plain strings: a title, column headers, rows (the first cell names the row).

    User text in it (names, paths, field values) is already `console.cell`-escaped; it is
    shown as rich `Text`, never parsed as markup."""

    title: list[str]  # words: the title wraps between them, never inside one (a name is one word)
    headers: list[str]
    rows: list[list[str]]
    left: int = 1  # how many leading columns are text (left-aligned); the rest are numbers

    def table(self) -> Table:
        table = Table(title=None, show_edge=True)
        for i, head in enumerate(self.headers):
            table.add_column(Text(head), justify="left" if i < self.left else "right", no_wrap=True)
        for row in self.rows:
            table.add_row(*(Text(c) for c in row))
        return table

    def stacked(self) -> str:
        """One block per row: its name, then each header and value on a line of its own."""
        width = max((len(h) for h in self.headers[1:]), default=0)
        first = max((len(c.split("\n")[0]) for row in self.rows for c in row[1:]), default=0)
        lines = []
        for row in self.rows:
            lines.append(row[0])
            for head, value in zip(self.headers[1:], row[1:]):
                point, *rest = value.split("\n")
                lines.append("  ".join([f"  {head:<{width}}", point.rjust(first), *rest]).rstrip())
        return "\n".join(lines)


def wrapped(words: list[str], width: int) -> str:
    """`words` joined by spaces, a line break instead of a space where the next word would
    pass `width`; a word longer than `width` stands alone on its line, whole."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def print_grid(console: Console, grid: Grid) -> None:
    """The title on its own line, then the table when it fits the terminal, else one block per
    row (`Grid.stacked`): no cell is ever cut, folded or wrapped."""
    console.print(Text(wrapped(grid.title, console.width)), soft_wrap=True)
    table = grid.table()
    if _squeezed(console, table):
        console.print(Text(grid.stacked()), soft_wrap=True)
    else:
        console.print(table, soft_wrap=True)


MCE_ROWS = "MCE rows"  # the column beside MCE: the rows of the bin it comes from


def _headers(keys: list[str]) -> list[str]:
    """The metric columns' headers with direction arrows, MCE followed by its bin's rows."""
    heads = []
    for k in keys:
        name, direction = METRICS[k]
        heads.append(f"{name} {_ARROWS[direction]}")
        if k == "mce":
            heads.append(MCE_ROWS)
    return heads


def count_text(value: float | None) -> str:
    """A row count (or weight sum) as a table shows it."""
    if value is None or value != value:
        return "n/a"
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def metrics_grid(report) -> Grid:
    """One row per column/map, one column per metric; with --bootstrap the interval below."""
    keys = _keys(report)
    headers = ["probabilities", *_headers(keys)]
    return Grid(_title_words(report), headers, [[cell(r.name), *_cells(r, keys, "\n", counts=True)] for r in report.results])


def metrics_table(report) -> Table:
    """The metric table as a rich Table (`metrics_grid`)."""
    return metrics_grid(report).table()


def _cells(result, keys: list[str], gap: str, counts: bool = False) -> list[str]:
    """Each metric to 4 decimals, with its bootstrap interval after `gap` when there is one
    (`counts`: MCE followed by the rows of its bin, as `_headers` has it)."""
    cells = []
    for k in keys:
        value = fmt(result.metrics[k])
        if result.intervals is not None:
            lo, hi = result.intervals.get(k, (None, None))
            value += f"{gap}[{fmt(lo)}, {fmt(hi)}]"
        cells.append(value)
        if counts and k == "mce":
            cells.append(count_text(result.mce_count))
    return cells


def field_grids(report) -> Iterable[Grid]:
    """For each column/map: the fields with the largest |bias| and largest |relative bias|."""
    for r in report.results:
        if r.by_field is None:
            continue
        bf = r.by_field
        for key, what in (("by_bias", "bias Σ(y−p)"), ("by_relative_bias", "relative bias Σ(y−p)/Σ(y+0.01)")):
            title = [f"'{cell(r.name)}':", *f"top {min(bf['top'], bf['fields'])} of {bf['fields']} values of".split(),
                     f"'{cell(report.field_col)}'", "by", *f"|{what}|".split()]
            headers = ["field", "rows", "positives", "mean p", "positive rate", "bias", "relative bias"]
            rows = [[cell(f["field"]), str(f["rows"]), str(f["positives"]), fmt(f["mean_p"]),
                     fmt(f["positive_rate"]), f"{f['bias']:+.2f}", f"{f['relative_bias']:+.1%}"]
                    for f in bf[key]]
            yield Grid(title, headers, rows)


SEGMENT_HEADERS = ["segment", "rows", "predicted", "observed", "ECCE", "σ", "ECCE/σ", "p"]


def _segment_title(r) -> list[str]:
    capped = f" (--segment-max stopped the enumeration at {r.segments_checked})" if r.segments_capped else ""
    return [f"'{cell(r.name)}':", *(f"the {len(r.segments)} worst of {r.segments_checked} segments{capped}, by "
                                    "ECCE/σ: how far the segment's cumulative calibration error strays from 0, in "
                                    "units of its noise (above ~5 is significant); p: the chance of a stray "
                                    "this large if the segment were calibrated, not corrected for the number "
                                    "of segments").split()]


def _segment_cells(s: dict[str, Any], weighted: bool) -> list[str]:
    cells = [cell(s["segment"]), count_text(s["rows"])]
    if weighted:
        cells.append(count_text(s["weight"]))
    return cells + [fmt(s["predicted"]), fmt(s["observed"]), _g(s["ecce"]), _g(s["sigma"]),
                    _g(s["ecce_sigma"], 2, fixed=True), _g(s["p"], 3)]


def _g(value: float | None, digits: int = 4, fixed: bool = False) -> str:
    if value is None or value != value:
        return "n/a"
    return f"{value:.{digits}f}" if fixed else f"{value:.{digits}g}"


def segment_grids(report) -> Iterable[Grid]:
    """For each column/map with --segment-col: its worst segments (`EvalRow.segments`)."""
    weighted = report.weight_col is not None
    headers = SEGMENT_HEADERS[:2] + (["weight"] if weighted else []) + SEGMENT_HEADERS[2:]
    for r in report.results:
        if r.segments:
            yield Grid(_segment_title(r), headers, [_segment_cells(s, weighted) for s in r.segments])


def field_tables(report) -> Iterable[Table]:
    """The per-field views as rich Tables (`field_grids`)."""
    return (g.table() for g in field_grids(report))


def reliability_text(name: str, bins: list[dict[str, Any]], width: int = BAR_WIDTH, kclass: bool = False) -> str:
    """A reliability diagram in plain text: one line per non-empty bin of ECE (`--ece-bins`,
    `--ece-strategy`; tied p never split).

    The bar is the observed positive rate on a 0..1 scale of `width` characters; `|` marks
    the mean predicted p, where the bar would end if the bin were perfectly calibrated.
    `kclass`: the top-label diagram (p the confidence, the rate the top label's accuracy).
    """
    what = "top-label reliability" if kclass else "reliability"
    bar = "accuracy, | mean confidence" if kclass else "positive rate, | mean p"
    lines = [f"{what} of '{name}': {len(bins)} bins of ECE (bar: {bar})",
             f"{'mean p':>8} {'rate':>7} {'rows':>8}  0{' ' * (width - 2)}1"]
    for b in bins:
        cells = ["█"] * round(b["positive_rate"] * width) + [" "] * width
        cells = cells[:width]
        mark = min(int(b["mean_p"] * width), width - 1)
        cells[mark] = "|"
        lines.append(f"{b['mean_p']:8.4f} {b['positive_rate']:7.4f} {b['rows']:8d}  {''.join(cells)}")
    return "\n".join(lines)


def _keys(report) -> list[str]:
    return report.metric_keys()


def _title(report) -> str:
    return " ".join(_title_words(report))


def _title_words(report) -> list[str]:
    title = report.headline
    if report.bootstrap:
        title += f"; {report.bootstrap.level:.0%} intervals from {report.bootstrap.replicates} resamples"
    return [f"{cell(report.input)}:", *title.split()]


def stacked_text(report) -> str:
    """The metric table as one block per column/map: for terminals too narrow for the table."""
    return _title(report) + "\n" + metrics_grid(report).stacked()


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
    """The metric table as CSV: one row per column/map, full precision, empty for n/a; names
    exactly as given, quoted (RFC 4180) when they hold a comma, a quote, CR or LF. With
    --segment-col, an empty line and a second table follow: the worst segments of each
    column/map (`SEGMENT_CSV`, worst first)."""
    header, rows = _flat_rows(report)
    text = "".join(",".join(map(_csv_field, row)) + "\n" for row in [header, *rows])
    segments = [[r.name, str(i + 1), *(_csv_number(s[k]) if k != "segment" else s[k] for k in SEGMENT_CSV[2:])]
                for r in report.results for i, s in enumerate(r.segments or [])]
    if any(r.segments is not None for r in report.results):
        text += "\n" + "".join(",".join(map(_csv_field, row)) + "\n" for row in [list(SEGMENT_CSV), *segments])
    return text


SEGMENT_CSV = ("name", "rank", "segment", "rows", "weight", "predicted", "observed", "ecce", "sigma", "ecce_sigma", "p")


def _csv_number(v: Any) -> str:
    return "" if v is None or v != v else repr(v)


def _csv_field(text: str) -> str:
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


_MARKDOWN_SPECIAL = "|*_`[]<>~"


def _markdown(text: str) -> str:
    """`console.cell` text (no space at its ends: `cell` escapes them, as Markdown trims a
    cell's edges) inside a Markdown table cell: pipes escaped (`\\|`), and the characters that
    would start emphasis, code, links or HTML shown literally."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in text)


def markdown_text(report) -> str:
    """The metric table as a Markdown (GitHub) table, 4 decimals, for CI comments."""
    keys = _keys(report)
    head = ["probabilities", *(METRICS[k][0] for k in keys)]
    lines = [f"**{_markdown(_title(report))}**", "", "| " + " | ".join(head) + " |",
             "|" + "---|" + "---:|" * len(keys)]
    for r in report.results:
        lines.append(f"| {_markdown(cell(r.name))} | " + " | ".join(_cells(r, keys, " ")) + " |")
    for grid in segment_grids(report):
        lines += ["", f"**{_markdown(' '.join(grid.title))}**", "", "| " + " | ".join(grid.headers) + " |",
                  "|---|" + "---:|" * (len(grid.headers) - 1)]
        lines += [f"| {_markdown(row[0])} | " + " | ".join(row[1:]) + " |" for row in grid.rows]
    return "\n".join(lines) + "\n"


def print_report(report, reliability: bool = False) -> None:
    """Everything `calib evaluate` prints on stdout as tables: each table when it fits the
    terminal, else one block per column/map (never a truncated number or merged headers)."""
    console = stdout_console()
    print_grid(console, metrics_grid(report))
    for grid in field_grids(report):
        print_grid(console, grid)
    for grid in segment_grids(report):
        print_grid(console, grid)
    if reliability:
        for r in report.results:
            console.print(Text(reliability_text(cell(r.name), r.reliability or [], kclass=report.kclass)),
                          soft_wrap=True)


def _squeezed(console: Console, table: Table) -> bool:
    """True when rich would have to wrap or cut a cell to fit the table in the terminal."""
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    return natural > console.width


__all__ = ["Grid", "SEGMENT_CSV", "csv_text", "field_grids", "segment_grids", "field_tables", "metrics_grid", "print_grid", "markdown_text", "metrics_table", "print_report", "reliability_text",
           "stacked_text"]
