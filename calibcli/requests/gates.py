"""The gate options of `calib evaluate` (`--fail-above`, `--fail-below`, `--max-regression`,
`--baseline`, `--gate-on`) as parsed and checked at the door: `GateSpec`. Deciding them on a
report is `calibcli.evaluation.gates`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from calibcli.errors import UsageError
from calibcli.requests.metrics import ALL_METRICS, TARGETS, metric_key


def refuse_targets(limits: Sequence["Limit"]) -> None:
    """A regression needs a direction: metrics best at a target (slope 1, z 0) take thresholds."""
    for lim in limits:
        if ALL_METRICS[lim.metric][1] == "data":
            name = lim.metric.replace("_", "-")
            raise UsageError(f"--max-regression {name}: {name} is a property of the labels, not of the "
                             "probabilities, so it has no better or worse",
                             hint=f"bound it with --fail-above/--fail-below {name}=X instead")
        if ALL_METRICS[lim.metric][1] == "target":
            name = lim.metric.replace("_", "-")
            raise UsageError(f"--max-regression {name}: {name} is best at {TARGETS[lim.metric]:g}, "
                             "neither higher nor lower",
                             hint=f"bound it with --fail-above/--fail-below {name}=X instead")


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
    """Every gate option of one `calib evaluate` run (parsed and checked by `EvaluateOptions.build`)."""

    fail_above: list[Limit] = field(default_factory=list)
    fail_below: list[Limit] = field(default_factory=list)
    max_regression: list[Limit] = field(default_factory=list)
    baseline: str | None = None
    gate_on: str = "point"

    @property
    def active(self) -> bool:
        return bool(self.fail_above or self.fail_below or self.max_regression)

    def metrics_used(self) -> set[str]:
        return {lim.metric for lim in (*self.fail_above, *self.fail_below, *self.max_regression)}


def require_field_col(spec: GateSpec, field_col: str | None) -> None:
    """Gates on Field-ECE/RCE need --field-col: say so before any data is read."""
    missing = {"field_ece", "field_rce"} & spec.metrics_used()
    if missing and field_col is None:
        names = ", ".join(sorted(m.replace("_", "-") for m in missing))
        raise UsageError(f"a gate on {names} needs --field-col")


__all__ = ["GateSpec", "Limit", "parse_limits", "refuse_targets", "require_field_col"]
