"""Gates for `calib evaluate` in CI: thresholds and baseline comparison.

Pure library code: functions parse options and decide gates; they return data or raise
`UsageError` (exit 2). The baseline file is read in `evaluation.baseline` and matched to
this run by `check_baseline`; intervals come from `evaluation.bootstrap`; the result types
live in `evaluation.results`. The CLI prints the results and exits 1 when a gate failed.

Gates
-----
- `--fail-above METRIC=X`: fails when the metric is above X (for any metric).
- `--fail-below METRIC=X`: fails when the metric is below X.
- `--max-regression METRIC=D` with `--baseline FILE`: fails when the metric is worse than
  the baseline's value by more than D (absolute) or by more than D% of the baseline value
  (`=5%`). "Worse" follows the metric's direction (`metrics.METRICS`): higher for log-loss,
  Brier, ECE, CalBin, Field-ECE, Field-RCE; lower for AUC.
- A gate applies to every evaluated column and map, or, written `COLUMN:METRIC=VALUE`, to
  the one it names (`requests.gates.split_gate`), which then takes that gate instead of a
  gate of the same option and metric without a column. A metric that is n/a (AUC with a
  single class) fails its gate rather than passing silently.
- `--gate-on point` (default) compares the metric itself. With `--bootstrap N`, `--gate-on
  worst` compares the end of the confidence interval worst for the gate: the upper end for
  `--fail-above` and for a regression of a lower-is-better metric (log-loss, ECE), the lower
  end for `--fail-below` and for a regression of a higher-is-better one (AUC): a gate passes
  only when the whole interval is on its passing side. `--gate-on best` compares the other
  end: a gate fails only when the whole interval is past it, so differences inside the noise
  pass. `upper` is the deprecated name of `worst`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import binary as metrics
from calibcli.requests.gates import GateSpec, Limit, parse_limits, refuse_targets, require_field_col  # noqa: F401
from calibcli.requests.metrics import lower_is_better, metric_key, metric_names  # noqa: F401
from calibcli.evaluation.results import SETTING_DEFAULTS, GATED_SETTINGS, Baseline, Check, GateReport

def _interval_end(intervals: Mapping[str, tuple[float, float]] | None, metric: str,
                  value: float, worst_high: bool, gate_on: str) -> float:
    """What a gate compares: the point, or (`worst`, `best`) an end of the metric's interval;
    `worst_high`: whether the upper end is the one worst for the gate."""
    if gate_on == "point" or intervals is None or metric not in intervals:
        return value
    lo, hi = intervals[metric]
    return hi if worst_high == (gate_on == "worst") else lo


def decide(spec: GateSpec, results: Sequence[tuple[str, Mapping[str, float], Mapping | None]],
           baseline: Baseline | None = None) -> GateReport:
    """Apply each gate to the (name, metrics, intervals) results it applies to (`Limit.applies_to`;
    a spec checked against the other options when its `EvaluateOptions` was built)."""
    checks: list[Check] = []
    for name, values, intervals in results:
        for lim in spec.fail_above:
            if not lim.applies_to(name, spec.fail_above):
                continue
            v = values[lim.metric]
            c = _interval_end(intervals, lim.metric, v, True, spec.gate_on)
            checks.append(_check(name, lim.metric, "above", v, c, lim.value, c - lim.value, threshold=lim.value))
        for lim in spec.fail_below:
            if not lim.applies_to(name, spec.fail_below):
                continue
            v = values[lim.metric]
            c = _interval_end(intervals, lim.metric, v, False, spec.gate_on)
            checks.append(_check(name, lim.metric, "below", v, c, lim.value, lim.value - c, threshold=lim.value))
        for lim in spec.max_regression:
            if not lim.applies_to(name, spec.max_regression):
                continue
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


def _described(option: str, value: Any) -> str:
    if value is None:
        return f"no {option}"
    if isinstance(value, (list, tuple)):  # --segment-col, repeated
        return " ".join(f"{option} {v!r}" for v in value)
    return f"{option} {value!r}" if isinstance(value, str) else f"{option} {value}"


def check_baseline(baseline: Baseline, names: Sequence[str] | None, field_col: str | None,
                   calbin_window: int, spec: GateSpec, **settings: Any) -> None:
    """Refuse a baseline that was computed on other columns, maps or settings (exit 2); `names`
    None leaves the columns and maps to `match_baseline`, once the input's columns are known.

    `settings` are this run's other GATED_SETTINGS (ece_bins, ece_strategy, weight_col,
    step, label_col, score_col; a setting not given is its default; `score_col` None: no
    map is evaluated, so the score column changes nothing). A setting must match the baseline's when a
    --max-regression gate is on a metric it changes; the refusal names the setting and
    both values. The baseline's point values are what is compared (with --gate-on upper,
    this run's interval against them), so its --bootstrap settings do not enter.
    """
    if names is not None and set(baseline.metrics) != set(names):
        raise UsageError(
            f"{baseline.path}: baseline is for {', '.join(map(repr, baseline.metrics)) or 'nothing'}, "
            f"this run evaluates {', '.join(map(repr, names))}",
            hint="evaluate the same --prob-col/--map as the baseline, or save a new one with --save-baseline")
    regressed = {lim.metric for lim in spec.max_regression}
    unknown = set(settings) - set(GATED_SETTINGS)
    if unknown:
        raise TypeError(f"check_baseline: unknown settings {sorted(unknown)}")
    ours = {**SETTING_DEFAULTS, **{k: v for k, v in settings.items() if v is not None},
            "field_col": field_col, "calbin_window": calbin_window}
    for key, gated in GATED_SETTINGS.items():
        if key == "score_col" and settings.get("score_col") is None:
            continue
        changed = sorted(regressed & gated.metrics)
        theirs, mine = baseline.setting(key), ours[key]
        if changed and theirs != mine:
            shown = ", ".join(metrics.ALL_METRICS[m][0] for m in changed)
            raise UsageError(f"{baseline.path}: baseline was computed with {_described(gated.option, theirs)}, "
                             f"this run uses {_described(gated.option, mine)}: its {shown} cannot be compared")
    for name in names or ():
        _require_metrics(baseline, name, regressed)


def _require_metrics(baseline: Baseline, name: str, regressed: set[str]) -> None:
    for metric in sorted(regressed):
        if metric not in baseline.metrics[name]:
            raise UsageError(f"{baseline.path}: baseline has no {metric} for {name!r}")


def match_baseline(baseline: Baseline, predictions: Sequence[tuple[str, Sequence[str] | None]], spec: GateSpec,
                   resolve: Callable[[str], Sequence[str] | None] | None = None) -> Baseline:
    """The baseline with its results under this run's names, matched by name or else by the
    input columns read (`predictions`: (name, resolved columns or None for a map)): a result's
    recorded `columns`, or, for a baseline that did not record them, its name read as this
    run would read it (`resolve`, e.g. a --prob-cols SPEC against this input's schema; None
    when it does not read). So `--prob-cols 'calibrated_*'` and the same columns listed by name
    are one baseline. A baseline for other columns or maps is refused (exit 2)."""
    theirs = {name: baseline.columns.get(name) if baseline.columns else None for name in baseline.metrics}
    for name, cols in theirs.items():
        if cols is None and resolve is not None:
            theirs[name] = resolve(name)
    matched: dict[str, str] = {}
    free = set(baseline.metrics)
    for name, cols in predictions:
        if name in free:
            matched[name] = name
        else:
            same = [b for b in sorted(free) if cols is not None and theirs[b] is not None
                    and list(theirs[b]) == list(cols)]
            if not same:
                continue
            matched[name] = same[0]
        free.discard(matched[name])
    missing = [name for name, _ in predictions if name not in matched]
    if missing or free:
        raise UsageError(
            f"{baseline.path}: baseline is for {', '.join(map(repr, baseline.metrics)) or 'nothing'}, "
            f"this run evaluates {', '.join(repr(n) for n, _ in predictions)}",
            hint="evaluate the same --prob-col/--prob-cols/--map as the baseline (results match by name or by "
                 "the columns read), or save a new one with --save-baseline")
    rekeyed = Baseline(baseline.path, baseline.field_col, baseline.calbin_window,
                       {name: baseline.metrics[b] for name, b in matched.items()}, baseline.settings,
                       {name: theirs[b] for name, b in matched.items()})
    regressed = {lim.metric for lim in spec.max_regression}
    for name in rekeyed.metrics:
        _require_metrics(rekeyed, name, regressed)
    return rekeyed
