"""What each command asks the library to do, checked once, at the door.

Every `calib` command and every Python entry point (`calibcli.fit`, `calibcli.evaluate`, the
engines) builds one of these requests; its builder is the only place an option is checked
(against `bounds.py`, the method's `Param`s, and the other options it must agree with), so
a bad value is refused with the same message whichever door it came in by. The library takes
a built request and trusts it.

Imports stay light (no numpy, no pyarrow): the CLI builds its request before any library
start-up, and a refused option costs nothing.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Sequence

from calibcli.requests import bounds
from calibcli.requests.names import column_options
from calibcli.errors import UsageError
from calibcli.requests.params import (CALBIN_WINDOW, COMPARED, ECE_BINS, ECE_STRATEGIES, KCLASS_COMPARED, SQL_DIALECTS, STEP_NA,
                                      WEIGHT_KINDS)

if TYPE_CHECKING:
    from calibcli.calibrators import Calibrator
    from calibcli.calibrators.kclass import ClassCalibrator
    from calibcli.evaluation.bootstrap import BootstrapPlan
    from calibcli.evaluation.gates import GateSpec
    from calibcli.evaluation.metrics.selection import MetricChoice

ON_INVALID = ("error", "null", "skip")
DIAGRAMS = ("corp", "smooth", "binned")  # `calib evaluate --diagram`: what --plot draws
GATE_ON = ("point", "upper")  # `calib evaluate --gate-on`
OUTPUT_FORMATS = ("table", "json", "csv", "markdown")  # `calib evaluate --output-format`
_SQL_QUOTES = {"ansi": "'\"", "spark": "'\"`"}  # what opens a quote in a --score-expr, per --dialect


@dataclass(frozen=True)
class Columns:
    """Which input columns hold what (the --*-col options)."""

    score: str = "score"
    label: str = "label"
    weight: str | None = None
    fields: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    pos_label: str | None = None  # --pos-label: the positive value of two labels that are not 0/1

    def __post_init__(self) -> None:
        column_options([("--score-col", self.score), ("--label-col", self.label), ("--weight-col", self.weight),
                        *(("--field-col", c) for c in self.fields), *(("--feature-col", c) for c in self.features)])


@dataclass(frozen=True)
class FitRequest:
    """A fit to run: the configured, unfitted calibrator (its method looked up once, its
    parameters typed and checked, the seed set), the columns and what the weights mean."""

    calibrator: Calibrator
    columns: Columns = Columns()
    weight_kind: str = "frequency"

    @property
    def method(self) -> str:
        return self.calibrator.name

    @classmethod
    def build(cls, method: str, params: Mapping[str, Any] | Sequence[str] | None = None, *, texts: bool = False,
              seed: int | None = None, weight_kind: str = "frequency", columns: Columns = Columns(),
              weighted: bool | None = None, from_summary: bool = False) -> "FitRequest":
        """Check and configure a fit. `params` are typed values (Python API), or with `texts` the
        `--param key=value` texts (or {key: text}); `weighted`: weights are given (default: `columns.weight`);
        `from_summary`: the fit reads a score summary, whose counts are weights."""
        from calibcli.calibrators import registry

        weight_kind = weight_kind_option(weight_kind, columns.weight is not None if weighted is None else weighted,
                                         from_summary)
        kind = registry.binary(method)
        if from_summary and kind.uses_features:
            raise UsageError(f"method {method!r} uses feature columns, which a score summary does not have",
                             hint="fit it with `calib fit --field-col ...` on the rows")
        if (columns.fields or columns.features) and not kind.uses_features:
            from calibcli.calibrators.base import refuse_features

            refuse_features(method, (*columns.fields, *columns.features))  # the contract's own refusal
        params = param_texts(params) if texts else dict(params or {})
        seeded = seed_option(method, {p.name for p in kind.params}, params, seed)
        calibrator = kind.from_cli(params) if texts else kind(**params)  # the constructor checks params
        calibrator.params.update(seeded)  # checked here as --seed, not again as the method's `seed`
        return cls(calibrator, columns, weight_kind)


def kclass_calibrator(method: str, params: Mapping[str, Any] | Sequence[str] | None = None, *, texts: bool = False,
                      seed: int | None = None, score_kind: str = "auto") -> ClassCalibrator:
    """A K-class fit's unfitted calibrator (`calib fit --score-cols`, `calibcli.fit` on (n, K)
    scores): its method looked up once, the `--param` texts (`texts`) parsed once by their Params
    and checked by the constructor's check, `--seed` checked once (`seed_option`) and set. An
    `auto` score kind is built as probability; set the kind read from the rows with `set_params`."""
    from calibcli.calibrators import registry

    cal = registry.kclass(method, {"score_kind": "probability" if score_kind == "auto" else score_kind})
    declared = {p.name: p for p in cal.declared_params()}
    params = param_texts(params) if texts else dict(params or {})
    typed = {key: declared[key].parse(text) if texts and key in declared else text for key, text in params.items()}
    if typed.pop("score_kind", score_kind) != score_kind:
        raise UsageError("give the score kind with --score-kind, not --param score_kind")
    seeded = seed_option(method, declared, params, seed)
    cal.set_params(**typed).params.update(seeded)  # checked here as --seed, not again as the method's `seed`
    return cal


def fit_inputs(input: str | None, from_summary: str | None, *, score_cols: str | None = None,
               score_col: str | None = None, pos_label: str | None = None, field_col: Sequence[str] = (),
               feature_col: Sequence[str] = (), weight_col: str | None = None, fmt: str | None = None,
               classes: str | None = None, score_kind: str = "auto") -> None:
    """How `calib fit`'s inputs combine: a score file or --from-summary; the options of one
    binary score column or of K score columns (--score-cols), not both; a summary's options."""
    if input is None and from_summary is None:
        raise UsageError("missing the score file to fit on (or --from-summary FILE)",
                         hint="e.g. `calib fit cal.csv -o map.json`, or `-` to read stdin")
    if input is not None and from_summary is not None:
        raise UsageError("give either a score file or --from-summary FILE, not both",
                         hint="e.g. `calib fit cal.csv` or `calib fit --from-summary summary.parquet`")
    if score_cols is not None:
        given = [flag for flag, value in (("--score-col", score_col), ("--pos-label", pos_label),
                                          ("--field-col", field_col), ("--feature-col", feature_col),
                                          ("--from-summary", from_summary)) if value]
        if given:
            raise UsageError(f"--score-cols (K classes) cannot be combined with {given[0]}",
                             hint="--score-col, --pos-label, --field-col, --feature-col and --from-summary "
                             "are for one binary score column")
        return
    binary_scores(classes, score_kind)
    if from_summary is not None and (weight_col or field_col or feature_col or fmt or pos_label is not None):
        raise UsageError("--weight-col, --field-col, --feature-col, --pos-label and --format apply to score "
                         "files, not to --from-summary", hint="give them to `calib summarize` instead")


def param_texts(pairs: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """`--param key=value` texts (`calib fit`, binary and K-class) as {key: text}; a mapping as it is."""
    if pairs is None or isinstance(pairs, Mapping):
        return dict(pairs or {})
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {pair!r} is not key=value", hint="e.g. --param platt_correction=true")
        out[key.strip()] = value
    return out


def binary_scores(classes: Any = None, score_kind: str = "auto") -> None:
    """`--classes` and `--score-kind` (K-class options) refused on a binary fit or comparison
    (`calib fit`, `calib compare`, `calibcli.fit` on scores of shape (n,))."""
    if classes is not None or score_kind != "auto":
        flag = "--classes" if classes is not None else "--score-kind"
        raise UsageError(f"{flag} is for K-class scores: give the K columns with --score-cols",
                         hint="binary methods take --param score_kind=... where they have it")


def seed_option(method: str, declared: Any, params: Mapping[str, Any], seed: int | None) -> dict[str, int]:
    """`--seed` of a fit (binary or K-class) whose method declares the parameter names
    `declared`: {} or {"seed": seed}, refused out of range, for a deterministic method, or
    beside `--param seed=`."""
    if seed is None:
        return {}
    seed = _whole("--seed", seed)
    if "seed" not in declared:
        raise UsageError(f"method {method!r} is deterministic and takes no --seed")
    if "seed" in params:
        raise UsageError(f"--seed {seed} and --param seed={params['seed']} both set the seed",
                         hint="give only one of them")
    return {"seed": seed}


def weight_kind_option(kind: str, weighted: bool, from_summary: bool = False) -> str:
    """`--weight-kind` (binary and K-class fits): frequency, or importance of given weights."""
    if kind not in WEIGHT_KINDS:
        raise UsageError(f"--weight-kind must be one of {', '.join(WEIGHT_KINDS)}, got {kind!r}")
    if kind != "frequency" and not (weighted or from_summary):
        raise UsageError("--weight-kind needs --weight-col (or --from-summary)")
    return kind


@dataclass(frozen=True)
class ApplyRequest:
    """How `calib apply` writes: the score column(s) read, the column added, what invalid
    scores do, and whether the map's interval is written too."""

    score_col: str = "score"
    output_col: str = "calibrated"
    on_invalid: str = "error"
    interval: bool = False
    score_cols: str | None = None  # --score-cols: the K score columns a K-class map reads

    @classmethod
    def build(cls, score_col: str = "score", output_col: str = "calibrated", on_invalid: str = "error",
              interval: bool = False, score_cols: str | None = None) -> "ApplyRequest":
        if on_invalid not in ON_INVALID:
            raise UsageError(f"--on-invalid {on_invalid!r}: expected one of {', '.join(ON_INVALID)}")
        column_options([("--score-col", score_col), ("--output-col", output_col)])
        return cls(score_col, output_col, on_invalid, interval, score_cols)


@dataclass(frozen=True)
class ExportRequest:
    """What `calib export --sql` writes: the score as a column (quoted in the dialect) or a
    SQL expression, the dialect, the knot budget, the K score columns of a K-class map.
    Whether the map is K-class is known once it is read (`export_kclass.export_map`)."""

    column: str | None = None  # --score-col (None: the column `score`, unless an expression is given)
    expression: str | None = None
    dialect: str = "ansi"
    max_knots: int | None = None
    score_cols: tuple[str, ...] | None = None

    @classmethod
    def build(cls, column: str | None = None, expression: str | None = None, dialect: str = "ansi",
              max_knots: int | None = None, score_cols: Sequence[str] | None = None) -> "ExportRequest":
        """Check the options; `column` None: the column `score`, unless an expression is given."""
        if column is not None and expression is not None:
            raise UsageError("give --score-col or --score-expr, not both")
        if score_cols is not None and (column is not None or expression is not None):
            raise UsageError("--score-cols (K-class maps) cannot be combined with --score-col or --score-expr")
        if dialect not in SQL_DIALECTS:
            raise UsageError(f"--dialect {dialect!r} is not one of {', '.join(SQL_DIALECTS)}")
        bounds.check(max_knots=max_knots)
        if expression is not None:
            check_expression(expression, dialect)
        column_options([("--score-col", column), *(("--score-cols", c) for c in score_cols or ())])
        return cls(column, expression, dialect, max_knots, None if score_cols is None else tuple(score_cols))


class CompareRequest(NamedTuple):
    """How `calib compare` (binary, or K-class with `kclass`) splits and ranks: --folds, --seed,
    --metric. `compare_file` and `compare_kclass_file` build it first thing, for the CLI and
    the Python API alike."""

    folds: int
    seed: int
    metric: str

    @classmethod
    def build(cls, folds: int = 5, seed: int = 0, metric: str = "log_loss", kclass: bool = False) -> "CompareRequest":
        bounds.check(folds=folds, seed=seed)
        allowed, of = (KCLASS_COMPARED, " for K classes") if kclass else (COMPARED, "")
        if metric not in allowed:
            raise UsageError(f"--metric {metric!r}: expected one of {', '.join(allowed)}{of}")
        return cls(folds, seed, metric)


def check_expression(expr: str, dialect: str = "ansi") -> None:
    """Refuse (UsageError) a score expression that could end the statement, open a comment or
    leave a quote, parenthesis or bracket open, reading quotes as the dialect does.

    Strings are '...' and identifiers "..." (a quote doubled inside is the quote); Spark also
    reads "..." as a string and quotes identifiers with backticks, which ANSI mode refuses
    (DuckDB and MySQL read them as quotes, PostgreSQL does not). Backslashes, `$` outside
    quotes and `${` are refused: backslash escapes (PostgreSQL's E'..' strings, every Spark
    string) and dollar quoting would move where a string ends, and Spark substitutes
    `${var}` before parsing.
    """
    def refuse(why: str) -> UsageError:
        return UsageError(f"--score-expr {expr!r} {why}",
                          hint="give one expression of the score, e.g. --score-expr 'CAST(raw AS DOUBLE)'")

    if not expr.strip():
        raise UsageError("--score-expr must be a SQL expression")
    for bad, why in (("\\", "has a backslash"), ("\x00", "has a NUL character"), ("${", "has '${'")):
        if bad in expr:
            raise refuse(why)
    quotes, opened, i, n = _SQL_QUOTES[dialect], [], 0, len(expr)
    while i < n:
        c = expr[i]
        if c in quotes:
            j = i + 1
            while True:
                j = expr.find(c, j)
                if j < 0:
                    raise refuse(f"leaves a {c} quote open")
                if expr.startswith(c + c, j):
                    j += 2
                    continue
                break
            i = j + 1
            continue
        two = expr[i:i + 2]
        if c == ";":
            raise refuse("has ';' outside quotes (it would end the statement)")
        if two in ("--", "/*") or c == "#":
            raise refuse(f"has {two if c != '#' else c!r} outside quotes (it would open a comment)")
        if c in "$`":
            raise refuse(f"has {c!r} outside quotes")
        if c in "([":
            opened.append(c)
        elif c in ")]":
            if not opened or opened.pop() != "([)]"[")]".index(c)]:
                raise refuse(f"closes a {c!r} it did not open")
        i += 1
    if opened:
        raise refuse(f"leaves a {opened[-1]!r} open")


def step_option(step: float | None) -> float | None:
    """`--step` (summaries and evaluation): None, or a positive finite width."""
    bounds.check(step=step)
    return None if step is None else float(step)


def _whole(option: str, value: Any) -> int:
    """A whole-number option (a numpy integer too, not a bool) within its bounds."""
    try:
        number = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        number = None
    if number is None:
        raise UsageError(f"{option} {value!r} is not an integer")
    bounds.check(**{option[2:].replace("-", "_"): number})
    return number


def _no_gate_spec() -> GateSpec:
    from calibcli.evaluation.gates import GateSpec

    return GateSpec()


def _default_metrics() -> MetricChoice:
    from calibcli.evaluation.metrics.selection import MetricChoice

    return MetricChoice()


@dataclass
class EvaluateOptions:
    """Every option of `calib evaluate` but its inputs: columns, metric settings, gates,
    bootstrap, per-field view, reliability bins. Build it with `build`, which checks it."""

    label_col: str = "label"
    score_col: str = "score"
    field_col: str | None = None  # categorical column of Field-ECE/RCE
    weight_col: str | None = None  # row weights for every metric
    calbin_window: int = CALBIN_WINDOW
    ece_bins: int = ECE_BINS  # bins of ECE and MCE
    ece_strategy: str = "uniform"  # uniform (equal width) or quantile (equal mass) bins
    step: float | None = None  # bucket width of p for AUC and CalBin (bounded memory)
    gates: GateSpec = field(default_factory=_no_gate_spec)
    bootstrap: BootstrapPlan | None = None
    by_field_top: int | None = None
    reliability_bins: int | None = None
    interval_cols: tuple[str, str] | None = None  # (low, high) of the one --prob-col; else <col>_low/_high
    pos_label: str | None = None  # --pos-label: the positive value of two labels that are not 0/1
    kclass_cols: tuple[str, ...] = ()  # --prob-cols: each SPEC one K-class prediction (kclass_evaluate)
    classes: tuple[str, ...] | None = None  # --classes: the class of each --prob-cols column
    score_cols: str | None = None  # --score-cols: the K score columns multiclass maps read
    choice: MetricChoice = field(default_factory=_default_metrics)  # --metrics, --bands, --seed, --hl-groups
    diagram: str | None = None  # with --plot: corp, smooth or binned (the data the figure draws)

    @classmethod
    def build(cls, *, label_col: str = "label", score_col: str = "score", field_col: str | None = None,
              weight_col: str | None = None, calbin_window: int = CALBIN_WINDOW, ece_bins: int = ECE_BINS,
              ece_strategy: str = "uniform", step: float | None = None,
              bootstrap: int = 0, seed: int = 0, by_field: bool = False, top: int = 5,
              reliability_bins: int | None = None, interval_cols: str | tuple[str, str] | None = None,
              pos_label: str | None = None, kclass_cols: tuple[str, ...] = (),
              classes: tuple[str, ...] | None = None, score_cols: str | None = None, metrics: str | None = None,
              bands: int | None = None, hl_groups: int | None = None, diagram: str | None = None,
              fail_above: Sequence[str] = (), fail_below: Sequence[str] = (), max_regression: Sequence[str] = (),
              baseline: str | None = None, gate_on: str = "point") -> "EvaluateOptions":
        """Check every option and how they combine (what depends on a map being K-class is
        known only once the maps are loaded: `kclass_evaluate.refuse_binary_options`).

        `interval_cols`: (low, high) or the text of `--interval-cols LOW,HIGH`; `diagram` (what
        `--plot` draws) is kept with `reliability_bins` (a plot) only; the gates are the texts
        of `--fail-above`, `--fail-below`, `--max-regression` (METRIC=VALUE) with `--baseline`
        and `--gate-on`."""
        column_options([("--label-col", label_col), ("--score-col", score_col), ("--field-col", field_col),
                        ("--weight-col", weight_col)])
        window = _whole("--calbin-window", calbin_window)
        bounds.check(bootstrap=bootstrap, seed=seed, top=top, ece_bins=ece_bins, bands=bands, hl_groups=hl_groups)
        step = step_option(step)
        if ece_strategy not in ECE_STRATEGIES:
            raise UsageError(f"--ece-strategy {ece_strategy!r}: expected uniform or quantile")
        if by_field and field_col is None:
            raise UsageError("--by-field needs --field-col")
        if bootstrap and weight_col is not None:
            raise UsageError("--bootstrap cannot resample weighted rows exactly (a resampled weight depends on "
                             "which rows are drawn, not only how many)", hint="drop --weight-col or --bootstrap")
        if bootstrap and step is not None:
            raise UsageError("--bootstrap needs the exact probabilities; it cannot be combined with --step")
        if diagram is not None and diagram not in DIAGRAMS:
            raise UsageError(f"--diagram {diagram!r}: expected one of {', '.join(DIAGRAMS)}")
        gates = _gate_spec(fail_above, fail_below, max_regression, baseline, gate_on, bootstrap)
        _check_gates(gates, None if kclass_cols else field_col, step, bool(kclass_cols))
        if step is not None and ece_strategy != "uniform":
            raise UsageError("--ece-strategy quantile places its bin edges at percentiles of the exact p; it cannot "
                             "be combined with --step", hint="use --ece-strategy uniform (exact under --step), or drop --step")
        from calibcli.evaluation.metrics.selection import HL_GROUPS, MetricChoice

        choice = MetricChoice.parse(metrics, required=gates.metrics_used(), bands=bands, seed=seed,
                                    plot=reliability_bins is not None,
                                    hl_groups=HL_GROUPS if hl_groups is None else hl_groups)
        plan = None
        if bootstrap:
            from calibcli.evaluation.bootstrap import BootstrapPlan

            plan = BootstrapPlan(bootstrap, seed)
        return cls(label_col, score_col, field_col, weight_col, window, ece_bins, ece_strategy, step, gates,
                   plan, top if by_field else None, reliability_bins, _interval_cols(interval_cols), pos_label,
                   tuple(kclass_cols), classes, score_cols, choice, diagram if reliability_bins is not None else None)

    def check_kind(self, kclass: bool) -> None:
        """Refuse `--metrics` and gates of the other kind of prediction than the one evaluated
        (binary probabilities, or K-class ones: `kclass`), and `--classes`/`--score-cols` on binary
        ones, once that is known (a --map's kind is known when it is loaded)."""
        from calibcli.evaluation.metrics.binary import KCLASS_METRICS, METRICS

        hint = ("K-class metrics: " + ", ".join(k.replace("_", "-") for k in KCLASS_METRICS) if kclass
                else "K-class predictions are --prob-cols SPEC or a multiclass --map")
        given = [flag for flag, value in (("--classes", self.classes), ("--score-cols", self.score_cols))
                 if value is not None]
        if given and not kclass:
            raise UsageError(f"{given[0]} applies to K-class predictions (--prob-cols, or a multiclass --map)")
        if kclass and self.choice.binary_only:
            raise UsageError(f"--metrics {self.choice.binary_only[0].replace('_', '-')}: a metric of binary "
                             "probabilities, not of K-class predictions", hint=hint)
        if not kclass and self.choice.kclass_only:
            raise UsageError(f"--metrics {self.choice.kclass_only[0].replace('_', '-')}: it is a K-class metric",
                             hint=hint)
        other = sorted(self.gates.metrics_used() - set(KCLASS_METRICS if kclass else METRICS))
        if other:
            raise UsageError(f"a gate on {other[0].replace('_', '-')}: it is {'not ' if kclass else ''}a K-class metric",
                             hint=hint)


def _gate_spec(fail_above: Sequence[str], fail_below: Sequence[str], max_regression: Sequence[str],
               baseline: str | None, gate_on: str, bootstrap: int) -> GateSpec:
    """The gates of `--fail-above`, `--fail-below`, `--max-regression` (each METRIC=VALUE, read by
    `gates.parse_limits`), `--baseline` and `--gate-on`."""
    from calibcli.evaluation import gates

    if gate_on not in GATE_ON:
        raise UsageError(f"--gate-on {gate_on!r}: expected one of {', '.join(GATE_ON)}")
    if gate_on == "upper" and bootstrap <= 0:
        raise UsageError("--gate-on upper needs confidence intervals", hint="add --bootstrap 200 (or more)")
    if max_regression and baseline is None:
        raise UsageError("--max-regression needs --baseline FILE",
                         hint="write one with `calib evaluate ... --save-baseline FILE`")
    spec = gates.GateSpec(gates.parse_limits(fail_above, "--fail-above"), gates.parse_limits(fail_below, "--fail-below"),
                          gates.parse_limits(max_regression, "--max-regression", allow_percent=True), baseline, gate_on)
    gates.refuse_targets(spec.max_regression)
    if baseline is not None and not spec.max_regression:
        raise UsageError("--baseline needs --max-regression METRIC=VALUE",
                         hint="e.g. --max-regression field-rce=0.01 or --max-regression log-loss=5%")
    return spec


def _interval_cols(cols: str | tuple[str, str] | None) -> tuple[str, str] | None:
    """`--interval-cols LOW,HIGH` as a pair of column names."""
    if cols is None or not isinstance(cols, str):
        return None if cols is None else (cols[0], cols[1])
    parts = [p.strip() for p in cols.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--interval-cols {cols!r}: expected two column names, LOW,HIGH")
    return parts[0], parts[1]


def evaluate_output(output_format: str | None = None, deprecated: str | None = None, as_json: bool = False,
                    save_baseline: str | None = None) -> str:
    """What `calib evaluate` writes on stdout (table, json, csv or markdown), from --output-format,
    its deprecated name --output (`deprecated`) or --json; `--save-baseline` must name a file."""
    if save_baseline == "-":
        raise UsageError("--save-baseline needs a file name", hint="use --json for the report on stdout")
    option = "--output" if deprecated is not None else "--output-format"
    if deprecated is not None:
        if output_format is not None:
            raise UsageError("give --output-format only: --output is its deprecated name")
        output_format = deprecated
    kind = "table" if output_format is None else output_format
    if kind not in OUTPUT_FORMATS:
        raise UsageError(f"{option} {kind!r}: expected table, json, csv or markdown")
    return "json" if as_json else kind


def _check_gates(spec: GateSpec, field_col: str | None, step: float | None, kclass: bool) -> None:
    """Gates the other options make impossible: Field-ECE/RCE without --field-col (binary
    predictions; K-class ones refuse field gates as not theirs), the calibration slope or
    intercept under --step (n/a there), --gate-on upper on a metric without a bootstrap
    interval (`bootstrap.WITHHELD`: its missing end must not pass or fail a gate silently)."""
    from calibcli.evaluation import gates
    from calibcli.evaluation.bootstrap import NO_INTERVAL, withheld_reason

    if not kclass:
        gates.require_field_col(spec, field_col)
    bare = sorted(spec.metrics_used() & NO_INTERVAL) if spec.gate_on == "upper" else []
    if bare:
        raise UsageError(f"--gate-on upper on {bare[0].replace('_', '-')}: it has no bootstrap interval "
                         f"({withheld_reason(bare[0])})", hint="use --gate-on point")
    n_a = sorted(spec.metrics_used() & set(STEP_NA)) if step is not None else []
    if n_a:
        name = n_a[0].replace("_", "-")
        raise UsageError(f"a gate on {name} needs the exact probabilities: it is n/a with --step "
                         "(no bound from the bucketed p covers it)", hint="drop --step, or gate on other metrics")


__all__ = ["ApplyRequest", "Columns", "CompareRequest", "EvaluateOptions", "ExportRequest", "FitRequest",
           "binary_scores", "check_expression", "evaluate_output", "fit_inputs", "kclass_calibrator", "param_texts",
           "seed_option", "step_option", "weight_kind_option"]
