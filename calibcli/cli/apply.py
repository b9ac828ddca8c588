"""`calib apply` and `calib export`: using a saved map, on a score file or in SQL."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from calibcli.io import console
from calibcli.cli.shared import InputArg, ScoreCol, ScoreColsOpt, option_range, reports_errors, state
from calibcli.errors import UsageError


@reports_errors
def apply(
    map: Annotated[str, typer.Argument(help="A map saved by `calib fit` (.json or .parquet).")],
    input: InputArg,
    output: Annotated[str, typer.Option("--output", "-o", help="Output file, or - (default) for stdout.")] = "-",
    score_col: ScoreCol = "score",
    score_cols: Annotated[Optional[str], typer.Option("--score-cols", metavar="SPEC", help="K-class maps: the K score columns (comma list, quoted pattern 'p_*' or a list column); default: the columns the map was fitted on.")] = None,
    output_col: Annotated[str, typer.Option("--output-col", help="Name of the added probability column (K-class maps: the prefix of <output-col>_<class>).")] = "calibrated",
    format: Annotated[Optional[str], typer.Option("--format", "-f", "--input-format", help="Input format: csv, tsv, jsonl, parquet (default: from extension, else sniffed).")] = None,
    output_format: Annotated[Optional[str], typer.Option("--output-format", help="Output format: csv, tsv, jsonl, parquet (default: from -o's extension, .gz for gzip; else the input's).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing output directory of parts that calib wrote (it holds calib's .calibcli-output marker and nothing else), once the new one is complete.")] = False,
    on_invalid: Annotated[str, typer.Option("--on-invalid", metavar="error|null|skip", help="Rows whose score is empty, NaN, infinite or outside the map's domain: error stops (default), null writes an empty calibrated value, skip leaves the row out; null and skip print the count.")] = "error",
    interval: Annotated[bool, typer.Option("--interval", help="Also write the map's probability interval as <output-col>_low and <output-col>_high (venn-abers maps).")] = False,
) -> None:
    """Add calibrated probabilities to a score file, streaming (works in pipes and on large files).

    INPUT may also be a directory or glob of Parquet parts: the parts are then mirrored
    into the directory -o. A progress bar shows on stderr when it is a terminal.

    \b
    calib apply map.json new.parquet -o out.parquet
    cat new.csv | calib apply map.json - > out.csv
    calib apply map.json 'scores/*.parquet' -o calibrated/
    calib apply map.json new.csv --on-invalid null -o out.csv
    calib apply kmap.json new.parquet -o out.parquet      # K-class map: calibrated_<class> columns
    """
    from calibcli.requests import ApplyRequest

    request = ApplyRequest.build(score_col, output_col, on_invalid, interval, score_cols)
    from calibcli import io
    from calibcli.io import progress
    from calibcli.applying.stream import apply_file

    to_stdout = output == "-"
    total = io.parquet_rows(input) if progress.enabled(to_stdout) else None
    with progress.rows("apply", total, data_to_stdout=to_stdout) as advance:
        done = apply_file(map, input, output, request, input_format=format, output_format=output_format,
                          on_batch=advance, force=force)
    if on_invalid != "error" and done.invalid:
        what = "written with an empty calibrated value" if on_invalid == "null" else "skipped"
        console.info(f"{done.invalid} of {done.rows} rows had an invalid score (empty, NaN, infinite or "
                     f"outside the map's domain): {what}")
    if done.unseen:
        examples = "; ".join(f"{column}: " + ", ".join(values)
                             for column, values in done.unseen_examples.items())
        console.warn(f"{done.unseen} of {done.rows} rows have a field value the map never saw at fit (e.g. {examples}): "
                     "they are calibrated without a shift of their own (the map's 'unknown' level)")


@reports_errors
def export(
    map: Annotated[str, typer.Argument(help="A map saved by `calib fit` (.json or .parquet).")],
    sql: Annotated[bool, typer.Option("--sql", help="Print one SQL expression computing the calibrated probability.")] = False,
    score_col: Annotated[Optional[str], typer.Option("--score-col", help="Score column the expression reads (default: score); quoted as an identifier.")] = None,
    score_cols: Annotated[Optional[str], typer.Option("--score-cols", metavar="A,B,...", help="K-class maps: the score columns, a comma list (default: the columns the map was fitted on); quoted as identifiers.")] = None,
    score_expr: Annotated[Optional[str], typer.Option("--score-expr", help="A SQL expression giving the score, instead of --score-col; refused if it could end the statement or open a comment.")] = None,
    dialect: Annotated[str, typer.Option("--dialect", help="How identifiers and strings are quoted: ansi (\"col\": DuckDB, PostgreSQL) or spark (`col`).")] = "ansi",
    max_knots: Annotated[Optional[int], typer.Option("--max-knots", help="Simplify a knot or bin map to at most N knots (bin edges), printing the maximum error it adds." + option_range("--max-knots"))] = None,
) -> None:
    """Export a map for use outside calibcli (isotonic, binning, logistic, beta, ilps, ...).

    A K-class map (temperature, vector, dirichlet) gives a select list, one line per class
    `<expression> AS "calibrated_<class>"`, for `SELECT <list> FROM t`.

    \b
    calib export map.json --sql --score-col score
    duckdb -c "SELECT *, $(calib export map.json --sql) AS p FROM 'scores.parquet'"
    duckdb -c "SELECT $(calib export kmap.json --sql) FROM 'digits.parquet'"
    """
    from calibcli.export import dispatch
    from calibcli.requests import ExportRequest

    if not sql:
        raise UsageError("choose an export format", hint="--sql prints a SQL expression")
    request = ExportRequest.build(score_col, score_expr, dialect, max_knots, score_cols)
    result = dispatch.export_map(map, request)
    simplified = result.simplified
    if simplified is not None and simplified.after < simplified.before:
        console.info(f"simplified {simplified.before} knots to {simplified.after}: "
                     f"max absolute error {simplified.max_error!r}")
    if result.too_large():
        message = result.size_warning()
        if state["strict"]:
            raise UsageError(message)
        console.warn(message)
    typer.echo(result.sql)
