"""Field-aware calibration: Neural Calibration (Pan et al. 2020) with per-level logit shifts.

The map is q = sigmoid(eta(logit) + sum_f s_f[z_f] + x . beta + g(z, x)), where logit is the
score's log-odds, z_f the level of categorical column f (`--field-col`) and x the standardised
numeric columns (`--feature-col`):

- eta is ILPS (`ilps.py`: K+1 knots in logit space, hinge penalty of eq. 11);
- s_f is one logit shift per level with a Gaussian prior N(0, tau_f^2) whose variance is
  estimated from the data (empirical Bayes): a level seen once is shrunk to almost 0, a level
  seen thousands of times keeps its own logit offset;
- beta is linear in the numeric columns;
- g is the paper's network: an embedding per categorical column and the numeric columns,
  through `layers` ReLU layers of width `hidden` to one output.

`train` (`field_training.py`) runs two stages. Stage 1 (`fit_additive`) fits eta, the shifts
and beta on all rows by block-coordinate Newton steps; it contains the one-hot-field logistic
regression (logit plus one coefficient per level) as a special case, which the paper's network
alone did not reliably reach. Stage 2 fits g with the stage-1 logit as a fixed offset (Adam,
mini-batches, numpy only); g starts at exactly 0 and early stopping on held-out rows keeps the
best state seen, the start (no network) included. Derivations, constants and the deviations from the paper are in
docs/algorithms.md, "Field-aware calibration".

Further rules: without features the fit is exactly `ilps`; rows are put in a canonical order
before the seeded split and shuffles, so the fit ignores input order; zero-weight rows are
dropped and weights count as frequencies in the shrinkage; levels seen fewer than `min_count`
times share the "unknown" embedding (row 0) but keep their own shrunk shift; an unseen level
gets shift 0 and the unknown embedding; str/object columns are categorical, numeric dtypes
numeric; for fixed features the map is non-decreasing in the score (knots projected by PAV).

Reference: Pan, Ao, Tang, Lu, Liu, Xiao, He (2020), "Field-aware Calibration: A Simple and
Empirically Strong Method for Reliable Probabilistic Predictions", WWW '20, sections 4-4.3.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from calibcli.calibrators.base import FeatureCalibrator
from calibcli.calibrators.field_network import Network
from calibcli.calibrators.field_training import train
from calibcli.calibrators.ilps import (
    K_PARAM,
    LAM_PARAM,
    RIDGE_PARAM,
    check_splits,
    fit_ilps,
    ilps_eta,
    ilps_splits,
    project_monotone,
    to_logit,
)
from calibcli.calibrators.logistic import sigmoid
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import FitError, InputError
from calibcli.calibrators.params import PLATT_CORRECTION, SCORE_KIND, SEED, Param

MAX_COLUMNS = 10_000  # feature columns a saved map may name
NET_LIMIT = 1e9  # |network parameter| in a saved map: with the size bounds, g(x) stays finite


def check_network(params: Mapping[str, Any], v: dict[str, Any], fail: Callable) -> None:
    """Shapes of a saved map: K+1 splits (ILPS eta) or 2 (linear eta); per categorical column
    one shift and one embedding row (of embed_dim) per level + unknown; one coefficient per
    numeric column; `layers` dense layers of width `hidden`; an output of the last width."""
    if v["a"].size not in (params["K"] + 1, 2):
        fail("a", problem=f"has {v['a'].size} splits, expected K+1 = {params['K'] + 1} or 2 (linear eta)")
    if set(v["categorical"]) & set(v["numeric"]):
        fail("numeric", problem="names a column that is also categorical")
    if not v["categorical"] and not v["numeric"]:
        for name in ("shifts", "linear", "embeddings", "weights", "biases", "out_w"):
            if len(v[name]):
                fail(name, problem="must be empty in a map without feature columns")
        return
    dim = params["embed_dim"]
    for f, (shift, emb) in enumerate(zip(v["shifts"], v["embeddings"])):
        rows = len(v["vocab"][f]) + 1
        if shift.shape != (rows,):
            fail("shifts", f, problem=f"has {shift.size} values, expected {rows} (levels + unknown)")
        if emb.shape != (rows, dim):
            fail("embeddings", f, problem=f"has shape {emb.shape}, expected {(rows, dim)}")
    width = len(v["categorical"]) * dim + len(v["numeric"])
    if len(v["weights"]) != params["layers"]:
        fail("weights", problem=f"has {len(v['weights'])} layers, expected layers={params['layers']}")
    for j, (wm, bv) in enumerate(zip(v["weights"], v["biases"])):
        if wm.shape != (width, params["hidden"]) or bv.shape != (params["hidden"],):
            fail("weights", j, problem=f"has shape {wm.shape} (biases {bv.shape}), expected "
                                       f"{(width, params['hidden'])}")
        width = params["hidden"]
    if v["out_w"].shape != (width,):
        fail("out_w", problem=f"has {v['out_w'].size} values, expected {width}")


def split_features(
    features: Mapping[str, Any] | None, n: int, error: type
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(categorical, numeric) columns by dtype: str/object/bool -> categorical (`level_strings`),
    numbers -> numeric."""
    cat: dict[str, np.ndarray] = {}
    num: dict[str, np.ndarray] = {}
    for name, values in (features or {}).items():
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.size != n:
            raise error(f"feature column {name!r} has shape {arr.shape}, expected ({n},) like the scores")
        if arr.dtype.kind in "OUSb":
            cat[str(name)] = level_strings(arr)
        elif arr.dtype.kind in "fiu":
            col = arr.astype(np.float64)
            if not np.all(np.isfinite(col)):
                raise error(f"numeric feature column {name!r} holds NaN or inf")
            num[str(name)] = col
        else:
            raise error(f"feature column {name!r} has unsupported dtype {arr.dtype}")
    return cat, num


def level_strings(values: Any) -> np.ndarray:
    """Categorical values as the map's levels are spelled: booleans as Arrow casts them (true,
    false: a Parquet boolean column read by `calib fit`/`apply`), anything else by `str`."""
    arr = np.asarray(values)
    return np.where(arr, "true", "false") if arr.dtype.kind == "b" else arr.astype(str)


def encode(values: np.ndarray, vocab: np.ndarray) -> np.ndarray:
    """Codes 1..V for levels in the sorted vocabulary, 0 (unknown) for anything else."""
    if vocab.size == 0:
        return np.zeros(values.size, dtype=np.int64)
    pos = np.clip(np.searchsorted(vocab, values), 0, vocab.size - 1)
    return np.where(vocab[pos] == values, pos + 1, 0).astype(np.int64)


def read_features(s: np.ndarray, features: Mapping[str, Any] | None, cat: list[str], num: list[str],
                  vocab: list[np.ndarray], method: str) -> tuple[np.ndarray, np.ndarray]:
    """(level codes, raw numeric matrix) of a map's feature columns at predict time; a missing
    column, a wrong length or a non-finite number is a one-line InputError."""
    given = features or {}
    missing = [c for c in cat + num if c not in given]
    if missing:
        raise InputError(
            "missing feature column" + ("s " if len(missing) > 1 else " ") + ", ".join(repr(c) for c in missing),
            hint=f"this {method} map was fitted with --field-col/--feature-col " + ", ".join(cat + num),
        )
    codes = np.zeros((s.size, len(cat)), dtype=np.int64)
    for f, name in enumerate(cat):
        col = np.asarray(given[name])
        if col.shape != s.shape:
            raise InputError(f"feature column {name!r} has {col.size} values for {s.size} scores")
        codes[:, f] = encode(level_strings(col), vocab[f])
    raw = np.zeros((s.size, len(num)))
    for j, name in enumerate(num):
        try:
            col = np.asarray(given[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"numeric feature column {name!r} holds non-numbers") from None
        if col.shape != s.shape or not np.all(np.isfinite(col)):
            raise InputError(f"numeric feature column {name!r} must hold {s.size} finite numbers")
        raw[:, j] = col
    return codes, raw


def levels_and_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct levels, codes 1..V per row, rows per code with index 0 = 0).

    Same result as np.unique(values, return_inverse=True, return_counts=True) shifted by one,
    but hash-based (pyarrow's dictionary encoding), then sorting only the distinct levels, not
    every row's string (docs/algorithms.md, "Field-aware calibration").
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(pa.array(values, type=pa.string()))
    found = np.array(encoded.dictionary.to_pylist(), dtype=str)
    order = np.argsort(found, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)
    codes = rank[encoded.indices.to_numpy()]
    return found[order], codes, np.bincount(codes, minlength=order.size + 1)


@register
class FieldAwareCalibrator(FeatureCalibrator):
    """Field-aware calibration: ILPS(logit) + shrunk per-level shifts + linear numeric + MLP."""

    name = "field-aware"
    complexity = 10000
    fitted = "a piecewise-linear logit, field shifts and a neural network"
    description = "Neural Calibration: sigmoid(ILPS(logit) + field shifts + MLP(features)) (Pan et al. 2020)"
    resamples_rows = True  # random validation split and batches over rows
    extremes = "inside (0, 1): sigmoid of a finite logit (ILPS or linear eta, shifts, network)"
    params = (
        K_PARAM,
        LAM_PARAM,
        RIDGE_PARAM,
        SCORE_KIND,
        PLATT_CORRECTION,
        SEED,
        Param("epochs", int, 20, "maximum passes of the network over the training rows", low=1, high=1000),
        Param("batch_size", int, 8192, "rows per Adam step", low=1, high=65536),
        Param("lr", float, 1e-2, "Adam learning rate", low=0.0, high=10.0),
        Param("hidden", int, 32, "units per hidden ReLU layer", low=1, high=256),
        Param("layers", int, 2, "hidden layers (0 = linear in the embeddings and features)", low=0, high=8),
        Param("embed_dim", int, 8, "embedding size per categorical column", low=1, high=256),
        Param("valid_fraction", float, 0.1, "share of rows held out for early stopping (0 = none)", low=0.0, high=0.5),
        Param("patience", int, 2, "epochs without held-out improvement before stopping", low=1, high=1000),
        Param("min_count", int, 5, "levels seen fewer times share the 'unknown' embedding", low=1, high=10**9),
        Param("unknown_rate", float, 0.01, "chance a training value uses the 'unknown' embedding", low=0.0, high=0.5),
    )
    monotone = True  # for fixed features: everything but eta is added in logit space, knots projected

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.progress: Callable[[int, int], None] | None = None  # called as progress(step, total)

    def _fit(self, s, y, w, features):
        params = self.params
        a = ilps_splits(params["K"])
        logit = to_logit(s, params["score_kind"])
        cat, num = split_features(features, s.size, FitError)
        if not cat and not num:
            b, info = fit_ilps(logit, y, w, a, params["lam"], params["ridge"])
            b, viol = project_monotone(b)
            empty = {"categorical": [], "numeric": [], "vocab": [], "mean": [], "std": [], "shifts": [], "linear": []}
            self._set_state(dict(empty, a=a, b=b))
            self.info_ = {"ilps": info, "max_violation": viol, "projection_changed": viol > 0.0}
            return
        keep = w > 0
        logit, y, w = logit[keep], y[keep], w[keep]
        cat_names, num_names = sorted(cat), sorted(num)
        vocabs, code_cols, counts = [], [], []
        for name in cat_names:
            levels, col, cnt = levels_and_codes(cat[name][keep])
            vocabs.append(levels)
            code_cols.append(col)
            counts.append(cnt)
        xnum = np.column_stack([num[c][keep] for c in num_names]) if num_names else np.zeros((logit.size, 0))
        codes = np.column_stack(code_cols) if code_cols else np.zeros((logit.size, 0), dtype=np.int64)
        # Canonical row order (sorted by logit; ties broken by label, weight, codes, values) so the
        # fit ignores input order; every sum below (scaling, Newton sums, the split) runs in it.
        order = np.argsort(logit, kind="stable")
        if np.any(logit[order][1:] == logit[order][:-1]):  # tied logits: break ties by the other columns
            keys = [xnum[:, j] for j in range(xnum.shape[1])[::-1]] + [codes[:, j] for j in range(codes.shape[1])[::-1]]
            order = np.lexsort(keys + [w, y, logit])
        logit, y, w, codes, xnum = logit[order], y[order], w[order], codes[order], xnum[order]
        mean = xnum.mean(axis=0)
        std = xnum.std(axis=0)
        std[~(std > 0)] = 1.0
        a, net, info = train(a, logit, y, w, codes, counts, (xnum - mean) / std, params, self.progress)
        net.b, viol = project_monotone(net.b)
        self.a_, self.net_ = a, net
        self.cat_, self.num_, self.vocab_, self.mean_, self.std_ = cat_names, num_names, vocabs, mean, std
        info["vocabulary_sizes"] = {c: int(v.size) for c, v in zip(cat_names, vocabs)}
        self.info_ = dict(info, max_violation=viol, projection_changed=viol > 0.0)

    def _inputs(self, s: np.ndarray, features) -> tuple[np.ndarray, np.ndarray]:
        """(level codes, standardised numeric matrix) for the map's feature columns."""
        codes, raw = read_features(s, features, self.cat_, self.num_, self.vocab_, self.name)
        return codes, (raw - self.mean_) / self.std_

    def _predict(self, s, features):
        logit = to_logit(s, self.params["score_kind"])
        if not self.cat_ and not self.num_:
            return sigmoid(ilps_eta(logit, self.a_, self.net_.b))
        codes, xnum = self._inputs(s, features)
        return sigmoid(self.net_.logits(self.a_, logit, codes, xnum))

    def _get_state(self) -> dict[str, Any]:
        net = self.net_
        return {
            "a": self.a_,
            "b": net.b,
            "categorical": list(self.cat_),
            "numeric": list(self.num_),
            "vocab": [v.tolist() for v in self.vocab_],
            "mean": self.mean_,
            "std": self.std_,
            "shifts": [v.tolist() for v in net.shifts],
            "linear": net.linear,
            "embeddings": [e.tolist() for e in net.embeddings],
            "weights": [m.tolist() for m in net.weights],
            "biases": [v.tolist() for v in net.biases],
            "out_w": net.out_w,
            "out_b": float(net.out_b[0]),
        }

    state_spec = StateSpec(
        Field("a", order="increasing", low=-1e3, high=1e3, min_size=2),
        Field("b", order="monotone", low=-1e300, high=1e300, same_size="a"),
        Field("categorical", "strings", max_size=MAX_COLUMNS),
        Field("numeric", "strings", max_size=MAX_COLUMNS),
        Field("vocab", "string_lists", sorted_unique=True, same_size="categorical"),
        Field("mean", low=-1e300, high=1e300, same_size="numeric"),
        Field("std", low=1e-300, high=1e300, same_size="numeric"),
        Field("shifts", "arrays", ndim=1, low=-NET_LIMIT, high=NET_LIMIT, same_size="categorical"),
        Field("linear", low=-NET_LIMIT, high=NET_LIMIT, same_size="numeric"),
        Field("embeddings", "arrays", ndim=2, low=-NET_LIMIT, high=NET_LIMIT, same_size="categorical"),
        Field("weights", "arrays", ndim=2, low=-NET_LIMIT, high=NET_LIMIT, max_size=lambda params: params["layers"]),
        Field("biases", "arrays", ndim=1, low=-NET_LIMIT, high=NET_LIMIT, same_size="weights"),
        Field("out_w", low=-NET_LIMIT, high=NET_LIMIT),
        Field("out_b", "number", low=-NET_LIMIT, high=NET_LIMIT),
        check=lambda params, v, fail: (check_splits(params, v, fail), check_network(params, v, fail)),
    )

    @classmethod
    def from_state(cls, params: Mapping[str, Any], state: Mapping[str, Any]) -> "Calibrator":
        """Maps written before the per-level shifts existed (no "shifts"/"linear") load with
        zero shifts and coefficients: the same predictions as when they were saved."""
        state = dict(state)
        if "shifts" not in state and "linear" not in state:
            state["shifts"] = [[0.0] * (len(v) + 1) for v in state.get("vocab", [])]
            state["linear"] = [0.0] * len(state.get("numeric", []))
        return super().from_state(params, state)

    def _set_state(self, state: dict[str, Any]) -> None:
        """Load a state (checked by `state_spec` when read from a map) into the named Network."""

        def floats(value: Any) -> np.ndarray:
            return np.array(value, dtype=np.float64)

        self.a_ = floats(state["a"])
        self.cat_ = [str(c) for c in state["categorical"]]
        self.num_ = [str(c) for c in state["numeric"]]
        self.vocab_ = [np.array([str(x) for x in v], dtype=str) for v in state["vocab"]]
        self.mean_, self.std_ = floats(state["mean"]), floats(state["std"])
        has_net = bool(self.cat_ or self.num_)
        self.net_ = Network(
            b=floats(state["b"]),
            shifts=[floats(v) for v in state["shifts"]],
            linear=floats(state["linear"]),
            embeddings=[floats(e) for e in state["embeddings"]] if has_net else [],
            weights=[floats(m) for m in state["weights"]] if has_net else [],
            biases=[floats(v) for v in state["biases"]] if has_net else [],
            out_w=floats(state["out_w"]) if has_net else np.zeros(0),
            out_b=floats([state["out_b"]]) if has_net else np.zeros(1),
        )

    def input_features(self) -> tuple[list[str], list[str]]:
        self._check_fitted()
        return list(self.cat_), list(self.num_)

    def unseen(self, features: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
        """Per categorical column, which rows hold a value the fit never saw (they take the
        'unknown' embedding and no shift of their own): what `calib apply` counts and reports."""
        self._check_fitted()
        given = features or {}
        return {name: encode(np.asarray(given[name]).astype(str), self.vocab_[f]) == 0
                for f, name in enumerate(self.cat_) if name in given}

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"knots": int(self.a_.size), "categorical": self.cat_, "numeric": self.num_,
                               "levels": {c: int(v.size) for c, v in zip(self.cat_, self.vocab_)},
                               "column_use": "a shrunk shift per level and an embedding in the network"}
        out.update(getattr(self, "info_", {}))
        return out
