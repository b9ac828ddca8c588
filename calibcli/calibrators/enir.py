"""ENIR: an ensemble of near-isotonic regression models, and near-isotonic regression itself.

Near-isotonic regression (Tibshirani, Hoefling & Tibshirani 2011, "Nearly-isotonic
regression", Technometrics 53(1)) minimises, on the scores' order,

    1/2 * sum_i w_i (y_i - b_i)^2 + lambda * sum_i (b_i - b_{i+1})_+ ,

so lambda = 0 reproduces the data and a large lambda gives the isotonic (PAV) fit. ENIR
(Naeini & Cooper 2016, "Binary classifier calibration using an ensemble of near isotonic
regression models", ICDM) fits the models at the breakpoints of that path, scores each by
BIC and averages them with the relative likelihoods as weights.

The path (`near_isotonic_path`) is the modified pool-adjacent-violators algorithm of the
2011 paper, weighted, on the unique scores with their summed weights (ties pooled first):

- at lambda = 0 every unique score is its own group; adjacent unique scores with equal mean
  targets are pooled at once (they are equal for every lambda);
- between events a group's value is b_g(lambda) = mean_g + lambda * (above_L - above_R) / W_g,
  where above_L says the left neighbour is higher and above_R that the group is higher than
  its right neighbour (the group's stationarity condition);
- two neighbours merge when their values meet (groups never split, as the paper shows), which
  changes only the merged group's slope; the next meeting is taken from a heap.

The relative order of two neighbours cannot change without their meeting, so the whole path
is stored as one number per boundary between initial groups: the lambda at which it
disappears. The solution at any lambda is then rebuilt exactly and in a vectorised way
(groups = surviving boundaries, signs = the signs at lambda = 0). The event loop is the only
Python loop: one heap pop and at most two pushes per merge, at most (distinct scores - 1)
merges after runs of equal targets are pooled (`benchmarks/bench_enir.py` times it against
netcal's ENIR). No coarse-graining is done, so the path is exact.

ENIR choices, against what the original R code and netcal do:

- lambda grid: the sorted distinct merge lambdas with 0 prepended, evenly sub-sampled to at
  most `models` values by R's `nearisoGetBreakpoints` rule (index round(k (L-1)/(M-1))).
  The lambda = 0 model (the raw data) is dropped, as in the R code, unless it is the only one.
- score: `criterion=bic` is the R code's BIC = -2 LL + df (ln N + ln 2 pi) (the form the
  Bayes-Iso paper's ENIR numbers come from; netcal omits ln 2 pi); `aic` is -2 LL + 2 df.
  LL is the weighted log-likelihood of the targets, sum w (y ln p + (1-y) ln(1-p)), so
  Platt-corrected (fractional) targets count as such; the R code's `getScoreLocal` counts
  every non-zero label as a positive, which would make every Platt target positive. N is the
  summed weight; df = 1 + the number of changes between neighbouring fitted values rounded
  to 1e-6, as in R (so neighbours that meet at the same lambda up to rounding count once).
  Models with an infinite score (p = 0 or 1 against a target) are dropped, as in R.
- weights exp((min score - score) / 2), averaged over all retained models (R's prediction
  option 1, used by the Bayes-Iso experiments); no elbow pruning (netcal prunes, R builds
  the pruned model but does not use it).
- R also rounds the fitted values themselves to 1e-6; we keep them unrounded.
- The R code's per-bin smoothing p' = (p cnt + e (1 - |o - e|)) / (cnt + 1 - |o - e|), with
  e the mean score and o the mean target of the bin, is the option `smoothing` (default off:
  it treats scores as probabilities, which calibcli does not assume, and it is a detail of
  the R code, not of the method). When on, it is applied to every model before scoring and
  averaging (where exactly R applies it was not checked against its source).

Every model is piecewise linear on the same grid of unique training scores, so the weighted
average of the models' linear interpolants is the linear interpolant of the averaged values:
the map stores only the averaged knots (flat interior knots removed), constant outside the
training range, clipped to [0, 1]. ENIR is not monotone by design.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from calibcli.calibrators.isotonic import compress_knots
from calibcli.calibrators.piecewise import KnotMap
from calibcli.calibrators.registry import register
from calibcli.errors import FitError
from calibcli.calibrators.params import SAFE_PLATT_CORRECTION, Param
from calibcli.numeric.pooling import unique_with_sums


class NearIsotonicPath:
    """The exact weighted near-isotonic solution path of sorted targets `y` with weights `w`.

    Attributes: `merge_lambda` (one per boundary between initial groups: where it vanishes),
    `breakpoints` (sorted distinct merge lambdas), `events` (number of merges).
    """

    def __init__(self, y: np.ndarray, w: np.ndarray):
        y = np.asarray(y, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if y.size == 0 or y.shape != w.shape or np.any(w <= 0):
            raise ValueError("need a non-empty y and positive weights of the same length")
        # Initial groups: runs of equal targets (equal for every lambda). Equal up to _TOL:
        # pooled means of equal targets, w t / w, can differ from t in the last bit, and such
        # rounding must not split a run (it would change the path's breakpoints).
        scale = np.maximum(np.abs(y[1:]), np.abs(y[:-1])) + 1.0
        new_run = np.concatenate([[True], np.abs(y[1:] - y[:-1]) > _TOL * scale])
        self.block_of = np.cumsum(new_run) - 1
        self.W = np.bincount(self.block_of, weights=w)
        self.S = np.bincount(self.block_of, weights=w * y)
        starts = np.flatnonzero(new_run)
        self.c = y[starts]  # exact run value (S / W could differ in the last bit)
        self.down = self.c[:-1] > self.c[1:]  # boundary j: block j above block j+1
        self.merge_lambda = _merge_lambdas(self.c, self.W, self.S, self.down)
        self.events = int(np.isfinite(self.merge_lambda).sum())
        self.breakpoints = _distinct(self.merge_lambda[np.isfinite(self.merge_lambda)])

    def groups(self, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """At `lam`: (block -> group index, group weight, group weighted target sum, value)."""
        alive = self.merge_lambda > lam
        gid = np.concatenate([[0], np.cumsum(alive)])
        wg = np.bincount(gid, weights=self.W)
        sg = np.bincount(gid, weights=self.S)
        dn = self.down[alive].astype(np.float64)
        above_l = np.concatenate([[0.0], dn])
        above_r = np.concatenate([dn, [0.0]])
        if wg.size == 1:
            value = np.array([self.c[0] if self.c.size == 1 else sg[0] / wg[0]])
        else:
            value = sg / wg + lam * (above_l - above_r) / wg
        return gid, wg, sg, value

    def solution(self, lam: float) -> np.ndarray:
        """The fitted value at every input point for penalty `lam` >= 0."""
        if lam < 0:
            raise ValueError("lambda must be >= 0")
        gid, _, _, value = self.groups(lam)
        if lam == 0:
            return self.c[self.block_of]
        return value[gid][self.block_of]

    def lambda_grid(self, max_models: int) -> np.ndarray:
        """0 and the breakpoints, evenly sub-sampled to at most `max_models` (R's rule)."""
        lams = np.unique(np.concatenate([[0.0], self.breakpoints]))
        if lams.size > max_models:
            idx = np.round(np.arange(max_models) / (max_models - 1) * (lams.size - 1)).astype(int)
            lams = lams[idx]
        return lams


def _distinct(lams: np.ndarray) -> np.ndarray:
    """Sorted distinct merge lambdas, those equal up to _TOL (relative) counted once.

    Meetings at the same lambda in exact arithmetic can come out a few ulps apart (a weighted
    row or the same row repeated); each cluster is represented by its largest member, at
    which every boundary of the cluster has merged, so the grid (and the model count) does
    not depend on that rounding.
    """
    lams = np.sort(lams)
    if lams.size < 2:
        return lams
    last = np.concatenate([np.diff(lams) > _TOL * np.maximum(np.abs(lams[1:]), 1.0), [True]])
    return lams[last]


def near_isotonic_path(y: np.ndarray, w: np.ndarray | None = None) -> NearIsotonicPath:
    """The near-isotonic path of targets `y` (already in score order), weights default 1."""
    y = np.asarray(y, dtype=np.float64)
    return NearIsotonicPath(y, np.ones_like(y) if w is None else w)


_TOL = 1e-12  # relative: neighbours this close when their pair is recomputed count as met


def _pair_times(mean_a, slope_a, down, mean_b, slope_b, lam):
    """When neighbours a < b (values mean + lambda * slope) meet, for lambda >= `lam`.

    They approach when a is above b and falls faster, or below and rises faster; otherwise
    they never meet (inf) unless they are already equal (several meetings at one lambda).
    """
    d = slope_a - slope_b
    gap = mean_b - mean_a
    approach = np.where(down, d < 0, d > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tn = np.maximum(gap / d, lam)
    equal = np.abs(gap - lam * d) <= _TOL * (np.maximum(np.abs(mean_a), np.abs(mean_b)) + 1.0)
    return np.where(approach, tn, np.where(equal, lam, np.inf))


def _merge_lambdas(c: np.ndarray, W: np.ndarray, S: np.ndarray, down: np.ndarray) -> np.ndarray:
    """The lambda at which each boundary between initial groups disappears (inf: never).

    Modified PAV of Tibshirani et al. (2011), weighted. A group has value
    mean + lambda * slope with slope = (above_L - above_R) / W; neighbours meet as in
    `_pair_times`. The initial meeting times are vectorised; the merges run in `_heap_phase`.
    (A vectorised variant that merged every pair meeting before any other pending or newly
    created meeting at once was tried: with random labels the admissible batches shrink to a
    few events after three or four rounds, and it saved under 15% at 1e6 rows.)
    """
    n = c.size
    merge = np.full(max(n - 1, 0), np.inf)
    if n < 2:
        return merge
    dn = down.astype(np.float64)
    al = np.concatenate([[0.0], dn])
    ar = np.concatenate([dn, [0.0]])
    slope = (al - ar) / W
    t = _pair_times(c[:-1], slope[:-1], down, c[1:], slope[1:], 0.0)
    _heap_phase(merge, np.arange(n), W, S, c, slope, al, ar, t, 0.0)
    return merge


def _heap_phase(merge, start, Wg, Sg, mean, slope, al, ar, t, lam) -> None:
    """Sequential modified PAV from the given groups and pair times; fills `merge` in place.

    One heap pop and at most two pushes per merge. Groups are keyed by their position in the
    input arrays and kept in a doubly linked list. The heap holds bare floats (about three
    times faster to sift than tuples); `pending[t]` lists the (group, stamp) entries due at
    t, in any order (meetings at the same lambda commute), and an entry whose stamp is no
    longer the group's is stale and skipped. `start` is each group's first initial block.
    """
    G = Wg.size
    if G < 2:
        return
    idx = np.flatnonzero(np.isfinite(t))
    heap = t[idx].tolist()
    pending: dict[float, list[tuple[int, int]]] = {}
    for key, g in zip(heap, idx.tolist()):
        pending.setdefault(key, []).append((g, 0))
    heapq.heapify(heap)
    first = start.tolist()
    Wl, Sl, mean, slope = Wg.tolist(), Sg.tolist(), mean.tolist(), slope.tolist()
    al, ar = al.tolist(), ar.tolist()
    right = list(range(1, G + 1))
    left = list(range(-1, G - 1))
    stamp = [0] * G
    out = {}
    pop, push = heapq.heappop, heapq.heappush
    tol = _TOL

    def schedule(k: int, d: float, gap: float, up: bool, scale: float, lam: float) -> None:
        """Queue when group k meets its right neighbour: gap closes at relative slope d."""
        if (d < 0.0) if up else (d > 0.0):
            tn = max(gap / d, lam)
        elif abs(gap - lam * d) <= tol * scale:
            tn = lam
        else:
            return
        push(heap, tn)
        pending.setdefault(tn, []).append((k, stamp[k]))

    while heap:
        tt = pop(heap)
        entries = pending[tt]
        g, st = entries.pop()
        if not entries:
            del pending[tt]
        if st != stamp[g]:
            continue
        if tt > lam:
            lam = tt
        r = right[g]
        out[first[r] - 1] = lam
        wg = Wl[g] + Wl[r]
        sg = Sl[g] + Sl[r]
        Wl[g] = wg
        Sl[g] = sg
        ag = ar[r]
        ar[g] = ag
        stamp[r] = -1
        rr = right[r]
        right[g] = rr
        yg = sg / wg
        mg = (al[g] - ag) / wg
        mean[g] = yg
        slope[g] = mg
        stamp[g] += 1
        if rr < G:
            left[rr] = g
            schedule(g, mg - slope[rr], mean[rr] - yg, ag, max(abs(yg), abs(mean[rr])) + 1.0, lam)
        lg = left[g]
        if lg >= 0:
            stamp[lg] += 1
            schedule(lg, slope[lg] - mg, yg - mean[lg], ar[lg], max(abs(yg), abs(mean[lg])) + 1.0, lam)
    if out:
        merge[np.fromiter(out.keys(), dtype=np.int64)] = np.fromiter(out.values(), dtype=np.float64)


def _log_likelihood(sg: np.ndarray, wg: np.ndarray, p: np.ndarray) -> float:
    """sum over groups of S ln p + (W - S) ln(1 - p); -inf when p is 0 or 1 against a target."""
    from scipy.special import xlogy

    neg = np.maximum(wg - sg, 0.0)
    return float(np.sum(xlogy(sg, p) + xlogy(neg, 1.0 - p)))


def enir_values(
    xs: np.ndarray,
    sw: np.ndarray,
    swy: np.ndarray,
    max_models: int = 100,
    criterion: str = "bic",
    smoothing: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    """ENIR's averaged fitted value at each unique score `xs` (weights `sw`, sums `swy`).

    Returns the values and diagnostics (models on the grid, models used, breakpoints,
    merge events, effective number of models (sum v)^2 / sum v^2 of the model weights v).
    """
    path = NearIsotonicPath(swy / sw, sw)
    lams = path.lambda_grid(max_models)
    if lams.size > 1:
        lams = lams[1:]  # the lambda = 0 model reproduces the data: dropped as in R
    total = float(sw.sum())
    if smoothing:
        swx = np.bincount(path.block_of, weights=sw * xs)
    penalty = 2.0 if criterion == "aic" else math.log(total) + math.log(2.0 * math.pi)
    kept: list[tuple[float, float, np.ndarray, np.ndarray]] = []
    for lam in lams:
        gid, wg, sg, value = path.groups(float(lam))
        p = np.clip(value, 0.0, 1.0)
        if smoothing:
            e = np.bincount(gid, weights=swx) / wg
            shrink = 1.0 - np.abs(sg / wg - e)
            p = np.clip((p * wg + e * shrink) / (wg + shrink), 0.0, 1.0)
        rounded = np.round(p * 1e6)
        df = 1 + int(np.count_nonzero(rounded[1:] != rounded[:-1]))
        score = -2.0 * _log_likelihood(sg, wg, p) + penalty * df
        if np.isfinite(score):
            kept.append((score, float(lam), gid, p))
    if not kept:
        # Every model puts probability 0 or 1 on some opposite target: use the isotonic end.
        gid, wg, sg, value = path.groups(float(lams[-1]))
        kept.append((0.0, float(lams[-1]), gid, np.clip(value, 0.0, 1.0)))
    scores = np.array([k[0] for k in kept])
    weights = np.exp((scores.min() - scores) / 2.0)
    acc = np.zeros(path.W.size)
    for v, (_, _, gid, p) in zip(weights, kept):
        if v > 0.0:
            acc += v * p[gid]
    values = (acc / weights.sum())[path.block_of]
    info = {
        "models": int(len(kept)),
        "grid": int(lams.size),
        "breakpoints": int(path.breakpoints.size),
        "events": path.events,
        "effective_models": float(weights.sum() ** 2 / np.sum(weights**2)),
    }
    return values, info


def _pooled(s: np.ndarray, y: np.ndarray, w: np.ndarray):
    xs, sw, swy = unique_with_sums(s, y, w)
    keep = sw > 0
    return xs[keep], sw[keep], swy[keep]


class _NearIsotonicFamily(KnotMap):
    """Knot maps fitted on tie-pooled scores that may decrease (near-isotonic, ENIR)."""

    monotone = False

    def summary(self) -> dict[str, Any]:
        out = {"knots": int(self.x_.size)}
        out.update(getattr(self, "info_", {}))
        return out


@register
class ENIRCalibrator(_NearIsotonicFamily):
    """ENIR: BIC-weighted average of near-isotonic fits along the whole lambda path."""

    name = "enir"
    complexity = 3000
    fitted = "the knots of an average of near-isotonic fits (grows with the data)"
    description = "ENIR: BIC-weighted ensemble of near-isotonic regressions along the lambda path"
    params = (
        Param("models", int, 100, "at most this many lambdas from the path (R's maxBreaks)", low=2, high=1000),
        Param("criterion", str, "bic", "model score: bic (as the R code) or aic", choices=("bic", "aic")),
        Param("smoothing", bool, False, "the R code's per-bin shrinkage toward the mean score"),
        SAFE_PLATT_CORRECTION,
    )

    def _fit(self, s, y, w):
        if self.params["smoothing"] and (s.min() < 0 or s.max() > 1):
            raise FitError(
                "smoothing=true treats scores as probabilities: they must lie in [0, 1]",
                hint="turn smoothing off or calibrate probabilities",
            )
        xs, sw, swy = _pooled(s, y, w)
        values, self.info_ = enir_values(
            xs, sw, swy, self.params["models"], self.params["criterion"], self.params["smoothing"]
        )
        self.x_, self.y_ = compress_knots(xs, values)


@register
class NearIsotonicCalibrator(_NearIsotonicFamily):
    """Near-isotonic regression at one penalty lambda (on summed weights)."""

    name = "near-isotonic"
    complexity = 1000
    fitted = "one value per fused block of scores (grows with the data)"
    description = "near-isotonic regression: least squares + lambda * sum of decreases, linear between knots"
    params = (
        Param(
            "lam",
            float,
            1.0,
            "lambda: penalty per unit decrease, in units of weight (0: raw means, large: isotonic)",
            low=0.0,
            high=1e15,
        ),
        SAFE_PLATT_CORRECTION,
    )

    def _fit(self, s, y, w):
        xs, sw, swy = _pooled(s, y, w)
        path = NearIsotonicPath(swy / sw, sw)
        self.x_, self.y_ = compress_knots(xs, path.solution(self.params["lam"]))
