"""Bounds of every numeric command-line option, in one table, checked before any work.

Each bound keeps a run within minutes and a few GB on a small machine (2 cores, 24 GB)
for data of about 1e5-1e6 rows, or is the range where the option means anything. Method
options (`--param`) carry their bounds in their `Param` declarations; `param_rows` lists
them for the README and `calib fit --help`.

Rough costs the bounds come from (shared 2-core machine, uniform scores, one run each):
- `evaluate --bootstrap 100` on 1e5 rows: +2 s, so the cap of 10 000 is a few minutes;
- bayes-iso on 3000 distinct scores: samples=1e4 2 s, 1e5 11 s (linear: the cap 1e6 is
  about 2 min); grid=2e4 with 1e4 samples 10 s (time grows as samples x grid);
- enir on 1e5 rows: models=100 1 s / 0.1 GB, models=1000 1.4 s / 0.4 GB (kept models
  grow as models x distinct scores, hence the cap 1000);
- boot-isotonic on 1e5 rows: r=20 1.5 s / 0.2 GB, r=200 26 s / 1.4 GB (linear in r: the
  cap 500 is about a minute and 3.5 GB);
- field-aware on 1e5 rows, one epoch: defaults 22 s / 0.1 GB; every size option at its
  cap at once (hidden=256, layers=8, batch_size=65536, embed_dim=256) 146 s / 2.8 GB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from calibcli.errors import UsageError

SEED_MAX = 2**63 - 1


@dataclass(frozen=True)
class Bound:
    """Inclusive [low, high] (low excluded when `low_open`), and why the limit is there."""

    low: float
    high: float
    why: str
    low_open: bool = False

    def describe(self) -> str:
        """`[0, 10000]`, `(0, 1e+300]`; integers written out exactly."""
        def show(v: float) -> str:
            return str(v) if isinstance(v, int) else f"{v:g}"

        return f"{'(' if self.low_open else '['}{show(self.low)}, {show(self.high)}]"


OPTIONS: dict[str, Bound] = {
    "--bootstrap": Bound(0, 10_000, "each resample is a pass over the rows: 10 000 on 1e5 rows take minutes"),
    "--calbin-window": Bound(1, 10_000_000, "a window larger than the data has no meaning; bounds memory"),
    "--ece-bins": Bound(1, 100_000, "more bins than that leave most of them empty on any real data"),
    "--folds": Bound(2, 100, "each fold refits every method; 100 folds of a slow method take minutes"),
    "--seed": Bound(0, SEED_MAX, "seeds are 64-bit integers, stored exactly in the map"),
    "--step": Bound(0.0, 1e300, "a positive, finite rounding step", low_open=True),
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


def check_params(method: str, pairs: dict[str, str]) -> None:
    """Refuse unknown methods and out-of-range `--param key=value` before any input is read
    (ParamError/UsageError); imports only the calibrators, not the readers."""
    from calibcli.calibrators import registry

    cls = registry.get(method)
    known = {p.name: p for p in cls.params}
    for key, text in pairs.items():
        if key in known:
            known[key].parse(text)


def param_rows() -> list[tuple[str, str, str, str]]:
    """(method, option, type, range) for every int/float `--param` of every method."""
    from calibcli.calibrators import registry

    rows = []
    for name in registry.available():
        for p in registry.get(name).params:
            if p.type in (int, float):
                rows.append((name, p.name, p.type.__name__, p.range_text()))
    return rows


def markdown_table() -> str:
    """The README's option-bounds table: command-line options, then method options."""
    lines = ["| option | range | why |", "|---|---|---|"]
    lines += [f"| `{name}` | {b.describe()} | {b.why} |" for name, b in OPTIONS.items()]
    lines += [f"| `-p {option}` ({method}) | {rng} | {kind} |" for method, option, kind, rng in param_rows()]
    return "\n".join(lines)
