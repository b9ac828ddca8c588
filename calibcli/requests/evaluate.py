"""The door of `calib evaluate` (and `calibcli.evaluate`, the engines' `evaluate`): every option
checked once, in one phase, in `EvaluateOptions.build`.

What is evaluated decides the kind (`kinds.kind_of`): `--prob-col`s are binary probabilities,
each `--prob-cols SPEC` a K-class prediction, and each `--map` is of the kind its envelope says
(read here, once: the driver builds the maps from these envelopes). The two kinds cannot be
evaluated in one run (their labels differ); the options of the other kind are refused here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from calibcli.errors import UsageError
from calibcli.kinds import BINARY, KCLASS, kind_of
from calibcli.requests import bounds
from calibcli.requests.bounds import step_option, whole
from calibcli.requests.gates import GateSpec, parse_limits, refuse_targets, require_field_col
from calibcli.requests.metrics import (HL_GROUPS, KCLASS_METRICS, METRICS, NO_INTERVAL, STEP_NA, MetricChoice,
                                       withheld_reason)
from calibcli.requests.names import column_options
from calibcli.requests.segments import SegmentSpec, segment_spec
from calibcli.calibrators.params import CALBIN_WINDOW, ECE_BINS, ECE_STRATEGIES

MIN_ROWS = 30  # --min-rows: the rows (weight) a field value needs for --by-field to test and show it

DIAGRAMS = ("corp", "smooth", "binned")  # `calib evaluate --diagram`: what --plot draws
GATE_ON = ("point", "worst", "best")  # `calib evaluate --gate-on`
GATE_ON_ALIASES = {"upper": "worst"}  # deprecated names (the CLI warns)
OUTPUT_FORMATS = ("table", "json", "csv", "markdown")  # `calib evaluate --output-format`
CONFIDENCE = 0.95  # the level of --bootstrap intervals


@dataclass(frozen=True)
class BootstrapPlan:
    """`--bootstrap N --seed S`: how many resamples, with which seed, for which interval level."""

    replicates: int
    seed: int
    level: float = CONFIDENCE

    def to_json(self) -> dict[str, Any]:
        return {"replicates": self.replicates, "seed": self.seed, "level": self.level,
                "method": "recentred-percentile", "resampling": "poisson"}


@dataclass
class EvaluateOptions:
    """Every option of `calib evaluate`: what is evaluated (its kind decided), columns, metric
    settings, gates, bootstrap, per-field view, reliability bins. Build it with `build`."""

    label_col: str = "label"
    score_col: str = "score"
    field_col: str | None = None  # categorical column of Field-ECE/RCE
    weight_col: str | None = None  # row weights for every metric
    calbin_window: int = CALBIN_WINDOW
    ece_bins: int = ECE_BINS  # bins of ECE and MCE
    ece_strategy: str = "uniform"  # uniform (equal width) or quantile (equal mass) bins
    step: float | None = None  # bucket width of p for AUC and CalBin (bounded memory)
    gates: GateSpec = field(default_factory=GateSpec)
    bootstrap: BootstrapPlan | None = None
    by_field_top: int | None = None
    reliability_bins: int | None = None
    interval_cols: tuple[str, str] | None = None  # (low, high) of the one --prob-col; else <col>_low/_high
    pos_label: str | None = None  # --pos-label: the positive value of two labels that are not 0/1
    kclass_cols: tuple[str, ...] = ()  # --prob-cols: each SPEC one K-class prediction
    classes: tuple[str, ...] | None = None  # --classes: the class of each --prob-cols column
    score_cols: str | None = None  # --score-cols: the K score columns multiclass maps read
    choice: MetricChoice = field(default_factory=MetricChoice)  # --metrics, --bands, --seed, --hl-groups
    diagram: str | None = None  # with --plot: corp, smooth or binned (the data the figure draws)
    prob_cols: tuple[str, ...] = ()  # --prob-col: binary probability columns
    maps: tuple[tuple[str, dict], ...] = ()  # --map: (path, envelope), each read once here
    kind: str = BINARY  # of every prediction evaluated (kinds.BINARY or kinds.KCLASS)
    names: tuple[str, ...] = ()  # what is evaluated, as results name it (gates may name one)
    min_rows: int = MIN_ROWS  # --min-rows: the rows a field value needs to be tested by --by-field
    segments: SegmentSpec | None = None  # --segment-col ...: the multicalibration error's segments

    @classmethod
    def build(cls, *, label_col: str = "label", score_col: str = "score", field_col: str | None = None,
              weight_col: str | None = None, calbin_window: int = CALBIN_WINDOW, ece_bins: int = ECE_BINS,
              ece_strategy: str = "uniform", step: float | None = None,
              bootstrap: int = 0, seed: int = 0, by_field: bool = False, top: int = 5,
              reliability_bins: int | None = None, interval_cols: str | tuple[str, str] | None = None,
              pos_label: str | None = None, kclass_cols: Sequence[str] = (),
              classes: Sequence[str] | None = None, score_cols: str | None = None, metrics: str | None = None,
              bands: int | None = None, hl_groups: int | None = None, diagram: str | None = None,
              fail_above: Sequence[str] = (), fail_below: Sequence[str] = (), max_regression: Sequence[str] = (),
              baseline: str | None = None, gate_on: str = "point", prob_cols: Sequence[str] = (),
              maps: Sequence[str] = (), kind: str | None = None, min_rows: int | None = None,
              segment_cols: Sequence[str] = (), segment_bins: int | None = None, segment_top: int | None = None,
              segment_depth: int | None = None, segment_min_rows: int | None = None, segment_max: int | None = None,
              segments: int | None = None) -> "EvaluateOptions":
        """Check every option and how they combine, the kind of what is evaluated included.

        `prob_cols`, `kclass_cols` and `maps` (paths: each envelope is read here) are what is
        evaluated; `kind` names it where there is none of them (the Python API and the engines
        evaluate arrays and frames: default binary). `interval_cols`: (low, high) or the text of
        `--interval-cols LOW,HIGH`; `diagram` (what `--plot` draws) is kept with
        `reliability_bins` (a plot) only; the gates are the texts of `--fail-above`,
        `--fail-below`, `--max-regression` ([COLUMN:]METRIC=VALUE: `gates.split_gate`) with
        `--baseline` and `--gate-on` (point, worst, best; `upper` is worst's deprecated name);
        `min_rows` (`--min-rows`) goes with `by_field`; the
        `segment_*` options and `segments` (the rows of the worst-segments table) are those of
        `--segment-col ...` (`requests.segments`; None: not given)."""
        column_options([("--label-col", label_col), ("--score-col", score_col), ("--field-col", field_col),
                        ("--weight-col", weight_col)])
        window = whole("--calbin-window", calbin_window)
        bounds.check(bootstrap=bootstrap, seed=seed, top=top, ece_bins=ece_bins, bands=bands, hl_groups=hl_groups,
                     min_rows=min_rows)
        if min_rows is not None and not by_field:
            raise UsageError("--min-rows applies to --by-field", hint="add --by-field --field-col COLUMN")
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
        if step is not None and ece_strategy != "uniform":
            raise UsageError("--ece-strategy quantile places its bin edges at percentiles of the exact p; it cannot "
                             "be combined with --step", hint="use --ece-strategy uniform (exact under --step), or drop --step")
        spec = segment_spec(segment_cols, bins=segment_bins, top=segment_top, depth=segment_depth,
                            min_rows=segment_min_rows, max_segments=segment_max, shown=segments)
        names = evaluated_names(prob_cols, kclass_cols, maps, score_col)
        gates = _gate_spec(fail_above, fail_below, max_regression, baseline, gate_on, bootstrap,
                           names if (prob_cols or kclass_cols or maps or kind is None) else None)
        choice = MetricChoice.parse(metrics, required=gates.metrics_used(), bands=bands, seed=seed,
                                    plot=reliability_bins is not None,
                                    hl_groups=HL_GROUPS if hl_groups is None else hl_groups)
        envelopes = _envelopes(maps)
        kind = _kind(prob_cols, kclass_cols, envelopes, kind)
        opts = cls(label_col, score_col, field_col, weight_col, window, ece_bins, ece_strategy, step, gates,
                   BootstrapPlan(bootstrap, seed) if bootstrap else None, top if by_field else None,
                   reliability_bins, _interval_cols(interval_cols), pos_label, tuple(kclass_cols),
                   None if classes is None else tuple(classes), score_cols, choice,
                   diagram if reliability_bins is not None else None, tuple(prob_cols), envelopes, kind,
                   tuple(names), segments=spec)
        if min_rows is not None:
            opts.min_rows = min_rows
        if choice.segment_named and spec is None:
            gated = sorted(set(choice.segment_named) & gates.metrics_used())
            what = f"a gate on {gated[0]}" if gated else f"--metrics {choice.segment_named[0]}"
            raise UsageError(f"{what.replace('_', '-')} needs --segment-col (the columns whose segments it checks)",
                             hint="e.g. --segment-col country --segment-col age")
        _KIND_CHECKS[kind](opts)
        _check_gates(opts)
        return opts


def evaluated_names(prob_cols: Sequence[str], kclass_cols: Sequence[str], maps: Sequence[str],
                    score_col: str) -> list[str]:
    """The names results take, in order: each --prob-col and --prob-cols SPEC as typed, then each
    --map's path (`<stdin>` for `-`); the score column itself when none is given."""
    names = [*prob_cols, *kclass_cols, *("<stdin>" if m == "-" else str(m) for m in maps)]
    return names or [score_col]


def _envelopes(paths: Sequence[str]) -> tuple[tuple[str, dict], ...]:
    """Each `--map`'s envelope, read and checked once (`maps.envelope.read_envelope`)."""
    if not paths:
        return ()
    from calibcli.maps.envelope import read_envelope

    return tuple((path, read_envelope(path)) for path in paths)


def _kind(prob_cols: Sequence[str], kclass_cols: Sequence[str], envelopes: Sequence[tuple[str, dict]],
          given: str | None) -> str:
    """The one kind of what is evaluated; binary and K-class predictions in one run are refused."""
    seen = {kind_of(envelope): path for path, envelope in envelopes}
    if prob_cols:
        seen.setdefault(BINARY, f"--prob-col {prob_cols[0]}")
    if kclass_cols:
        seen.setdefault(KCLASS, f"--prob-cols {kclass_cols[0]}")
    if len(seen) > 1:
        raise UsageError(f"{seen[BINARY]} (binary) and {seen[KCLASS]} (K classes) cannot be evaluated in one run: "
                         "their labels differ",
                         hint="run calib evaluate once for the binary columns and once for the K-class ones")
    return next(iter(seen)) if seen else (given or BINARY)


def _binary_checks(opts: EvaluateOptions) -> None:
    """Binary probabilities: the K-class options and metrics refused."""
    given = [flag for flag, value in (("--classes", opts.classes), ("--score-cols", opts.score_cols))
             if value is not None]
    if given:
        raise UsageError(f"{given[0]} applies to K-class predictions (--prob-cols, or a multiclass --map)")
    hint = "K-class predictions are --prob-cols SPEC or a multiclass --map"
    if opts.choice.kclass_only:
        raise UsageError(f"--metrics {opts.choice.kclass_only[0].replace('_', '-')}: it is a K-class metric",
                         hint=hint)
    other = sorted(opts.gates.metrics_used() - set(METRICS))
    if other:
        raise UsageError(f"a gate on {other[0].replace('_', '-')}: it is a K-class metric", hint=hint)
    require_field_col(opts.gates, opts.field_col)


def _kclass_checks(opts: EvaluateOptions) -> None:
    """K-class predictions: the options and metrics of one probability column refused."""
    refused = [("--field-col", opts.field_col), ("--step", opts.step), ("--interval-cols", opts.interval_cols),
               ("--by-field", opts.by_field_top), ("--pos-label", opts.pos_label)]
    by_value = ("for K classes, --segment-col COL --segment-depth 1 --segment-top K shows the top label's "
                "calibration in each of COL's K most frequent values, worst first, with its p-value")
    for flag, value in refused:
        if value is not None:
            raise UsageError(f"{flag} applies to binary probabilities; K-class predictions do not take it",
                             hint=by_value if flag in ("--field-col", "--by-field") else None)
    hint = "K-class metrics: " + ", ".join(k.replace("_", "-") for k in KCLASS_METRICS)
    if opts.choice.binary_only:
        raise UsageError(f"--metrics {opts.choice.binary_only[0].replace('_', '-')}: a metric of binary "
                         "probabilities, not of K-class predictions", hint=hint)
    other = sorted(opts.gates.metrics_used() - set(KCLASS_METRICS))
    if other:
        raise UsageError(f"a gate on {other[0].replace('_', '-')}: it is not a K-class metric", hint=hint)


_KIND_CHECKS = {BINARY: _binary_checks, KCLASS: _kclass_checks}


def _gate_spec(fail_above: Sequence[str], fail_below: Sequence[str], max_regression: Sequence[str],
               baseline: str | None, gate_on: str, bootstrap: int, names: Sequence[str] | None) -> GateSpec:
    """The gates of `--fail-above`, `--fail-below`, `--max-regression` (each [COLUMN:]METRIC=VALUE,
    read by `gates.parse_limits`; a COLUMN among `names`), `--baseline` and `--gate-on`."""
    given = gate_on
    gate_on = GATE_ON_ALIASES.get(gate_on, gate_on)
    if gate_on not in GATE_ON:
        raise UsageError(f"--gate-on {given!r}: expected one of {', '.join(GATE_ON)}")
    if gate_on != "point" and bootstrap <= 0:
        raise UsageError(f"--gate-on {given} needs confidence intervals", hint="add --bootstrap 200 (or more)")
    if max_regression and baseline is None:
        raise UsageError("--max-regression needs --baseline FILE",
                         hint="write one with `calib evaluate ... --save-baseline FILE`")
    spec = GateSpec(parse_limits(fail_above, "--fail-above", columns=names),
                    parse_limits(fail_below, "--fail-below", columns=names),
                    parse_limits(max_regression, "--max-regression", allow_percent=True, columns=names),
                    baseline, gate_on)
    refuse_targets(spec.max_regression)
    if baseline is not None and not spec.max_regression:
        raise UsageError("--baseline needs --max-regression METRIC=VALUE",
                         hint="e.g. --max-regression field-rce=0.01 or --max-regression log-loss=5%")
    return spec


def _check_gates(opts: EvaluateOptions) -> None:
    """Gates the other options make impossible: the calibration slope or intercept under --step
    (n/a there), --gate-on upper on a metric without a bootstrap interval (`WITHHELD`: its missing
    end must not pass or fail a gate silently)."""
    spec = opts.gates
    bare = sorted(spec.metrics_used() & NO_INTERVAL) if spec.gate_on != "point" else []
    if bare:
        raise UsageError(f"--gate-on {spec.gate_on} on {bare[0].replace('_', '-')}: it has no bootstrap interval "
                         f"({withheld_reason(bare[0])})", hint="use --gate-on point")
    n_a = sorted(spec.metrics_used() & set(STEP_NA)) if opts.step is not None else []
    if n_a:
        name = n_a[0].replace("_", "-")
        raise UsageError(f"a gate on {name} needs the exact probabilities: it is n/a with --step "
                         "(no bound from the bucketed p covers it)", hint="drop --step, or gate on other metrics")


def field_min_rows(min_rows: float) -> float:
    """`min_rows=` of `calibcli.evaluate` (fields ranked by evidence): `--min-rows`'s range."""
    bounds.check(min_rows=min_rows)
    return min_rows


def _interval_cols(cols: str | tuple[str, str] | None) -> tuple[str, str] | None:
    """`--interval-cols LOW,HIGH` as a pair of column names."""
    if cols is None or not isinstance(cols, str):
        return None if cols is None else (cols[0], cols[1])
    parts = [p.strip() for p in cols.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--interval-cols {cols!r}: expected two column names, LOW,HIGH")
    return parts[0], parts[1]


def evaluate_output(output_format: str | None = None, deprecated: str | None = None, as_json: bool = False,
                    save_baseline: str | None = None, summary: str | None = None, title: str | None = None,
                    plot: str | None = None) -> str:
    """What `calib evaluate` writes on stdout (table, json, csv or markdown), from --output-format,
    its deprecated name --output (`deprecated`) or --json; `--save-baseline` and `--summary` must
    name files, each another than the others (and than `--plot`); `--title` must hold text."""
    if save_baseline == "-":
        raise UsageError("--save-baseline needs a file name", hint="use --json for the report on stdout")
    if summary == "-":
        raise UsageError("--summary needs a file name", hint="use --output-format markdown for Markdown on stdout")
    files = [(flag, path) for flag, path in (("--save-baseline", save_baseline), ("--summary", summary),
                                              ("--plot", plot)) if path is not None and path != "-"]
    for i, (flag, path) in enumerate(files):
        for other, again in files[:i]:
            if path == again:
                raise UsageError(f"{path}: {other} and {flag} name the same file")
    if title is not None and not title.strip():
        raise UsageError("--title is empty", hint="give the report a heading, e.g. --title 'nightly model'")
    option = "--output" if deprecated is not None else "--output-format"
    if deprecated is not None:
        if output_format is not None:
            raise UsageError("give --output-format only: --output is its deprecated name")
        output_format = deprecated
    kind = "table" if output_format is None else output_format
    if kind not in OUTPUT_FORMATS:
        raise UsageError(f"{option} {kind!r}: expected table, json, csv or markdown")
    return "json" if as_json else kind


__all__ = ["BootstrapPlan", "DIAGRAMS", "EvaluateOptions", "GATE_ON", "GATE_ON_ALIASES", "MIN_ROWS", "OUTPUT_FORMATS",
           "evaluate_output", "evaluated_names", "field_min_rows"]
