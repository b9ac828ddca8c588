"""The evaluation JSON report: its writer (`Evaluation.to_json`, `save_evaluation`) and its
reader (`load_baseline`, for `--baseline`), side by side so the schema lives in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from calibcli import io, strictjson
from calibcli.io import targets
from calibcli.errors import InputError, UsageError
from calibcli.evaluation import metrics as metrics_table
from calibcli.evaluation.bootstrap import BootstrapPlan
from calibcli.evaluation.gates import GateReport

if TYPE_CHECKING:
    from calibcli.evaluation.gates import GateSpec

EVALUATION_FORMAT = "calibcli.evaluation"
SCHEMA_VERSION = 2


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


@dataclass
class Evaluation:
    input: str
    rows: int
    positives: int
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

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report (`calib evaluate --json`, `--save-baseline`); NaN becomes null.

        Schema (version 2; version 1 had only the keys marked *):

        - `format`: "calibcli.evaluation"; `schema_version`: 2; `calibcli_version`
        - `input`*, `rows`*, `positives`*, `field_col`*, `calbin_window`*
        - `results`*: one object per --prob-col and --map, in order: `name`*, `kind`*
          ("column" or "map"), `metrics`* (snake_case keys of `metrics.METRICS`, null when
          n/a), `intervals` ({metric: [low, high]} with --bootstrap, else null), `by_field`
          (with --by-field: `fields`, `top`, `by_bias` and `by_relative_bias` lists of
          {field, rows, positives, mean_p, positive_rate, bias, relative_bias}, else null),
          `histogram` (with --plot: rows with p in each of 20 equal-width bins, else null),
          `reliability` (with --plot: equal-mass bins {rows, mean_p, positive_rate, p_min,
          p_max}, else null), `step_bounds` (with --step: per metric, the largest possible
          distance from its exact value: 0 where it is exact, null where it is n/a; else null)
        - `weight_col`, `step`: the --weight-col and --step options (null when not given)
        - `ece_bins`, `ece_strategy`: the bins of ECE and MCE (--ece-bins, --ece-strategy)
        - `label_col`; `score_col` (the column the maps were applied to; null without --map)
        - `bootstrap`: {replicates, seed, level, method: "percentile", resampling: "poisson"} or null
        - `gate`: {passed, gate_on, baseline (path or null), checked, failed, checks}; each
          check is {result, metric, kind ("above", "below", "regression"), value, compared,
          limit, passed, excess, threshold, baseline, allowed, relative}. With no gate
          options `passed` is true and `checks` is empty.

        Keys are only ever added within a schema version; a removal or change of meaning
        bumps it. `--baseline` reads versions 1 and 2.
        """
        from calibcli import __version__

        def clean(v: float) -> float | None:
            return None if v != v else v

        def result(r: EvalRow) -> dict[str, Any]:
            return {
                "name": r.name, "kind": r.kind,
                "metrics": {k: clean(v) for k, v in r.metrics.items()},
                "intervals": None if r.intervals is None else
                {k: [clean(lo), clean(hi)] for k, (lo, hi) in r.intervals.items()},
                "by_field": r.by_field,
                "reliability": r.reliability,
                "step_bounds": None if r.step_bounds is None else
                {k: None if v is None else clean(v) for k, v in r.step_bounds.items()},
                "histogram": r.histogram,
            }

        gate = self.gate or GateReport("point", None, [])
        return {
            "format": EVALUATION_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "calibcli_version": __version__,
            "input": self.input,
            "rows": self.rows,
            "positives": self.positives,
            "field_col": self.field_col,
            "calbin_window": self.calbin_window,
            "weight_col": self.weight_col,
            "step": self.step,
            "ece_bins": self.ece_bins,
            "ece_strategy": self.ece_strategy,
            "label_col": self.label_col,
            "score_col": self.score_col,
            "results": [result(r) for r in self.results],
            "bootstrap": self.bootstrap.to_json() if self.bootstrap else None,
            "gate": gate.to_json(),
        }

    def to_json_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n").encode()


def save_evaluation(evaluation: Evaluation, path: str) -> None:
    """Write the JSON report where a later `--baseline` can read it (atomically)."""
    targets.write_bytes_atomic(path, evaluation.to_json_bytes())


@dataclass
class Baseline:
    """What an earlier `calib evaluate --json` (or `--save-baseline`) wrote."""

    path: str
    field_col: str | None
    calbin_window: int | None
    metrics: dict[str, dict[str, float | None]]  # result name -> metric -> value
    settings: dict[str, Any] | None = None  # the GATED_SETTINGS it was computed with (None: defaults)

    def setting(self, key: str) -> Any:
        """The baseline's value of a gated setting; a report that did not record it used the
        default of its time (`GATED_SETTINGS`)."""
        if key == "field_col":
            return self.field_col
        if key == "calbin_window":
            return _DEFAULTS[key] if self.calbin_window is None else self.calbin_window
        value = (self.settings or {}).get(key)
        return _DEFAULTS[key] if value is None else value


@dataclass(frozen=True)
class GatedSetting:
    """An option that changes some metrics' values: a baseline must have used the same."""

    option: str
    metrics: frozenset[str]  # the metrics whose value it changes
    default: Any  # its value in reports that did not record it


_ALL = frozenset(metrics_table.METRICS)
# --step keeps log-loss, Brier, ECE/MCE (equal-width bins), Spiegelhalter and the field
# metrics exact (state.py); only these move with it.
STEP_METRICS = frozenset({"auc", "calbin", "cal_slope", "cal_intercept"})
GATED_SETTINGS: dict[str, GatedSetting] = {
    "field_col": GatedSetting("--field-col", frozenset({"field_ece", "field_rce"}), None),
    "calbin_window": GatedSetting("--calbin-window", frozenset({"calbin"}), metrics_table.CALBIN_WINDOW),
    "ece_bins": GatedSetting("--ece-bins", frozenset({"ece", "mce"}), metrics_table.ECE_BINS),
    "ece_strategy": GatedSetting("--ece-strategy", frozenset({"ece", "mce"}), "uniform"),
    "weight_col": GatedSetting("--weight-col", _ALL, None),
    "step": GatedSetting("--step", STEP_METRICS, None),
    "label_col": GatedSetting("--label-col", _ALL, "label"),
    "score_col": GatedSetting("--score-col", _ALL, "score"),  # only where maps are evaluated
}
_DEFAULTS = {k: g.default for k, g in GATED_SETTINGS.items()}


BASELINE_LIMITS = strictjson.Limits(max_bytes=256 << 20)
MAX_RESULTS = 100_000  # results (columns and maps) a baseline may hold


def load_baseline(path: str) -> Baseline:
    """Read a baseline file strictly; a missing, corrupt, crafted or newer file is an InputError.

    The text goes through `strictjson` (no NaN/Infinity, overflowing numbers or duplicate
    keys), and the documented types are required (see `Evaluation.to_json`): result names
    are distinct strings, every metric is a finite number or null, `field_col` a string or
    null, `calbin_window` a positive integer or null. A NaN or infinite baseline metric would
    otherwise make every --max-regression check pass.
    """
    raw = io.read_bytes(path, "baseline file", limit=BASELINE_LIMITS.max_bytes)

    def bad(problem: str) -> InputError:
        return InputError(f"{path}: {problem}",
                          hint="write it with `calib evaluate ... --json` or --save-baseline")

    try:
        doc = strictjson.loads(raw, BASELINE_LIMITS)
    except strictjson.StrictJSONError as exc:
        raise bad(f"baseline is not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise bad("not a `calib evaluate --json` report (no 'results' list)")
    if doc.get("format", EVALUATION_FORMAT) != EVALUATION_FORMAT:
        raise bad(f"baseline 'format' is {doc['format']!r:.40}, not {EVALUATION_FORMAT!r}")
    version = doc.get("schema_version")
    if not _is_int(version) or version < 1:
        raise bad(f"baseline has no valid schema_version (got {version!r:.40})")
    if version > SCHEMA_VERSION:
        raise InputError(f"{path}: baseline schema version {version} is newer than this calibcli "
                         f"reads (up to {SCHEMA_VERSION})", hint="upgrade calibcli")
    field_col, window = doc.get("field_col"), doc.get("calbin_window")
    if field_col is not None and not isinstance(field_col, str):
        raise bad(f"baseline 'field_col' is {field_col!r:.40}, not a column name or null")
    if window is not None and (not _is_int(window) or window < 1):
        raise bad(f"baseline 'calbin_window' is {window!r:.40}, not a positive integer or null")
    settings = {}
    for key, valid, what in _SETTING_TYPES:
        value = doc.get(key)
        if value is not None and not valid(value):
            raise bad(f"baseline {key!r} is {value!r:.40}, not {what} or null")
        settings[key] = value
    if len(doc["results"]) > MAX_RESULTS:
        raise bad(f"baseline has {len(doc['results'])} results, more than {MAX_RESULTS}")
    results: dict[str, dict[str, float | None]] = {}
    for i, entry in enumerate(doc["results"]):
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
                or not isinstance(entry.get("metrics"), dict)):
            raise bad(f"results[{i}] has no name or metrics")
        name = entry["name"]
        if name in results:
            raise bad(f"results[{i}]: the name {name!r:.60} appears twice")
        if entry.get("kind", "column") not in ("column", "map"):
            raise bad(f"results[{i}] kind is {entry['kind']!r:.40}, not 'column' or 'map'")
        values = {}
        for key, value in entry["metrics"].items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise bad(f"results[{i}] metric {key!r:.40} is {value!r:.40}, not a number")
            values[key] = None if value is None else float(value)  # strictjson: always finite
        results[name] = values
    return Baseline(path, field_col, window, results, settings)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_SETTING_TYPES = (
    ("ece_bins", lambda v: _is_int(v) and v >= 1, "a positive integer"),
    ("ece_strategy", lambda v: v in metrics_table.ECE_STRATEGIES, "'uniform' or 'quantile'"),
    ("weight_col", lambda v: isinstance(v, str), "a column name"),
    ("step", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0, "a positive number"),
    ("label_col", lambda v: isinstance(v, str), "a column name"),
    ("score_col", lambda v: isinstance(v, str), "a column name"),
)


def _described(option: str, value: Any) -> str:
    if value is None:
        return f"no {option}"
    return f"{option} {value!r}" if isinstance(value, str) else f"{option} {value}"


def check_baseline(baseline: Baseline, names: Sequence[str], field_col: str | None,
                   calbin_window: int, spec: GateSpec, **settings: Any) -> None:
    """Refuse a baseline that was computed on other columns, maps or settings (exit 2).

    `settings` are this run's other GATED_SETTINGS (ece_bins, ece_strategy, weight_col,
    step, label_col, score_col; a setting not given is its default; `score_col` None: no
    map is evaluated, so the score column changes nothing). A setting must match the baseline's when a
    --max-regression gate is on a metric it changes; the refusal names the setting and
    both values. The baseline's point values are what is compared (with --gate-on upper,
    this run's interval against them), so its --bootstrap settings do not enter.
    """
    if set(baseline.metrics) != set(names):
        raise UsageError(
            f"{baseline.path}: baseline is for {', '.join(map(repr, baseline.metrics)) or 'nothing'}, "
            f"this run evaluates {', '.join(map(repr, names))}",
            hint="evaluate the same --prob-col/--map as the baseline, or save a new one with --save-baseline")
    regressed = {lim.metric for lim in spec.max_regression}
    unknown = set(settings) - set(GATED_SETTINGS)
    if unknown:
        raise TypeError(f"check_baseline: unknown settings {sorted(unknown)}")
    ours = {**_DEFAULTS, **{k: v for k, v in settings.items() if v is not None},
            "field_col": field_col, "calbin_window": calbin_window}
    for key, gated in GATED_SETTINGS.items():
        if key == "score_col" and settings.get("score_col") is None:
            continue
        changed = sorted(regressed & gated.metrics)
        theirs, mine = baseline.setting(key), ours[key]
        if changed and theirs != mine:
            shown = ", ".join(metrics_table.METRICS[m][0] for m in changed)
            raise UsageError(f"{baseline.path}: baseline was computed with {_described(gated.option, theirs)}, "
                             f"this run uses {_described(gated.option, mine)}: its {shown} cannot be compared")
    for name in names:
        for metric in sorted(regressed):
            if metric not in baseline.metrics[name]:
                raise UsageError(f"{baseline.path}: baseline has no {metric} for {name!r}")
