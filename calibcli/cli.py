"""The `calib` command: parses arguments, calls the library (`fit`, `apply`, `evaluation`, ...), prints results.

Exit codes: 0 success; 1 an `evaluate` gate failed; 2 usage, input, map or fit error.
Data goes to stdout; messages, tables of diagnostics and progress go to stderr.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import warnings
from typing import Annotated, Callable, List, Optional

import typer

# The calibrators' matrix products are small: BLAS threads only contend on few cores (field-aware
# trained 3x slower with them). Set before numpy is first imported; users may override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Arrow buffers from the C allocator: pages a table frees are the ones numpy's arrays reuse next,
# where a separate arena would hold them and every numpy array would fault in fresh memory
# (a cold `calib fit` of 1e7 rows took 2x as long). Set before pyarrow is first imported.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

from calibcli import bounds, console  # noqa: E402
from calibcli._version import __version__  # noqa: E402
from calibcli.errors import CalibError, CalibWarning, ExitCode, UsageError  # noqa: E402

_GLOBAL_FLAGS = ("-q", "--quiet", "--debug", "--strict")


class _Group(typer.core.TyperGroup):
    """Accepts the global flags (-q, --debug, --strict) after the subcommand too:
    `calib fit x.csv --strict` means `calib --strict fit x.csv`."""

    def parse_args(self, ctx, args):
        if "--" in args:
            head, tail = args[:args.index("--")], args[args.index("--"):]
        else:
            head, tail = args, []
        flags = [a for a in head if a in _GLOBAL_FLAGS]
        rest = [a for a in head if a not in _GLOBAL_FLAGS]
        return super().parse_args(ctx, flags + rest + tail)


app = typer.Typer(
    cls=_Group,
    name="calib",
    help="Turn a classifier's raw scores into probabilities people can trust.\n\n"
    "Exit codes: 0 success, 1 an evaluate gate failed, 2 usage/input/map/fit error.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

_state = {"debug": False, "strict": False}

InputArg = Annotated[str, typer.Argument(help="Score file (CSV, TSV, JSON lines, Parquet; .gz ok) or - for stdin.")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", "-f", help="Input format: csv, tsv, jsonl, parquet (default: from extension, else sniffed).")]
ScoreCol = Annotated[str, typer.Option("--score-col", help="Column with the classifier's scores.")]
LabelCol = Annotated[str, typer.Option("--label-col", help="Column with 0/1 (or true/false) labels.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"calib {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Hide warnings and summaries (errors still show).")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of unexpected errors.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings (non-converged fit, clipped scores, all-equal scores) as errors: exit 2, no output.")] = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    console.quiet = quiet
    _state["debug"] = debug
    _state["strict"] = strict


def reports_errors(func: Callable) -> Callable:
    """Turn library errors into `error: ...` on stderr and exit code 2, inside each command."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except CalibError as exc:
            console.error(exc.message, exc.hint)
            raise typer.Exit(ExitCode.ERROR) from None
        except BrokenPipeError:
            console.stdout_closed()  # downstream closed the pipe (e.g. `| head`): stop quietly
            raise typer.Exit(ExitCode.OK) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except OSError as exc:  # a failure of the system, not of calib: one line, exit 2
            where = f"{exc.filename}: " if exc.filename else ""
            console.error(f"{where}{exc.strerror or exc}")
            raise typer.Exit(ExitCode.ERROR) from None
        except Exception as exc:  # noqa: BLE001 - last resort: one line, not a traceback
            if _state["debug"]:
                raise
            console.error(f"internal error: {type(exc).__name__}: {exc}",
                          "run with `calib --debug ...` for the traceback and report it")
            raise typer.Exit(ExitCode.ERROR) from None

    return wrapper


def _parse_params(pairs: List[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {pair!r} is not key=value", hint="e.g. --param platt_correction=true")
        out[key.strip()] = value
    return out


def _range(option: str) -> str:
    return " Range: " + bounds.OPTIONS[option].describe() + "."


class _FitCommand(typer.core.TyperCommand):
    """`calib fit --help` ends with every numeric method option and its bounds."""

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        with formatter.section("Numeric method options (--param key=value) and their bounds"):
            formatter.write_dl([(f"{method}: {name}", f"{kind} in {rng}")
                                for method, name, kind, rng in bounds.param_rows()])


def _fmt(value: float) -> str:
    return "n/a" if value != value else f"{value:.4f}"


@app.command(cls=_FitCommand)
@reports_errors
def fit(
    input: Annotated[Optional[str], typer.Argument(help="Score file (CSV, TSV, JSON lines, Parquet; .gz ok) or - for stdin; omit with --from-summary.")] = None,
    from_summary: Annotated[Optional[str], typer.Option("--from-summary", help="Fit on a score summary (from `calib summarize`, or Spark/Dask: Parquet/JSON file or directory) instead of rows.")] = None,
    method: Annotated[str, typer.Option("--method", "-m", help="Calibration method (see `calib methods`).")] = "isotonic",
    param: Annotated[List[str], typer.Option("--param", "-p", help="Method option key=value; repeatable.")] = [],
    output: Annotated[str, typer.Option("--output", "-o", help="Where to save the map: .json or .parquet; - (default) prints JSON to stdout.")] = "-",
    seed: Annotated[Optional[int], typer.Option("--seed", help="Random seed for methods that sample." + _range("--seed"))] = None,
    score_col: ScoreCol = "score",
    label_col: LabelCol = "label",
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights (see --weight-kind).")] = None,
    weight_kind: Annotated[str, typer.Option("--weight-kind", help="frequency: weight k counts as k rows (default); importance: only ratios matter, the map ignores the weights' scale.")] = "frequency",
    field_col: Annotated[List[str], typer.Option("--field-col", help="Categorical feature column for field-aware methods; repeatable.")] = [],
    feature_col: Annotated[List[str], typer.Option("--feature-col", help="Numeric feature column for field-aware methods; repeatable.")] = [],
    format: FormatOpt = None,
    output_format: Annotated[Optional[str], typer.Option("--output-format", help="Map format: json or parquet (default: from -o's extension, else JSON).")] = None,
) -> None:
    """Fit a calibration map from a score/label file.

    \b
    calib fit --method isotonic cal.csv -o map.json
    cat cal.csv | calib fit - --method logistic > map.json
    calib fit --from-summary summary.parquet --method isotonic -o map.json
    """
    bounds.check(seed=seed)  # before the imports: a refusal costs no library start-up
    bounds.check_params(method, _parse_params(param))
    from calibcli.io import reading

    ahead = input if input is not None and from_summary is None else "-"  # "-": nothing to read ahead
    with reading.prefetching(ahead, format, tuple(field_col)):  # read while the fitting code imports
        from calibcli import fitting

        fitting.check_weight_kind(weight_kind)
        if weight_kind != "frequency" and input is not None and weight_col is None:
            raise UsageError("--weight-kind needs --weight-col (or --from-summary)")
        if input is None and from_summary is None:
            raise UsageError("missing the score file to fit on (or --from-summary FILE)",
                             hint="e.g. `calib fit cal.csv -o map.json`, or `-` to read stdin")
        if input is not None and from_summary is not None:
            raise UsageError("give either a score file or --from-summary FILE, not both",
                             hint="e.g. `calib fit cal.csv` or `calib fit --from-summary summary.parquet`")
        if from_summary is not None:
            if weight_col or field_col or feature_col or format:
                raise UsageError("--weight-col, --field-col, --feature-col and --format apply to score files, "
                                 "not to --from-summary", hint="give them to `calib summarize` instead")
            result = fitting.fit_summary_file(from_summary, method, _parse_params(param), seed=seed, out=output,
                                              strict=_state["strict"], out_format=output_format,
                                              weight_kind=weight_kind)
        else:
            cols = fitting.Columns(score_col, label_col, weight_col, tuple(field_col), tuple(feature_col))
            result = fitting.fit_file(input, method, _parse_params(param), cols=cols, fmt=format, seed=seed,
                                      out=output, strict=_state["strict"], out_format=output_format,
                                      weight_kind=weight_kind)
    for message in result.warnings:
        console.warn(message)
    _print_fit_summary(method, result)


def _show(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    return "auto" if value is None else str(value)


def _print_fit_summary(method: str, result) -> None:
    t = result.training
    params = ", ".join(f"{k}={_show(v)}" for k, v in result.calibrator.params.items()) or "defaults"
    # Scalars only: list-valued diagnostics (e.g. per-epoch losses) stay in the saved map.
    fitted = ", ".join(f"{k}={_show(v)}" for k, v in t["fit"].items() if not isinstance(v, (list, dict)))
    console.info(f"fitted {method} ({params}) on {t['rows']} rows, {t['positives']} positive, "
                 f"scores in [{t['score_range'][0]:.6g}, {t['score_range'][1]:.6g}]")
    if fitted:
        console.info(f"  {fitted}")
    before = t.get("before")
    after = t["after"]
    ll_before = _fmt(before["log_loss"]) if before else "n/a"
    br_before = _fmt(before["brier"]) if before else "n/a"
    console.info(f"  training log-loss {ll_before} -> {_fmt(after['log_loss'])}, "
                 f"Brier {br_before} -> {_fmt(after['brier'])}")


@app.command()
@reports_errors
def summarize(
    input: InputArg,
    output: Annotated[str, typer.Option("--output", "-o", help="Where to save the summary: .parquet or .json; - (default) prints JSON to stdout.")] = "-",
    score_col: ScoreCol = "score",
    label_col: LabelCol = "label",
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights.")] = None,
    step: Annotated[Optional[float], typer.Option("--step", help="Round scores to multiples of STEP (each moves at most STEP/2); default exact." + _range("--step"))] = None,
    format: FormatOpt = None,
) -> None:
    """Stream a score file into per-score counts (n0, n1) that `calib fit --from-summary` fits on.

    Summaries of parts merge: Spark or Dask can write the same table (score, n0, n1);
    INPUT may be a directory or glob of Parquet parts.

    \b
    calib summarize big.parquet -o summary.parquet
    calib fit --from-summary summary.parquet --method isotonic -o map.json
    """
    bounds.check(step=step)
    from calibcli import io, progress, summary
    from calibcli.io.targets import check_output

    check_output(output, [input])
    summary.output_format(output)
    total = io.parquet_rows(input) if progress.enabled() else None
    with progress.rows("summarize", total) as advance:
        result = summary.summarize_file(input, score_col=score_col, label_col=label_col, weight_col=weight_col,
                                        fmt=format, step=step, on_batch=advance)
    summary.save(result, output)
    console.info(f"summarized {result.rows} rows, {result.positives} positive, into "
                 f"{result.size} distinct scores" + (f" (step {step:g})" if step else ""))


@app.command()
@reports_errors
def apply(
    map: Annotated[str, typer.Argument(help="A map saved by `calib fit` (.json or .parquet).")],
    input: InputArg,
    output: Annotated[str, typer.Option("--output", "-o", help="Output file, or - (default) for stdout.")] = "-",
    score_col: ScoreCol = "score",
    output_col: Annotated[str, typer.Option("--output-col", help="Name of the added probability column.")] = "calibrated",
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
    """
    from calibcli import io, progress
    from calibcli.applying import apply_file, check_on_invalid

    check_on_invalid(on_invalid)
    to_stdout = output == "-"
    total = io.parquet_rows(input) if progress.enabled(to_stdout) else None
    with progress.rows("apply", total, data_to_stdout=to_stdout) as advance:
        done = apply_file(map, input, output, score_col=score_col, output_col=output_col, input_format=format,
                          output_format=output_format, on_batch=advance, force=force, on_invalid=on_invalid,
                          interval=interval)
    if on_invalid != "error":
        what = "written with an empty calibrated value" if on_invalid == "null" else "skipped"
        console.info(f"{done.invalid} of {done.rows} rows had an invalid score (empty, NaN, infinite or "
                     f"outside the map's domain): {what}")


def _interval_cols(text: Optional[str]) -> Optional[tuple[str, str]]:
    """`--interval-cols LOW,HIGH` as a pair of column names."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--interval-cols {text!r}: expected two column names, LOW,HIGH")
    return parts[0], parts[1]


@app.command()
@reports_errors
def evaluate(
    input: InputArg,
    prob_col: Annotated[List[str], typer.Option("--prob-col", help="Probability column to evaluate; repeatable.")] = [],
    map: Annotated[List[str], typer.Option("--map", help="Map to apply to --score-col and evaluate; repeatable.")] = [],
    label_col: LabelCol = "label",
    score_col: ScoreCol = "score",
    field_col: Annotated[Optional[str], typer.Option("--field-col", help="Categorical column for Field-ECE and Field-RCE.")] = None,
    calbin_window: Annotated[int, typer.Option("--calbin-window", help="CalBin window size s." + _range("--calbin-window"))] = 100,
    ece_bins: Annotated[int, typer.Option("--ece-bins", help="Bins of ECE and MCE (as scikit-learn's calibration_curve n_bins)." + _range("--ece-bins"))] = 10,
    ece_strategy: Annotated[str, typer.Option("--ece-strategy", help="ECE/MCE bins: uniform (equal width) or quantile (equal mass), as scikit-learn's calibration_curve.")] = "uniform",
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights (every metric is weighted).")] = None,
    step: Annotated[Optional[float], typer.Option("--step", help="Keep p bucketed to multiples of STEP (bounded memory): AUC and CalBin within the JSON's step_bounds, slope/intercept n/a, the rest exact; default exact." + _range("--step"))] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (versioned schema): the same as --output json.")] = False,
    output_kind: Annotated[str, typer.Option("--output", help="What stdout gets: table (stacked blocks when the terminal is narrow), json, csv or markdown.")] = "table",
    fail_above: Annotated[List[str], typer.Option("--fail-above", metavar="METRIC=X", help="Gate: exit 1 if METRIC is above X (e.g. field-rce=0.12); repeatable.")] = [],
    fail_below: Annotated[List[str], typer.Option("--fail-below", metavar="METRIC=X", help="Gate: exit 1 if METRIC is below X (e.g. auc=0.7); repeatable.")] = [],
    baseline: Annotated[Optional[str], typer.Option("--baseline", metavar="FILE", help="JSON from an earlier `evaluate --json`/--save-baseline to compare with.")] = None,
    max_regression: Annotated[List[str], typer.Option("--max-regression", metavar="METRIC=D", help="Gate: exit 1 if METRIC is worse than the baseline by more than D, or D% of it (e.g. field-rce=0.01, log-loss=5%); repeatable.")] = [],
    save_baseline: Annotated[Optional[str], typer.Option("--save-baseline", metavar="FILE", help="Also write the JSON report to FILE, for a later --baseline.")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", metavar="N", help="Add 95% percentile confidence intervals from N row resamples." + _range("--bootstrap"))] = 0,
    gate_on: Annotated[str, typer.Option("--gate-on", metavar="point|upper", help="point: gate on the metric; upper: fail only when the whole bootstrap interval is past the limit (ignores noise).")] = "point",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap resamples." + _range("--seed"))] = 0,
    by_field: Annotated[bool, typer.Option("--by-field", help="Show the fields with the largest absolute and relative bias (needs --field-col).")] = False,
    top: Annotated[int, typer.Option("--top", metavar="K", help="How many fields --by-field shows." + _range("--top"))] = 5,
    plot: Annotated[Optional[str], typer.Option("--plot", metavar="FILE", help="Reliability diagram: an image (.png/.svg/.pdf, needs calibcli[plot]) or - for text on stdout.")] = None,
    format: FormatOpt = None,
    interval_cols: Annotated[Optional[str], typer.Option("--interval-cols", metavar="LOW,HIGH", help="Interval columns of the one --prob-col (default: <col>_low and <col>_high when present): adds interval width and coverage.")] = None,
) -> None:
    """Print log-loss, Brier, AUC, ECE, CalBin (and Field-ECE/RCE with --field-col).

    Without --prob-col or --map the score column itself is evaluated. Gates apply to every
    column and map. Exit codes: 0 all gates passed (or none given), 1 a gate failed (which,
    by how much and against what is printed on stderr), 2 usage or input error.

    \b
    calib evaluate test.csv --prob-col p1 --prob-col p2 --field-col field
    calib evaluate test.csv --map a.json --map b.json --json
    calib evaluate test.csv --field-col field --fail-above field-rce=0.12 --fail-below auc=0.7
    calib evaluate test.csv --field-col field --baseline base.json --max-regression field-rce=5%
    """
    from calibcli import progress
    bounds.check(calbin_window=calbin_window, bootstrap=bootstrap, seed=seed, top=top, ece_bins=ece_bins, step=step)
    from calibcli.evaluation import baseline as evaluation_json, evaluate as evaluation, gates, report as render
    from calibcli.evaluation.bootstrap import BootstrapPlan
    from calibcli.io.targets import check_output

    if ece_strategy not in ("uniform", "quantile"):
        raise UsageError(f"--ece-strategy {ece_strategy!r}: expected uniform or quantile")
    if output_kind not in ("table", "json", "csv", "markdown"):
        raise UsageError(f"--output {output_kind!r}: expected table, json, csv or markdown")
    if as_json:
        output_kind = "json"
    spec = gates.GateSpec.from_options(fail_above, fail_below, max_regression, baseline, gate_on, bootstrap)
    if save_baseline == "-":
        raise UsageError("--save-baseline needs a file name", hint="use --json for the report on stdout")
    reads = [input, *map, *([baseline] if baseline else [])]
    for target in (save_baseline, None if plot == "-" else plot):
        if target is not None:
            check_output(target, reads)
    if save_baseline is not None and plot is not None and save_baseline == plot:
        raise UsageError(f"{plot}: --plot and --save-baseline name the same file")
    if plot is not None and plot != "-":
        from calibcli.evaluation import plot as plotting

        plotting.check_target(plot)
    options = evaluation.EvaluateOptions(
        gates=spec,
        bootstrap=BootstrapPlan(bootstrap, seed) if bootstrap else None,
        by_field_top=top if by_field else None,
        reliability_bins=10 if plot is not None else None,
        weight_col=weight_col,
        step=step,
        ece_bins=ece_bins,
        ece_strategy=ece_strategy,
        interval_cols=_interval_cols(interval_cols),
    )
    with progress.working("evaluate"):
        result = evaluation.evaluate_file(input, prob_col, map, label_col, score_col, field_col,
                                          calbin_window, format, options)
    if save_baseline is not None:
        evaluation_json.save_evaluation(result, save_baseline)
    if plot is not None and plot != "-":
        plotting.save_reliability(result, plot)
    with console.data_output():
        if output_kind == "json":
            console.write_data(json.dumps(result.to_json(), indent=2, allow_nan=False) + "\n")
        elif output_kind == "csv":
            console.write_data(render.csv_text(result))
        elif output_kind == "markdown":
            console.write_data(render.markdown_text(result))
        else:
            render.print_report(result, reliability=plot == "-")
    _report_gates(result.gate)


def _report_gates(gate) -> None:
    """Failed gates on stderr (never hidden by --quiet) and exit 1; a summary when all passed."""
    if gate is None or not gate.checks:
        return
    if gate.passed:
        console.info(f"gates passed: {len(gate.checks)} checks")
        return
    for check in gate.failed:
        console.err().print(f"gate failed: {console.safe(check.describe())}", markup=False, highlight=False)
    console.err().print(f"{len(gate.failed)} of {len(gate.checks)} gate checks failed",
                        markup=False, highlight=False)
    raise typer.Exit(ExitCode.GATE_FAILED)


@app.command()
@reports_errors
def export(
    map: Annotated[str, typer.Argument(help="A map saved by `calib fit` (.json or .parquet).")],
    sql: Annotated[bool, typer.Option("--sql", help="Print one SQL expression computing the calibrated probability.")] = False,
    score_col: Annotated[Optional[str], typer.Option("--score-col", help="Score column the expression reads (default: score); quoted as an identifier.")] = None,
    score_expr: Annotated[Optional[str], typer.Option("--score-expr", help="A SQL expression giving the score, instead of --score-col; refused if it could end the statement or open a comment.")] = None,
    dialect: Annotated[str, typer.Option("--dialect", help="How identifiers and strings are quoted: ansi (\"col\": DuckDB, PostgreSQL) or spark (`col`).")] = "ansi",
    max_knots: Annotated[Optional[int], typer.Option("--max-knots", help="Simplify a knot or bin map to at most N knots (bin edges), printing the maximum error it adds." + _range("--max-knots"))] = None,
) -> None:
    """Export a map for use outside calibcli (isotonic, binning, logistic, beta, ilps, ...).

    \b
    calib export map.json --sql --score-col score
    duckdb -c "SELECT *, $(calib export map.json --sql) AS p FROM 'scores.parquet'"
    """
    from calibcli import export as exporting

    if not sql:
        raise UsageError("choose an export format", hint="--sql prints a SQL expression")
    if score_col is not None and score_expr is not None:
        raise UsageError("give --score-col or --score-expr, not both")
    if dialect not in exporting.DIALECTS:
        raise UsageError(f"--dialect {dialect!r} is not one of " + ", ".join(exporting.DIALECTS))
    bounds.check(max_knots=max_knots)
    column = None if score_expr is not None else ("score" if score_col is None else score_col)
    result = exporting.export_sql(map, column, score_expr, dialect, max_knots)
    simplified = result.simplified
    if simplified is not None and simplified.after < simplified.before:
        console.info(f"simplified {simplified.before} knots to {simplified.after}: "
                     f"max absolute error {simplified.max_error!r}")
    if result.too_large():
        message = (f"the SQL is {len(result.sql.encode()) / 1e6:.1f} MB over {result.knots} knots: engines plan "
                   f"an expression this long slowly; --max-knots {exporting.WARN_KNOTS // 10} keeps it small")
        if _state["strict"]:
            raise UsageError(message)
        console.warn(message)
    typer.echo(result.sql)


@app.command()
@reports_errors
def compare(
    input: InputArg,
    method: Annotated[List[str], typer.Option("--method", "-m", help="Method to compare; repeatable (default: every score-only method).")] = [],
    folds: Annotated[int, typer.Option("--folds", help="Number of cross-validation folds." + _range("--folds"))] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fold split and of the methods that sample." + _range("--seed"))] = 0,
    metric: Annotated[str, typer.Option("--metric", help="Metric that picks the best: log_loss, brier, ece or calbin.")] = "log_loss",
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Save the best method's map, refitted on all rows (.json or .parquet).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    score_col: ScoreCol = "score",
    label_col: LabelCol = "label",
    format: FormatOpt = None,
) -> None:
    """Which method calibrates these scores best? Out-of-fold metrics per method, mean ± sd.

    \b
    calib compare cal.csv
    calib compare cal.csv -m isotonic -m bayes-iso -m beta --folds 10 -o best.json
    """
    bounds.check(folds=folds, seed=seed)
    from calibcli import compare as comparing

    result = comparing.compare_file(input, method, folds, seed, metric.replace("-", "_"), score_col, label_col,
                                    format, output)
    with console.data_output():
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2))
        else:
            from calibcli.evaluation import report as render

            render.print_grid(render.stdout_console(), comparing.grid(result))
    if output is not None:
        console.info(f"saved the {result.best.method} map, refitted on all {result.rows} rows, to {output}")


@app.command()
@reports_errors
def methods(
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON (name, description, properties, params with type, default and bounds).")] = False,
) -> None:
    """List the calibration methods and their options."""
    from calibcli.calibrators import registry  # the registry alone: no pyarrow for a listing

    if as_json:
        typer.echo(json.dumps(registry.catalogue_json(), indent=2))
        return
    for name, description, params in registry.catalogue():
        typer.echo(f"{name}: {description}")
        for line in params:
            typer.echo(f"    --param {line}")


class _NoPandas:
    """An import hook under which `import pandas` fails, as if pandas were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (not used by the calib command)")
        return None


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning that reaches the command (from a library underneath) as one `warning:`
    line on stderr, hidden by -q, never the raw two-line form with a source line."""
    text = str(message) if issubclass(category, CalibWarning) else f"{category.__name__}: {message}"
    console.warn(text)


def main() -> None:
    """Console-script entry point.

    Exits with `os._exit` after flushing, so that native threads still parked in pyarrow
    after an error cannot abort the process during interpreter teardown.
    """
    from calibcli.io import targets

    # pyarrow imports pandas, when installed, the first time it builds any array (0.3 s of
    # CPU a run); the CLI never gives pyarrow pandas objects, so it tells pyarrow there is none.
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    targets.install_signal_cleanup()
    warnings.showwarning = _show_warning
    for stream in (sys.stdout, sys.stderr):  # an ASCII or Latin-1 terminal gets escapes, not a crash
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.ERROR)
    plotting = sys.modules.get("calibcli.evaluation.plot")
    if plotting is not None:
        plotting.release()  # os._exit below skips atexit
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            continue  # the reader is gone: nothing left to tell it
        except OSError as exc:
            if stream is sys.stdout:
                console.error(f"<stdout>: cannot write ({exc.strerror})")
                code = code or ExitCode.ERROR
    os._exit(int(code))
