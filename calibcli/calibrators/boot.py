"""Boot-isotonic regression and boot-binning (Zitnik 2012), adapted to fixed scores.

Reference
---------
M. Zitnik, "Reliable Calibrated Probability Estimation in Classification", 2012,
section III (boot-isotonic regression and boot-binning). No code by the author is
known, so the paper's four stages are the spec, adapted as follows.

The paper bootstraps the *training* set and retrains the classifier in every round; `calib`
only has scores and labels, so a round here is:

1. draw a bootstrap sample (n draws with replacement) of the calibration rows;
2. fit isotonic regression (`pav` / `compress_knots` / `interpolate`, as the `isotonic`
   method, on the round's tie-pooled in-bag sums) or
   equal-frequency histogram binning (`bin_edges` / `bin_values`, the `binning` method) on
   the in-bag rows, counting a row drawn k times with weight k;
3. predict the out-of-bag rows (the ~37% never drawn) and record those calibrated values.

The roles of the two parts are the other way round from the paper's: there the in-bag rows
train the classifier and the calibrator is fit on the out-of-bag rows (its "calibration
set"); here the calibrator is fit on the in-bag rows and evaluated out of bag, which is
the only way to use a bootstrap when the scores are fixed.

After r rounds, each row has one value per round in which it was out of bag. Stage four:

4. per row, the Hodges-Lehmann pseudo-median (median of the Walsh averages
   (v_j + v_k)/2, j <= k) and the Wilcoxon signed-rank confidence interval
   [W_(q), W_(M+1-q)] of the sorted Walsh averages, M = m(m+1)/2, q = the
   smallest x with P(T <= x) >= alpha/2 under the exact null distribution of the
   signed-rank statistic T for m values (at least 1), as R's `wilcox.test(conf.int=TRUE)`;
   its coverage is >= conf_level only without ties: a row's out-of-bag values repeat
   whenever rounds agree (a flat stretch of the map gives many equal values), and the
   exact null distribution assumes distinct values, so with ties the interval is an
   approximation (R warns "cannot compute exact confidence interval with ties" there);
5. bins: start from the union of the rounds' bins (a cut between two neighbouring distinct
   scores wherever any round's map changes value there) and merge repeatedly: a row's
   interval is *contained* in its bin when the bin's interval covers at least the fraction
   `t_in` of it; a bin with fewer than `t_count` contained intervals is merged with a
   neighbour. A bin's value is the mean pseudo-median of its rows.
6. boot-binning: piecewise constant over the final bins. Boot-isotonic: weighted PAV over
   the bins' values, knots at each bin's weighted mean score, linear between knots and
   constant outside (monotone). Knots at both ends of each bin (flat inside, as `isotonic`
   does for its pools) made the map a staircase: on the sets below its MSE was 0.007-0.012
   worse than with centre knots, and worse than plain isotonic.

Where the paper is ambiguous, and what we chose
-----------------------------------------------
- *What a round fits on.* The paper retrains a classifier; scores are fixed here, so rounds
  differ only by which rows calibrate (the issue's adaptation).
- *Confidence level.* Not given: option `conf_level`, default 0.95. With m < 6 out-of-bag values the exact
  test cannot reach 0.95 and the interval is [min, max] of the Walsh averages (q = 1, as R).
- *Rows never out of bag* (probability ~0.63^r each): they use all r rounds' values.
- *"Merging two sets of intervals obtained from two repetitions".* Read as: the final bins
  start from the union of all rounds' bin boundaries (the common refinement of the rounds'
  partitions), which merging then coarsens.
- *A bin's interval* (what a row's interval must overlap by t_in). Bins are score ranges,
  but intervals are probabilities, so a bin's interval is its *cell* on the probability
  axis: the probabilities closer to its value than to its neighbours' values (midpoint to
  midpoint; the outer bins reach 0 and 1). A bin counts its own rows' intervals. "Too
  narrow" bins (values close to a neighbour's) and bins whose rows disagree (anomalies,
  flipped labels) then fail and are merged, as the paper intends. Tried and rejected:
  the bin's mean interval of its rows (not monotone in the bin size: a bin spanning a slope
  never reaches t_count; the 100-row sets collapsed to one bin, test MSE ~0.25).
- *How bins are merged.* In passes: every bin failing t_count is merged with the neighbour
  whose value is closer (ties: the left one; first/last bins have one neighbour), all at
  once, until none fails or one bin is left. Each pass is vectorised. For boot-isotonic
  the bin values are made monotone (PAV) before the cells are formed.
- *Final values.* "Probabilities are merged accordingly": the weighted mean of the rows'
  pseudo-medians in a bin; boot-isotonic then applies PAV so the map is monotone.
- *t_count.* The paper's best setting on its 100-example sets is T_count = 15 (r = 15,
  T_in = 0.7 for boot-isotonic; r = 10, T_in = 0.6, n_bin = 13 for boot-binning). With the
  intervals built here (at 95% a row's Wilcoxon interval from its ~0.37 r out-of-bag values
  spans nearly all of them), 15 merges 100 rows into 2-4 bins. Mean test MSE over 40 seeds
  on the paper's artificial sets (built as in tests/calibrators/test_boot.py; r = 20, t_in = 0.7):

      t_count   A0/D0   A1     A2     D1     D2      (plain isotonic: .1765 .1842 .1819 .1799 .1881)
      15        .1720  .1859  .1744  .1837  .1980
      10        .1708  .1819  .1724  .1770  .1887
      5         .1710  .1807  .1725  .1739  .1803

  so the default is `t_count` = 5, read as a count (large sets keep fine bins); a value
  < 1 is a fraction of the (weighted) number of rows, e.g. 0.15 is the paper's 15 of 100.
- *Boot-binning edges.* Inside a round, a score equal to a bin edge belongs to the bin
  below, as in `binning` (`bin_values`). The final map's edges lie midway between the last
  score of a bin and the first of the next, so no training score sits on one.
- *Weights.* Frequency weights (the default kind) that are whole numbers are expanded into
  duplicated rows before anything random happens (`Calibrator.fit`, up to 2e6 rows), so a
  weight-k row is exactly k duplicated rows. Other weights (fractional, importance weights
  rescaled to sum to the number of rows, or more than 2e6 expanded rows): a draw picks a
  row with probability proportional to its weight, n draws per round. Zero-weight rows are
  dropped; t_count counts contained intervals by weight.
- *Row order.* Rows are sorted by (score, target, weight) before any random step, so the
  map does not depend on the input order.
"""

from __future__ import annotations

import math

from typing import Any

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator, fit_warning
from calibcli.calibrators.binning import bin_edges, bin_values
from calibcli.calibrators.fitdata import weighted_rows
from calibcli.calibrators.isotonic import compress_knots, pav
from calibcli.calibrators.piecewise import KnotMap, StepMap, interpolate
from calibcli.calibrators.registry import register
from calibcli.calibrators.params import SAFE_PLATT_CORRECTION, SEED, Param

_WALSH_BLOCK = 4_000_000  # Walsh averages held at once (rows x pairs), ~32 MB of float64


def signrank_lower_index(m_max: int, alpha: float) -> np.ndarray:
    """q[m] for m = 0..m_max: smallest x with P(T <= x) >= alpha/2, at least 1 (R's qsignrank).

    T is the Wilcoxon signed-rank statistic of m values under the null; its exact
    distribution is built by the recursion P_m(t) = (P_{m-1}(t) + P_{m-1}(t - m)) / 2.
    """
    q = np.ones(m_max + 1, dtype=np.int64)
    dist = np.ones(1)
    for m in range(1, m_max + 1):
        new = np.zeros(dist.size + m)
        new[: dist.size] += 0.5 * dist
        new[m:] += 0.5 * dist
        dist = new
        cdf = np.cumsum(dist)
        q[m] = max(1, int(np.searchsorted(cdf, alpha / 2 * (1 - 1e-12), side="left")))
    return q


def walsh_summary(values: np.ndarray, valid: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: Hodges-Lehmann pseudo-median and Wilcoxon interval of its valid values.

    `values` is rows x r, `valid` marks the entries that count (each row needs >= 1), and
    q[m] the 1-based lower order statistic of the Walsh averages for m values. Rows with
    the same count m are handled together: their m valid values, the m(m+1)/2 Walsh
    averages, and `np.partition` at the four order statistics needed (no full sort), in
    blocks of at most _WALSH_BLOCK averages.
    """
    n = values.shape[0]
    m_all = valid.sum(axis=1)
    hl, lo, hi = np.empty(n), np.empty(n), np.empty(n)
    for m in np.unique(m_all):
        rows = np.flatnonzero(m_all == m)
        j, k = np.triu_indices(m)
        big_m = j.size
        kth = np.unique([(big_m - 1) // 2, big_m // 2, q[m] - 1, big_m - q[m]])
        block = max(1, _WALSH_BLOCK // big_m)
        for start in range(0, rows.size, block):
            idx = rows[start : start + block]
            v = np.sort(np.where(valid[idx], values[idx], np.inf), axis=1)[:, :m]  # valid first
            walsh = np.partition((v[:, j] + v[:, k]) * 0.5, kth, axis=1)
            hl[idx] = 0.5 * (walsh[:, (big_m - 1) // 2] + walsh[:, big_m // 2])
            lo[idx] = walsh[:, q[m] - 1]
            hi[idx] = walsh[:, big_m - q[m]]
    return hl, lo, hi


def bin_cells(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each bin's probability interval: the values closer to its own than to a neighbour's.

    For increasing values this is [midpoint to the left value, midpoint to the right value];
    the first and last bins reach 0 and 1. A neighbour with an equal value gives a
    zero-width side, so equal-valued neighbours are never both kept.
    """
    lo = np.zeros(value.size)
    hi = np.ones(value.size)
    for nb_value, own in ((value[:-1], slice(1, None)), (value[1:], slice(None, -1))):
        mid = 0.5 * (value[own] + nb_value)
        above = nb_value >= value[own]
        hi[own] = np.where(above, np.minimum(hi[own], mid), hi[own])
        lo[own] = np.where(~above | (nb_value == value[own]), np.maximum(lo[own], mid), lo[own])
    return lo, hi


def merge_bins(cut: np.ndarray, group: np.ndarray, w: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               t_in: float, t_count: float, monotone: bool) -> np.ndarray:
    """Coarsen the partition `cut` (True between score groups g and g+1) until every bin
    contains at least `t_count` (by weight) of its rows' intervals; returns the final cuts.

    Rows are given by their score group, weight, pseudo-median h and interval [lo, hi]. A
    bin's value is its rows' mean pseudo-median (PAV over bins when `monotone`); its
    interval is `bin_cells` of the values. Failing bins join their closer-valued neighbour,
    all in one vectorised pass, until none fails or a single bin is left.
    """
    cut = cut.copy()
    length = hi - lo
    need = t_count * (1 - 1e-12)
    while cut.any():
        bin_of_group = np.concatenate([[0], np.cumsum(cut)])
        nb = int(bin_of_group[-1]) + 1
        b = bin_of_group[group]
        sw = np.bincount(b, weights=w, minlength=nb)
        value = np.bincount(b, weights=w * h, minlength=nb) / sw
        if monotone:
            value = pav(value, sw)
        cell_lo, cell_hi = bin_cells(value)
        bl, bh = cell_lo[b], cell_hi[b]
        overlap = np.minimum(hi, bh) - np.maximum(lo, bl)
        inside = np.where(
            length > 0, overlap >= t_in * length * (1 - 1e-12), (lo >= bl) & (lo <= bh)
        )
        count = np.bincount(b, weights=w * inside, minlength=nb)
        fail = count < need
        if not fail.any():
            break
        left = np.abs(value[1:-1] - value[:-2])
        right = np.abs(value[1:-1] - value[2:])
        go_left = np.concatenate([[False], left <= right, [True]])
        starts = np.flatnonzero(cut)  # the boundary before bin i is cut index starts[i - 1]
        fb = np.flatnonzero(fail)
        cut[starts[np.where(go_left[fb], fb - 1, fb)]] = False
    return cut


class _BootBase(ScoreCalibrator):
    """Shared fit: canonical order, vectorised bootstrap rounds, Walsh summary, merging."""

    monotone = True
    resamples_rows = True

    def _round_values(self, xs: np.ndarray, sw: np.ndarray, swy: np.ndarray) -> np.ndarray:
        """Calibrated values at every distinct score, fitted on one round's in-bag sums."""
        raise NotImplementedError

    def _fit(self, s, y, w):
        s, y, w = weighted_rows(s, y, w)
        order = np.lexsort((w, y, s))
        s, y, w = s[order], y[order], w[order]
        n = s.size
        r = self.params["r"]
        xs, group = np.unique(s, return_inverse=True)
        n_groups = xs.size

        rng = np.random.default_rng(self.params["seed"])
        u = rng.random((r, n))
        if np.all(w == w[0]):
            draws = (u * n).astype(np.int64)  # what the weighted search gives, without it
        else:
            cum = np.cumsum(w)
            draws = np.searchsorted(cum, u * cum[-1], side="right")
        draws = np.minimum(draws, n - 1)
        offset = np.arange(r)[:, None]
        in_bag = np.bincount((draws + offset * n).ravel(), minlength=r * n).reshape(r, n) > 0
        flat = (group[draws] + offset * n_groups).ravel()
        gsw = np.bincount(flat, minlength=r * n_groups).reshape(r, n_groups).astype(np.float64)
        gswy = np.bincount(flat, weights=y[draws].ravel(), minlength=r * n_groups).reshape(r, n_groups)
        table = np.empty((r, n_groups))
        for k in range(r):
            table[k] = self._round_values(xs, gsw[k], gswy[k])

        oob = ~in_bag.T  # rows x rounds
        never = ~oob.any(axis=1)
        oob[never] = True
        q = signrank_lower_index(r, 1.0 - self.params["conf_level"])
        h, lo, hi = walsh_summary(table.T[group], oob, q)

        t_count = self.params["t_count"]
        needed = t_count * w.sum() if t_count < 1 else t_count
        if needed > w.sum():
            fit_warning(f"{self.name}: t_count={t_count:g} exceeds the number of rows ({w.sum():g}); "
                        "the map is a single bin", stacklevel=2)
        cut0 = np.any(table[:, 1:] != table[:, :-1], axis=0)
        cut = merge_bins(cut0, group, w, h, lo, hi, self.params["t_in"], needed, self.monotone)

        bin_of_group = np.concatenate([[0], np.cumsum(cut)])
        nb = int(bin_of_group[-1]) + 1
        b = bin_of_group[group]
        bw = np.bincount(b, weights=w, minlength=nb)
        value = np.bincount(b, weights=w * h, minlength=nb) / bw
        first = xs[np.concatenate([[0], np.flatnonzero(cut) + 1])]
        last = xs[np.concatenate([np.flatnonzero(cut), [n_groups - 1]])]
        self.n_bins_ = nb
        self.n_rounds_oob_ = float(np.mean((~in_bag).sum(axis=0)))
        centre = np.clip(_weighted_means(b, w, s, bw, nb), first, last)  # rounding
        self._finish(first, last, centre, value, bw)

    def _finish(self, first, last, centre, value, weight) -> None:
        """Store the final map from each bin's score range, weighted mean score, value, weight."""
        raise NotImplementedError


def _weighted_means(b: np.ndarray, w: np.ndarray, s: np.ndarray, bw: np.ndarray, nb: int) -> np.ndarray:
    """Weighted mean score of each bin; scores beyond 2**256 are summed scaled by a power of
    two (exact), so that w * s and the sums cannot overflow."""
    e = math.frexp(float(np.max(np.abs(s))))[1]
    if e <= 256:
        return np.bincount(b, weights=w * s, minlength=nb) / bw
    return np.ldexp(np.bincount(b, weights=w * np.ldexp(s, -e), minlength=nb) / bw, e)


def _common_params() -> tuple[Param, ...]:
    return (
        Param("r", int, 20, "bootstrap rounds (memory and time grow as r x rows)", low=1, high=500),
        Param("t_in", float, 0.7, "fraction of a row's confidence interval a bin must cover to contain it",
              low=0.0, high=1.0),
        Param("t_count", float, 5.0,
              "contained intervals a bin needs (a count; < 1 means a fraction of the rows)", low=0.0,
              high=1e12),
        Param("conf_level", float, 0.95, "Wilcoxon confidence level of each row's interval",
              low=0.5, high=0.999),
        SEED,
        SAFE_PLATT_CORRECTION,
    )


@register
class BootIsotonicCalibrator(_BootBase, KnotMap):
    """Boot-isotonic regression: bootstrapped isotonic fits, merged bins, PAV over the bins."""

    name = "boot-isotonic"
    complexity = 3000
    fitted = "the knots of an average of bootstrapped isotonic fits (grows with the data)"
    description = "bootstrapped isotonic regression with Wilcoxon-interval bin merging (Zitnik 2012)"
    params = _common_params()

    def _round_values(self, xs, sw, swy):
        m = sw > 0  # xs is already sorted and distinct: PAV directly, as isotonic_knots would
        kx, ky = compress_knots(xs[m], pav(swy[m] / sw[m], sw[m]))
        return interpolate(kx, ky, xs)

    def _finish(self, first, last, centre, value, weight):
        self.x_, self.y_ = compress_knots(centre, pav(value, weight))

    def summary(self) -> dict[str, Any]:
        out = {"knots": int(self.x_.size)}
        if hasattr(self, "n_bins_"):
            out.update(merged_bins=self.n_bins_, mean_oob_rounds=round(self.n_rounds_oob_, 2))
        return out


@register
class BootBinningCalibrator(_BootBase, StepMap):
    """Boot-binning: bootstrapped equal-frequency binning, merged bins, piecewise constant."""

    name = "boot-binning"
    complexity = 3000
    fitted = "the merged bins of bootstrapped binnings (grows with the data)"
    description = "bootstrapped histogram binning with Wilcoxon-interval bin merging (Zitnik 2012)"
    params = _common_params()[:1] + (
        Param("n_bins", int, 10, "equal-frequency bins per bootstrap round", low=1, high=1_000_000),
    ) + _common_params()[1:]
    monotone = False
    edge_side = "right"

    def _round_values(self, xs, sw, swy):
        m = sw > 0
        xm, wm = xs[m], sw[m]
        edges = bin_edges(xm, wm, self.params["n_bins"], "quantile")
        values = bin_values(xm, swy[m] / wm, wm, edges)
        return values[np.searchsorted(edges, xs, side="left")]  # as bin_values: edge -> bin below

    def _finish(self, first, last, centre, value, weight):
        lo, hi = last[:-1], first[1:]
        with np.errstate(over="ignore"):
            mid = lo + (hi - lo) * 0.5
        wide = ~np.isfinite(mid)
        mid[wide] = lo[wide] * 0.5 + hi[wide] * 0.5
        self.edges_ = np.where(mid > lo, mid, hi)
        self.values_ = value

    def summary(self) -> dict[str, Any]:
        out = {"bins": int(self.values_.size)}
        if hasattr(self, "n_bins_"):
            out["mean_oob_rounds"] = round(self.n_rounds_oob_, 2)
        return out
