"""Venn-Abers predictors: inductive (IVAP) and cross (CVAP).

For a test score s, p0(s) is the isotonic fit at s of the calibration set plus (s, label 0)
and p1(s) the same with label 1. The interval [p0, p1] is a multiprobability prediction
whose IVAP version is valid (perfectly calibrated in the sense of Vovk et al.); the point
prediction is p1 / (1 - p0 + p1), which minimises the worst-case log-loss over the pair
(`loss=brier`: p1 + (p0^2 - p1^2) / 2, the Brier-loss rule).

Fit: tied calibration scores are pooled into (distinct score, weight, positives); on the
cumulative sum diagram P_0 = (0, 0), P_j = (W_j, C_j) the test point is one extra
increment (1, label) placed between P_i and the next block. Its isotonic value is the
slope of the pool that contains it in the pool-adjacent-violators solution: starting from
the test point alone, the pool absorbs the last pool of the prefix fit (an edge of the
greatest convex minorant of P_0..P_i) while that pool's mean is above the pool's, and the
first pool of the suffix fit (an edge of the minorant of P_i..P_k) while its mean is below.
The two minorants' edges are static (left of a vertex of the prefix minorant lies the
minorant of the shorter prefix, and likewise on the right), so one left-to-right and one
right-to-left stack scan give every edge, O(k); the merges then run for all k + 1 insertion
positions at once as numpy array steps. The paper's algorithms 1-4 compute the same values
with the same minorants.

Predict: p0 and p1 are step functions of s over the distinct calibration scores c. For s
strictly between c[j-1] and c[j] both use insertion position j. For s equal to a
calibration score c[j] (a tie), p0 takes the right-hand step (the test point placed just
after the tied block) and p1 the left-hand one (just before it), as the reference
implementation (package `venn-abers`, `calc_probs`) does. Thresholds where neither step
changes are dropped from the saved map: predictions are unchanged.

CVAP (`variant=cvap`): the rows are dealt to `folds` stratified folds (seeded, independent of
row order: rows are put in (label, score) order before the seeded shuffle); each fold is
an IVAP calibration set of its own, and the folds' pairs are merged as in the paper:
p1 = GM(p1_k), 1 - p0 = GM(1 - p0_k) (geometric means over folds), p = p1 / (1 - p0 + p1).
With `loss=brier`, p = mean_k(p1_k + (p0_k^2 - p1_k^2) / 2). The interval of a CVAP map merges
the pairs as the point does: `loss=log` the numbers 1 - GM(1 - p0_k) and GM(p1_k) in order,
`loss=brier` [mean_k p0_k, mean_k p1_k]; the point always lies inside (`predict_interval`).
Unlike IVAP's, it carries no validity guarantee.

Weights are frequency weights: counts in the calibration set (a whole number k is k
duplicated rows, for CVAP too: such weights are expanded into rows before the fold split);
a fractional weight is a fractional count. The test point always counts as one row.

References
----------
Vovk, Petej & Fedorova (2015), "Large-scale probabilistic predictors with and without
guarantees of validity", NeurIPS 28 (arXiv:1511.00213).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.calibrators.params import SEED, Param
from calibcli.calibrators.registry import register
from calibcli.numeric.pooling import unique_with_sums

MAX_FOLDS = 100


def _prefix_edges(x: list[float], y: list[float]) -> np.ndarray:
    """prv[j]: the vertex before P_j on the greatest convex minorant of P_0..P_j (prv[0] = 0)."""
    n = len(x)
    prv = [0] * n
    stack = [0]
    for j in range(1, n):
        xj, yj = x[j], y[j]
        while len(stack) >= 2:
            b, a = stack[-1], stack[-2]
            xa, ya = x[a], y[a]
            if (y[b] - ya) * (xj - xa) >= (yj - ya) * (x[b] - xa):  # P_b on or above the chord P_a P_j
                stack.pop()
            else:
                break
        prv[j] = stack[-1]
        stack.append(j)
    return np.array(prv, dtype=np.intp)


def _suffix_edges(x: list[float], y: list[float]) -> np.ndarray:
    """nxt[j]: the vertex after P_j on the greatest convex minorant of P_j..P_k (nxt[k] = k):
    the prefix scan of the points mirrored in x (x -> -x keeps convexity; the negations are
    exact, so every comparison is the same)."""
    n = len(x)
    prv = _prefix_edges([-v for v in reversed(x)], list(reversed(y)))
    return (n - 1 - prv)[::-1].copy()


def _insertion_values(X: np.ndarray, Y: np.ndarray, prv: np.ndarray, nxt: np.ndarray, label: float) -> np.ndarray:
    """Isotonic value of a test point (weight 1, `label`) inserted after each of the k + 1
    vertices P_0..P_k of the cumulative sum diagram: PAV merges around it, all positions at once."""
    k = X.size - 1
    a = np.arange(k + 1)
    b = a.copy()
    active = a.copy()
    while active.size:
        aa, bb = a[active], b[active]
        num = Y[bb] - Y[aa] + label
        den = X[bb] - X[aa] + 1.0
        nb, pa = nxt[bb], prv[aa]
        right = (bb < k) & ((Y[nb] - Y[bb]) * den < num * (X[nb] - X[bb]))  # next pool's mean below
        left = (aa > 0) & ((Y[aa] - Y[pa]) * den > num * (X[aa] - X[pa]))  # previous pool's mean above
        b[active] = np.where(right, nb, bb)
        a[active] = np.where(left, pa, aa)
        active = active[right | left]
    return (Y[b] - Y[a] + label) / (X[b] - X[a] + 1.0)


def ivap_steps(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c, p0, p1): distinct calibration scores (k) and the two step functions (k + 1 values
    each; index j is the test score between c[j-1] and c[j]), with unchanged thresholds dropped."""
    xs, sw, swy = unique_with_sums(s, y, w)
    keep = sw > 0
    if not keep.all():
        xs, sw, swy = xs[keep], sw[keep], swy[keep]
    X = np.concatenate([[0.0], np.cumsum(sw)])
    Y = np.concatenate([[0.0], np.cumsum(swy)])
    xl, yl = X.tolist(), Y.tolist()
    prv, nxt = _prefix_edges(xl, yl), _suffix_edges(xl, yl)
    p0 = _insertion_values(X, Y, prv, nxt, 0.0)
    p1 = _insertion_values(X, Y, prv, nxt, 1.0)
    return compress_steps(xs, *_in_order(p0, p1))


def _in_order(p0: np.ndarray, p1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p0 and p1 in [0, 1], non-decreasing, p0 <= p1, as they are exactly: cumulative sums of
    weights spanning the float64 range round separately, which can put a value a unit in the
    last place outside (1.0000000000000002, or a step down)."""
    p0 = np.maximum.accumulate(np.clip(p0, 0.0, 1.0))
    p1 = np.maximum.accumulate(np.clip(p1, 0.0, 1.0))
    return np.minimum(p0, p1), p1


def compress_steps(c: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop thresholds c[j] where neither step function changes (p0[j] == p0[j+1] and
    p1[j] == p1[j+1]): every prediction, at ties too, stays the same."""
    same = (p0[:-1] == p0[1:]) & (p1[:-1] == p1[1:])
    if not same.any():
        return c, p0, p1
    keep = np.concatenate([~same, [True]])
    return c[~same], p0[keep], p1[keep]


_PASSES = 4  # "step right" passes for queries in cells holding a few thresholds; more: binary search
_MAX_CELLS = 1 << 20


def step_table(c: np.ndarray) -> tuple:
    """A uniform grid over [c[0], c[-1]]: per cell the number of thresholds at or below its
    lower edge (taken 1% of a cell early, so rounding of a query's cell can only start it too
    far left), whether a threshold lies in it (1% margins) and whether more than `_PASSES` do."""
    k = c.size
    with np.errstate(over="ignore"):
        span = float(c[-1] - c[0])
    cells = int(min(_MAX_CELLS, max(64, 4 * k)))
    scale = cells / span if span > 0 and np.isfinite(span) and np.isfinite(cells / span) else 0.0
    edges = np.arange(cells + 1, dtype=np.float64)
    if scale > 0:
        with np.errstate(over="ignore"):  # edges past c[-1] at a span near the float64 limit
            start = np.searchsorted(c, c[0] + (edges - 0.01) / scale, side="right")
            end = np.searchsorted(c, c[0] + (edges + 1.01) / scale, side="right")
    else:
        start, end = np.zeros(cells + 1, dtype=np.intp), np.full(cells + 1, k, dtype=np.intp)
    return start, end > start, (end - start) > _PASSES, scale, np.append(c, np.nan)  # NaN: never <= s


def grid_cells(c: np.ndarray, s: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray | None]:
    """(grid cell of each query, NaN mask or None); NaN queries are put in cell 0. Without a
    grid (scale 0: one threshold, or a span beyond the float64 range) every query is in cell 0."""
    x = np.clip(s, c[0], c[-1])
    nan = np.isnan(x)
    if not nan.any():
        nan = None
    else:
        x[nan] = c[0]
    if scale == 0:
        return np.zeros(x.shape, dtype=np.intp), nan
    x -= c[0]
    x *= scale
    return x.astype(np.intp), nan


def step_positions(c: np.ndarray, s: np.ndarray, table: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(right, tie_rows): right = np.searchsorted(c, s, 'right') (thresholds <= s) and the rows
    where s equals a threshold. NaN rows get right = 0 and are not ties (callers mask them).

    A query's grid cell gives the thresholds below it; only queries in cells holding a
    threshold step right (a few passes) or, in crowded cells, are binary-searched.
    """
    start, busy, crowded, scale, c_next = table if table is not None else step_table(c)
    cell, nan = grid_cells(c, s, scale)
    right = np.take(start, cell)
    rows = np.flatnonzero(np.take(busy, cell))
    if nan is not None:
        right[nan] = 0
        rows = rows[~nan[rows]]
    if not rows.size:
        return right, rows
    sb, rb = np.take(s, rows), np.take(right, rows)
    deep = np.take(crowded, np.take(cell, rows))
    if deep.any():
        rb[deep] = np.searchsorted(c, sb[deep], side="right")
    near = np.flatnonzero(~deep)
    if near.size:
        sn, rn = sb[near], rb[near]
        for _ in range(_PASSES):
            rn += np.take(c_next, rn) <= sn
        rb[near] = rn
    np.put(right, rows, rb)
    tie = rows[(rb > 0) & (np.take(c, np.maximum(rb - 1, 0)) == sb)]
    return right, tie


def fold_ids(s: np.ndarray, y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Stratified fold of each row, independent of row order: rows in (label, score) order,
    each class shuffled with the seed and dealt round-robin (negatives first, then positives,
    continuing the count, so fold sizes differ by at most one)."""
    order = np.lexsort((s, y))
    rng = np.random.default_rng(seed)
    ids = np.empty(s.size, dtype=np.int64)
    start = 0
    for cls in (0.0, 1.0):
        rows = order[y[order] == cls]
        shuffled = rows[rng.permutation(rows.size)]
        ids[shuffled] = (start + np.arange(rows.size)) % folds
        start += rows.size
    return ids


def _ordered_within(arrays: list[np.ndarray], what: str, fail, ordered: str, unit: bool) -> None:
    for i, arr in enumerate(arrays):
        if unit and arr.size and (arr.min() < 0 or arr.max() > 1):
            bad = int(np.argmax((arr < 0) | (arr > 1)))
            fail(f"{what}[{i}]", bad, arr[bad], "is not a probability in [0, 1]")
        d = np.diff(arr)
        bad = np.flatnonzero(d <= 0 if ordered == "increasing" else d < 0)
        if bad.size:
            j = int(bad[0]) + 1
            rule = "strictly increasing" if ordered == "increasing" else "non-decreasing"
            fail(f"{what}[{i}]", j, arr[j], f"breaks the order: values must be {rule}")


def _check_state(params, values, fail) -> None:
    c, p0, p1, sizes = values["c"], values["p0"], values["p1"], values["sizes"]
    folds = sizes.size
    if params["variant"] == "ivap" and folds != 1:
        fail("sizes", problem=f"holds {folds} folds: an ivap map has one")
    bad = np.flatnonzero(sizes != np.floor(sizes))
    if bad.size:
        fail("sizes", int(bad[0]), sizes[bad[0]], "is not a whole number")
    if int(sizes.sum()) != c.size:
        fail("sizes", problem=f"sums to {int(sizes.sum())} thresholds but 'c' has {c.size}")
    for name, arr in (("p0", p0), ("p1", p1)):
        if arr.size != c.size + folds:
            fail(name, problem=f"has {arr.size} values, expected {c.size + folds} (one more than each fold's "
                               "thresholds)")
    bad = np.flatnonzero(p0 > p1)
    if bad.size:
        fail("p0", int(bad[0]), p0[bad[0]], "is above p1 at the same position")
    cs, p0s, p1s = _split(c, p0, p1, sizes)
    for what, arrays, strict in (("c", cs, True), ("p0", p0s, False), ("p1", p1s, False)):
        offset = 0
        for k, arr in enumerate(arrays):
            with np.errstate(over="ignore"):  # thresholds at -1e308 and 1e308: an inf step keeps its sign
                d = np.diff(arr)
            bad = np.flatnonzero(d <= 0 if strict else d < 0)
            if bad.size:
                j = int(bad[0]) + 1
                rule = "strictly increasing" if strict else "non-decreasing"
                fail(what, offset + j, arr[j], f"breaks the order of fold {k}: values must be {rule}")
            offset += arr.size


def _split(c: np.ndarray, p0: np.ndarray, p1: np.ndarray, sizes: np.ndarray) -> tuple[list, list, list]:
    """Per-fold thresholds and step values from the flat saved arrays."""
    n = sizes.astype(np.int64)
    return (np.split(c, np.cumsum(n)[:-1]), np.split(p0, np.cumsum(n + 1)[:-1]),
            np.split(p1, np.cumsum(n + 1)[:-1]))


@register
class VennAbersCalibrator(ScoreCalibrator):
    """Venn-Abers predictor: point prediction from the isotonic pair (p0, p1), and the interval."""

    name = "venn-abers"
    complexity = 2000
    fitted = "two isotonic step functions (p0, p1) per fold (grows with the data)"
    description = ("Venn-Abers predictor (inductive or cross): p1/(1-p0+p1) from the isotonic fits "
                   "with the test score labelled 0 and 1; [p0, p1] is a valid interval (apply --interval)")
    params = (
        Param("variant", str, "ivap", "ivap: one calibration set (valid interval); cvap: cross "
              "Venn-Abers over stratified folds, merged by geometric means", choices=("ivap", "cvap")),
        Param("folds", int, 5, "number of folds of variant=cvap (fewer when there are fewer rows)", low=2,
              high=MAX_FOLDS),
        Param("loss", str, "log", "point prediction from (p0, p1): log: p1/(1-p0+p1); brier: "
              "p1 + (p0^2 - p1^2)/2", choices=("log", "brier")),
        SEED,
    )
    extremes = ("never exactly 0 or 1: the test score counts as a calibration row of each label, "
                "so p1 > 0 and p0 < 1")

    def __init__(self, **params: Any):
        super().__init__(**params)
        # CVAP deals rows to folds: whole-number frequency weights become duplicated rows first.
        self.resamples_rows = self.params["variant"] == "cvap"

    def _fit(self, s, y, w):
        if self.params["variant"] == "ivap":
            parts = [ivap_steps(s, y, w)]
        else:
            ids = fold_ids(s, y, self.params["folds"], self.params["seed"])
            parts = []
            for k in range(self.params["folds"]):
                rows = ids == k
                if np.any(w[rows] > 0):
                    parts.append(ivap_steps(s[rows], y[rows], w[rows]))
        self._set_folds(([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts]))

    def _get_state(self) -> dict[str, Any]:
        """Every fold's thresholds, p0 and p1 concatenated, and the thresholds per fold."""
        return {"c": np.concatenate(self.c_), "p0": np.concatenate(self.p0_), "p1": np.concatenate(self.p1_),
                "sizes": np.array([c.size for c in self.c_], dtype=np.float64)}

    state_spec = StateSpec(
        Field("c", min_size=1),
        Field("p0", unit=True, min_size=2),
        Field("p1", unit=True, same_size="p0"),
        Field("sizes", low=1, min_size=1, max_size=MAX_FOLDS),
        check=_check_state,
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        sizes = np.asarray(state["sizes"], dtype=np.float64)
        self._set_folds(_split(*(np.asarray(state[k], dtype=np.float64) for k in ("c", "p0", "p1")), sizes))

    def _set_folds(self, folds: tuple[list, list, list]) -> None:
        self.c_, self.p0_, self.p1_ = (list(f) for f in folds)
        self._tables_ = self._cell_values_ = None
        if len(self.c_) == 1:  # IVAP: the point prediction between thresholds and at each one
            p0, p1 = self.p0_[0], self.p1_[0]
            self._point_ = (self._point([p0], [p1]), self._point([p0[1:]], [p1[:-1]]))

    def predict_interval(self, scores: Any) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) around the point prediction `predict` gives, which it always holds. IVAP:
        p0 and p1. CVAP: the folds' pairs merged as the point merges them: `loss=log` the two
        numbers 1 - GM(1 - p0_k) and GM(p1_k), in order (when the folds disagree, GM(p1_k) can
        be the lower one; the point lies between them either way), `loss=brier` the means of
        p0_k and of p1_k. Exact arithmetic puts the point inside; the ends are widened to it
        where float rounding does not (by an ulp). NaN for NaN."""
        self._check_fitted()
        s = np.asarray(scores, dtype=np.float64)
        lows, highs = self._pairs(s)
        point = np.clip(self._point(lows, highs), 0.0, 1.0)  # `predict`'s bits: the same operations
        if len(lows) == 1:
            low, high = lows[0], highs[0]
        elif self.params["loss"] == "brier":
            low, high = np.mean(lows, axis=0), np.mean(highs, axis=0)
        else:
            a, b = 1.0 - _geo_mean(1.0 - np.array(lows)), _geo_mean(np.array(highs))
            low, high = np.minimum(a, b), np.maximum(a, b)
        return np.minimum(low, point), np.maximum(high, point)

    def _pairs(self, s: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        nan = np.isnan(s)
        lows, highs = [], []
        for c, p0, p1, table in zip(self.c_, self.p0_, self.p1_, self._tables()):
            right, tie = step_positions(c, s, table)
            low, high = np.take(p0, right), np.take(p1, right)
            if tie.size:
                np.put(high, tie, np.take(p1, np.take(right, tie) - 1))
            if nan.any():
                low[nan] = np.nan
                high[nan] = np.nan
            lows.append(low)
            highs.append(high)
        return lows, highs

    def _predict(self, s):
        if len(self.c_) == 1:
            return self._ivap_point(s)
        return self._point(*self._pairs(s))

    def _point(self, lows: list[np.ndarray], highs: list[np.ndarray]) -> np.ndarray:
        """The point prediction from the folds' (p0, p1) pairs (one pair for IVAP)."""
        if self.params["loss"] == "brier":
            total = np.zeros(lows[0].shape)
            for p0, p1 in zip(lows, highs):
                total += p1 + 0.5 * (p0 * p0 - p1 * p1)
            return total / len(lows)
        if len(lows) == 1:
            p0, p1 = lows[0], highs[0]
            return p1 / (1.0 - p0 + p1)
        g1 = _geo_mean(np.array(highs))
        return g1 / (_geo_mean(1.0 - np.array(lows)) + g1)

    def _ivap_point(self, s: np.ndarray) -> np.ndarray:
        """The IVAP point prediction: one gather of the cell's value, where the cell holds no
        threshold (NaN in `cell_values` marks those that do: their rows search exactly)."""
        c = self.c_[0]
        between, at = self._point_
        table = self._tables()[0]
        if getattr(self, "_cell_values_", None) is None:
            start, busy = table[0], table[1]
            self._cell_values_ = np.where(busy, np.nan, np.take(between, start))
        cell, nan = grid_cells(c, s, table[3])
        out = np.take(self._cell_values_, cell)
        del cell
        rows = np.flatnonzero(np.isnan(out))
        if rows.size:
            sb = np.take(s, rows)
            r = np.searchsorted(c, sb, side="right")
            tie = (r > 0) & (np.take(c, np.maximum(r - 1, 0)) == sb)
            np.put(out, rows, np.where(tie, np.take(at, np.maximum(r - 1, 0)), np.take(between, r)))
        if nan is not None:
            out[nan] = np.nan
        return out

    def _tables(self) -> list[tuple]:
        """The lookup grid of each fold's thresholds, built on first use."""
        if getattr(self, "_tables_", None) is None:
            self._tables_ = [step_table(c) for c in self.c_]
        return self._tables_

    def summary(self) -> dict[str, Any]:
        return {"folds": len(self.c_), "thresholds": int(sum(c.size for c in self.c_))}


def _geo_mean(stack: np.ndarray) -> np.ndarray:
    """Geometric mean over the first axis, as the reference computes it (product, then root)."""
    return stack.prod(axis=0) ** (1.0 / stack.shape[0])
