"""Neural Calibration (field-aware calibration): q = sigmoid(eta(l) + g(x)), Pan et al. 2020.

eta is ILPS (see `ilps.py`: K+1 knots in logit space, hinge penalty of eq. 11); g is a small
multi-layer perceptron over feature columns: each categorical column (`--field-col`, object
array of str) is embedded, each numeric column (`--feature-col`, float64) is standardised, the
pieces are concatenated and fed through `layers` ReLU layers of width `hidden` to one output.
Both parts are trained together on the weighted mean log-loss (eq. 8) + the ILPS penalty, with
hand-written forward/backward passes, Adam and mini-batches, in numpy only.

Choices where the paper is silent or differs from the third-party code (baiyimeng/UMC), and why:

- Warm start. eta starts from the exact ILPS fit on the training rows (UMC starts from the
  identity) and g starts at 0 (zero output layer), so the first epoch already begins at the
  score-only optimum and the network only has to learn the field corrections.
- Size. The paper uses 256-dim embeddings and two 200-unit layers (UMC: MLP[200, 200] and no
  ECE regulariser here); defaults are embed_dim=8, hidden=32, layers=2, batch_size=1024,
  lr=3e-3, which keeps 1e6 rows in the minutes on two cores.
- Early stopping. `valid_fraction` (default 0.1) of the rows, drawn with the seed, are held
  out; after each epoch the held-out weighted log-loss is computed and the best epoch's
  parameters are kept; training stops after `patience` epochs without improvement.
- Unknown categories. Each categorical column has an "unknown" embedding (row 0). Levels
  seen fewer than `min_count` times in the calibration rows use it (they are not stored in
  the vocabulary), and during training each categorical value is replaced by unknown with
  probability `unknown_rate`, so the unknown embedding is trained even without rare levels.
  At apply time every unseen level maps to it.
- Row order. Rows are put in a canonical order (sorted by logit, label, weight, feature
  codes and values) before the seeded split and shuffles, so the fit does not depend on the
  input order; zero-weight rows are dropped. Weights act in each batch's weighted mean.
- Without features (features None or empty) g = 0 and the fit is exactly `ilps`.
- After training the knots are projected to be non-decreasing (PAV), so for fixed features
  the map is non-decreasing in the score (`monotone = True`); across rows with different
  features the ranking can change, which is the point (AUC can improve).
- The categorical/numeric split is decided by dtype: str/object arrays are categorical,
  numeric dtypes numeric. A map lists the columns it needs (`input_features()`); a missing
  column at apply time is an InputError naming it.

Reference: Pan, Ao, Tang, Lu, Liu, Xiao, He (2020), "Field-aware Calibration: A Simple and
Empirically Strong Method for Reliable Probabilistic Predictions", WWW '20, sections 4-4.3.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from calibcli.calibrators.base import PLATT_CORRECTION, SEED, Calibrator, Field, Param, StateSpec, as_float_array
from calibcli.calibrators.ilps import (
    K_PARAM,
    KNOT_FIELDS,
    LAM_PARAM,
    RIDGE_PARAM,
    SCORE_KIND,
    eta_backward,
    fit_ilps,
    ilps_eta,
    check_splits,
    ilps_splits,
    knot_penalty,
    project_monotone,
    segments,
    to_logit,
)
from calibcli.calibrators.logistic import sigmoid
from calibcli.calibrators.registry import register
from calibcli.errors import FitError, InputError

_CHUNK = 65536  # rows per forward pass at predict / validation time (bounds memory)
MAX_COLUMNS = 10_000  # feature columns a saved map may name
NET_LIMIT = 1e9  # |network parameter| in a saved map: with the size bounds, g(x) stays finite


def check_network(params: Mapping[str, Any], v: dict[str, Any], fail: Callable) -> None:
    """Shapes of a saved network: one embedding (vocabulary + unknown) x embed_dim per
    categorical column, `layers` dense layers of width `hidden`, an output of the last width."""
    if set(v["categorical"]) & set(v["numeric"]):
        fail("numeric", problem="names a column that is also categorical")
    if not v["categorical"] and not v["numeric"]:
        for name in ("embeddings", "weights", "biases", "out_w"):
            if len(v[name]):
                fail(name, problem="must be empty in a map without feature columns")
        return
    dim = params["embed_dim"]
    for f, emb in enumerate(v["embeddings"]):
        if emb.shape != (len(v["vocab"][f]) + 1, dim):
            fail("embeddings", f, problem=f"has shape {emb.shape}, expected {(len(v['vocab'][f]) + 1, dim)}")
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
    """(categorical, numeric) columns by dtype: str/object -> categorical, numbers -> numeric."""
    cat: dict[str, np.ndarray] = {}
    num: dict[str, np.ndarray] = {}
    for name, values in (features or {}).items():
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.size != n:
            raise error(f"feature column {name!r} has shape {arr.shape}, expected ({n},) like the scores")
        if arr.dtype.kind in "OUS":
            cat[str(name)] = arr.astype(str)
        elif arr.dtype.kind in "fiub":
            col = arr.astype(np.float64)
            if not np.all(np.isfinite(col)):
                raise error(f"numeric feature column {name!r} holds NaN or inf")
            num[str(name)] = col
        else:
            raise error(f"feature column {name!r} has unsupported dtype {arr.dtype}")
    return cat, num


def encode(values: np.ndarray, vocab: np.ndarray) -> np.ndarray:
    """Codes 1..V for levels in the sorted vocabulary, 0 (unknown) for anything else."""
    if vocab.size == 0:
        return np.zeros(values.size, dtype=np.int64)
    pos = np.clip(np.searchsorted(vocab, values), 0, vocab.size - 1)
    return np.where(vocab[pos] == values, pos + 1, 0).astype(np.int64)


def net_forward(params: list[np.ndarray], n_cat: int, codes: np.ndarray, xnum: np.ndarray):
    """g(x) and the cache for the backward pass. params = [b, E_1..E_F, W_1, c_1, ..., w_out, c_out]."""
    parts = [params[1 + f][codes[:, f]] for f in range(n_cat)]
    if xnum.shape[1]:
        parts.append(xnum)
    h = np.concatenate(parts, axis=1)
    hs, zs = [h], []
    n_layers = (len(params) - 3 - n_cat) // 2
    for j in range(n_layers):
        z = h @ params[1 + n_cat + 2 * j] + params[2 + n_cat + 2 * j]
        h = np.maximum(z, 0.0)
        zs.append(z)
        hs.append(h)
    g = h @ params[-2] + params[-1][0]
    return g, (hs, zs)


def net_backward(params: list[np.ndarray], n_cat: int, codes: np.ndarray, cache, r: np.ndarray) -> list:
    """Gradients of sum_i r_i * g(x_i) for every network parameter (None for the knots b)."""
    hs, zs = cache
    grads: list[Any] = [None] * len(params)
    grads[-2] = hs[-1].T @ r
    grads[-1] = np.array([r.sum()])
    dh = np.outer(r, params[-2])
    for j in range(len(zs) - 1, -1, -1):
        dz = dh * (zs[j] > 0)
        grads[1 + n_cat + 2 * j] = hs[j].T @ dz
        grads[2 + n_cat + 2 * j] = dz.sum(axis=0)
        dh = dz @ params[1 + n_cat + 2 * j].T
    col = 0
    for f in range(n_cat):
        emb = params[1 + f]
        dim = emb.shape[1]
        grads[1 + f] = np.stack(
            [np.bincount(codes[:, f], weights=dh[:, col + m], minlength=emb.shape[0]) for m in range(dim)],
            axis=1,
        )
        col += dim
    return grads


def loss_and_grads(
    params: list[np.ndarray],
    n_cat: int,
    a: np.ndarray,
    lam: float,
    ridge: float,
    k: np.ndarray,
    t: np.ndarray,
    codes: np.ndarray,
    xnum: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
) -> tuple[float, list[np.ndarray]]:
    """Batch objective (weighted mean log-loss of sigmoid(eta + g) + knot penalty) and gradients."""
    b = params[0]
    g, cache = net_forward(params, n_cat, codes, xnum)
    z = b[k] + t * (b[k + 1] - b[k]) + g
    sw = float(w.sum())
    loss = float(np.sum(w * (np.logaddexp(0.0, z) - y * z))) / sw
    r = w * (sigmoid(z) - y) / sw
    grads = net_backward(params, n_cat, codes, cache, r)
    pen, gpen = knot_penalty(a, b, lam, ridge)
    grads[0] = eta_backward(k, t, r, b.size) + gpen
    return loss + pen, grads


@register
class FieldAwareCalibrator(Calibrator):
    """Neural Calibration: ILPS on the logit plus an MLP over field and numeric feature columns."""

    name = "field-aware"
    description = "Neural Calibration: sigmoid(ILPS(logit) + MLP(features)) (Pan et al. 2020)"
    resamples_rows = True  # random validation split and batches over rows
    extremes = "inside (0, 1): sigmoid of ILPS's finite logit plus the network's output"
    params = (
        K_PARAM,
        LAM_PARAM,
        RIDGE_PARAM,
        SCORE_KIND,
        PLATT_CORRECTION,
        SEED,
        Param("epochs", int, 20, "maximum passes over the training rows", low=1, high=1000),
        Param("batch_size", int, 1024, "rows per Adam step", low=1, high=65536),
        Param("lr", float, 3e-3, "Adam learning rate", low=0.0, high=10.0),
        Param("hidden", int, 32, "units per hidden ReLU layer", low=1, high=256),
        Param("layers", int, 2, "hidden layers (0 = linear in the embeddings and features)", low=0, high=8),
        Param("embed_dim", int, 8, "embedding size per categorical column", low=1, high=256),
        Param("valid_fraction", float, 0.1, "share of rows held out for early stopping (0 = none)", low=0.0, high=0.5),
        Param("patience", int, 3, "epochs without held-out improvement before stopping", low=1, high=1000),
        Param("min_count", int, 5, "levels seen fewer times share the 'unknown' embedding", low=1, high=10**9),
        Param("unknown_rate", float, 0.01, "chance a training value is replaced by 'unknown'", low=0.0, high=0.5),
    )
    monotone = True  # for fixed features: g is added in logit space and the knots are projected
    uses_features = True

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.needs_probabilities = self.params["score_kind"] == "probability"
        self.progress: Callable[[int, int], None] | None = None  # called as progress(step, total)

    # ---- fitting -------------------------------------------------------------------------
    def _fit(self, s, y, w, features):
        p = self.params
        a = ilps_splits(p["K"])
        l = to_logit(s, p["score_kind"])
        cat, num = split_features(features, s.size, FitError)
        if not cat and not num:
            b, info = fit_ilps(l, y, w, a, p["lam"], p["ridge"])
            b, viol = project_monotone(b)
            self._set_state(self._empty_state(a, b))
            self.info_ = {"ilps": info, "max_violation": viol, "projection_changed": viol > 0.0}
            return
        self._fit_network(a, l, y, w, cat, num)

    @staticmethod
    def _empty_state(a, b) -> dict[str, Any]:
        return {
            "a": a, "b": b, "categorical": [], "numeric": [], "vocab": [], "mean": [], "std": [],
            "embeddings": [], "weights": [], "biases": [], "out_w": [], "out_b": 0.0,
        }

    def _fit_network(self, a, l, y, w, cat, num):
        p = self.params
        keep = w > 0
        l, y, w = l[keep], y[keep], w[keep]
        cat_names, num_names = sorted(cat), sorted(num)
        vocabs, code_cols = [], []
        for name in cat_names:
            levels, inv, counts = np.unique(cat[name][keep], return_inverse=True, return_counts=True)
            kept = counts >= p["min_count"]
            vocabs.append(levels[kept])
            code_cols.append((np.cumsum(kept) * kept)[inv].astype(np.int64))
        xnum = np.column_stack([num[c][keep] for c in num_names]) if num_names else np.zeros((l.size, 0))
        codes = np.column_stack(code_cols) if code_cols else np.zeros((l.size, 0), dtype=np.int64)
        # Canonical row order (lexsort: last key is primary) so the fit ignores input order;
        # every sum below (scaling, weights, ILPS pooling) then runs in this order.
        keys = [xnum[:, j] for j in range(xnum.shape[1])[::-1]] + [codes[:, j] for j in range(codes.shape[1])[::-1]]
        order = np.lexsort(keys + [w, y, l])
        l, y, w, codes, xnum = l[order], y[order], w[order], codes[order], xnum[order]
        mean = xnum.mean(axis=0)
        std = xnum.std(axis=0)
        std[~(std > 0)] = 1.0
        xnum = (xnum - mean) / std

        rng = np.random.default_rng(p["seed"])
        n = l.size
        n_val = int(round(p["valid_fraction"] * n))
        if n_val < 1 or n - n_val < 1:
            n_val = 0
        perm = rng.permutation(n)
        val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
        b0, ilps_info = fit_ilps(l[tr], y[tr], w[tr], a, p["lam"], p["ridge"])

        n_cat = len(cat_names)
        params = [b0]
        for vocab in vocabs:
            params.append(rng.normal(0.0, 0.1, size=(vocab.size + 1, p["embed_dim"])))
        width = n_cat * p["embed_dim"] + len(num_names)
        for _ in range(p["layers"]):
            params.append(rng.normal(0.0, np.sqrt(2.0 / width), size=(width, p["hidden"])))
            params.append(np.zeros(p["hidden"]))
            width = p["hidden"]
        params.append(np.zeros(width))
        params.append(np.zeros(1))

        k_all, t_all = segments(l, a)
        w_all = w / w[tr].mean()
        adam_m = [np.zeros_like(q) for q in params]
        adam_v = [np.zeros_like(q) for q in params]
        beta1, beta2, eps = 0.9, 0.999, 1e-8
        bs = p["batch_size"]
        steps_per_epoch = -(-tr.size // bs)
        total = p["epochs"] * steps_per_epoch
        step = 0
        best = [q.copy() for q in params]
        best_loss, best_epoch, bad, history = np.inf, 0, 0, []
        for epoch in range(1, p["epochs"] + 1):
            shuffled = tr[rng.permutation(tr.size)]
            for start in range(0, tr.size, bs):
                idx = shuffled[start : start + bs]
                cb = codes[idx]
                if p["unknown_rate"] > 0 and n_cat:
                    cb = np.where(rng.random(cb.shape) < p["unknown_rate"], 0, cb)
                _, grads = loss_and_grads(
                    params, n_cat, a, p["lam"], p["ridge"], k_all[idx], t_all[idx], cb, xnum[idx], y[idx], w_all[idx]
                )
                step += 1
                c1, c2 = 1.0 - beta1**step, 1.0 - beta2**step
                for q, g, m, v in zip(params, grads, adam_m, adam_v):
                    m *= beta1
                    m += (1.0 - beta1) * g
                    v *= beta2
                    v += (1.0 - beta2) * g * g
                    q -= p["lr"] * (m / c1) / (np.sqrt(v / c2) + eps)
                if self.progress is not None:
                    self.progress(step, total)
            if n_val:
                vloss = self._mean_logloss(params, n_cat, a, l[val], y[val], w[val], codes[val], xnum[val])
                history.append(vloss)
                if vloss < best_loss:
                    best_loss, best_epoch, bad = vloss, epoch, 0
                    best = [q.copy() for q in params]
                else:
                    bad += 1
                    if bad >= p["patience"]:
                        break
            else:
                best, best_epoch = [q.copy() for q in params], epoch
        if self.progress is not None:
            self.progress(total, total)

        b, viol = project_monotone(best[0])
        n_layers = p["layers"]
        self._set_state(
            {
                "a": a,
                "b": b,
                "categorical": cat_names,
                "numeric": num_names,
                "vocab": [v.tolist() for v in vocabs],
                "mean": mean,
                "std": std,
                "embeddings": [best[1 + f] for f in range(n_cat)],
                "weights": [best[1 + n_cat + 2 * j] for j in range(n_layers)],
                "biases": [best[2 + n_cat + 2 * j] for j in range(n_layers)],
                "out_w": best[-2],
                "out_b": float(best[-1][0]),
            }
        )
        self.info_ = {
            "ilps_warm_start": ilps_info,
            "train_rows": int(tr.size),
            "valid_rows": int(n_val),
            "epochs_run": epoch,
            "best_epoch": best_epoch,
            "valid_logloss": [float(v) for v in history],
            "vocabulary_sizes": {c: int(v.size) for c, v in zip(cat_names, vocabs)},
            "max_violation": viol,
            "projection_changed": viol > 0.0,
        }

    @staticmethod
    def _mean_logloss(params, n_cat, a, l, y, w, codes, xnum) -> float:
        total = 0.0
        for start in range(0, l.size, _CHUNK):
            sl = slice(start, start + _CHUNK)
            g, _ = net_forward(params, n_cat, codes[sl], xnum[sl])
            z = ilps_eta(l[sl], a, params[0]) + g
            total += float(np.sum(w[sl] * (np.logaddexp(0.0, z) - y[sl] * z)))
        return total / float(w.sum())

    # ---- prediction and state ----------------------------------------------------------
    def _predict(self, s, features):
        eta = ilps_eta(to_logit(s, self.params["score_kind"]), self.a_, self.b_)
        if not self.cat_ and not self.num_:
            return sigmoid(eta)
        given = features or {}
        missing = [c for c in self.cat_ + self.num_ if c not in given]
        if missing:
            raise InputError(
                "missing feature column" + ("s " if len(missing) > 1 else " ") + ", ".join(repr(c) for c in missing),
                hint="this field-aware map was fitted with --field-col/--feature-col "
                + ", ".join(self.cat_ + self.num_),
            )
        codes = np.zeros((s.size, len(self.cat_)), dtype=np.int64)
        for f, name in enumerate(self.cat_):
            col = np.asarray(given[name])
            if col.shape != s.shape:
                raise InputError(f"feature column {name!r} has {col.size} values for {s.size} scores")
            codes[:, f] = encode(col.astype(str), self.vocab_[f])
        xnum = np.zeros((s.size, len(self.num_)))
        for j, name in enumerate(self.num_):
            try:
                col = np.asarray(given[name], dtype=np.float64)
            except (TypeError, ValueError):
                raise InputError(f"numeric feature column {name!r} holds non-numbers") from None
            if col.shape != s.shape or not np.all(np.isfinite(col)):
                raise InputError(f"numeric feature column {name!r} must hold {s.size} finite numbers")
            xnum[:, j] = (col - self.mean_[j]) / self.std_[j]
        out = np.empty(s.size)
        for start in range(0, s.size, _CHUNK):
            sl = slice(start, start + _CHUNK)
            g, _ = net_forward(self.net_, len(self.cat_), codes[sl], xnum[sl])
            out[sl] = sigmoid(eta[sl] + g)
        return out

    def _get_state(self) -> dict[str, Any]:
        n_cat = len(self.cat_)
        has_net = bool(self.cat_ or self.num_)
        n_layers = (len(self.net_) - 3 - n_cat) // 2 if has_net else 0
        return {
            "a": self.a_,
            "b": self.b_,
            "categorical": list(self.cat_),
            "numeric": list(self.num_),
            "vocab": [v.tolist() for v in self.vocab_],
            "mean": self.mean_,
            "std": self.std_,
            "embeddings": [e.tolist() for e in self.net_[1 : 1 + n_cat]],
            "weights": [self.net_[1 + n_cat + 2 * j].tolist() for j in range(n_layers)],
            "biases": [self.net_[2 + n_cat + 2 * j] for j in range(n_layers)],
            "out_w": self.net_[-2] if has_net else np.zeros(0),
            "out_b": float(self.net_[-1][0]) if has_net else 0.0,
        }

    state_spec = StateSpec(
        *KNOT_FIELDS,
        Field("categorical", "strings", max_size=MAX_COLUMNS),
        Field("numeric", "strings", max_size=MAX_COLUMNS),
        Field("vocab", "string_lists", sorted_unique=True, same_size="categorical"),
        Field("mean", low=-1e300, high=1e300, same_size="numeric"),
        Field("std", low=1e-300, high=1e300, same_size="numeric"),
        Field("embeddings", "arrays", ndim=2, low=-NET_LIMIT, high=NET_LIMIT, same_size="categorical"),
        Field("weights", "arrays", ndim=2, low=-NET_LIMIT, high=NET_LIMIT, max_size=lambda p: p["layers"]),
        Field("biases", "arrays", ndim=1, low=-NET_LIMIT, high=NET_LIMIT, same_size="weights"),
        Field("out_w", low=-NET_LIMIT, high=NET_LIMIT),
        Field("out_b", "number", low=-NET_LIMIT, high=NET_LIMIT),
        check=lambda params, v, fail: (check_splits(params, v, fail), check_network(params, v, fail)),
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_ = np.array(as_float_array(state["a"], "state a"))
        self.b_ = np.array(as_float_array(state["b"], "state b"))
        if self.a_.size < 2 or self.a_.size != self.b_.size:
            raise FitError("field-aware state needs as many knot values b as splits a (at least 2)")
        self.cat_ = [str(c) for c in state["categorical"]]
        self.num_ = [str(c) for c in state["numeric"]]
        self.vocab_ = [np.array([str(x) for x in v], dtype=str) for v in state["vocab"]]
        self.mean_ = np.array(as_float_array(state["mean"], "state mean"))
        self.std_ = np.array(as_float_array(state["std"], "state std"))
        if len(self.vocab_) != len(self.cat_) or self.mean_.size != len(self.num_) or self.std_.size != len(self.num_):
            raise FitError("field-aware state: vocabularies or scalings do not match the feature columns")
        self.net_: list[np.ndarray] = []
        if not self.cat_ and not self.num_:
            return
        self.net_.append(self.b_)
        for f, e in enumerate(state["embeddings"]):
            emb = np.array(e, dtype=np.float64)
            if emb.ndim != 2 or emb.shape[0] != self.vocab_[f].size + 1:
                raise FitError(f"field-aware state: embedding {f} does not match its vocabulary")
            self.net_.append(emb)
        if len(self.net_) != 1 + len(self.cat_):
            raise FitError("field-aware state: one embedding per categorical column expected")
        for wm, bv in zip(state["weights"], state["biases"], strict=True):
            weight = np.array(wm, dtype=np.float64)
            bias = np.array(as_float_array(bv, "state biases"))
            if weight.ndim != 2 or weight.shape[1] != bias.size:
                raise FitError("field-aware state: a layer's weights and biases do not match")
            self.net_.extend([weight, bias])
        self.net_.append(np.array(as_float_array(state["out_w"], "state out_w")))
        self.net_.append(np.array([float(state["out_b"])]))

    def input_features(self) -> tuple[list[str], list[str]]:
        self._check_fitted()
        return list(self.cat_), list(self.num_)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"knots": int(self.a_.size), "categorical": self.cat_, "numeric": self.num_}
        out.update(getattr(self, "info_", {}))
        return out
