"""Bounds of every numeric command-line option, in one table, checked before any work.

Each bound keeps a run within minutes and a few GB on a small machine (2 cores, 24 GB)
for data of about 1e5-1e6 rows, or is the range where the option means anything. Method
options (`--param`) carry their bounds in their `Param` declarations; `param_rows` lists
them for `calib fit --help` and the generated reference.

The measurements behind the caps are in `benchmarks/results_option_costs.md`.
"""

from __future__ import annotations

import operator

import math
from dataclasses import dataclass
from typing import Any

from calibcli.errors import UsageError
from calibcli.calibrators.params import SEED_MAX, bounds_text


@dataclass(frozen=True)
class Bound:
    """Inclusive [low, high] (low excluded when `low_open`), and why the limit is there."""

    low: float
    high: float
    why: str
    low_open: bool = False

    def describe(self) -> str:
        """`[0, 10000]`, `(0, 1e+300]`; integers written out exactly."""
        text = bounds_text(self.low, self.high)
        return "(" + text[1:] if self.low_open else text


OPTIONS: dict[str, Bound] = {
    "--bands": Bound(0, 100_000, "each round refits PAV on the distinct p: 100 rounds on 1e6 rows take seconds"),
    "--bootstrap": Bound(0, 10_000, "each resample is a pass over the rows: 10 000 on 1e5 rows take minutes"),
    "--calbin-window": Bound(1, 10_000_000, "a window larger than the data has no meaning; bounds memory"),
    "--ece-bins": Bound(1, 100_000, "more bins than that leave most of them empty on any real data"),
    "--hl-groups": Bound(3, 100_000, "the Hosmer-Lemeshow test has groups - 2 degrees of freedom"),
    "--folds": Bound(2, 100, "each fold refits every method; 100 folds of a slow method take minutes"),
    "--min-rows": Bound(1, 1e15, "the rows (weight) a --by-field value needs to be tested: fewer are noise, not evidence"),
    "--max-knots": Bound(2, 10_000_000, "a simplified map keeps its two end knots; more knots than a map has change nothing"),
    "--seed": Bound(0, SEED_MAX, "seeds are 64-bit integers, stored exactly in the map"),
    "--segment-bins": Bound(1, 100, "each quantile bin of a numeric segment column is a level; combinations of "
                                    "levels multiply across columns"),
    "--segment-depth": Bound(0, 10, "segments intersect up to this many columns: each combination of columns is "
                                    "one pass over the rows"),
    "--segment-max": Bound(1, 1_000_000, "every checked segment is listed in memory"),
    "--segment-min-rows": Bound(1, 10**15, "a segment is checked when it has at least this many rows"),
    "--segment-top": Bound(1, 100, "the most frequent values of a categorical segment column kept as levels; "
                                   "combinations of levels multiply across columns"),
    "--segments": Bound(0, 100_000, "rows of the worst-segments table (0: none)"),
    "--step": Bound(1e-12, 1e300, "p / step stays below 2^40, so rint(p / step) * step is within step/2 of p "
                    "(to 1e-4 of a step): a finer step would bucket nothing and name buckets wrongly"),
    "--top": Bound(1, 10_000, "rows of the --by-field table"),
}


def check(**values: Any) -> None:
    """Refuse out-of-range option values (UsageError, exit 2); keyword `calbin_window` is
    `--calbin-window`. None (option not given) passes."""
    for key, value in values.items():
        if value is None:
            continue
        option = "--" + key.replace("_", "-")
        bound = OPTIONS[option]
        number = float(value) if isinstance(value, float) else value
        inside = (isinstance(number, int) or math.isfinite(number)) and (
            (number > bound.low if bound.low_open else number >= bound.low) and number <= bound.high)
        if not inside:
            raise UsageError(f"{option} {value!r} is out of range: it must be in {bound.describe()}",
                             hint=bound.why)


def param_rows() -> list[tuple[str, str, str, str]]:
    """(method, option, type, range) for every int/float `--param` of every method."""
    from calibcli.calibrators import registry

    rows = []
    for name in registry.available():
        for p in registry.get(name).params:
            if p.type in (int, float):
                rows.append((name, p.name, p.type.__name__, p.range_text()))
    return rows


def step_option(step: float | None) -> float | None:
    """`--step` (summaries and evaluation): None, or a positive finite width."""
    check(step=step)
    return None if step is None else float(step)


def whole(option: str, value: Any) -> int:
    """A whole-number option (a numpy integer too, not a bool) within its bounds."""
    try:
        number = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        number = None
    if number is None:
        raise UsageError(f"{option} {value!r} is not an integer")
    check(**{option[2:].replace("-", "_"): number})
    return number
