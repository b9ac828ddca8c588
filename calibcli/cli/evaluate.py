"""`calib evaluate` and `calib compare`: how well probabilities are calibrated, with gates for CI,
and which method calibrates a score file best."""

from __future__ import annotations

import json
from typing import Annotated, List, Optional

import typer

from calibcli.io import console
from calibcli.cli.shared import (ClassesOpt, FormatOpt, InputArg, LabelCol, PosLabelOpt, ScoreCol, ScoreColsOpt, ScoreKindOpt, command_line, option_range, reports_errors)
from calibcli.errors import CalibError, ExitCode


@reports_errors
def evaluate(
    ctx: typer.Context,
    input: InputArg,
    prob_col: Annotated[List[str], typer.Option("--prob-col", help="Probability column to evaluate; repeatable.")] = [],
    prob_cols: Annotated[List[str], typer.Option("--prob-cols", metavar="SPEC", help="K-class probability columns of one prediction: a comma list, a quoted pattern ('p_*', natural order) or a list column; repeatable.")] = [],
    classes: Annotated[Optional[str], typer.Option("--classes", metavar="A,B,...", help="The class of each --prob-cols column, in order (default: their suffixes after the common prefix).")] = None,
    score_cols: Annotated[Optional[str], typer.Option("--score-cols", metavar="SPEC", help="The K score columns a multiclass --map reads (default: those it was fitted on).")] = None,
    map: Annotated[List[str], typer.Option("--map", help="Map to apply to --score-col and evaluate; repeatable.")] = [],
    label_col: LabelCol = "label",
    pos_label: PosLabelOpt = None,
    score_col: ScoreCol = "score",
    field_col: Annotated[Optional[str], typer.Option("--field-col", help="Categorical column for Field-ECE and Field-RCE.")] = None,
    calbin_window: Annotated[int, typer.Option("--calbin-window", help="CalBin window size s." + option_range("--calbin-window"))] = 100,
    ece_bins: Annotated[int, typer.Option("--ece-bins", help="Bins of ECE and MCE (as scikit-learn's calibration_curve n_bins)." + option_range("--ece-bins"))] = 10,
    ece_strategy: Annotated[str, typer.Option("--ece-strategy", help="ECE/MCE bins: uniform (equal width) or quantile (equal mass), as scikit-learn's calibration_curve.")] = "uniform",
    weight_col: Annotated[Optional[str], typer.Option("--weight-col", help="Column of non-negative row weights (every metric is weighted).")] = None,
    step: Annotated[Optional[float], typer.Option("--step", help="Keep p bucketed to multiples of STEP (bounded memory): log-loss, Brier, ECE, MCE, Spiegelhalter stay exact; AUC, CalBin, MCB, DSC move within the JSON's step_bounds; slope, intercept, CORP p, smECE, HL, KS, Kuiper are n/a; default exact." + option_range("--step"))] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (versioned schema): the same as --output-format json.")] = False,
    output_format: Annotated[Optional[str], typer.Option("--output-format", metavar="table|json|csv|markdown", help="What stdout gets: table (default; stacked blocks when the terminal is narrow), json, csv or markdown.")] = None,
    output_kind: Annotated[Optional[str], typer.Option("--output", hidden=True, help="Deprecated: --output-format.")] = None,
    fail_above: Annotated[List[str], typer.Option("--fail-above", metavar="[COLUMN:]METRIC=X", help="Gate: exit 1 if METRIC is above X (e.g. field-rce=0.12) for every column and map, or for COLUMN only (calibrated:log-loss=0.5); repeatable.")] = [],
    fail_below: Annotated[List[str], typer.Option("--fail-below", metavar="[COLUMN:]METRIC=X", help="Gate: exit 1 if METRIC is below X (e.g. auc=0.7), or COLUMN's METRIC; repeatable.")] = [],
    baseline: Annotated[Optional[str], typer.Option("--baseline", metavar="FILE", help="JSON from an earlier `evaluate --json`/--save-baseline to compare with.")] = None,
    max_regression: Annotated[List[str], typer.Option("--max-regression", metavar="[COLUMN:]METRIC=D", help="Gate: exit 1 if METRIC (of COLUMN only, when named) is worse than the baseline by more than D, or D% of it (e.g. field-rce=0.01, log-loss=5%); repeatable.")] = [],
    save_baseline: Annotated[Optional[str], typer.Option("--save-baseline", metavar="FILE", help="Also write the JSON report to FILE, for a later --baseline.")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", metavar="N", help="Add 95% percentile confidence intervals from N row resamples." + option_range("--bootstrap"))] = 0,
    gate_on: Annotated[str, typer.Option("--gate-on", metavar="point|worst|best", help="What a gate compares: point, the metric; with --bootstrap, worst, the end of its interval worst for the gate (upper for --fail-above and lower-is-better regressions, lower for --fail-below and higher-is-better ones: passes only when the whole interval passes), or best, the other end (fails only when the whole interval fails). upper: deprecated name of worst.")] = "point",
    summary: Annotated[Optional[str], typer.Option("--summary", metavar="FILE.md", help="Also write the verdict, every gate with its value and limit, and the exit decision as Markdown to FILE (e.g. $GITHUB_STEP_SUMMARY), whatever the exit code.")] = None,
    title: Annotated[Optional[str], typer.Option("--title", metavar="TEXT", help="Heading of the HTML report (--plot FILE.html) and of --summary.")] = None,
    min_rows: Annotated[Optional[int], typer.Option("--min-rows", metavar="N", help="Rows a field value needs for --by-field to test and show it (default 30)." + option_range("--min-rows"))] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap resamples and of the --bands rounds." + option_range("--seed"))] = 0,
    by_field: Annotated[bool, typer.Option("--by-field", help="Show the field values with the strongest evidence of a gap between predicted and observed (exact binomial test, Benjamini-Hochberg adjusted; needs --field-col).")] = False,
    top: Annotated[int, typer.Option("--top", metavar="K", help="How many fields --by-field shows." + option_range("--top"))] = 5,
    plot: Annotated[Optional[str], typer.Option("--plot", metavar="FILE", help="Reliability diagram: an image (.png/.svg/.pdf, needs calibcli[plot]), an HTML report (.html) or - for text on stdout.")] = None,
    format: FormatOpt = None,
    metrics: Annotated[Optional[str], typer.Option("--metrics", metavar="LIST", help="What is computed and shown: default (the first set plus the CORP decomposition), all, or a comma list of metric names (may include default), e.g. default,smece,ks-p; for K-class predictions top-label-<name> (e.g. top-label-smece). Gated metrics are always computed.")] = None,
    bands: Annotated[Optional[int], typer.Option("--bands", metavar="N", help="Rounds of the CORP consistency bands and of the corp-p test (0: none; default 100 with --plot, else 0), seeded by --seed." + option_range("--bands"))] = None,
    hl_groups: Annotated[int, typer.Option("--hl-groups", metavar="G", help="Equal-mass groups of the Hosmer-Lemeshow test (chi-squared with G - 2 degrees of freedom)." + option_range("--hl-groups"))] = 10,
    diagram: Annotated[str, typer.Option("--diagram", metavar="corp|smooth|binned", help="What --plot draws: the CORP reliability diagram (PAV curve, consistency band), the smooth one (smECE's kernel), or the bins of ECE/MCE with their rows.")] = "corp",
    interval_cols: Annotated[Optional[str], typer.Option("--interval-cols", metavar="LOW,HIGH", help="Interval columns of the one --prob-col (default: <col>_low and <col>_high when present): adds interval width and coverage.")] = None,
    segment_col: Annotated[List[str], typer.Option("--segment-col", metavar="COL", help="Column whose values define segments for the multicalibration error (multical, multical-sigma, multical-p; K classes: top-label); repeatable. Float columns are cut into quantile bins, text, integer and boolean columns are categorical.")] = [],
    segment_bins: Annotated[Optional[int], typer.Option("--segment-bins", metavar="N", help="Quantile bins of a numeric segment column (default 3)." + option_range("--segment-bins"))] = None,
    segment_top: Annotated[Optional[int], typer.Option("--segment-top", metavar="K", help="Most frequent values of a categorical segment column kept, the rest 'other' (default 2)." + option_range("--segment-top"))] = None,
    segment_depth: Annotated[Optional[int], typer.Option("--segment-depth", metavar="D", help="Segments intersect up to D columns (default 3)." + option_range("--segment-depth"))] = None,
    segment_min_rows: Annotated[Optional[int], typer.Option("--segment-min-rows", metavar="N", help="Segments with fewer rows are not checked (default 10)." + option_range("--segment-min-rows"))] = None,
    segment_max: Annotated[Optional[int], typer.Option("--segment-max", metavar="N", help="At most N segments are checked, in enumeration order (default 1000)." + option_range("--segment-max"))] = None,
    segments: Annotated[Optional[int], typer.Option("--segments", metavar="K", help="Rows of the worst-segments table (default 10)." + option_range("--segments"))] = None,
) -> None:
    """Is each probability column calibrated? The verdict first, then log-loss, Brier, AUC, ECE, ...

    The verdict says calibrated within noise or miscalibrated, which way (over- or
    under-confident, too high or too low on average) and where, from a fixed family of tests
    (README "Metrics", docs/verdict.md). Without --prob-col or --map the score column itself
    is evaluated. Each --prob-cols SPEC (and each multiclass --map) is a K-class prediction:
    log-loss, Brier, accuracy, top-label ECE/MCE, classwise ECE and one-vs-rest AUC. Gates
    apply to every column and map, or to the one named (COLUMN:METRIC=X). Exit codes: 0 all
    gates passed (or none given), 1 a gate failed (which, by how much and against what is
    printed on stderr), 2 usage or input error.

    \b
    calib evaluate test.csv --prob-col p1 --prob-col p2 --field-col field
    calib evaluate test.csv --map a.json --map b.json --json
    calib evaluate test.csv --field-col field --fail-above field-rce=0.12 --fail-below auc=0.7
    calib evaluate test.csv --prob-col raw --prob-col calibrated --fail-above calibrated:log-loss=0.5 --summary s.md
    calib evaluate test.csv --field-col field --baseline base.json --max-regression field-rce=5%
    calib evaluate digits.csv --prob-cols 'p_*' --prob-cols 'calibrated_*' --fail-above top-label-ece=0.05
    calib evaluate test.csv --prob-col p --segment-col country --segment-col age --fail-above multical-sigma=5
    """
    from calibcli.kinds.names import parse_classes
    from calibcli.requests import EvaluateOptions, evaluate_output
    from calibcli.requests.evaluate import GATE_ON_ALIASES

    options = EvaluateOptions.build(
        label_col=label_col, score_col=score_col, field_col=field_col, weight_col=weight_col,
        calbin_window=calbin_window, ece_bins=ece_bins, ece_strategy=ece_strategy, step=step,
        fail_above=fail_above, fail_below=fail_below, max_regression=max_regression, baseline=baseline,
        gate_on=gate_on, bootstrap=bootstrap, seed=seed, by_field=by_field, top=top, bands=bands,
        hl_groups=hl_groups, reliability_bins=ece_bins if plot is not None else None, interval_cols=interval_cols,
        pos_label=pos_label, kclass_cols=tuple(prob_cols), classes=parse_classes(classes), score_cols=score_cols,
        metrics=metrics, diagram=diagram, prob_cols=tuple(prob_col), maps=tuple(map), min_rows=min_rows,
        segment_cols=tuple(segment_col), segment_bins=segment_bins, segment_top=segment_top,
        segment_depth=segment_depth, segment_min_rows=segment_min_rows, segment_max=segment_max, segments=segments)
    shown = evaluate_output(output_format, output_kind, as_json, save_baseline, summary, title, plot)
    if output_kind is not None:
        console.warn("evaluate --output is deprecated: use --output-format (-o names a file in the other commands)")
    if gate_on in GATE_ON_ALIASES:
        console.warn(f"--gate-on {gate_on} is deprecated: it is now --gate-on {GATE_ON_ALIASES[gate_on]}, the end of "
                     "the interval worst for the gate (before, it compared the end best for the gate: --gate-on best)")
    from calibcli.io import progress
    from calibcli.evaluation import baseline as evaluation_json, driver as evaluation
    from calibcli.evaluation.render import report as render
    from calibcli.io.targets import check_output

    reads = [input, *map, *([baseline] if baseline else [])]
    for target in (save_baseline, None if plot == "-" else plot, summary):
        if target is not None:
            check_output(target, reads)
    if plot is not None and plot != "-":
        from calibcli.evaluation.render import plot as plotting

        plotting.check_target(plot)
    try:
        with progress.working("evaluate"):
            result = evaluation.evaluate_file(input, options, format)
    except CalibError as exc:
        if summary is not None:  # the CI step summary says why the run stopped
            _write_summary(summary, None, ExitCode.ERROR, title, exc.message)
        raise
    result.title = title
    if save_baseline is not None:
        evaluation_json.save_evaluation(result, save_baseline)
    if plot is not None and plot != "-":
        result.command = command_line(ctx)
        plotting.save_reliability(result, plot)
    with console.data_output():
        if shown == "json":
            console.write_data(json.dumps(result.to_json(), indent=2, allow_nan=False) + "\n")
        elif shown == "csv":
            console.write_data(render.csv_text(result))
        elif shown == "markdown":
            from calibcli.evaluation.render import markdown

            console.write_data(markdown.markdown_text(result))
        else:
            render.print_report(result, reliability=plot == "-")
    code = ExitCode.GATE_FAILED if result.gate is not None and not result.gate.passed else ExitCode.OK
    if summary is not None:
        _write_summary(summary, result, code, title)
    _report_gates(result.gate)


def _write_summary(path: str, result, code: int, title: str | None, error: str | None = None) -> None:
    """`--summary FILE.md`: the verdict, the gates and the exit decision (`render.markdown.summary_text`)."""
    from calibcli.evaluation.render import markdown
    from calibcli.io.targets import write_bytes_atomic

    write_bytes_atomic(path, markdown.summary_text(result, int(code), title, error).encode("utf-8"))


def _report_gates(gate) -> None:
    """Failed gates on stderr (never hidden by --quiet) and exit 1; a summary when all passed."""
    if gate is None or not gate.checks:
        return
    if gate.passed:
        console.info(f"gates passed: {len(gate.checks)} check{'' if len(gate.checks) == 1 else 's'}")
        return
    for check in gate.failed:
        console.err().print(f"gate failed: {console.safe(check.describe())}", markup=False, highlight=False)
    console.err().print(f"{len(gate.failed)} of {len(gate.checks)} gate checks failed",
                        markup=False, highlight=False)
    raise typer.Exit(ExitCode.GATE_FAILED)


@reports_errors
def compare(
    input: InputArg,
    method: Annotated[List[str], typer.Option("--method", "-m", "--methods", metavar="NAME|LIST|fast|default|all", help="Methods to compare: a name (repeatable), a comma list, or a preset: fast, default (without -m: every score-only method but the slow bayes-iso; K classes: temperature, dirichlet and one-vs-rest logistic, beta, isotonic), all. The uncalibrated scores (none) are always compared.")] = [],
    folds: Annotated[int, typer.Option("--folds", help="Number of cross-validation folds." + option_range("--folds"))] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fold split and of the methods that sample." + option_range("--seed"))] = 0,
    metric: Annotated[str, typer.Option("--metric", help="Metric that picks the best: log_loss, brier, ece or calbin (K classes: log_loss, brier, top_label_ece or classwise_ece).")] = "log_loss",
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Save the chosen method's map (--pick), refitted on all rows (.json or .parquet); when it is none (calibration does not help), no map is written and stderr says why.")] = None,
    pick: Annotated[str, typer.Option("--pick", metavar="recommended|best", help="What -o saves: the recommended method (the simplest tied with the best) or the best mean.")] = "recommended",
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON (with recommended and reason).")] = False,
    score_col: ScoreCol = "score",
    score_cols: ScoreColsOpt = None,
    classes: ClassesOpt = None,
    score_kind: ScoreKindOpt = "auto",
    label_col: LabelCol = "label",
    pos_label: PosLabelOpt = None,
    field_col: Annotated[List[str], typer.Option("--field-col", help="Categorical column (segment); repeatable. With field or feature columns the default and all presets add multicalibration, fitted on them.")] = [],
    feature_col: Annotated[List[str], typer.Option("--feature-col", help="Feature column for feature methods; repeatable (text and true/false columns are categorical).")] = [],
    format: FormatOpt = None,
) -> None:
    """Which method calibrates these scores, if any? Out-of-fold metrics per method, mean ± sd, and a recommendation.

    The first row, none, is the uncalibrated scores on the same folds. The recommendation is
    none when they are tied with the best (calibration does not help), else the simplest
    method tied with the best (calib methods --json: complexity). With --score-cols, K-class
    methods (temperature, vector, dirichlet and one-vs-rest binary methods) are compared.

    \b
    calib compare cal.csv
    calib compare cal.csv -m fast --folds 10 -o chosen.json
    calib compare cal.csv -m isotonic,bayes-iso,beta --pick best -o best.json
    calib compare digits_scores.csv --score-cols 'p_*' -m temperature -m dirichlet
    calib compare cal.csv --field-col publisher --feature-col country
    """
    from calibcli.fitting import compare as comparing, comparison
    from calibcli.kinds.names import parse_classes
    from calibcli.requests import Columns, CompareRequest

    cols = Columns(score_col, label_col, pos_label=pos_label, score_cols=score_cols, classes=parse_classes(classes),
                   score_kind=score_kind, fields=tuple(field_col), features=tuple(feature_col))
    request = CompareRequest.build(folds, seed, metric, cols)
    comparing.check_pick(pick)
    result = comparing.compare_file(input, request, method, format, output, pick)
    with console.data_output():
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2))
        else:
            from rich.text import Text

            from calibcli.evaluation.render import report as render

            out = render.stdout_console()
            render.print_grid(out, comparison.grid(result))
            out.print(Text(render.wrapped(result.sentence().split(" "), out.width)), soft_wrap=True)
    if output is not None and result.saved is not None:
        console.info(f"saved the {result.saved['method']} map, refitted on all {result.rows} rows, to {output}")
    elif output is not None:  # never hidden by --quiet: -o asked for a file that is not there
        console.err().print(console.safe(comparing.not_saved(result, output)), markup=False, highlight=False)
