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
    if grid.title:
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
    """One row per column/map: its verdict, then one column per metric; with --bootstrap the
    interval below."""
    keys = _keys(report)
    headers = ["probabilities", "verdict", *_headers(keys)]
    return Grid(_title_words(report), headers, [[cell(r.name), verdict_label(r), *_cells(r, keys, "\n", counts=True)]
                                                for r in report.results], left=2)


def verdict_label(result) -> str:
    """The verdict in a word or two, for a table cell ("n/a" for a result without one)."""
    v = getattr(result, "verdict", None)
    return "n/a" if v is None else v.label


def verdict_lines(report) -> list[tuple[str, str]]:
    """(name, the verdict in words) of each result that has one, in order."""
    return [(r.name, r.verdict.text) for r in report.results if getattr(r, "verdict", None) is not None]


def verdict_text(report, width: int) -> str:
    """The verdicts in plain text, first in `calib evaluate`'s table output: one paragraph per
    result, wrapped at `width` (`wrapped`: a word is never cut)."""
    lines = []
    for name, text in verdict_lines(report):
        lines.append(wrapped(f"verdict of '{cell(name)}': {text}".split(" "), width))
    return "\n".join(lines)


def metrics_table(report) -> Table:
    """The metric table as a rich Table (`metrics_grid`)."""
    return metrics_grid(report).table()


def metric_cells(result, keys: list[str], gap: str) -> list[str]:
    """Each metric to 4 decimals, with its bootstrap interval after `gap` (no MCE rows column)."""
    return _cells(result, keys, gap)


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


FIELD_HEADERS = ["field", "rows", "positives", "mean p", "positive rate", "gap", "p", "adjusted p", "significant"]


def field_rows(by_field: dict) -> list[list[str]]:
    """The listed field values as text cells (FIELD_HEADERS)."""
    return [[cell(f["field"]), count_text(f["rows"]), count_text(f["positives"]), fmt(f["mean_p"]),
             fmt(f["positive_rate"]), f"{f['gap']:+.4f}", _p_text(f["p_value"]), _p_text(f["adjusted_p"]),
             "yes" if f["significant"] else "no"] for f in by_field["values"]]


def _p_text(p: float) -> str:
    if p is None or p != p:
        return "n/a"
    return "<1e-4" if p < 1e-4 else f"{p:.4f}"


def field_title(report, result) -> list[str]:
    """`'p': 5 of 212 values of 'field', ranked by evidence (...)`, as words."""
    bf = result.by_field
    shown = len(bf["values"])
    return [f"'{cell(result.name)}':", *f"the {shown} of {bf['fields']} values of".split(),
            f"'{cell(report.field_col)}'",
            *(f"with the strongest evidence of a gap (exact binomial test of each of the {bf['tested']} values with "
              f"at least {count_text(bf['min_rows'])} rows, p adjusted by Benjamini-Hochberg; gap = mean p − "
              f"positive rate; {bf['significant']} significant at a 5% false discovery rate)").split()]


def field_grids(report) -> Iterable[Grid]:
    """For each column/map with --by-field: the values with the strongest evidence of a gap."""
    for r in report.results:
        if r.by_field is None:
            continue
        yield Grid(field_title(report, r), list(FIELD_HEADERS), field_rows(r.by_field))


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


def metric_keys(report) -> list[str]:
    """The metrics the tables show, in order."""
    return report.metric_keys()


def _title(report) -> str:
    return " ".join(_title_words(report))


def title_text(report) -> str:
    """`input: 1000 rows, 130 positive` (and the bootstrap's intervals)."""
    return _title(report)


def _title_words(report) -> list[str]:
    title = report.headline
    if report.bootstrap:
        title += f"; {report.bootstrap.level:.0%} intervals from {report.bootstrap.replicates} resamples"
    return [f"{cell(report.input)}:", *title.split()]


def stacked_text(report) -> str:
    """The metric table as one block per column/map: for terminals too narrow for the table."""
    return _title(report) + "\n" + metrics_grid(report).stacked()


VERDICT_COLUMNS = ["calibrated", "direction", "where_p_min", "where_p_max", "where_predicted", "where_observed",
                   "verdict"]
FIELD_COLUMNS = ["field", "field_rows", "field_positives", "field_mean_p", "field_positive_rate", "field_gap",
                 "field_p_value", "field_adjusted_p", "field_significant"]


def _flat_rows(report) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the metric table as plain strings (metrics at full precision): the
    verdict's columns after the name and kind; with --by-field, one more row (kind `field`)
    per listed field value, its columns empty in the other rows."""
    keys = _keys(report)
    header = ["name", "kind", *VERDICT_COLUMNS, *keys]
    with_intervals = any(r.intervals is not None for r in report.results)
    if with_intervals:
        header += [f"{k}_{end}" for k in keys for end in ("low", "high")]
    with_fields = any(r.by_field is not None for r in report.results)
    if with_fields:
        header += FIELD_COLUMNS
    rows = []
    for r in report.results:
        row = [r.name, r.kind, *_verdict_cells(r), *(_full(r.metrics[k]) for k in keys)]
        if with_intervals:
            row += [_full(v) for k in keys for v in (r.intervals or {}).get(k, (math.nan,) * 2)]
        rows.append(row + [""] * (len(FIELD_COLUMNS) if with_fields else 0))
    for r in report.results:
        for f in (r.by_field or {}).get("values", []):
            cells = [f["field"], *(_full(f[k]) for k in ("rows", "positives", "mean_p", "positive_rate", "gap",
                                                          "p_value", "adjusted_p")),
                     "true" if f["significant"] else "false"]
            rows.append([r.name, "field", *[""] * (len(header) - 2 - len(FIELD_COLUMNS)), *cells])
    return header, rows


def _full(v) -> str:
    return "" if v is None or v != v else repr(v) if isinstance(v, float) else str(v)


def _verdict_cells(result) -> list[str]:
    v = getattr(result, "verdict", None)
    if v is None:
        return [""] * len(VERDICT_COLUMNS)
    where = v.where or {}
    return ["" if v.calibrated is None else str(v.calibrated).lower(), ";".join(v.direction),
            *(_full(where.get(k)) for k in ("p_min", "p_max", "predicted", "observed")), v.text]


def csv_text(report) -> str:
    """The metric table as CSV: one row per column/map, full precision, empty for n/a; names
    exactly as given, quoted (RFC 4180) when they hold a comma, a quote, CR or LF. The verdict
    is in the columns after the name and kind (`VERDICT_COLUMNS`: calibrated true, false or
    empty for too few rows; directions joined by `;`; the score range of the largest gap; the
    sentence); `--by-field` adds rows of kind `field` (`FIELD_COLUMNS`). With
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


def print_report(report, reliability: bool = False) -> None:
    """Everything `calib evaluate` prints on stdout as tables: each table when it fits the
    terminal, else one block per column/map (never a truncated number or merged headers)."""
    console = stdout_console()
    console.print(Text(wrapped(_title_words(report), console.width)), soft_wrap=True)
    console.print(Text(verdict_text(report, console.width)), soft_wrap=True)
    grid = metrics_grid(report)
    grid.title = []
    print_grid(console, grid)
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


__all__ = ["FIELD_HEADERS", "Grid", "SEGMENT_CSV", "csv_text", "field_grids", "field_rows", "field_tables", "segment_grids", "metrics_grid", "print_grid",
           "metrics_table", "print_report", "reliability_text", "stacked_text", "title_text", "metric_cells", "metric_keys", "verdict_label", "verdict_lines",
           "verdict_text"]
