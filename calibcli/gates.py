"""Gates for `calib evaluate` in CI: thresholds, baseline comparison, bootstrap intervals.

Pure library code: functions parse options, load a baseline, compute confidence intervals
and decide gates; they return data or raise `UsageError`/`InputError` (exit 2). The CLI
prints the results and exits 1 when a gate failed.

Gates
-----
- `--fail-above METRIC=X`: fails when the metric is above X (for any metric).
- `--fail-below METRIC=X`: fails when the metric is below X.
- `--max-regression METRIC=D` with `--baseline FILE`: fails when the metric is worse than
  the baseline's value by more than D (absolute) or by more than D% of the baseline value
  (`=5%`). "Worse" follows the metric's direction (`metrics.METRICS`): higher for log-loss,
  Brier, ECE, CalBin, Field-ECE, Field-RCE; lower for AUC.
- Every gate applies to every evaluated column and map. A metric that is n/a (AUC with a
  single class) fails its gate rather than passing silently.
- `--gate-on point` (default) compares the metric itself. `--gate-on upper` (needs
  `--bootstrap N`) lets the limit stretch up to the noise: a gate fails only when the
  whole confidence interval is past it, i.e. it compares the end of the interval nearest
  to passing (the lower end for `--fail-above` and for a lower-is-better regression, the
  upper end for `--fail-below` and for an AUC regression).

Bootstrap
---------
`bootstrap_intervals` resamples rows with replacement (seeded, the same resamples for every
column and map, so they are compared on the same draws) and reports percentile intervals.
A resample is represented by per-row counts w (a multinomial draw, `bincount` of n random
row indices), never by a copy of the data: log-loss and Brier are dot products with w, ECE
and the field metrics weighted `bincount`s, AUC a weighted Mann-Whitney count over the
tie groups of the one sort done up front. Only CalBin materialises rows, because its windows
are s consecutive resampled rows: `np.repeat` of the already sorted arrays, O(n), no sort.
Cost: O(n) per replicate for every metric but CalBin (one binary search per window, as in
`metrics.calbin`); memory a few n-length arrays. Measured on a shared, loaded 2-core
machine: 0.7-1.1 s per replicate at n = 1e6 (1.5x faster than copying the resample and
evaluating it), 6 ms at 1e4; so `--bootstrap 200` at 1e6 rows takes minutes per column.
The sort is done once per column (`benchmarks/bench_evaluate.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from calibcli import io, metrics, strictjson
from calibcli.errors import InputError, UsageError

GATE_ON = ("point", "upper")
CONFIDENCE = 0.95
EVALUATION_FORMAT = "calibcli.evaluation"
SCHEMA_VERSION = 2


def metric_names() -> str:
    """The metric names as typed on the command line, for hints."""
    return ", ".join(k.replace("_", "-") for k in metrics.METRICS)


def metric_key(name: str, flag: str) -> str:
    """The snake_case key of a metric typed as `field-rce`, `field_rce` or `Field-RCE`."""
    key = name.strip().lower().replace("-", "_")
    if key not in metrics.METRICS:
        raise UsageError(f"{flag}: unknown metric {name.strip()!r}", hint=f"metrics: {metric_names()}")
    return key


def lower_is_better(metric: str) -> bool:
    return metrics.METRICS[metric][1] == "lower"


@dataclass(frozen=True)
class Limit:
    """One `METRIC=VALUE` option: a threshold, or an allowed regression (`relative`: a fraction)."""

    metric: str
    value: float
    relative: bool = False


def parse_limits(specs: Sequence[str], flag: str, allow_percent: bool = False) -> list[Limit]:
    """Parse `METRIC=VALUE` options (`VALUE%` too when `allow_percent`); one per metric."""
    out: dict[str, Limit] = {}
    example = "field-rce=5%" if allow_percent else "field-rce=0.12"
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise UsageError(f"{flag} {spec!r} is not METRIC=VALUE", hint=f"e.g. {flag} {example}")
        key = metric_key(name, flag)
        text = text.strip()
        relative = allow_percent and text.endswith("%")
        try:
            value = float(text[:-1] if relative else text)
        except ValueError:
            raise UsageError(f"{flag} {spec!r}: {text!r} is not a number",
                             hint=f"e.g. {flag} {example}") from None
        if not math.isfinite(value):
            raise UsageError(f"{flag} {spec!r}: the value must be finite")
        if allow_percent and value < 0:
            raise UsageError(f"{flag} {spec!r}: an allowed regression cannot be negative")
        if key in out:
            raise UsageError(f"{flag} is given twice for {key.replace('_', '-')}")
        out[key] = Limit(key, value / 100 if relative else value, relative)
    return list(out.values())


@dataclass
class GateSpec:
    """Every gate option of one `calib evaluate` run."""

    fail_above: list[Limit] = field(default_factory=list)
    fail_below: list[Limit] = field(default_factory=list)
    max_regression: list[Limit] = field(default_factory=list)
    baseline: str | None = None
    gate_on: str = "point"

    @classmethod
    def from_options(cls, fail_above: Sequence[str], fail_below: Sequence[str],
                     max_regression: Sequence[str], baseline: str | None, gate_on: str,
                     bootstrap: int) -> "GateSpec":
        """Parse and cross-check the CLI options; raises UsageError on any inconsistency."""
        if gate_on not in GATE_ON:
            raise UsageError(f"--gate-on {gate_on!r}: expected one of {', '.join(GATE_ON)}")
        if gate_on == "upper" and bootstrap <= 0:
            raise UsageError("--gate-on upper needs confidence intervals",
                             hint="add --bootstrap 200 (or more)")
        if max_regression and baseline is None:
            raise UsageError("--max-regression needs --baseline FILE",
                             hint="write one with `calib evaluate ... --save-baseline FILE`")
        spec = cls(parse_limits(fail_above, "--fail-above"), parse_limits(fail_below, "--fail-below"),
                   parse_limits(max_regression, "--max-regression", allow_percent=True),
                   baseline, gate_on)
        if baseline is not None and not spec.max_regression:
            raise UsageError("--baseline needs --max-regression METRIC=VALUE",
                             hint="e.g. --max-regression field-rce=0.01 or --max-regression log-loss=5%")
        return spec

    @property
    def active(self) -> bool:
        return bool(self.fail_above or self.fail_below or self.max_regression)

    def metrics_used(self) -> set[str]:
        return {lim.metric for lim in (*self.fail_above, *self.fail_below, *self.max_regression)}


# ---------------------------------------------------------------------------- baselines


@dataclass
class Baseline:
    """What an earlier `calib evaluate --json` (or `--save-baseline`) wrote."""

    path: str
    field_col: str | None
    calbin_window: int | None
    metrics: dict[str, dict[str, float | None]]  # result name -> metric -> value


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
    raw = io.read_bytes(path, "baseline")

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
    return Baseline(path, field_col, window, results)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_baseline(baseline: Baseline, names: Sequence[str], field_col: str | None,
                   calbin_window: int, spec: GateSpec) -> None:
    """Refuse a baseline that was computed on other columns, maps or settings (exit 2)."""
    if set(baseline.metrics) != set(names):
        raise UsageError(
            f"{baseline.path}: baseline is for {', '.join(map(repr, baseline.metrics)) or 'nothing'}, "
            f"this run evaluates {', '.join(map(repr, names))}",
            hint="evaluate the same --prob-col/--map as the baseline, or save a new one with --save-baseline")
    regressed = {lim.metric for lim in spec.max_regression}
    if regressed & {"field_ece", "field_rce"} and baseline.field_col != field_col:
        raise UsageError(f"{baseline.path}: baseline field metrics are for --field-col "
                         f"{baseline.field_col!r}, this run uses {field_col!r}")
    if "calbin" in regressed and baseline.calbin_window not in (None, calbin_window):
        raise UsageError(f"{baseline.path}: baseline CalBin used --calbin-window "
                         f"{baseline.calbin_window}, this run uses {calbin_window}")
    for name in names:
        for metric in sorted(regressed):
            if metric not in baseline.metrics[name]:
                raise UsageError(f"{baseline.path}: baseline has no {metric} for {name!r}")


# ---------------------------------------------------------------------------- decisions


def require_field_col(spec: GateSpec, field_col: str | None) -> None:
    """Gates on Field-ECE/RCE need --field-col: say so before any data is read."""
    missing = {"field_ece", "field_rce"} & spec.metrics_used()
    if missing and field_col is None:
        names = ", ".join(sorted(m.replace("_", "-") for m in missing))
        raise UsageError(f"a gate on {names} needs --field-col")


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
        return {k: _clean(v) for k, v in self.__dict__.items()}

    def describe(self) -> str:
        """One line for stderr: which metric, for what, its value, the limit and by how much."""
        where = f"{metrics.METRICS[self.metric][0]} of {self.result!r}"
        shown = _num(self.value)
        if self.compared == self.compared and self.compared != self.value:
            shown += f" (confidence interval end {_num(self.compared)})"
        if self.kind == "regression":
            if self.value != self.value or self.baseline is None:
                return f"{where} is {shown} and the baseline {_num(self.baseline)}: cannot compare them"
            worse = "above" if lower_is_better(self.metric) else "below"
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


def _interval_end(intervals: Mapping[str, tuple[float, float]] | None, metric: str,
                  value: float, favourable_low: bool, gate_on: str) -> float:
    if gate_on == "point" or intervals is None or metric not in intervals:
        return value
    lo, hi = intervals[metric]
    return lo if favourable_low else hi


def decide(spec: GateSpec, results: Sequence[tuple[str, Mapping[str, float], Mapping | None]],
           baseline: Baseline | None = None, field_col: str | None = None) -> GateReport:
    """Apply every gate to every (name, metrics, intervals) result."""
    require_field_col(spec, field_col)
    checks: list[Check] = []
    for name, values, intervals in results:
        for lim in spec.fail_above:
            v = values[lim.metric]
            c = _interval_end(intervals, lim.metric, v, True, spec.gate_on)
            checks.append(_check(name, lim.metric, "above", v, c, lim.value, c - lim.value, threshold=lim.value))
        for lim in spec.fail_below:
            v = values[lim.metric]
            c = _interval_end(intervals, lim.metric, v, False, spec.gate_on)
            checks.append(_check(name, lim.metric, "below", v, c, lim.value, lim.value - c, threshold=lim.value))
        for lim in spec.max_regression:
            assert baseline is not None
            v = values[lim.metric]
            base = baseline.metrics[name].get(lim.metric)
            low = lower_is_better(lim.metric)
            c = _interval_end(intervals, lim.metric, v, low, spec.gate_on)
            rel = lim.value if lim.relative else None
            if base is None:
                checks.append(Check(name, lim.metric, "regression", v, c, math.nan, False, math.nan,
                                    relative=rel))
                continue
            allowed = lim.value * abs(base) if lim.relative else lim.value
            limit = base + allowed if low else base - allowed
            checks.append(_check(name, lim.metric, "regression", v, c, limit,
                                 c - limit if low else limit - c, baseline=base,
                                 allowed=allowed, relative=rel))
    return GateReport(spec.gate_on, baseline.path if baseline else None, checks)


def _check(name: str, metric: str, kind: str, value: float, compared: float, limit: float,
           excess: float, **extra: Any) -> Check:
    if value != value or compared != compared or limit != limit:  # n/a never passes a gate
        return Check(name, metric, kind, value, compared, limit, False, math.nan, **extra)
    failed = excess > 0
    return Check(name, metric, kind, value, compared, limit, not failed, excess if failed else 0.0, **extra)


def _num(v: float | None) -> str:
    return "n/a" if v is None or v != v else f"{v:.4g}"


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v


# ---------------------------------------------------------------------------- bootstrap


@dataclass
class BootstrapPlan:
    """How many resamples, with which seed, for which interval level."""

    replicates: int
    seed: int
    level: float = CONFIDENCE

    def to_json(self) -> dict[str, Any]:
        return {"replicates": self.replicates, "seed": self.seed, "level": self.level,
                "method": "percentile"}


def bootstrap_replicates(y: np.ndarray, p: np.ndarray, groups: np.ndarray | None,
                         calbin_window: int, plan: BootstrapPlan) -> dict[str, np.ndarray]:
    """Every metric on `plan.replicates` row resamples (one array per metric).

    The same seed gives the same resamples for every column of the same length.
    """
    n = y.size
    rng = np.random.default_rng(plan.seed)
    order = np.argsort(p)
    ps = p[order]
    ys = y[order].astype(np.float64)
    tie = metrics.tie_groups(ps)
    n_ties = int(tie[-1]) + 1
    q = np.clip(ps, metrics.LOG_LOSS_EPS, 1 - metrics.LOG_LOSS_EPS)
    row_ll = -np.where(ys == 1, np.log(q), np.log1p(-q))
    row_sq = (ps - ys) ** 2
    ece_bin = np.minimum((ps * metrics.ECE_BINS).astype(np.int64), metrics.ECE_BINS - 1)
    gap = ps - ys
    gs = groups[order] if groups is not None else None
    n_groups = int(groups.max()) + 1 if groups is not None else 0
    keys = [k for k in metrics.METRICS if groups is not None or not k.startswith("field_")]
    out = {k: np.empty(plan.replicates) for k in keys}
    for b in range(plan.replicates):
        w = np.bincount(rng.integers(0, n, n), minlength=n)[order].astype(np.float64)
        out["log_loss"][b] = w @ row_ll / n
        out["brier"][b] = w @ row_sq / n
        out["ece"][b] = np.abs(np.bincount(ece_bin, weights=w * gap, minlength=metrics.ECE_BINS)).sum() / n
        if n_ties == n:  # no tied p: each row is its own tie group
            cnt, pos = w, w * ys
        else:
            cnt = np.bincount(tie, weights=w, minlength=n_ties)
            pos = np.bincount(tie, weights=w * ys, minlength=n_ties)
        neg = cnt - pos
        out["auc"][b] = metrics.auc_from_ties(pos, neg)
        wi = w.astype(np.int64)
        pooled = np.divide(pos, cnt, out=np.zeros_like(pos), where=cnt > 0)
        out["calbin"][b] = metrics.calbin_sorted(np.repeat(ps, wi), np.repeat(pooled[tie], wi), calbin_window)
        if gs is not None:
            fc = np.bincount(gs, weights=w, minlength=n_groups)
            resid = np.bincount(gs, weights=-w * gap, minlength=n_groups)
            fpos = np.bincount(gs, weights=w * ys, minlength=n_groups)
            out["field_ece"][b] = np.abs(resid).sum() / n
            keep = fc > 0
            out["field_rce"][b] = (fc[keep] * np.abs(resid[keep])
                                   / (fpos[keep] + metrics.FIELD_RCE_EPS * fc[keep])).sum() / n
    return out


def percentile_intervals(replicates: Mapping[str, np.ndarray], level: float = CONFIDENCE
                         ) -> dict[str, tuple[float, float]]:
    """Percentile interval of each metric; n/a replicates (AUC with one class) are left out."""
    tail = (1 - level) / 2 * 100
    out = {}
    for key, values in replicates.items():
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            out[key] = (math.nan, math.nan)
        else:
            lo, hi = np.percentile(finite, [tail, 100 - tail])
            out[key] = (float(lo), float(hi))
    return out


def bootstrap_intervals(y: np.ndarray, p: np.ndarray, groups: np.ndarray | None,
                        calbin_window: int, plan: BootstrapPlan) -> dict[str, tuple[float, float]]:
    """Seeded percentile confidence intervals of every metric of one probability column."""
    return percentile_intervals(bootstrap_replicates(y, p, groups, calbin_window, plan), plan.level)
