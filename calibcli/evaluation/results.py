"""The result types of `calib evaluate`: the report (`Evaluation`, one `EvalRow` per column or
map, its JSON schema in `Evaluation.to_json`), the gate outcome (`Check`, `GateReport`) and
the baseline an earlier report gives (`Baseline`, with the `GATED_SETTINGS` it was computed
with). `gates` decides and `baseline` reads and writes; both depend on this module only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from calibcli.evaluation.metrics import binary as metrics_table
from calibcli.requests import segments as segment_options
from calibcli.requests.metrics import SEGMENT, TOP_LABEL_SEGMENT

if TYPE_CHECKING:
    from calibcli.evaluation.bootstrap import BootstrapPlan

EVALUATION_FORMAT = "calibcli.evaluation"
SCHEMA_VERSION = 4
# The options an evaluation records as they were given, in the order its JSON writes them.
_HEADER = ("input", "rows", "positives", "field_col", "calbin_window", "weight_col", "step", "ece_bins",
           "ece_strategy", "label_col", "score_col", "hl_groups", "segment_cols", "segment_bins", "segment_top",
           "segment_depth", "segment_min_rows", "segment_max")


@dataclass
class EvalRow:
    name: str
    kind: str  # "column" or "map"
    metrics: dict[str, float]
    intervals: dict[str, tuple[float, float]] | None = None  # with --bootstrap
    by_field: dict[str, Any] | None = None  # with --by-field
    reliability: list[dict[str, Any]] | None = None  # with --plot
    step_bounds: dict[str, float | None] | None = None  # with --step: how far each metric may be off
    histogram: list[int] | None = None  # with --plot: rows per p in [k/20, (k+1)/20)
    mce_count: float | None = None  # rows (weight) of the bin where MCE is reached
    classes: list[str] | None = None  # a K-class prediction: the class of each probability column
    corp: dict[str, Any] | None = None  # with --plot (--diagram corp): `corp.diagram`
    smooth: dict[str, Any] | None = None  # with --plot --diagram smooth: the smoothed curve
    segments: list[dict[str, Any]] | None = None  # with --segment-col: the worst segments (`multical.segment_dict`)
    segments_checked: int | None = None  # with --segment-col: how many segments were checked
    segments_capped: bool | None = None  # with --segment-col: whether --segment-max stopped the enumeration
    verdict: Any = None  # `verdict.Verdict`: calibrated within noise or not, which way, where
    columns: list[str] | None = None  # the input columns a --prob-col/--prob-cols result read (baselines match them)
    interval: dict[str, Any] | None = None  # with interval columns: widths and the label-side verdict


@dataclass
class Evaluation:
    input: str
    rows: int
    positives: int | None  # None for K-class predictions
    field_col: str | None
    calbin_window: int
    results: list[EvalRow]
    bootstrap: BootstrapPlan | None = None
    gate: GateReport | None = None
    weight_col: str | None = None
    step: float | None = None
    ece_bins: int = 10
    ece_strategy: str = "uniform"
    label_col: str = "label"
    score_col: str | None = None  # the score column the maps were applied to (None: no map)
    hl_groups: int = 10  # groups of the Hosmer-Lemeshow test
    command: str | None = None  # the command line that made the report (named by the HTML page)
    segment_cols: list[str] | None = None  # --segment-col (and the options below; None without it)
    segment_bins: int | None = None
    segment_top: int | None = None
    segment_depth: int | None = None
    segment_min_rows: int | None = None
    segment_max: int | None = None
    title: str | None = None  # --title: the HTML report's and the summary's heading

    @property
    def headline(self) -> str:
        """`1000 rows, 130 positive`, or for K-class predictions `1000 rows, 3 classes` (and
        with --plot, what the reliability diagram plots)."""
        classes = self.results[0].classes if self.results else None
        if classes is None:
            return f"{self.rows} rows, {self.positives} positive"
        return f"{self.rows} rows, {len(classes)} classes"

    @property
    def kclass(self) -> bool:
        """Whether the results are K-class predictions (top-label reliability, K-class metrics)."""
        return bool(self.results) and self.results[0].classes is not None

    def metric_keys(self) -> list[str]:
        """The reported metrics in table order (`metrics.KCLASS_METRICS` for K-class results)."""
        order = metrics_table.KCLASS_METRICS if self.kclass else metrics_table.ALL_METRICS
        return [k for k in order if self.results and k in self.results[0].metrics]

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report (`calib evaluate --json`, `--save-baseline`); NaN becomes null.

        Schema (version 4; version 1 had only the keys marked *; version 3 added the metrics
        of `selection.NEW`, `corp` and `smooth`; version 4 the `verdict` and the tested
        `by_field`):

        - `format`: "calibcli.evaluation"; `schema_version`: 3; `calibcli_version`
        - `input`*, `rows`*, `positives`*, `field_col`*, `calbin_window`*
        - `results`*: one object per --prob-col and --map, in order: `name`*, `kind`*
          ("column" or "map"), `verdict` (`verdict.Verdict.to_json`: `calibrated` true, false or
          null for too few rows, `direction`, `where`, `evidence`, `text`, `level`,
          `detectable`; the rule in docs/verdict.md), `metrics`* (snake_case keys of `metrics.METRICS`, null when
          n/a), `intervals` ({metric: [low, high]} with --bootstrap, [null, null] for a metric
          the bootstrap withholds (`bootstrap.WITHHELD`), else null), `by_field` (with
          --by-field: `fields`, `tested` (values with at least `min_rows`), `min_rows`, `top`,
          `significant`, `level`, `test`, `adjustment` and `values`, the top values by
          evidence: {field, rows, positives, mean_p, positive_rate, gap, bias, relative_bias,
          p_value, adjusted_p, significant}, else null),
          `histogram` (with --plot: rows with p in each of 20 equal-width bins, else null),
          `reliability` (with --plot: the bins of ECE/MCE, --ece-bins and --ece-strategy,
          that hold rows: {rows, mean_p, positive_rate, rate_low, rate_high, p_min, p_max};
          tied p are never split; before schema 3, 10 equal-mass bins; else null), `step_bounds` (with --step: per metric, the largest possible
          distance from its exact value: 0 where it is exact, null where it is n/a or has no
          finite bound; else null),
          `mce_count` (the rows, or weight, of the bin where MCE is reached; null when n/a),
          `classes` (a K-class prediction, `--prob-cols` or a multiclass map: the class of each
          probability column, in order; its `metrics` are the keys of
          `metrics.KCLASS_METRICS`, `histogram` and `reliability` are of the confidence
          max_k p_k with the top label's accuracy as `positive_rate`, and so are `corp` and
          `smooth`; else null),
          `corp` (with --plot and the CORP diagram: `p` and
          `recalibrated`, the PAV curve at the ends of its constant blocks; `band_p`,
          `band_lower`, `band_upper`, the consistency band; `level`, `rounds`, `p_value`),
          `smooth` (with --plot --diagram smooth: `p`, `rate`, `density` of the smoothed
          reliability curve),
          `infinite` (the metrics whose value is +inf, written null in `metrics`: JSON has no
          infinity; only the multicalibration error can be, when a segment whose every p is 0
          or 1 has a row of the other label; usually []),
          `segments` (with --segment-col: the --segments worst segments, worst first, each
          {segment, rows, weight, predicted, observed, ecce, sigma, ecce_sigma, p, infinite},
          `infinite` listing its +inf values written null; else null), `segments_checked` (how
          many segments were checked) and `segments_capped` (whether --segment-max stopped the
          enumeration), null without --segment-col
        - K-class reports have `positives` null and `field_col` null
        - `weight_col`, `step`: the --weight-col and --step options (null when not given)
        - `ece_bins`, `ece_strategy`: the bins of ECE and MCE (--ece-bins, --ece-strategy)
        - `label_col`; `score_col` (the column the maps were applied to; null without --map)
        - `hl_groups`: the groups of the Hosmer-Lemeshow test (--hl-groups)
        - `segment_cols` (a list), `segment_bins`, `segment_top`, `segment_depth`,
          `segment_min_rows`, `segment_max`: the segment options (all null without --segment-col)
        - `bootstrap`: {replicates, seed, level, method: "recentred-percentile", resampling: "poisson"} or null
        - `gate`: {passed, gate_on, baseline (path or null), checked, failed, checks}; each
          check is {result, metric, kind ("above", "below", "regression"), value, compared,
          limit, passed, excess, threshold, baseline, allowed, relative, infinite (those of
          its numbers that are +inf, written null)}. With no gate
          options `passed` is true and `checks` is empty.

        Keys are only ever added within a schema version; a removal or change of meaning
        bumps it. `--baseline` reads versions 1 to 4.
        """
        from calibcli._version import __version__

        def clean(v: float) -> float | None:
            return None if v != v or v in (math.inf, -math.inf) else v

        def result(r: EvalRow) -> dict[str, Any]:
            return {
                "name": r.name, "kind": r.kind,
                "verdict": None if r.verdict is None else r.verdict.to_json(),  # first: the answer
                "metrics": {k: clean(v) for k, v in r.metrics.items()},
                "infinite": infinite_keys(r.metrics),
                "intervals": None if r.intervals is None else
                {k: [clean(lo), clean(hi)] for k, (lo, hi) in r.intervals.items()},
                "by_field": r.by_field, "reliability": r.reliability,
                "step_bounds": None if r.step_bounds is None else
                {k: None if v is None else clean(v) for k, v in r.step_bounds.items()},
                "histogram": r.histogram,
                "mce_count": count_json(r.mce_count),
                **{k: getattr(r, k) for k in ("classes", "corp", "smooth")},
                "segments": None if r.segments is None else [_finite_json(s) for s in r.segments],
                "segments_checked": r.segments_checked, "segments_capped": r.segments_capped,
                "columns": r.columns, "interval": r.interval,
            }

        gate = self.gate or GateReport("point", None, [])
        return {
            "format": EVALUATION_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "calibcli_version": __version__,
            **{k: getattr(self, k) for k in _HEADER},
            "results": [result(r) for r in self.results],
            "bootstrap": self.bootstrap.to_json() if self.bootstrap else None,
            "gate": gate.to_json(),
        }

    def to_json_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n").encode()


@dataclass
class Check:
    """One gate applied to one metric of one column or map."""

    result: str
    metric: str
    kind: str  # "above", "below" or "regression"
    value: float  # the point estimate
    compared: float  # what was compared: the point, or an interval end with --gate-on upper
    limit: float  # the value `compared` must not cross
    passed: bool
    excess: float  # how far past the limit (0 when passed; NaN when a value is n/a)
    threshold: float | None = None
    baseline: float | None = None
    allowed: float | None = None  # the allowed regression, in the metric's units
    relative: float | None = None  # the allowed regression as a fraction of the baseline

    def to_json(self) -> dict[str, Any]:
        return _finite_json({k: _clean(v) for k, v in self.__dict__.items()})

    def describe(self) -> str:
        """One line for stderr: which metric, for what, its value, the limit and by how much."""
        where = f"{metrics_table.ALL_METRICS[self.metric][0]} of {self.result!r}"
        shown = _num(self.value)
        if self.compared == self.compared and self.compared != self.value:
            shown += f" (confidence interval end {_num(self.compared)})"
        if self.kind == "regression":
            if self.value != self.value or self.baseline is None:
                return f"{where} is {shown} and the baseline {_num(self.baseline)}: cannot compare them"
            worse = "above" if metrics_table.lower_is_better(self.metric) else "below"
            allowed = _num(self.allowed)
            if self.relative is not None:
                allowed += f" ({self.relative * 100:g}% of the baseline)"
            return (f"{where} is {shown}, {worse} the baseline {_num(self.baseline)} by "
                    f"{_num(abs(self.compared - self.baseline))}: more than the allowed {allowed}, "
                    f"over by {_num(self.excess)}")
        if self.value != self.value:
            return f"{where} is n/a: cannot check it against the threshold {_num(self.threshold)}"
        return f"{where} is {shown}, {self.kind} the threshold {_num(self.threshold)} by {_num(self.excess)}"


@dataclass
class GateReport:
    gate_on: str
    baseline: str | None
    checks: list[Check]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def passed(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "gate_on": self.gate_on, "baseline": self.baseline,
                "checked": len(self.checks), "failed": [c.to_json() for c in self.failed],
                "checks": [c.to_json() for c in self.checks]}


@dataclass
class Baseline:
    """What an earlier `calib evaluate --json` (or `--save-baseline`) wrote."""

    path: str
    field_col: str | None
    calbin_window: int | None
    metrics: dict[str, dict[str, float | None]]  # result name -> metric -> value
    settings: dict[str, Any] | None = None  # the GATED_SETTINGS it was computed with (None: defaults)
    columns: dict[str, list[str] | None] | None = None  # result name -> the input columns it read (schema 4)

    def setting(self, key: str) -> Any:
        """The baseline's value of a gated setting; a report that did not record it used the
        default of its time (`GATED_SETTINGS`)."""
        if key == "field_col":
            return self.field_col
        if key == "calbin_window":
            return SETTING_DEFAULTS[key] if self.calbin_window is None else self.calbin_window
        value = (self.settings or {}).get(key)
        return SETTING_DEFAULTS[key] if value is None else value


@dataclass(frozen=True)
class GatedSetting:
    """An option that changes some metrics' values: a baseline must have used the same."""

    option: str
    metrics: frozenset[str]  # the metrics whose value it changes
    default: Any  # its value in reports that did not record it


_ALL = frozenset(metrics_table.ALL_METRICS)
_SEGMENTED = frozenset(SEGMENT + TOP_LABEL_SEGMENT)  # the multicalibration error's keys (--segment-col)
_BINNED = frozenset({"ece", "mce", "top_label_ece", "top_label_mce", "classwise_ece"})
# --step keeps log-loss, Brier, ECE/MCE (equal-width bins), Spiegelhalter and the field
# metrics exact (state.py); only these move with it.
STEP_METRICS = frozenset({"auc", "calbin", "cal_slope", "cal_intercept", "brier_mcb", "brier_dsc", "log_loss_mcb",
                          "log_loss_dsc", "corp_p", "smece", "ece_debiased", "hl_stat", "hl_p", "ks", "ks_p",
                          "kuiper", "kuiper_p"})
GATED_SETTINGS: dict[str, GatedSetting] = {
    "field_col": GatedSetting("--field-col", frozenset({"field_ece", "field_rce"}), None),
    "calbin_window": GatedSetting("--calbin-window", frozenset({"calbin"}), metrics_table.CALBIN_WINDOW),
    "ece_bins": GatedSetting("--ece-bins", _BINNED | {"ece_debiased"}, metrics_table.ECE_BINS),
    "hl_groups": GatedSetting("--hl-groups", frozenset({"hl_stat", "hl_p"}), 10),
    "ece_strategy": GatedSetting("--ece-strategy", _BINNED, "uniform"),
    "weight_col": GatedSetting("--weight-col", _ALL, None),
    "step": GatedSetting("--step", STEP_METRICS, None),
    "label_col": GatedSetting("--label-col", _ALL, "label"),
    "score_col": GatedSetting("--score-col", _ALL, "score"),  # only where maps are evaluated
    "segment_cols": GatedSetting("--segment-col", _SEGMENTED, None),
    "segment_bins": GatedSetting("--segment-bins", _SEGMENTED, segment_options.BINS),
    "segment_top": GatedSetting("--segment-top", _SEGMENTED, segment_options.TOP),
    "segment_depth": GatedSetting("--segment-depth", _SEGMENTED, segment_options.DEPTH),
    "segment_min_rows": GatedSetting("--segment-min-rows", _SEGMENTED, segment_options.MIN_ROWS),
    "segment_max": GatedSetting("--segment-max", _SEGMENTED, segment_options.MAX_SEGMENTS),
}
SETTING_DEFAULTS = {k: g.default for k, g in GATED_SETTINGS.items()}


def count_json(v: float | None) -> int | float | None:
    """A row count for JSON: an int when whole (a weight sum may not be), null when n/a."""
    if v is None or v != v:
        return None
    return int(v) if float(v).is_integer() else float(v)


def _num(v: float | None) -> str:
    return "n/a" if v is None or v != v else f"{v:.4g}"


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v


def infinite_keys(values: dict[str, Any]) -> list[str]:
    """The keys whose value is +inf (JSON has no infinity: they are written null and listed)."""
    return [k for k, v in values.items() if isinstance(v, float) and v == math.inf]


def _finite_json(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with every infinite number written null and its key listed under "infinite"
    (+inf only: a metric is never -inf; -inf would be written null, unlisted)."""
    out = {k: None if isinstance(v, float) and v in (math.inf, -math.inf) else v for k, v in obj.items()}
    out["infinite"] = infinite_keys(obj)
    return out
