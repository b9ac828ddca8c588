"""`calib evaluate` in Markdown: `--output-format markdown` (for a CI comment) and `--summary
FILE.md` (for a CI step summary, e.g. `$GITHUB_STEP_SUMMARY`). Both open with the verdict and
the gates; the summary also says which exit code the run gives and why, and is written
whatever that code is. Renders; decides nothing.
"""

from __future__ import annotations

from calibcli.io.console import cell
from calibcli.evaluation.render import report as render
from calibcli.evaluation.metrics.binary import ALL_METRICS

_MARKDOWN_SPECIAL = "|*_`[]<>~"


def escape(text: str) -> str:
    """`console.cell` text (no space at its ends: `cell` escapes them, as Markdown trims a
    cell's edges) inside Markdown: pipes escaped (`\\|`), and the characters that would start
    emphasis, code, links or HTML shown literally."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in text)


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    lines = ["| " + " | ".join(escape(h) for h in headers) + " |",
             "|" + "---|" * left + "---:|" * (len(headers) - left)]
    lines += ["| " + " | ".join(escape(c).replace("\n", " ") for c in row) + " |" for row in rows]
    return lines


def verdict_lines(report) -> list[str]:
    """One bullet per result: its name in bold, the verdict in words."""
    return [f"- **{escape(cell(name))}**: {escape(text)}" for name, text in render.verdict_lines(report)]


def gate_lines(report) -> list[str]:
    """What the gates checked: the outcome in one line, then every check (passed ones too)."""
    gate = report.gate
    if gate is None or not gate.checks:
        return ["No gate options were given."]
    n = len(gate.checks)
    on = {"point": "the metric itself", "worst": "the end of its confidence interval worst for the gate",
          "best": "the end of its confidence interval best for the gate"}[gate.gate_on]
    head = (f"**Passed**: {n} check{'' if n == 1 else 's'}" if gate.passed
            else f"**Failed**: {len(gate.failed)} of {n} gate checks")
    lines = [f"{head} (each compares {on}{'; baseline ' + escape(cell(gate.baseline)) if gate.baseline else ''}).", ""]
    rows = []
    for c in gate.checks:
        limit = render.fmt(c.limit) if c.kind != "regression" or c.baseline is None else \
            f"{render.fmt(c.limit)} (baseline {render.fmt(c.baseline)})"
        rows.append([cell(c.result), ALL_METRICS[c.metric][0], c.kind, render.fmt(c.value), render.fmt(c.compared),
                     limit, "passed" if c.passed else "FAILED"])
    return lines + _table(["result", "metric", "gate", "value", "compared", "limit", "outcome"], rows, left=3)


def markdown_text(report) -> str:
    """The report as Markdown: the verdict, the gates, the metric table (4 decimals) and the
    `--by-field` tables."""
    keys = render.metric_keys(report)
    lines = [f"**{escape(render.title_text(report))}**", "", "**Verdict**", "", *verdict_lines(report), "",
             "**Gates**", "", *gate_lines(report), ""]
    head = ["probabilities", "verdict", *(ALL_METRICS[k][0] for k in keys)]
    rows = [[cell(r.name), render.verdict_label(r), *render.metric_cells(r, keys, " ")] for r in report.results]
    lines += _table(head, rows, left=2)
    for grid in render.field_grids(report):
        lines += ["", escape(" ".join(grid.title)), "", *_table(grid.headers, grid.rows)]
    lines += segment_lines(report)
    return "\n".join(lines) + "\n"


def segment_lines(report) -> list[str]:
    """With --segment-col: each result's worst segments (`report.segment_grids`), a Markdown
    table after a line saying what the columns mean; [] without."""
    lines = []
    for grid in render.segment_grids(report):
        lines += ["", escape(" ".join(grid.title)), "", *_table(grid.headers, grid.rows)]
    return lines


def exit_decision(report, code: int, error: str | None = None) -> str:
    """Why the run exits with `code`, in one line."""
    if error is not None:
        return f"**Exit {code}**: the run stopped before a verdict: {escape(cell(error))}"
    gate = report.gate
    if code == 1 and gate is not None:
        return f"**Exit 1**: {len(gate.failed)} of {len(gate.checks)} gate checks failed."
    if gate is not None and gate.checks:
        n = len(gate.checks)
        return f"**Exit 0**: every gate passed ({n} check{'' if n == 1 else 's'})."
    return "**Exit 0**: no gate was given, so the verdict does not set the exit code."


def summary_text(report, code: int, title: str | None = None, error: str | None = None) -> str:
    """The `--summary` file: a heading, the exit decision, the verdict and the gates (with their
    values and thresholds); `report` None (with `error`) when the run stopped before one."""
    heading = title or (f"calib evaluate: {report.input}" if report is not None else "calib evaluate")
    lines = [f"## {escape(cell(heading))}", "", exit_decision(report, code, error), ""]
    if report is None:
        return "\n".join(lines)
    lines += [escape(render.title_text(report)), "", "### Verdict", "", *verdict_lines(report), "",
              "### Gates", "", *gate_lines(report), ""]
    segments = segment_lines(report)
    if segments:
        lines += ["### Worst segments", *segments, ""]
    return "\n".join(lines)


__all__ = ["escape", "exit_decision", "gate_lines", "markdown_text", "segment_lines", "summary_text", "verdict_lines"]
