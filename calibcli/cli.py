"""The `calib` command: parses arguments, calls `calibcli.pipeline`, prints results.

Exit codes: 0 success; 1 an `evaluate` gate failed; 2 usage, input, map or fit error.
Data goes to stdout; messages, tables of diagnostics and progress go to stderr.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Annotated, Callable, List, Optional

import typer

from calibcli import __version__, console
from calibcli.errors import CalibError, ExitCode, UsageError

app = typer.Typer(
    name="calib",
    help="Turn a classifier's raw scores into probabilities people can trust.\n\n"
    "Exit codes: 0 success, 1 an evaluate gate failed, 2 usage/input/map/fit error.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

_state = {"debug": False}

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
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    console.quiet = quiet
    _state["debug"] = debug


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
            sys.stderr.close()  # downstream closed the pipe (e.g. `| head`): stop quietly
            raise typer.Exit(ExitCode.OK) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
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


def _fmt(value: float) -> str:
    return "n/a" if value != value else f"{value:.4f}"


@app.command()
@reports_errors
def fit(
    input: InputArg,
    method: Annotated[str, typer.Option("--method", "-m", help="Calibration method (see `calib methods`).")] = "isotonic",
    param: Annotated[List[str], typer.Option("--param", "-p", help="Method option key=value; repeatable.")] = [],
    output: Annotated[str, typer.Option("--output", "-o", help="Where to save the map: .json or .parquet; - (default) prints JSON to stdout.")] = "-",
    seed: Annotated[Optional[int], typer.Option("--seed", help="Random seed for methods that sample.")] = None,
    score_col: ScoreCol = "score",
    label_col: LabelCol = "label",
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights.")] = None,
    field_col: Annotated[List[str], typer.Option("--field-col", help="Categorical feature column for field-aware methods; repeatable.")] = [],
    feature_col: Annotated[List[str], typer.Option("--feature-col", help="Numeric feature column for field-aware methods; repeatable.")] = [],
    format: FormatOpt = None,
) -> None:
    """Fit a calibration map from a score/label file.

    \b
    calib fit --method isotonic cal.csv -o map.json
    cat cal.csv | calib fit - --method logistic > map.json
    """
    from calibcli import pipeline

    cols = pipeline.Columns(score_col, label_col, weight_col, tuple(field_col), tuple(feature_col))
    result = pipeline.fit_file(input, method, _parse_params(param), cols, format, seed, output)
    for message in result.warnings:
        console.warn(message)
    _print_fit_summary(method, result)


def _print_fit_summary(method: str, result) -> None:
    t = result.training
    params = ", ".join(f"{k}={v}" for k, v in result.calibrator.params.items()) or "defaults"
    fitted = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in t["fit"].items())
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
def apply(
    map: Annotated[str, typer.Argument(help="A map saved by `calib fit` (.json or .parquet).")],
    input: InputArg,
    output: Annotated[str, typer.Option("--output", "-o", help="Output file, or - (default) for stdout.")] = "-",
    score_col: ScoreCol = "score",
    output_col: Annotated[str, typer.Option("--output-col", help="Name of the added probability column.")] = "calibrated",
    format: Annotated[Optional[str], typer.Option("--format", "-f", help="Output format (default: from -o's extension, else the input's).")] = None,
    input_format: Annotated[Optional[str], typer.Option("--input-format", help="Input format (default: from extension, else sniffed).")] = None,
) -> None:
    """Add calibrated probabilities to a score file, streaming (works in pipes and on large files).

    \b
    calib apply map.json new.parquet -o out.parquet
    cat new.csv | calib apply map.json - > out.csv
    """
    from calibcli import pipeline

    pipeline.apply_file(map, input, output, score_col, output_col, input_format, format)


@app.command()
@reports_errors
def evaluate(
    input: InputArg,
    prob_col: Annotated[List[str], typer.Option("--prob-col", help="Probability column to evaluate; repeatable.")] = [],
    map: Annotated[List[str], typer.Option("--map", help="Map to apply to --score-col and evaluate; repeatable.")] = [],
    label_col: LabelCol = "label",
    score_col: ScoreCol = "score",
    field_col: Annotated[Optional[str], typer.Option("--field-col", help="Categorical column for Field-ECE and Field-RCE.")] = None,
    calbin_window: Annotated[int, typer.Option("--calbin-window", help="CalBin window size s.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of a table.")] = False,
    format: FormatOpt = None,
) -> None:
    """Print log-loss, Brier, AUC, ECE, CalBin (and Field-ECE/RCE with --field-col).

    Without --prob-col or --map the score column itself is evaluated.

    \b
    calib evaluate test.csv --prob-col p1 --prob-col p2 --field-col field
    calib evaluate test.csv --map a.json --map b.json --json
    """
    from calibcli import pipeline

    report = pipeline.evaluate_file(input, prob_col, map, label_col, score_col, field_col,
                                    calbin_window, format)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, allow_nan=False))
        return
    _print_evaluation(report)


def _print_evaluation(report) -> None:
    from rich.console import Console
    from rich.table import Table

    from calibcli.metrics import METRICS

    keys = [k for k in METRICS if k in report.results[0].metrics]
    table = Table(title=f"{report.input}: {report.rows} rows, {report.positives} positive",
                  title_justify="left")
    table.add_column("probabilities")
    for k in keys:
        label, direction = METRICS[k]
        table.add_column(f"{label} {'↓' if direction == 'lower' else '↑'}", justify="right")
    for r in report.results:
        table.add_row(r.name, *[_fmt(r.metrics[k]) for k in keys])
    tty = sys.stdout.isatty()
    Console(no_color=not tty or None, width=None if tty else 200, highlight=False).print(table)


@app.command()
@reports_errors
def methods() -> None:
    """List the calibration methods and their options."""
    from calibcli import pipeline

    for name, description, params in pipeline.method_catalogue():
        typer.echo(f"{name}: {description}")
        for line in params:
            typer.echo(f"    --param {line}")


def main() -> None:
    """Console-script entry point."""
    app()
