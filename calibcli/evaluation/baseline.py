"""The evaluation JSON report: its writer (`Evaluation.to_json`, `save_evaluation`) and its
reader (`load_baseline`, for `--baseline`), side by side so the schema lives in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from calibcli import io, output
from calibcli.errors import InputError, UsageError
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
          `reliability` (with --plot: equal-mass bins {rows, mean_p, positive_rate, p_min,
          p_max}, else null)
        - `bootstrap`: {replicates, seed, level, method: "percentile"} or null
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
            "results": [result(r) for r in self.results],
            "bootstrap": self.bootstrap.to_json() if self.bootstrap else None,
            "gate": gate.to_json(),
        }

    def to_json_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n").encode()


def save_evaluation(evaluation: Evaluation, path: str) -> None:
    """Write the JSON report where a later `--baseline` can read it (atomically)."""
    output.write_bytes_atomic(path, evaluation.to_json_bytes())


@dataclass
class Baseline:
    """What an earlier `calib evaluate --json` (or `--save-baseline`) wrote."""

    path: str
    field_col: str | None
    calbin_window: int | None
    metrics: dict[str, dict[str, float | None]]  # result name -> metric -> value


def load_baseline(path: str) -> Baseline:
    """Read a baseline file; missing, corrupt or newer files raise InputError (exit 2)."""
    raw = io.read_bytes(path, "baseline")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: baseline is not JSON ({exc})",
                         hint="write it with `calib evaluate ... --json` or --save-baseline") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise InputError(f"{path}: not a `calib evaluate --json` report (no 'results' list)")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise InputError(f"{path}: baseline has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise InputError(f"{path}: baseline schema version {version} is newer than this calibcli "
                         f"reads (up to {SCHEMA_VERSION})", hint="upgrade calibcli")
    results: dict[str, dict[str, float | None]] = {}
    for i, entry in enumerate(doc["results"]):
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
                or not isinstance(entry.get("metrics"), dict)):
            raise InputError(f"{path}: results[{i}] has no name or metrics")
        values = {}
        for key, value in entry["metrics"].items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise InputError(f"{path}: results[{i}] metric {key!r} is {value!r}, not a number")
            values[key] = None if value is None else float(value)
        results[entry["name"]] = values
    return Baseline(path, doc.get("field_col"), doc.get("calbin_window"), results)


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
