"""A saved map as one portable SQL expression (`calib export map.json --sql`).

The expression computes the calibrated probability from a score column, so a map can be
applied inside a database or an engine (Spark's native `apply` reuses it) without Python.
Supported: the knot maps (isotonic, enir, near-isotonic: linear between knots, constant
outside), binning and bbq (one value per interval), logistic, the beta family, ilps and
spline. Other methods need code SQL does not have (bootstraps, per-field networks) and are
refused.

Exactness (see docs/algorithms.md, "SQL export"): every constant is written at repr
precision with an exponent, so SQL engines parse it as the same float64 (a DOUBLE literal,
not a DECIMAL); piecewise-linear maps use numpy's own formula (`slope * (s - x_j) + y_j`
with the slope computed here), so they agree with `calib apply` to the last bit on
engines that evaluate IEEE doubles; the sigmoid is written without overflow as
`EXP(LEAST(e, 0)) / (1 + EXP(-ABS(e)))`, within a few ulps of numpy. Knot intervals are
a balanced tree of `CASE` expressions (depth log2 of the knots), so a row costs a few
comparisons even for maps with many knots. NULL scores give NULL, and so do scores outside
[0, 1] for a map fitted on probabilities (beta, ilps with `score_kind=probability`), which
`calib apply` refuses: SQL has no portable error, and NULL is its "no value" (NaN compares
above every number in DuckDB and Spark, so a NaN score gives NULL there too).

The score is inserted as given: a column name, or any SQL expression, quoted for the
target dialect when needed ("my col" in ANSI SQL, `my col` in Spark).
"""

from __future__ import annotations

import math
import re
from typing import Callable, Sequence

import numpy as np

from calibcli.calibrators import Calibrator
from calibcli.errors import MapError, UsageError

_FLAT = 8  # intervals below this many become one flat CASE instead of a nested one
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[`\"][^`\"]+[`\"]")


def literal(x: float) -> str:
    """A float64 as a SQL DOUBLE literal that parses back to the same bits (`0.5E0`, `(-2E-3)`)."""
    x = float(x)
    if not math.isfinite(x):
        raise MapError(f"cannot write {x!r} in SQL: map constants must be finite")
    text = repr(x).replace("e", "E")
    if "E" not in text:
        text += "E0"
    return f"({text})" if text.startswith("-") else text


def sigmoid(eta: str) -> str:
    """1 / (1 + exp(-eta)) with no overflow for any finite eta."""
    return f"EXP(LEAST({eta}, 0)) / (1 + EXP(-ABS({eta})))"


def case_tree(x: str, thresholds: Sequence[float], leaves: Sequence[str], op: str) -> str:
    """`leaves[i]` where x falls in the i-th interval between sorted `thresholds`.

    With op "<" an interval is [t_i-1, t_i) (a threshold belongs to the interval above);
    with "<=" it is (t_i-1, t_i]. len(leaves) == len(thresholds) + 1.
    """
    if len(leaves) <= _FLAT:
        whens = " ".join(f"WHEN {x} {op} {literal(t)} THEN {leaf}" for t, leaf in zip(thresholds, leaves))
        return f"CASE {whens} ELSE {leaves[-1]} END" if whens else leaves[0]
    mid = len(thresholds) // 2
    low = case_tree(x, thresholds[:mid], leaves[:mid + 1], op)
    high = case_tree(x, thresholds[mid + 1:], leaves[mid + 1:], op)
    return f"CASE WHEN {x} {op} {literal(thresholds[mid])} THEN {low} ELSE {high} END"


def _linear(slope: float, x: str, x0: float, y0: float) -> str:
    """slope * (x - x0) + y0 in numpy's order of operations (just y0 where the slope is 0)."""
    if slope == 0.0:
        return literal(y0)
    return f"{literal(slope)} * ({x} - {literal(x0)}) + {literal(y0)}"


def _knots(cal: Calibrator, s: str) -> str:
    """np.interp(s, x, y): constant y[0] below x[0] and y[-1] from x[-1] on."""
    x, y = cal.x_, cal.y_
    if x.size == 1:
        return literal(y[0])
    with np.errstate(over="ignore", invalid="ignore"):
        slope = (y[1:] - y[:-1]) / (x[1:] - x[:-1])
    leaves = [literal(y[0])]
    leaves += [_linear(float(slope[j]), s, float(x[j]), float(y[j])) for j in range(x.size - 1)]
    leaves.append(literal(y[-1]))
    return case_tree(s, x.tolist(), leaves, "<")


def _bins(cal: Calibrator, s: str) -> str:
    """values[searchsorted(edges, s, side='left')]: a score on an edge is in the bin below."""
    return case_tree(s, cal.edges_.tolist(), [literal(v) for v in cal.values_], "<=")


def _logistic(cal: Calibrator, s: str) -> str:
    return sigmoid(f"{literal(cal.a_)} * {s} + {literal(cal.b_)}")


def _clip(s: str, lo: float, hi: float) -> str:
    return f"LEAST(GREATEST({s}, {literal(lo)}), {literal(hi)})"


def _softplus(t: str) -> str:
    """ln(1 + e^t) without overflow (numpy's logaddexp(0, t))."""
    return f"(GREATEST({t}, 0) + LN(1 + EXP(-ABS({t}))))"


def _beta(cal: Calibrator, s: str) -> str:
    """sigmoid(a ln s - b ln(1-s) + c) on the clipped score (or on a clipped logit)."""
    eps = cal.eps_
    if cal.params["score_kind"] == "logit":
        bound = math.log1p(-eps) - math.log(eps)
        t = _clip(s, -bound, bound)
        f1, f2 = f"(-{_softplus(f'-({t})')})", _softplus(t)
    else:
        p = _clip(s, eps, 1.0 - eps)
        f1, f2 = f"LN({p})", f"(-LN(1 - {p}))"
    terms = [f"{literal(coef)} * {f}" for coef, f in ((cal.a_, f1), (cal.b_, f2)) if coef != 0.0]
    return sigmoid(" + ".join([*terms, literal(cal.c_)]))


def _ilps(cal: Calibrator, s: str) -> str:
    """sigmoid(eta(logit s)), eta linear between the splits a and extended beyond the ends.

    Intervals are chosen on the score itself (the splits mapped back to probabilities), so
    the logit is computed once per row; eta is continuous, so a score within an ulp of a
    split gives the same value from either segment up to rounding.
    """
    from calibcli.calibrators.ilps import PROB_CLIP

    a, b = cal.a_, cal.b_
    if cal.params["score_kind"] == "logit":
        logit, cuts = s, a[1:-1]
    else:
        p = _clip(s, PROB_CLIP, 1.0 - PROB_CLIP)
        logit = f"(LN({p}) - LN(1 - {p}))"
        cuts = 1.0 / (1.0 + np.exp(-a[1:-1]))
    leaves = [sigmoid(f"{literal(b[k])} + ({logit} - {literal(a[k])}) / {literal(a[k + 1] - a[k])}"
                      f" * {literal(b[k + 1] - b[k])}") for k in range(a.size - 1)]
    return case_tree(s, cuts.tolist(), leaves, "<")


def _spline(cal: Calibrator, s: str) -> str:
    """sigmoid(a_i + t (b_i + t (c_i + t d_i))), t = logit - knot_i, constant beyond the
    outer knots. As for ilps, the interval is chosen on the score itself (knots mapped back
    to probabilities), so a score within an ulp of a knot may take the neighbouring cubic:
    the spline is continuous there, so that changes the result only by rounding."""
    from calibcli.calibrators.base import PROB_CLIP

    knots = cal.knots_
    if cal.params["score_kind"] == "logit":
        logit, cuts = s, knots
    else:
        p = _clip(s, PROB_CLIP, 1.0 - PROB_CLIP)
        logit, cuts = f"(LN({p}) - LN(1 - {p}))", 1.0 / (1.0 + np.exp(-knots))
    leaves = [sigmoid(literal(cal.a_[0]))]
    for i in range(knots.size - 1):
        t = f"({logit} - {literal(knots[i])})"
        leaves.append(sigmoid(f"{literal(cal.a_[i])} + {t} * ({literal(cal.b_[i])} + {t} * "
                              f"({literal(cal.c_[i])} + {t} * {literal(cal.d_[i])}))"))
    leaves.append(sigmoid(literal(cal.a_[-1])))
    return case_tree(s, cuts.tolist(), leaves, "<")


_WRITERS: dict[str, Callable[[Calibrator, str], str]] = {
    "isotonic": _knots, "enir": _knots, "near-isotonic": _knots, "binning": _bins, "bbq": _bins,
    "logistic": _logistic, "beta": _beta, "beta-am": _beta, "beta-ab": _beta, "ilps": _ilps,
    "spline": _spline,
}
SQL_METHODS = tuple(_WRITERS)


def supports_sql(cal: Calibrator) -> bool:
    """True when `sql_expression` can write this map."""
    return cal.name in _WRITERS


def sql_expression(cal: Calibrator, score: str = "score") -> str:
    """One SQL expression giving the calibrated probability of `score` (NULL for NULL, and
    for a score outside [0, 1] when the map was fitted on probabilities)."""
    if not supports_sql(cal):
        raise MapError(f"a {cal.name} map cannot be exported as SQL",
                       hint="SQL export supports " + ", ".join(SQL_METHODS))
    score = score.strip()
    if not score:
        raise UsageError("--score-col must name a column")
    s = score if _IDENTIFIER.fullmatch(score) else f"({score})"
    refused = f"{s} IS NULL OR {s} < 0 OR {s} > 1" if cal.needs_probabilities else f"{s} IS NULL"
    return f"CASE WHEN {refused} THEN NULL ELSE {_WRITERS[cal.name](cal, s)} END"


def export_sql(map_path: str, score: str = "score") -> str:
    """The SQL expression of the map saved at `map_path` (`calib export --sql`)."""
    from calibcli import io, maps

    cal, _ = maps.load_map(map_path)
    try:
        return sql_expression(cal, score)
    except MapError as exc:
        raise MapError(f"{io.display_name(map_path)}: {exc.message}", hint=exc.hint) from None
