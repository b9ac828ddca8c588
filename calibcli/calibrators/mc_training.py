"""Fitting `multicalibration`: round 0 is the additive stage alone; rounds 1..R start from
Platt's logit and each adds trees, then refits the additive terms with the trees held fixed;
R is chosen by k-fold held-out log-loss. See `multicalibration.py` for the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from calibcli.calibrators.mc_additive import Rows, Terms, design_of, fast_sigmoid, fit_terms
from calibcli.calibrators.mc_trees import MAX_BINS, Forest, Tree, TreeParams, bin_edges, to_bins


@dataclass
class Round:
    """One boosted round: trees on (levels, numeric columns, logit at the round's start), then
    the additive terms refitted with the trees held fixed (`correction`)."""

    trees: list[Tree]
    correction: Terms


@dataclass
class Model:
    """The fitted logit: base terms, then the rounds in order (replayed identically at fit and predict)."""

    base: Terms
    n_cat: int  # the first n_cat code columns are the categorical columns the trees split on
    rounds: list[Round] = field(default_factory=list)

    def start(self, logit: np.ndarray, codes: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.base.logit(logit, codes, x)

    def apply_round(self, r: int, z: np.ndarray, codes: np.ndarray, raw: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The logit after round r, from the logit before it (z) and the row's inputs."""
        inputs = tree_inputs(codes[:, : self.n_cat], raw, z)
        t = np.zeros(z.size)
        for tree in self.rounds[r].trees:
            t = t + tree.predict(inputs, self.n_cat)
        return (z + t) + self.rounds[r].correction.logit(None, codes, x)

    def logit(self, logit: np.ndarray, codes: np.ndarray, raw: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The final logit of rows with input logit, level codes, raw and standardised numeric columns."""
        z = self.start(logit, codes, x)
        for r in range(len(self.rounds)):
            z = self.apply_round(r, z, codes, raw, x)
        return z


def tree_inputs(codes: np.ndarray, raw: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The trees' input matrix: level codes, raw numeric columns, the current logit."""
    return np.column_stack([codes.astype(np.float64), raw, z])


def tree_params(params: Mapping[str, Any]) -> TreeParams:
    return TreeParams(leaves=params["leaves"], min_weight=params["min_weight"], l2=params["l2"],
                      min_gain=params["min_gain"], rate=params["rate"])


def weighted_logloss(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Summed (not mean) weighted log-loss of sigmoid(z)."""
    return float(np.sum(w * (np.logaddexp(0.0, z) - y * z)))


class Boost:
    """Fits on several row sets at once (the k folds, or all rows), advanced a round at a time
    in lockstep (`step`), each tracking the log-loss of its held-out rows after every round."""

    def __init__(self, rows: Rows, raw: np.ndarray, n_cat: int, params: Mapping[str, Any],
                 tasks: list[tuple[np.ndarray, np.ndarray | None]], tau2: list[float],
                 additive: Terms | None = None):
        """`rows.codes[:, :n_cat]` are the categorical columns (the trees' inputs with `raw`);
        the other code columns are binned numeric columns and the binned logit (additive stage
        only). `tau2`: the shift tables' prior variances, estimated once on all rows;
        `additive`: the additive fit of a single task's rows when already known."""
        self.params = params
        nc = n_cat
        # numeric thresholds come from every row's values (no labels), shared by the tasks
        self.edges: list[np.ndarray | None] = [None] * nc + [bin_edges(raw[:, j]) for j in range(raw.shape[1])]
        static = np.column_stack([rows.codes[:, :nc].astype(np.int32)] +
                                 [to_bins(raw[:, j], self.edges[nc + j]) for j in range(raw.shape[1])])
        self.sizes = np.array(list(rows.sizes[:nc]) + [e.size + 1 for e in self.edges[nc:]] + [MAX_BINS],
                              dtype=np.int64)
        self.fits = []
        for train_idx, held_idx in tasks:
            sub = rows.take(train_idx)
            design = design_of(sub)
            fitted = additive if additive is not None else fit_terms(sub, tau2=tau2, design=design)[0]
            start = platt_start(sub, fitted)
            refit_rows = Rows(None, sub.codes, sub.sizes, sub.x, sub.y, sub.w)
            fit = {"rows": sub, "raw": raw[train_idx], "static": static[train_idx], "tau2": tau2,
                   "additive": fitted, "model": Model(start, n_cat), "totals": replace(start), "losses": [],
                   "refit": (refit_rows, design_of(refit_rows, like=design))}
            fit["z"] = fit["model"].start(sub.logit, sub.codes, sub.x)
            if held_idx is not None:
                held = rows.take(held_idx)
                fit["held"] = (held, raw[held_idx])
                fit["zh"] = fit["model"].start(held.logit, held.codes, held.x)
                fit["losses"].append(weighted_logloss(fitted.logit(held.logit, held.codes, held.x), held.y, held.w))
            self.fits.append(fit)

    def step(self) -> None:
        """One more round for every task: trees in lockstep, then each task's refit."""
        p, fits = self.params, self.fits
        bins, edges = [], []
        for fit in fits:
            ez = bin_edges(fit["z"])
            bins.append(np.column_stack([fit["static"], to_bins(fit["z"], ez)]))
            edges.append(self.edges + [ez])
        forest = Forest(bins, self.sizes, edges, tree_params(p))
        z = np.concatenate([f["z"] for f in fits])
        y = np.concatenate([f["rows"].y for f in fits])
        w = np.concatenate([f["rows"].w for f in fits])
        owner = np.repeat(np.arange(len(fits)), [f["z"].size for f in fits])
        done = np.zeros(len(fits), dtype=bool)
        t = np.zeros(z.size)
        trees: list[list[Tree]] = [[] for _ in fits]
        for _ in range(p["trees"]):
            q = fast_sigmoid(z + t)
            grown, values = forest.grow(w * (q - y), w * q * (1.0 - q), w)
            for j, tree in enumerate(grown):
                if tree.feature[0] < 0:
                    done[j] = True  # no split: the round adds nothing more for this task
                if not done[j]:
                    trees[j].append(tree)
            if done.all():
                break
            t = t + np.where(done[owner], 0.0, values)
        for j, fit in enumerate(fits):
            rows = fit["rows"]
            zj = fit["z"] + t[owner == j]
            refit_rows, design = fit["refit"]
            corr, _, _ = fit_terms(refit_rows, offset=zj, centre=fit["totals"], tau2=fit["tau2"], design=design)
            fit["model"].rounds.append(Round(trees[j], corr))
            fit["z"] = zj + corr.logit(None, rows.codes, rows.x)
            tot = fit["totals"]
            fit["totals"] = Terms(tot.intercept + corr.intercept, tot.slope,
                                  [a + b for a, b in zip(tot.shifts, corr.shifts)], tot.linear + corr.linear)
            if "held" in fit:
                held, hraw = fit["held"]
                fit["zh"] = fit["model"].apply_round(len(fit["model"].rounds) - 1, fit["zh"], held.codes, hraw, held.x)
                fit["losses"].append(weighted_logloss(fit["zh"], held.y, held.w))


def platt_start(rows: Rows, like: Terms) -> Terms:
    """Where the rounds start: intercept + slope of the logit only (Platt), the other terms 0.

    The additive stage (round 0) makes every level's summed residual about 0, so an effect
    that lives only in an intersection (a0 & b0) leaves no gain to a first split on a or on b,
    and greedy trees would not find it; from Platt's logit the marginal residuals show it,
    and each round's refit then adds the shifts with the trees held fixed.
    """
    none = Rows(rows.logit, rows.codes[:, :0], [], rows.x[:, :0], rows.y, rows.w)
    platt, _, _ = fit_terms(none)
    return Terms(platt.intercept, platt.slope, [np.zeros_like(v) for v in like.shifts], np.zeros_like(like.linear))


def folds_of(y: np.ndarray, k: int, seed: int) -> np.ndarray:
    """A fold (0..k-1) per row, stratified by label (y > 0.5), from a seeded permutation."""
    perm = np.random.default_rng(seed).permutation(y.size)
    fold = np.empty(y.size, dtype=np.int64)
    for cls in (False, True):
        members = perm[(y[perm] > 0.5) == cls]
        fold[members] = np.arange(members.size) % k
    return fold


def choose_rounds(rows: Rows, raw: np.ndarray, n_cat: int, params: Mapping[str, Any],
                  tau2: list[float]) -> tuple[int, dict[str, Any]]:
    """The number of rounds (0 allowed) with the lowest k-fold held-out log-loss: all folds
    advance a round at a time and the search stops after `patience` rounds without
    improvement of the summed held-out loss."""
    k, max_rounds = params["folds"], params["rounds"]
    positives = int(np.count_nonzero(rows.y > 0.5))
    if max_rounds == 0 or min(positives, rows.y.size - positives) < k or rows.w.sum() < 2 * params["min_weight"]:
        return 0, {"folds": 0, "reason": "too few rows per class or in total for a k-fold choice"}
    fold = folds_of(rows.y, k, params["seed"])
    boost = Boost(rows, raw, n_cat, params, [(np.flatnonzero(fold != j), np.flatnonzero(fold == j)) for j in range(k)],
                  tau2)
    total = float(rows.w.sum())
    history = [sum(f["losses"][0] for f in boost.fits) / total]
    best, bad = 0, 0
    for r in range(1, max_rounds + 1):
        boost.step()
        history.append(sum(f["losses"][r] for f in boost.fits) / total)
        if history[-1] < history[best]:
            best, bad = r, 0
        else:
            bad += 1
            if bad > params["patience"]:
                break
    return best, {"folds": k, "heldout_logloss": history}


def train(rows: Rows, raw: np.ndarray, n_cat: int, params: Mapping[str, Any]) -> tuple[Model, dict[str, Any]]:
    """The shift tables' prior variances on all rows, the rounds chosen by k-fold, then the
    additive stage (0 rounds) or that many rounds on all rows."""
    additive, tau2, first = fit_terms(rows)  # the prior variances (empirical Bayes), once on all rows
    rounds, choice = choose_rounds(rows, raw, n_cat, params, tau2)
    boost = Boost(rows, raw, n_cat, params, [(np.arange(rows.y.size), None)], tau2, additive)
    for _ in range(rounds):
        boost.step()
    fit = boost.fits[0]
    model = fit["model"] if rounds else Model(fit["additive"], n_cat)
    info = {"rounds": rounds, "selection": choice, "shift_sd": first["shift_sd"],
            "trees": [len(r.trees) for r in model.rounds]}
    return model, info
