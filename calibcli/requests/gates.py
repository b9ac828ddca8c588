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
    """One `[COLUMN:]METRIC=VALUE` option: a threshold, or an allowed regression (`relative`: a
    fraction), for every evaluated column and map (`column` None) or for the one it names."""

    metric: str
    value: float
    relative: bool = False
    column: str | None = None

    def applies_to(self, name: str, limits: Sequence["Limit"]) -> bool:
        """Whether this gate checks result `name`: a gate naming a column checks that one; a gate
        without one checks every result that has no gate of its own on the same metric."""
        if self.column is not None:
            return self.column == name
        return not any(other.column == name and other.metric == self.metric for other in limits)


def split_gate(spec: str, flag: str, columns: Sequence[str] | None = None) -> tuple[str | None, str, str]:
    """(column or None, metric text, value text) of `[COLUMN:]METRIC=VALUE`.

    The rule: the value follows the last `=`; before it, the metric follows the last `:`, and
    what precedes that `:` names an evaluated column or map (`columns`; a name may itself hold
    `:` or `=`). Without a `:` the gate is on every column and map. A name that is not evaluated
    is refused here, with the names that are."""
    name, sep, text = spec.rpartition("=")
    if not sep or not name.strip() or not text.strip():
        return None, "", ""
    column, colon, metric = name.rpartition(":")
    if not colon:
        return None, name, text
    if columns is not None and column not in columns:
        shown = ", ".join(map(repr, columns))
        raise UsageError(f"{flag} {spec!r}: {column!r} is not an evaluated column or map",
                         hint=f"this run evaluates {shown}; {flag} METRIC=VALUE (no COLUMN:) gates every one")
    return column, metric, text


def parse_limits(specs: Sequence[str], flag: str, allow_percent: bool = False,
                 columns: Sequence[str] | None = None) -> list[Limit]:
    """Parse `[COLUMN:]METRIC=VALUE` options (`VALUE%` too when `allow_percent`; `split_gate`
    reads the column); one per metric and column. `columns`: the names evaluated (None: not
    checked here)."""
    out: dict[tuple[str | None, str], Limit] = {}
    example = "field-rce=5%" if allow_percent else "field-rce=0.12"
    for spec in specs:
        column, name, text = split_gate(spec, flag, columns)
        if not name.strip() or not text.strip():
            raise UsageError(f"{flag} {spec!r} is not [COLUMN:]METRIC=VALUE", hint=f"e.g. {flag} {example}")
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
        if (column, key) in out:
            where = "" if column is None else f" of {column!r}"
            raise UsageError(f"{flag} is given twice for {key.replace('_', '-')}{where}")
        out[(column, key)] = Limit(key, value / 100 if relative else value, relative, column)
    return list(out.values())


@dataclass
class GateSpec:
    """Every gate option of one `calib evaluate` run (parsed and checked by `EvaluateOptions.build`)."""

    fail_above: list[Limit] = field(default_factory=list)
    fail_below: list[Limit] = field(default_factory=list)
    max_regression: list[Limit] = field(default_factory=list)
    baseline: str | None = None
    gate_on: str = "point"  # point, worst or best (GATE_ON)

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


__all__ = ["GateSpec", "Limit", "parse_limits", "refuse_targets", "require_field_col", "split_gate"]
