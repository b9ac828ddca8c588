"""Histogram gradient-boosted trees for `multicalibration` (numpy and scipy.sparse only).

Inputs are binned once per round: a categorical column by its level code (0 = a level not
seen in training), a numeric column by thresholds between its distinct values (at most
MAX_BINS bins, at quantiles when there are more values). A bin histogram of (weight,
gradient, Hessian) is one sparse product, M[rows].T @ [w, g, h], where M is the rows' one-hot
bin matrix; a parent's larger child gets its histogram by subtraction. Trees grow leaf-wise
(best gain first) on the Newton gain GL^2/(HL + l2) + GR^2/(HR + l2) - G^2/(H + l2), as in
LightGBM: numeric splits at a bin boundary, categorical splits by sorting the levels by
G/(H + cat_smooth) and cutting that order (levels with less than `min_cat_weight` weight in
the node stay on the right, with unseen levels), with l2 + cat_l2 in the gain. A leaf's value
is -rate * G/(H + l2). See docs/algorithms.md, "Multicalibration".

A tree is stored as arrays over its nodes: `feature` (-1 for a leaf), `threshold` (numeric:
go left when x <= threshold; categorical: the index of its level set in `sets`), `left`,
`right` (node indices within the tree) and `value` (leaves).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_BINS = 64
_EMPTY = 1e-9  # a side of a split with less than this share of the node's weight counts as empty


def bin_edges(x: np.ndarray, max_bins: int = MAX_BINS) -> np.ndarray:
    """Thresholds t_0 < t_1 < ... between distinct values of x: every distinct value gets its
    own bin when there are at most `max_bins`, else bins of about equal row counts.

    A threshold lies between two adjacent distinct values (their midpoint, or the lower one
    when no float lies strictly between them), so "x <= t" never depends on rounding of x.
    """
    u, c = np.unique(x, return_counts=True)
    if u.size <= 1:
        return np.empty(0)
    if u.size <= max_bins:
        cut = np.arange(u.size - 1)
    else:
        cum = np.cumsum(c)
        cut = np.unique(np.searchsorted(cum, cum[-1] * np.arange(1, max_bins) / max_bins, side="left"))
        cut = cut[cut < u.size - 1]
    lo, hi = u[cut], u[cut + 1]
    mid = lo / 2 + hi / 2  # no overflow near the float64 limit
    return np.where((mid >= lo) & (mid < hi), mid, lo)


def to_bins(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin k of x holds edges[k-1] < x <= edges[k] (bin 0: x <= edges[0])."""
    return np.searchsorted(edges, x, side="left").astype(np.int32)


@dataclass(frozen=True)
class TreeParams:
    """Tree shape and regularisation (LightGBM's names in brackets)."""

    leaves: int = 5  # num_leaves
    min_weight: float = 160.0  # min_child_samples, as summed row weight
    l2: float = 0.0091  # lambda_l2
    min_gain: float = 0.15  # min_gain_to_split
    rate: float = 0.1  # learning_rate
    cat_l2: float = 10.0  # cat_l2
    cat_smooth: float = 10.0  # cat_smooth
    min_cat_weight: float = 100.0  # min_data_per_group
    max_cat_set: int = 32  # max_cat_threshold
    min_hessian: float = 1e-3  # min_sum_hessian_in_leaf


@dataclass
class Tree:
    """One fitted tree as node arrays (see the module docstring); columns below `n_cat` of the
    input matrix are categorical (level codes), the others numeric."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    sets: list[np.ndarray] = field(default_factory=list)

    def leaves(self, x: np.ndarray, n_cat: int) -> np.ndarray:
        """The leaf (node index) of every row of x (rows, columns)."""
        out = np.zeros(x.shape[0], dtype=np.int64)
        todo = [(0, np.arange(x.shape[0]))]
        while todo:
            node, rows = todo.pop()
            f = int(self.feature[node])
            if f < 0 or rows.size == 0:
                out[rows] = node
                continue
            col = x[rows, f]
            if f < n_cat:
                go = np.isin(col, self.sets[int(self.threshold[node])])
            else:
                go = col <= self.threshold[node]
            todo.append((int(self.left[node]), rows[go]))
            todo.append((int(self.right[node]), rows[~go]))
        return out

    def predict(self, x: np.ndarray, n_cat: int) -> np.ndarray:
        """The tree's value for every row of x."""
        return self.value[self.leaves(x, n_cat)]


class Forest:
    """Grows one tree per task at a time, for several tasks (the k folds) in lockstep.

    Task j has its own rows and bins (n_j, columns) with the same bin layout (`sizes`) for
    every task; the histograms of all tasks' nodes come from one sparse product over the
    stacked rows (task j's bins offset by j * total bins), and the split search runs on all
    the new nodes at once, so the Python work per tree is shared by the tasks.
    """

    def __init__(self, bins: list[np.ndarray], sizes: np.ndarray, edges: list[list[np.ndarray | None]],
                 params: TreeParams):
        """`bins[j]` (n_j, columns) int32; `sizes` bins per column (the same for every task);
        `edges[j][f]` the thresholds of numeric column f in task j, None for a categorical one."""
        self.tasks, self.nf = len(bins), bins[0].shape[1]
        is_cat = np.array([e is None for e in edges[0]], dtype=bool)
        self.sizes, self.edges, self.p = sizes, edges, params
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.total = int(sizes.sum())
        self.count = np.array([b.shape[0] for b in bins])
        self.start = np.concatenate([[0], np.cumsum(self.count)])
        self.bins = np.concatenate(bins)
        shift = np.repeat(np.arange(self.tasks) * self.total, self.count)[:, None] + self.offsets[None, :]
        self.flat = (self.bins + shift).astype(np.int64)
        from scipy import sparse  # imported when a fit runs: `calib` starts without scipy.sparse

        n, nf, rows_all = self.flat.shape[0], self.nf, self.tasks * self.total
        self.mt = sparse.csc_matrix((np.ones(n * nf), self.flat.ravel(), np.arange(0, n * nf + 1, nf)),
                                    shape=(rows_all, n))
        feat_of_bin = np.repeat(np.arange(nf), sizes)
        self.feat_of_bin = feat_of_bin
        start_of_bin = self.offsets[feat_of_bin]
        num = ~is_cat[feat_of_bin]
        num[self.offsets + sizes - 1] = False  # the last bin of a numeric column cannot end a left part
        self.num_pos = np.flatnonzero(num)
        self.num_start = start_of_bin[self.num_pos]
        self.cat_bins = np.flatnonzero(is_cat[feat_of_bin])
        self.cat_fid = feat_of_bin[self.cat_bins]
        # position (among the categorical bins) of the first bin of each categorical bin's column
        self.cat_first = np.searchsorted(self.cat_bins, self.offsets[self.cat_fid])
        self.cat_onehot = (self.cat_fid[:, None] == np.arange(nf)[None, :]).astype(np.float64)
        self.gwh = np.empty((n, 3))

    def _hists(self, rows: np.ndarray | None) -> np.ndarray:
        """Bin sums of (w, g, h) per task (tasks, bins, 3) over the stacked `rows` (all when None):
        all rows by the prebuilt sparse matrix, a subset by three bincounts over its bins."""
        if rows is None:
            return np.asarray(self.mt @ self.gwh).reshape(self.tasks, self.total, 3)
        idx = self.flat[rows].ravel()
        sub = self.gwh[rows]
        size = self.tasks * self.total
        out = np.empty((size, 3))
        for k in range(3):
            out[:, k] = np.bincount(idx, np.repeat(sub[:, k], self.nf), size)
        return out.reshape(self.tasks, self.total, 3)

    def _best(self, hist: np.ndarray, tot: np.ndarray) -> list[tuple[float, int, float, np.ndarray | None]]:
        """Per node (hist: nodes x bins x 3, tot: nodes x 3): (gain, column, bin or -1,
        categorical left codes) of its best split; gain -inf when it cannot split."""
        p = self.p
        k = hist.shape[0]
        parent = tot[:, 1] ** 2 / (tot[:, 2] + p.l2)
        gains, orders = [], []
        if self.num_pos.size:
            cum = np.concatenate([np.zeros((k, 1, 3)), np.cumsum(hist, axis=1)], axis=1)
            gains.append(self._gains(cum[:, self.num_pos + 1] - cum[:, self.num_start], tot, p.l2, parent))
            orders.append(None)
        if self.cat_bins.size:
            hc = np.concatenate([hist[:, self.cat_bins]] * 2)  # (2k, C, 3): both sort directions
            elig = (hc[..., 0] >= p.min_cat_weight) & (hc[..., 0] > 0)
            with np.errstate(divide="ignore", invalid="ignore"):  # empty levels are not eligible
                ratio = np.where(elig, hc[..., 1] / (hc[..., 2] + p.cat_smooth), 0.0)
            ratio[k:] *= -1.0
            order = np.lexsort((np.where(elig, ratio, np.inf), np.broadcast_to(self.cat_fid, elig.shape)), axis=-1)
            take = np.arange(2 * k)[:, None]
            el = elig[take, order]
            cum = np.concatenate([np.zeros((2 * k, 1, 3)), np.cumsum(hc[take, order] * el[..., None], axis=1)], axis=1)
            rank = np.arange(self.cat_bins.size) - self.cat_first
            n_elig = (elig @ self.cat_onehot)[:, self.cat_fid]
            ok = (rank < n_elig) & (rank < p.max_cat_set) & el
            g = self._gains(cum[:, 1:] - cum[:, self.cat_first], np.concatenate([tot, tot]), p.l2 + p.cat_l2,
                            np.concatenate([parent, parent]))
            g = np.where(ok, g, -np.inf)
            gains += [g[:k], g[k:]]
            orders += [order[:k], order[k:]]
        picks = [(np.argmax(g, axis=1), order) for g, order in zip(gains, orders)]
        out = []
        for i in range(k):
            best = (-np.inf, -1, -1.0, None)
            for g, (js, order) in zip(gains, picks):
                j = int(js[i])
                if not g[i, j] > best[0]:
                    continue
                if order is None:
                    pos = int(self.num_pos[j])
                    f = int(self.feat_of_bin[pos])
                    best = (float(g[i, j]), f, float(pos - self.offsets[f]), None)
                else:
                    f = int(self.cat_fid[j])
                    members = order[i, self.cat_first[j] : j + 1]
                    best = (float(g[i, j]), f, -1.0, np.sort(self.cat_bins[members] - self.offsets[f]))
            out.append(best)
        return out

    def _gains(self, left: np.ndarray, tot: np.ndarray, l2: float, parent: np.ndarray) -> np.ndarray:
        """Split gains (nodes x positions) for left sums (nodes x positions x 3); -inf where a
        child would hold less than min_weight or min_hessian."""
        p = self.p
        right = tot[:, None, :] - left
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = left[..., 1] ** 2 / (left[..., 2] + l2) + right[..., 1] ** 2 / (right[..., 2] + l2) - parent[:, None]
        # min_weight on both sides, and more than rounding residue: with weights near 1e308 a
        # side holding no row can keep a weight of 1e-16 times the total after subtraction
        floor = np.maximum(p.min_weight, _EMPTY * tot[:, None, 0])
        ok = (left[..., 0] >= floor) & (right[..., 0] >= floor) & (left[..., 0] > 0) & (right[..., 0] > 0)
        ok &= (left[..., 2] >= p.min_hessian) & (right[..., 2] >= p.min_hessian)
        return np.where(ok & np.isfinite(gain), gain, -np.inf)

    def grow(self, g: np.ndarray, h: np.ndarray, w: np.ndarray) -> tuple[list[Tree], np.ndarray]:
        """One tree per task fitted to the stacked gradients g and Hessians h (row weights w
        count toward min_weight), and the leaf value of every stacked row."""
        p = self.p
        self.gwh[:, 0], self.gwh[:, 1], self.gwh[:, 2] = w, g, h
        hist = self._hists(None)
        tot = hist[:, self.offsets[0] : self.offsets[0] + self.sizes[0]].sum(axis=1)
        first = self._best(hist, tot)
        grown = []
        for j in range(self.tasks):
            rows = np.arange(self.start[j], self.start[j + 1])
            grown.append({"nodes": [[-1, 0.0, -1, -1, 0.0]], "sets": [],
                          "leaves": {0: (rows, hist[j], tot[j], first[j])}})
        for split in range(p.leaves - 1):
            last = split == p.leaves - 2  # the last split's children are leaves: no histograms needed
            small_rows, splits = [], []
            for j, tr in enumerate(grown):
                leaves = tr["leaves"]
                node = max(leaves, key=lambda k: leaves[k][3][0])
                rows, nh, nt, (gain, f, thr, codes) = leaves[node]
                if not gain > p.min_gain:
                    continue
                del leaves[node]
                col = self.bins[rows, f]
                if codes is None:
                    go = col <= thr
                else:
                    member = np.zeros(self.sizes[f], dtype=bool)
                    member[codes] = True
                    go = member[col]
                lrows, rrows = rows[go], rows[~go]
                small_is_left = lrows.size <= rrows.size
                small_rows.append(lrows if small_is_left else rrows)
                nodes = tr["nodes"]
                ids = (len(nodes), len(nodes) + 1)
                if codes is None:
                    nodes[node][:4] = [f, float(self.edges[j][f][int(thr)]), ids[0], ids[1]]
                else:
                    nodes[node][:4] = [f, float(len(tr["sets"])), ids[0], ids[1]]
                    tr["sets"].append(codes)
                nodes += [[-1, 0.0, -1, -1, 0.0], [-1, 0.0, -1, -1, 0.0]]
                splits.append((j, ids, lrows, rrows, nh, nt, small_is_left))
            if not splits:
                break
            hs_all = None if last else self._hists(np.concatenate(small_rows))
            stacked_h, stacked_t = [], []
            for (j, ids, lrows, rrows, nh, nt, small_is_left), small in zip(splits, small_rows):
                if last:
                    hs, hb = None, None
                    ts = self.gwh[small].sum(axis=0)
                    tb = nt - ts
                else:
                    hs = hs_all[j]
                    ts = hs[self.offsets[0] : self.offsets[0] + self.sizes[0]].sum(axis=0)
                    hb, tb = nh - hs, nt - ts
                pair = [(hs, ts), (hb, tb)] if small_is_left else [(hb, tb), (hs, ts)]
                stacked_h += [pair[0][0], pair[1][0]]
                stacked_t += [pair[0][1], pair[1][1]]
            no_split = (-np.inf, -1, -1.0, None)
            best = [no_split] * len(stacked_t) if last else self._best(np.stack(stacked_h), np.stack(stacked_t))
            for i, (j, ids, lrows, rrows, *_rest) in enumerate(splits):
                leaves = grown[j]["leaves"]
                leaves[ids[0]] = (lrows, stacked_h[2 * i], stacked_t[2 * i], best[2 * i])
                leaves[ids[1]] = (rrows, stacked_h[2 * i + 1], stacked_t[2 * i + 1], best[2 * i + 1])
        out = np.empty(self.gwh.shape[0])
        trees = []
        for tr in grown:
            nodes = tr["nodes"]
            for node, (rows, _, nt, _) in tr["leaves"].items():
                nodes[node][4] = -p.rate * nt[1] / (nt[2] + p.l2)
                out[rows] = nodes[node][4]
            arr = np.array(nodes, dtype=np.float64)
            trees.append(Tree(arr[:, 0].astype(np.int64), arr[:, 1], arr[:, 2].astype(np.int64),
                              arr[:, 3].astype(np.int64), arr[:, 4], tr["sets"]))
        return trees, out
