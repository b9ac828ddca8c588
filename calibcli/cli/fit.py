"""`calib fit`, `calib summarize` and `calib methods`: making maps and summaries, and the methods
a map can be fitted with."""

from __future__ import annotations

import json
from typing import Annotated, List, Optional

import typer

from calibcli.requests import bounds
from calibcli.io import console
from calibcli.cli.shared import (ClassesOpt, FormatOpt, InputArg, LabelCol, PosLabelOpt, ScoreCol, ScoreColsOpt, ScoreKindOpt, option_range, reports_errors, state)


class FitCommand(typer.core.TyperCommand):
    """`calib fit --help` ends with every numeric method option and its bounds."""

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        with formatter.section("Numeric method options (--param key=value) and their bounds"):
            formatter.write_dl([(f"{method}: {name}", f"{kind} in {rng}")
                                for method, name, kind, rng in bounds.param_rows()])


def _fmt(value: float) -> str:
    return "n/a" if value != value else f"{value:.4f}"


@reports_errors
def fit(
    input: Annotated[Optional[str], typer.Argument(help="Score file (CSV, TSV, JSON lines, Parquet; .gz ok) or - for stdin; omit with --from-summary.")] = None,
    from_summary: Annotated[Optional[str], typer.Option("--from-summary", help="Fit on a score summary (from `calib summarize`, or Spark/Dask: Parquet/JSON file or directory) instead of rows.")] = None,
    method: Annotated[str, typer.Option("--method", "-m", help="Calibration method (see `calib methods`).")] = "isotonic",
    param: Annotated[List[str], typer.Option("--param", "-p", help="Method option key=value; repeatable.")] = [],
    output: Annotated[str, typer.Option("--output", "-o", help="Where to save the map: .json or .parquet; - (default) prints JSON to stdout.")] = "-",
    seed: Annotated[Optional[int], typer.Option("--seed", help="Random seed for methods that sample." + option_range("--seed"))] = None,
    score_col: Annotated[Optional[str], typer.Option("--score-col", help="Column with the classifier's scores (default: score).")] = None,
    score_cols: ScoreColsOpt = None,
    classes: ClassesOpt = None,
    score_kind: ScoreKindOpt = "auto",
    label_col: LabelCol = "label",
    pos_label: PosLabelOpt = None,
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights (see --weight-kind).")] = None,
    weight_kind: Annotated[str, typer.Option("--weight-kind", help="frequency: weight k counts as k rows (default); importance: only ratios matter, the map ignores the weights' scale.")] = "frequency",
    field_col: Annotated[List[str], typer.Option("--field-col", help="Categorical column (segment) for feature methods (multicalibration, field-aware); repeatable.")] = [],
    feature_col: Annotated[List[str], typer.Option("--feature-col", help="Feature column for feature methods; repeatable. Numbers are numeric, text and true/false columns categorical (like --field-col).")] = [],
    format: FormatOpt = None,
    output_format: Annotated[Optional[str], typer.Option("--output-format", help="Map format: json or parquet (default: from -o's extension, else JSON).")] = None,
) -> None:
    """Fit a calibration map from a score/label file.

    \b
    calib fit --method isotonic cal.csv -o map.json
    cat cal.csv | calib fit - --method logistic > map.json
    calib fit --from-summary summary.parquet --method isotonic -o map.json
    calib fit --score-cols 'p_*' --method temperature digits.csv -o map.json
    """
    from calibcli.kinds.names import parse_classes
    from calibcli.requests import Columns, FitRequest, fit_inputs

    fit_inputs(input, from_summary, score_cols=score_cols, score_col=score_col, weight_col=weight_col,
               field_col=field_col, feature_col=feature_col, fmt=format, pos_label=pos_label)
    cols = Columns("score" if score_col is None else score_col, label_col, weight_col, tuple(field_col), tuple(feature_col), pos_label,
                   score_cols, parse_classes(classes), score_kind)
    request = FitRequest.build(method, param, texts=True, seed=seed, weight_kind=weight_kind, columns=cols,
                               from_summary=from_summary is not None)
    from calibcli.io import reading

    ahead = input if from_summary is None else "-"  # "-": nothing to read ahead
    with reading.prefetching(ahead, format, tuple(field_col)):  # read while the fitting code imports
        from calibcli.fitting import pipeline as fitting

        if from_summary is not None:
            result = fitting.fit_summary_file(from_summary, request, out=output, strict=state["strict"],
                                              out_format=output_format)
        else:
            result = fitting.fit_file(input, request, fmt=format, out=output, strict=state["strict"],
                                      out_format=output_format)
    for message in result.warnings:
        console.warn(message)
    _SUMMARIES[request.kind](method, result)


def _print_kclass_summary(method: str, result) -> None:
    t = result.training
    params = ", ".join(f"{k}={_show(v)}" for k, v in result.calibrator.params.items()) or "defaults"
    classes = list(t["class_rows"])
    named = ", ".join(classes[:8]) + (", ..." if len(classes) > 8 else "")
    kind = t["score_kind"] + (" (auto)" if t["score_kind_option"] == "auto" else "")
    console.info(f"fitted {method} ({params}) on {t['rows']} rows, {len(classes)} classes ({named}); "
                 f"scores read as {kind}, labels as {t['labels_read_as']}")
    fitted = ", ".join(f"{k}={_show(v)}" for k, v in t["fit"].items() if not isinstance(v, (list, dict)))
    if fitted:
        console.info(f"  {fitted}")
    _print_quality(t)


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
    from calibcli.fitting.usage import column_usage

    for line in column_usage(t):
        console.info(f"  {line}")
    _print_quality(t)


_SUMMARIES = {"binary": lambda method, result: _print_fit_summary(method, result),
              "kclass": lambda method, result: _print_kclass_summary(method, result)}


def _print_quality(t) -> None:
    before = t.get("before")
    after = t["after"]
    ll_before = _fmt(before["log_loss"]) if before else "n/a"
    br_before = _fmt(before["brier"]) if before else "n/a"
    console.info(f"  training log-loss {ll_before} -> {_fmt(after['log_loss'])}, "
                 f"Brier {br_before} -> {_fmt(after['brier'])}")


@reports_errors
def summarize(
    input: InputArg,
    output: Annotated[str, typer.Option("--output", "-o", help="Where to save the summary: .parquet or .json; - (default) prints JSON to stdout.")] = "-",
    score_col: ScoreCol = "score",
    label_col: LabelCol = "label",
    pos_label: PosLabelOpt = None,
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights.")] = None,
    step: Annotated[Optional[float], typer.Option("--step", help="Round scores to multiples of STEP (each moves at most STEP/2); default exact." + option_range("--step"))] = None,
    format: FormatOpt = None,
) -> None:
    """Stream a score file into per-score counts (n0, n1) that `calib fit --from-summary` fits on.

    Summaries of parts merge: Spark or Dask can write the same table (score, n0, n1);
    INPUT may be a directory or glob of Parquet parts.

    \b
    calib summarize big.parquet -o summary.parquet
    calib fit --from-summary summary.parquet --method isotonic -o map.json
    """
    from calibcli.requests import step_option

    step = step_option(step)
    from calibcli import io
    from calibcli.io import progress
    from calibcli.fitting import summary
    from calibcli.io.targets import check_output

    check_output(output, [input])
    summary.output_format(output)
    total = io.parquet_rows(input) if progress.enabled() else None
    with progress.rows("summarize", total) as advance:
        result = summary.summarize_file(input, score_col=score_col, label_col=label_col, weight_col=weight_col,
                                        fmt=format, step=step, on_batch=advance, pos_label=pos_label)
    summary.save(result, output)
    console.info(f"summarized {result.rows} rows, {result.positives} positive, into "
                 f"{result.size} distinct scores" + (f" (step {step:g})" if step else ""))


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
