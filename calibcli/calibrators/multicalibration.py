"""Multicalibration: shrunk per-level shifts, then boosted trees over the fields, the numeric
columns and the current logit, each round followed by an exact refit of the shifts.

    round 0:  z = c + m * logit + sum_f s_f[z_f] + band shifts + sum_j beta_j x_j   (additive)
    round r:  z_r = z_{r-1} + sum_t tree_rt(z_1..z_F, x, z_{r-1})                     (trees)
                    + c_r + sum_f d_rf[z_f] + band shifts + sum_j b_rj x_j          (refit)
              with z_0 = Platt's c + m * logit when R >= 1
    q = sigmoid(z_R)

with z_f the level of categorical column f, x the numeric columns (standardised in the
additive terms, raw in the trees), band shifts one shrunk shift per quantile band of each
numeric column and of the logit. This is the boosted design of MCGrad (Tax et al., KDD 2026):
each round's trees start from and split on the logit the previous round left, so what remains
miscalibrated at some logit inside some segment (one airport at high delays; race x sex) is
the next round's target, which additive shifts cannot reach. Differences, and why:

- The additive terms (`mc_additive.py`): per-level and per-band shifts with an empirical-Bayes
  prior, so a rare level is shrunk and a level with many rows keeps its own offset. Round 0
  is these terms alone; rounds start from Platt's logit instead, because the additive fit
  leaves every level's summed residual at 0 and a greedy tree then sees no gain in a first
  split on either half of an intersection.
- After every round the intercept, the shifts (levels, numeric bands, logit bands) and the
  linear terms are refitted with the trees held fixed (Newton to convergence), so the map is
  unbiased on its fit rows: the weighted mean prediction equals the weighted mean label
  overall, and in each level and band up to the shrinkage term (sum over the level of
  w (y - p) = its total shift / tau^2). Trees with a learning rate and an L2 penalty otherwise
  leave a bias (MCGrad rescales the logit for it).
- The trees are this package's own histogram trees in numpy (`mc_trees.py`: LightGBM's
  leaf-wise growth, gain, categorical sort and defaults for leaves, min rows, L2, min gain),
  with fewer trees per round at a higher rate: no compiled dependency, a map that predicts
  bit for bit from its saved arrays, and one-thread fit times at or below MCGrad's
  (benchmarks/bench_multicalibration_fit.py).
- The number of rounds, 0 included (the additive stage alone), is chosen by k-fold held-out
  log-loss (folds stratified by label), then the model is refitted on all rows.

Why a method beside `field-aware` rather than inside it: the two are different model families
(an MLP on field embeddings, trained by SGD with early stopping on one hold-out, and monotone
in the score; trees over segments and the logit, chosen by k-fold, and not monotone in the
score, like MCGrad with its default `monotone_t=False`), with different states and fit costs.

Rules: rows are put in a canonical order first (the fit ignores input order); zero-weight rows
are dropped and whole-number frequency weights count as repeated rows; text columns are
categorical and numeric ones numeric; a level not seen in training gets shift 0 in every
stage and goes to the right side of every categorical split (the side of the "other" levels);
numeric columns must be finite. Output logits are capped at +-36, so a probability is never
exactly 0 or 1. Derivations and constants: docs/algorithms.md, "Multicalibration".
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from calibcli.calibrators.base import FeatureCalibrator
from calibcli.calibrators.field_aware import levels_and_codes, read_features, split_features
from calibcli.calibrators.ilps import to_logit
from calibcli.calibrators.logistic import sigmoid
from calibcli.calibrators.mc_additive import Rows
from calibcli.calibrators.mc_state import STATE_SPEC, model_from_state, state_of_model
from calibcli.calibrators.mc_training import Model, train
from calibcli.calibrators.mc_trees import bin_edges, to_bins
from calibcli.calibrators.registry import register
from calibcli.errors import FitError
from calibcli.calibrators.params import PLATT_CORRECTION, SCORE_KIND, SEED, Param

BANDS = 16  # quantile bands per numeric column and of the logit, each with a shrunk shift
LOGIT_CAP = 1e3  # input logits are clipped here (a probability score's logit is within +-27.7)
OUTPUT_CAP = 36.0  # sigmoid(36) = 1 - 2.3e-16 < 1
SHIFTED = 0.1  # a level "has its own shift" in the summary when |its summed shift| >= this (log-odds)


@register
class MulticalibrationCalibrator(FeatureCalibrator):
    """Additive shifts + boosted trees over fields, numeric columns and the logit, refitted per round."""

    name = "multicalibration"
    description = ("multicalibration: shrunk field shifts + boosted trees over fields, features and the logit, "
                   "rounds chosen by k-fold (after MCGrad, Tax et al. 2026)")
    resamples_rows = True  # k-fold split of the rows: whole-number weights are expanded into rows
    monotone = False  # the trees split on segments and the logit together
    extremes = "inside (0, 1): sigmoid of a logit capped at +-36"
    complexity = 10000  # grows with the data and the fields, like field-aware
    fitted = "shrunk shifts per field level and numeric band, and rounds of boosted trees over fields and the logit"
    params = (
        SCORE_KIND,
        PLATT_CORRECTION,
        SEED,
        Param("rounds", int, 100, "most boosted rounds; the number used is chosen by k-fold (0 = additive only)",
              low=0, high=1000),
        Param("folds", int, 5, "folds of the k-fold choice of the number of rounds", low=2, high=50),
        Param("patience", int, 0, "rounds without held-out improvement before the search stops", low=0, high=100),
        Param("trees", int, 20, "trees per round", low=1, high=10_000),
        Param("rate", float, 0.125, "learning rate of the trees", low=1e-6, high=1.0),
        Param("leaves", int, 5, "leaves per tree", low=2, high=1024),
        Param("min_weight", float, 160.0, "least summed row weight in a leaf", low=0.0, high=1e12),
        Param("l2", float, 0.0091, "L2 penalty on leaf values", low=0.0, high=1e6),
        Param("min_gain", float, 0.15, "least gain of a split", low=0.0, high=1e12),
    )

    def _fit(self, s, y, w, features):
        params = self.params
        cat, num = split_features(features, s.size, FitError)
        keep = w > 0
        logit = np.clip(to_logit(s, params["score_kind"]), -LOGIT_CAP, LOGIT_CAP)[keep]
        y, w = y[keep], w[keep]
        cat_names, num_names = sorted(cat), sorted(num)
        vocabs, code_cols = [], []
        for name in cat_names:
            levels, col, _ = levels_and_codes(cat[name][keep])
            vocabs.append(levels)
            code_cols.append(col)
        codes = np.column_stack(code_cols) if code_cols else np.zeros((logit.size, 0), dtype=np.int64)
        raw = np.column_stack([num[c][keep] for c in num_names]) if num_names else np.zeros((logit.size, 0))
        order = canonical_order(logit, y, w, codes, raw)
        logit, y, w, codes, raw = logit[order], y[order], w[order], codes[order], raw[order]
        mean, std = standardiser(raw)
        bands = [bin_edges(raw[:, j], BANDS) for j in range(raw.shape[1])] + [bin_edges(logit, BANDS)]
        sizes = [v.size + 1 for v in vocabs] + [e.size + 2 for e in bands]
        rows = Rows(logit, with_bands(codes, raw, logit, bands), sizes, standardise(raw, mean, std), y, w)
        model, info = train(rows, raw, len(cat_names), params)
        self._set_state(state_of_model(model, cat_names, num_names, vocabs, bands, mean, std))
        self.info_ = info

    def _inputs(self, s: np.ndarray, features) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(level codes, raw numeric matrix, standardised numeric matrix) for the map's columns."""
        codes, raw = read_features(s, features, self.cat_, self.num_, self.vocab_, self.name)
        return codes, raw, standardise(raw, self.mean_, self.std_)

    def _logit(self, s: np.ndarray, features) -> np.ndarray:
        logit = np.clip(to_logit(s, self.params["score_kind"]), -LOGIT_CAP, LOGIT_CAP)
        codes, raw, x = self._inputs(s, features)
        return self.model_.logit(logit, with_bands(codes, raw, logit, self.bands_), raw, x)

    def _predict(self, s, features):
        return sigmoid(np.clip(self._logit(s, features), -OUTPUT_CAP, OUTPUT_CAP))

    def _get_state(self) -> dict[str, Any]:
        return dict(self.state_)

    state_spec = STATE_SPEC

    def _set_state(self, state: Mapping[str, Any]) -> None:
        self.state_ = dict(state)
        self.model_, self.cat_, self.num_, self.vocab_, self.bands_, self.mean_, self.std_ = model_from_state(state)

    def input_features(self) -> tuple[list[str], list[str]]:
        self._check_fitted()
        return list(self.cat_), list(self.num_)

    def summary(self) -> dict[str, Any]:
        """How each column was used (kind, levels or bands, spread of the shrunk shifts,
        coefficient, tree splits), the rounds and trees, and the k-fold choice."""
        model: Model = self.model_
        nf, nq = len(self.cat_), len(self.num_)
        splits = np.zeros(nf + nq + 1, dtype=np.int64)
        for rnd in model.rounds:
            for tree in rnd.trees:
                splits += np.bincount(tree.feature[tree.feature >= 0].astype(np.int64), minlength=splits.size)
        info = getattr(self, "info_", {})
        sd = info.get("shift_sd", [None] * (nf + nq + 1))
        trees = " and tree splits" if model.rounds else ""
        columns: dict[str, Any] = {}
        shifts = [model.base.shifts[f] + sum((r.correction.shifts[f] for r in model.rounds), np.zeros(1))
                  for f in range(nf)]  # each level's summed additive shift (index 0: unseen levels, 0)
        for f, name in enumerate(self.cat_):
            total = np.abs(shifts[f][1:])
            columns[name] = {"kind": "categorical", "levels": int(self.vocab_[f].size), "shift_sd": sd[f],
                             "shifted_levels": int(np.count_nonzero(total >= SHIFTED)),
                             "largest_shift": float(total.max()) if total.size else 0.0,
                             "tree_splits": int(splits[f]),
                             "use": "shrunk per-level shifts, refitted after each round" + (trees if splits[f] else "")}
        for j, name in enumerate(self.num_):
            k = nf + j
            linear = model.base.linear[j] + sum(float(r.correction.linear[j]) for r in model.rounds)
            columns[name] = {"kind": "numeric", "coefficient": float(linear / self.std_[j]),
                             "bands": int(self.bands_[j].size + 1), "band_shift_sd": sd[k],
                             "tree_splits": int(splits[k]),
                             "use": "linear term and shrunk per-band shifts, refitted after each round"
                             + (trees if splits[k] else "")}
        out: dict[str, Any] = {
            "columns": columns,
            "logit": {"slope": model.base.slope, "bands": int(self.bands_[-1].size + 1), "band_shift_sd": sd[-1],
                      "tree_splits": int(splits[-1])},
            "rounds": len(model.rounds), "trees": sum(len(r.trees) for r in model.rounds),
            "categorical": list(self.cat_), "numeric": list(self.num_),
        }
        out.update({k: v for k, v in info.items() if k not in ("shift_sd", "rounds", "trees")})
        return out


def with_bands(codes: np.ndarray, raw: np.ndarray, logit: np.ndarray, bands: list[np.ndarray]) -> np.ndarray:
    """The level codes followed by each numeric column's and the logit's band (1..bands), the
    additive stage's per-band shifts."""
    cols = [raw[:, j] for j in range(raw.shape[1])] + [logit]
    return np.column_stack([codes] + [to_bins(c, e).astype(np.int64) + 1 for c, e in zip(cols, bands)])


def canonical_order(logit: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Rows sorted by logit, ties broken by label, weight, level codes and numeric values."""
    order = np.argsort(logit, kind="stable")
    if np.any(logit[order][1:] == logit[order][:-1]):
        keys = [raw[:, j] for j in range(raw.shape[1])[::-1]] + [codes[:, j] for j in range(codes.shape[1])[::-1]]
        order = np.lexsort(keys + [w, y, logit])
    return order


X_CAP = 1e9  # standardised numeric values are clipped here (a new value far outside the fit's range)


def standardise(raw: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """raw / std - mean / std (no overflow for values near the float64 limit), clipped to +-X_CAP."""
    return np.clip(raw / std - mean / std, -X_CAP, X_CAP)


def standardiser(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) per numeric column, computed on values scaled by a power of two near the
    largest magnitude (no overflow for values near the float64 limit); std 1 for a constant column."""
    mean, std = np.zeros(raw.shape[1]), np.ones(raw.shape[1])
    for j in range(raw.shape[1]):
        top = float(np.max(np.abs(raw[:, j]))) if raw.shape[0] else 0.0
        if top == 0.0:
            continue
        scale = 2.0 ** np.frexp(top)[1]
        col = raw[:, j] / scale
        mean[j] = float(np.mean(col)) * scale
        sd = float(np.std(col)) * scale
        std[j] = sd if sd > 0 and np.isfinite(sd) else 1.0
    return mean, std

