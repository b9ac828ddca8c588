"""A saved map as one portable SQL expression (`calib export map.json --sql`).

The expression computes the calibrated probability from a score column, so a map can be
applied inside a database or an engine (Spark's native `apply` reuses it) without Python.
Supported: the knot maps (isotonic, enir, near-isotonic, bayes-iso: linear between knots,
constant outside), binning and bbq (one value per interval), logistic, the beta family, ilps,
spline and inductive Venn-Abers (its point prediction: constant between calibration scores,
its own value at each). Other methods need code SQL does not have (bootstraps, per-field
networks) and are
refused.

Exactness (see docs/algorithms.md, "SQL export"): every constant is written at repr
precision with an exponent, so SQL engines parse it as the same float64 (a DOUBLE literal,
not a DECIMAL); piecewise-linear maps use numpy's own formula (`slope * (s - x_j) + y_j`
with the slope computed here; `_lookup.interval_values` on the intervals where that
formula overflows or loses digits), so they agree with `calib apply` to the last bit on
engines that evaluate IEEE doubles; the sigmoid is written without overflow as
`EXP(LEAST(e, 0)) / (1 + EXP(-ABS(e)))`, within a few ulps of numpy. Knot intervals are
a balanced tree of `CASE` expressions (depth log2 of the knots), so a row costs a few
comparisons even for maps with many knots; engines still plan a long expression slowly,
which `simplify` (`--max-knots`) bounds.

No value: NULL and NaN scores give NULL, and so do scores outside [0, 1] for a map fitted
on probabilities (beta, ilps with `score_kind=probability`), which `calib apply` refuses:
SQL has no portable error, and NULL is its "no value". NaN is caught by `-ABS(s) <= 0`,
false for NaN both where NaN compares above every number (DuckDB, Spark, PostgreSQL) and
where every comparison with NaN is false (IEEE).

The score is a column name, quoted here as an identifier of the dialect (double quotes in
ANSI SQL, backticks in Spark, the quote doubled inside), or an expression the caller writes,
which `requests.check_expression` refuses if it could end the statement or open a comment.
"""

from __future__ import annotations

import copy
import heapq
import math
import re
from typing import Callable, NamedTuple, Sequence

import numpy as np

from calibcli.calibrators import Calibrator
from calibcli.errors import MapError, UsageError, shown
from calibcli.requests import ExportRequest, check_expression  # noqa: F401 (the API name)

_FLAT = 8  # intervals below this many become one flat CASE instead of a nested one


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


def _extreme(x: str, x0: float, x1: float, y0: float, y1: float) -> str:
    """`_lookup.interval_values` on one interval, in its order of operations: t = (x - x0) / (x1 - x0)
    (halved terms when x1 - x0 overflows) kept in [0, 1], y0 + (y1 - y0) * t kept between y0 and y1."""
    with np.errstate(over="ignore"):
        gap = x1 - x0
    if math.isfinite(gap):
        t = f"({x} - {literal(x0)}) / {literal(gap)}"
    else:
        t = f"({x} * 0.5E0 - {literal(x0 * 0.5)}) / {literal(x1 * 0.5 - x0 * 0.5)}"
    value = f"{literal(y0)} + {literal(y1 - y0)} * {_clip(t, 0.0, 1.0)}"
    return _clip(value, min(y0, y1), max(y0, y1))


def _knots(cal: Calibrator, s: str) -> str:
    """`interp(s, x, y)` (calibcli.numeric.lookup): constant y[0] below x[0] and y[-1] from x[-1] on,
    numpy's slope formula between knots except on `extreme_intervals`."""
    from calibcli.numeric import lookup as _lookup

    x, y = cal.x_, cal.y_
    if x.size == 1:
        return literal(y[0])
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        slope = (y[1:] - y[:-1]) / (x[1:] - x[:-1])
    extreme = set(_lookup.extreme_intervals(x, y).tolist())
    leaves = [literal(y[0])]
    leaves += [_extreme(s, float(x[j]), float(x[j + 1]), float(y[j]), float(y[j + 1])) if j in extreme
               else _linear(float(slope[j]), s, float(x[j]), float(y[j])) for j in range(x.size - 1)]
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
    """sigmoid(eta(logit s)), eta linear between the splits a and extended beyond the ends
    (logits clipped to +-1e300 as `predict` does, so a flat end segment gives no 0 * inf).

    Intervals are chosen on the score itself (the splits mapped back to probabilities), so
    the logit is computed once per row; eta is continuous, so a score within an ulp of a
    split gives the same value from either segment up to rounding.
    """
    from calibcli.calibrators.ilps import LOGIT_CLIP
    from calibcli.calibrators.params import PROB_CLIP

    a, b = cal.a_, cal.b_
    if cal.params["score_kind"] == "logit":
        logit, cuts = _clip(s, -LOGIT_CLIP, LOGIT_CLIP), a[1:-1]
    else:
        p = _clip(s, PROB_CLIP, 1.0 - PROB_CLIP)
        logit = f"(LN({p}) - LN(1 - {p}))"
        cuts = 1.0 / (1.0 + np.exp(-a[1:-1]))
    leaves = [sigmoid(f"{literal(b[k])} + ({logit} - {literal(a[k])}) / {literal(a[k + 1] - a[k])}"
                      f" * {literal(b[k + 1] - b[k])}") for k in range(a.size - 1)]
    return case_tree(s, cuts.tolist(), leaves, "<")


def _venn_abers(cal: Calibrator, s: str) -> str:
    """The IVAP point prediction, constant between calibration scores with its own value at
    each one: intervals [c_j, next float after c_j) hold exactly c_j (a last c_j at the float64
    maximum has no finite next float: its interval and +inf's share one leaf)."""
    c = cal.c_[0]
    between, at = cal._point_
    with np.errstate(over="ignore"):
        thresholds = np.column_stack([c, np.nextafter(c, np.inf)]).ravel().tolist()
    leaves = [literal(between[0])]
    for j in range(c.size):
        leaves += [literal(at[j]), literal(between[j + 1])]
    if not math.isfinite(thresholds[-1]):
        thresholds.pop()
        leaf = leaves.pop()
        leaves[-1] = f"CASE WHEN {s} <= {literal(c[-1])} THEN {leaves[-1]} ELSE {leaf} END"
    return case_tree(s, thresholds, leaves, "<")


def _spline(cal: Calibrator, s: str) -> str:
    """sigmoid(a_i + t (b_i + t (c_i + t d_i))), t = logit - knot_i, constant beyond the
    outer knots. As for ilps, the interval is chosen on the score itself (knots mapped back
    to probabilities), so a score within an ulp of a knot may take the neighbouring cubic:
    the spline is continuous there, so that changes the result only by rounding."""
    from calibcli.calibrators.params import PROB_CLIP

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
    "isotonic": _knots, "enir": _knots, "near-isotonic": _knots, "bayes-iso": _knots, "binning": _bins,
    "bbq": _bins, "logistic": _logistic, "beta": _beta, "beta-am": _beta, "beta-ab": _beta, "ilps": _ilps,
    "spline": _spline, "venn-abers": _venn_abers,
}
SQL_METHODS = tuple(_WRITERS)
WARN_SQL_BYTES = 1_000_000  # an export longer than this warns: engines plan it slowly
WARN_KNOTS = 10_000  # so does a map with more break points than this
_ATOM = re.compile(r'[A-Za-z_][A-Za-z0-9_]*|"(?:[^"]|"")*"|`(?:[^`]|``)*`')
_ONLY: dict[str, Callable[[Calibrator], bool]] = {"venn-abers": lambda cal: len(cal.c_) == 1}  # IVAP, not CVAP


def supports_sql(cal: Calibrator) -> bool:
    """True when `sql_expression` can write this map."""
    return cal.name in _WRITERS and _ONLY.get(cal.name, lambda _: True)(cal)


def quote_identifier(name: str, dialect: str = "ansi") -> str:
    """`name` as one quoted identifier: "..." in ANSI SQL, `...` in Spark, the quote doubled inside."""
    q = "`" if dialect == "spark" else '"'
    return q + name.replace(q, q + q) + q


def score_sql(request: ExportRequest) -> str:
    """The score as SQL: the column quoted as an identifier, or the expression (both checked
    by `ExportRequest.build`)."""
    if request.expression is not None:
        return f"({request.expression.strip()})"
    return quote_identifier("score" if request.column is None else request.column, request.dialect)


def sql_expression(cal: Calibrator, score: str = '"score"') -> str:
    """One SQL expression giving the calibrated probability of `score`, a SQL expression the
    caller trusts (see `score_sql`): NULL for a NULL or NaN score, and for a score outside
    [0, 1] when the map was fitted on probabilities."""
    if not supports_sql(cal):
        kind = f"{cal.params['variant']} " if cal.name == "venn-abers" else ""
        raise MapError(f"a {kind}{cal.name} map cannot be exported as SQL",
                       hint="SQL export supports " + ", ".join(SQL_METHODS) + " (venn-abers: variant=ivap)")
    score = score.strip()
    s = score if _ATOM.fullmatch(score) else f"({score})"
    refused = f"{s} IS NULL OR NOT (-ABS({s}) <= 0)"
    if cal.needs_probabilities:
        refused += f" OR {s} < 0 OR {s} > 1"
    return f"CASE WHEN {refused} THEN NULL ELSE {_WRITERS[cal.name](cal, s)} END"


def breakpoints(cal: Calibrator) -> int:
    """How many knots, bin edges or splits the map's SQL branches on."""
    for attr in ("x_", "edges_"):
        if hasattr(cal, attr):
            return int(getattr(cal, attr).size)
    a = getattr(cal, "a_", None)
    return int(a.size) if isinstance(a, np.ndarray) else 0


class Simplified(NamedTuple):
    calibrator: Calibrator
    before: int  # break points of the map as saved
    after: int
    max_error: float  # max |original - simplified| over all scores


def simplify(cal: Calibrator, max_knots: int) -> Simplified:
    """The map with at most `max_knots` knots (knot maps) or bin edges (binning), chosen to keep
    the maximum absolute error small; other maps, and maps already that small, unchanged.

    Knot maps keep a subset of their knots (the first and last included) with their values,
    so the map stays monotone and in [0, 1] and its error is largest at a dropped knot. Bins
    merge into runs of adjacent bins valued at their midrange, whose error is half the
    run's range. Both search the smallest tolerance whose greedy cover (longest run first)
    needs at most `max_knots`; for bins that cover is optimal.
    """
    n = breakpoints(cal)
    if n <= max_knots or not (hasattr(cal, "x_") or hasattr(cal, "edges_")):
        return Simplified(cal, n, n, 0.0)
    out = copy.copy(cal)
    if hasattr(cal, "x_"):
        x, y = cal.x_, cal.y_
        start, hi = _split_worst(x, y, max_knots)
        keep = _bisect(lambda tol: _chord_reach(x, y, tol), x.size - 1, max_knots - 1, hi, start)
        out.x_, out.y_ = x[keep], y[keep]
        from calibcli.calibrators.piecewise import interpolate

        err = float(np.max(np.abs(interpolate(out.x_, out.y_, x) - y)))
        return Simplified(out, n, int(out.x_.size), err)
    v = cal.values_
    keep = _bisect(lambda tol: _range_reach(v, tol), v.size, max_knots + 1, 0.5 * float(v.max() - v.min()),
                   [0, v.size])
    lo, hi = keep[:-1], keep[1:]
    mids = 0.5 * (np.minimum.reduceat(v, lo) + np.maximum.reduceat(v, lo))
    out.edges_, out.values_ = cal.edges_[hi[:-1] - 1], mids
    err = float(np.max(np.abs(np.repeat(mids, hi - lo) - v)))
    return Simplified(out, n, int(out.edges_.size), err)


_WINDOW = 64  # run ends next to the run's start, tested all at once (a window x window array)


def _chord_error(x: np.ndarray, y: np.ndarray, i: int, j: int) -> float:
    """Max |y_k - chord(i, j)(x_k)| over the knots strictly between i and j."""
    if j - i < 2:
        return 0.0
    slope = (y[j] - y[i]) / (x[j] - x[i])
    return float(np.max(np.abs(slope * (x[i + 1:j] - x[i]) + y[i] - y[i + 1:j])))


def _chord_reach(x: np.ndarray, y: np.ndarray, tol: float) -> Callable[[int], int]:
    """From knot i, a far knot j whose chord is within `tol` of the knots between: the
    furthest of the next `_WINDOW` (all tested at once), then, if the last of them is
    within, galloping and bisecting on knots further out."""
    last = x.size - 1
    inside = np.arange(_WINDOW)[:, None] > np.arange(_WINDOW - 1)  # knot b is inside chord a

    def reach(i: int) -> int:
        end = min(i + _WINDOW, last)
        js = np.arange(i + 1, end + 1)
        slope = (y[js] - y[i]) / (x[js] - x[i])
        dev = np.abs(slope[:, None] * (x[i + 1:end] - x[i]) + (y[i] - y[i + 1:end]))
        dev *= inside[:js.size, :end - i - 1]
        good = int(js[np.flatnonzero(dev.max(axis=1, initial=0.0) <= tol)[-1]])
        if good < end or end == last:
            return good
        step = _WINDOW
        while good < last and _chord_error(x, y, i, min(good + step, last)) <= tol:
            good, step = min(good + step, last), 2 * step
        bad = min(good + step, last)
        while bad - good > 1:
            mid = (good + bad) // 2
            good, bad = (mid, bad) if _chord_error(x, y, i, mid) <= tol else (good, mid)
        return good

    return reach


def _range_reach(v: np.ndarray, tol: float) -> Callable[[int], int]:
    """From bin i, the end j of the longest run v[i:j] whose range is within 2 tol."""
    def reach(i: int) -> int:
        width = 16
        while True:
            part = v[i:i + width]
            spread = np.maximum.accumulate(part) - np.minimum.accumulate(part)
            over = np.flatnonzero(0.5 * spread > tol)
            if over.size:
                return i + int(over[0])
            if i + width >= v.size:
                return v.size
            width *= 4

    return reach


def _cover(reach: Callable[[int], int], last: int, limit: int) -> list[int] | None:
    """Greedy runs 0 = k_0 < k_1 < ... = last, each as long as `reach` allows; None once more
    than `limit` runs are needed."""
    cuts, i = [0], 0
    while i < last:
        i = reach(i)
        cuts.append(i)
        if len(cuts) - 1 > limit:
            return None
    return cuts


def _split_worst(x: np.ndarray, y: np.ndarray, max_knots: int) -> tuple[list[int], float]:
    """Top-down start (Douglas-Peucker): keep the ends, then add the knot furthest from its
    chord until `max_knots` are kept; (kept knots, their max error)."""
    def worst(i: int, j: int) -> tuple[float, int, int, int]:
        if j - i < 2:
            return (0.0, i, j, i)
        slope = (y[j] - y[i]) / (x[j] - x[i])
        dev = np.abs(slope * (x[i + 1:j] - x[i]) + y[i] - y[i + 1:j])
        k = int(np.argmax(dev))
        return (-float(dev[k]), i, j, i + 1 + k)

    heap, keep = [worst(0, x.size - 1)], [0, x.size - 1]
    while len(keep) < max_knots and heap[0][0] < 0:
        _, i, j, k = heapq.heappop(heap)
        keep.append(k)
        heapq.heappush(heap, worst(i, k))
        heapq.heappush(heap, worst(k, j))
    return sorted(keep), -heap[0][0]


def _bisect(reach_at: Callable[[float], Callable[[int], int]], last: int, limit: int, hi: float,
            best: list[int]) -> np.ndarray:
    """The greedy cover with at most `limit` runs at the smallest tolerance bisection finds
    to 1e-3 relative, or `best` (within `hi`) when none is better."""
    found = _cover(reach_at(0.0), last, limit)
    if found is not None:
        return np.asarray(found)
    lo = 0.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 1e-3 * hi:
            break
        found = _cover(reach_at(mid), last, limit)
        if found is None:
            lo = mid
        else:
            hi, best = mid, found
    return np.asarray(best)


class SQLExport(NamedTuple):
    sql: str
    knots: int  # break points the SQL branches on
    simplified: Simplified | None  # set when max_knots was given
    classes: int = 0  # K of a K-class map's select list (0: a binary map's expression)
    method: str = ""

    def too_large(self) -> bool:
        """Past the size where engines take long to plan the expression (`calib export` warns)."""
        return len(self.sql.encode()) > WARN_SQL_BYTES or self.knots > WARN_KNOTS

    def size_warning(self) -> str:
        """What `calib export` says when `too_large`: only remedies the map's export has
        (K-class maps have no knots and take no --max-knots)."""
        size = f"the SQL is {len(self.sql.encode()) / 1e6:.1f} MB"
        if not self.classes:
            return (f"{size} over {self.knots} knots: engines plan an expression this long slowly; "
                    f"--max-knots {WARN_KNOTS // 10} keeps it small")
        growth = "K^4 (each of its logits sums K columns)" if self.method == "dirichlet" else "K^3"
        return (f"{size} for the {self.classes} classes of this {self.method} map: engines plan an expression "
                f"this long slowly; each class repeats every logit, so the size grows as {growth}")


def export_sql(map_path: str, column: str | None = None, expression: str | None = None,
               dialect: str = "ansi", max_knots: int | None = None) -> SQLExport:
    """The SQL expression of the binary map saved at `map_path` (`calib export --sql`), the map
    first simplified to `max_knots` when given."""
    from calibcli.maps import envelope as maps

    request = ExportRequest.build(column, expression, dialect, max_knots)
    from calibcli import io

    return binary_sql(io.display_name(map_path), maps.load_map(map_path)[0], request)


def binary_sql(source: str, cal: Calibrator, request: ExportRequest) -> SQLExport:
    """The SQL of the binary map `cal`, read from `source`, for a checked request."""
    score, max_knots = score_sql(request), request.max_knots
    try:
        simplified = simplify(cal, max_knots) if max_knots is not None else None
        final = simplified.calibrator if simplified else cal
        return SQLExport(sql_expression(final, score), breakpoints(final), simplified)
    except MapError as exc:
        raise MapError(f"{source}: {exc.message}", hint=exc.hint) from None
