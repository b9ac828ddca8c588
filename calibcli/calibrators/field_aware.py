"""Field-aware calibration: Neural Calibration (Pan et al. 2020) with per-level logit shifts.

The map is q = sigmoid(eta(l) + sum_f s_f[z_f] + x . beta + g(z, x)), where l is the score's
logit, z_f the level of categorical column f (`--field-col`) and x the standardised numeric
columns (`--feature-col`):

- eta is ILPS (`ilps.py`: K+1 knots in logit space, hinge penalty of eq. 11);
- s_f is one logit shift per level with a Gaussian prior N(0, tau_f^2) whose variance is
  estimated from the data (empirical Bayes): a level seen once is shrunk to almost 0, a level
  seen thousands of times keeps its own logit offset;
- beta is linear in the numeric columns;
- g is the paper's network: an embedding per categorical column and the numeric columns,
  through `layers` ReLU layers of width `hidden` to one output.

`train` runs two stages. Stage 1 (`fit_additive`) fits eta, the shifts and beta on all rows by
block-coordinate Newton steps; it contains the one-hot-field logistic regression (logit plus one
coefficient per level) as a special case, which the paper's network alone did not reliably
reach. Stage 2 fits g with the stage-1 logit as a fixed offset (Adam, mini-batches, numpy only);
g starts at exactly 0 and early stopping on held-out rows keeps the best state seen, the start
(no network) included. Derivations, constants and the deviations from the paper are in
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

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from calibcli.calibrators.base import FeatureCalibrator
from calibcli.calibrators.ilps import (
    K_PARAM,
    LAM_PARAM,
    RIDGE_PARAM,
    check_splits,
    fit_ilps,
    ilps_eta,
    ilps_splits,
    project_monotone,
    segments,
    to_logit,
)
from calibcli.calibrators.logistic import sigmoid
from calibcli.calibrators.registry import register
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import FitError, InputError
from calibcli.options import PLATT_CORRECTION, SCORE_KIND, SEED, Param

_CHUNK = 65536  # rows per forward pass at predict / validation time (bounds memory)
_MAX_SWEEPS = 30  # stage 1: block-coordinate sweeps over (shifts, beta, knots)
_SWEEP_TOL = 1e-4  # stage 1 stops when the rows' logits moved less than this (RMS) in a sweep
_SELECT_ROWS = 50_000  # stage 1 chooses linear or ILPS eta on at most this many training rows
_CHECK_ROWS = 1 << 18  # stage 2 checks the held-out loss after this many training rows (or an epoch)
_TAU2_RANGE = (1e-8, 100.0)  # prior variance of the shifts is kept in this range
_MAX_STEP = 2.0  # largest Newton step of one shift (logit units) per iteration
_LINEAR_RIDGE = 1e-3  # ridge on beta (sum scale): only makes beta unique for constant columns


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


@dataclass
class Network:
    """Named weights of the field-aware logit; every per-level table has row 0 = unknown level."""

    b: np.ndarray  # ILPS knot values at the splits a
    shifts: list[np.ndarray]  # per categorical column: (levels + 1,) logit shifts, row 0 = 0
    linear: np.ndarray  # (numeric columns,) coefficients beta of the standardised columns
    embeddings: list[np.ndarray]  # per categorical column: (levels + 1, embed_dim)
    weights: list[np.ndarray]  # per hidden layer: (inputs, hidden)
    biases: list[np.ndarray]  # per hidden layer: (hidden,)
    out_w: np.ndarray  # (last width,)
    out_b: np.ndarray  # (1,)

    def trainable(self) -> list[np.ndarray]:
        """The arrays of g in a fixed order (stage 2 updates them in place)."""
        layers = [q for pair in zip(self.weights, self.biases) for q in pair]
        return [*self.embeddings, *layers, self.out_w, self.out_b]

    def additive(self, a: np.ndarray, l: np.ndarray, codes: np.ndarray, xnum: np.ndarray) -> np.ndarray:
        """The stage-1 logit eta(l) + sum_f s_f[z_f] + x . beta."""
        z = ilps_eta(l, a, self.b)
        for f, shift in enumerate(self.shifts):
            z = z + shift[codes[:, f]]
        if self.linear.size:
            z = z + xnum @ self.linear
        return z

    def mlp(self, codes: np.ndarray, xnum: np.ndarray) -> tuple[np.ndarray, tuple]:
        """g(z, x) and the activations the backward pass needs."""
        parts = [emb[codes[:, f]] for f, emb in enumerate(self.embeddings)]
        if xnum.shape[1]:
            parts.append(xnum)
        h = np.concatenate(parts, axis=1)
        hs, zs = [h], []
        for weight, bias in zip(self.weights, self.biases):
            z = h @ weight + bias
            h = np.maximum(z, 0.0)
            zs.append(z)
            hs.append(h)
        return h @ self.out_w + self.out_b[0], (hs, zs)

    def mlp_backward(self, codes: np.ndarray, cache: tuple, r: np.ndarray) -> list[np.ndarray]:
        """Gradients of sum_i r_i * g(x_i), in `trainable()` order."""
        hs, zs = cache
        dh = np.outer(r, self.out_w)
        layer_grads: list[np.ndarray] = []
        for j in range(len(zs) - 1, -1, -1):
            dz = dh * (zs[j] > 0)
            layer_grads[:0] = [hs[j].T @ dz, dz.sum(axis=0)]
            dh = dz @ self.weights[j].T
        emb_grads, col = [], 0
        for f, emb in enumerate(self.embeddings):
            rows, dim = emb.shape
            flat = (codes[:, f, None] * dim + np.arange(dim)).ravel()
            emb_grads.append(np.bincount(flat, weights=dh[:, col : col + dim].ravel(), minlength=rows * dim))
            emb_grads[-1] = emb_grads[-1].reshape(rows, dim)
            col += dim
        return [*emb_grads, *layer_grads, hs[-1].T @ r, np.array([r.sum()])]

    def logits(
        self, a: np.ndarray, l: np.ndarray, codes: np.ndarray, xnum: np.ndarray, emb_codes: np.ndarray | None = None
    ) -> np.ndarray:
        """The full logit for every row in chunks of _CHUNK rows; g looks levels up in `emb_codes`
        when given (training: rare levels -> 0), else in `codes`."""
        emb_codes = codes if emb_codes is None else emb_codes
        out = np.empty(l.size)
        for start in range(0, l.size, _CHUNK):
            sl = slice(start, start + _CHUNK)
            out[sl] = self.additive(a, l[sl], codes[sl], xnum[sl]) + self.mlp(emb_codes[sl], xnum[sl])[0]
        return out


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


def levels_and_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct levels, codes 1..V per row, rows per code with index 0 = 0).

    Same result as np.unique(values, return_inverse=True, return_counts=True) shifted by one,
    but hash-based (pyarrow's dictionary encoding) and then sorting only the distinct levels:
    sorting a million strings was most of the fit's set-up time.
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


def weighted_logloss(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean log-loss of sigmoid(z)."""
    return float(np.sum(w * (np.logaddexp(0.0, z) - y * z))) / float(w.sum())


def loss_and_grads(
    net: Network, base: np.ndarray, codes: np.ndarray, xnum: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[float, list[np.ndarray]]:
    """Stage-2 batch objective (weighted mean log-loss of sigmoid(base + g)) and its gradients."""
    g, cache = net.mlp(codes, xnum)
    z = base + g
    r = w * (sigmoid(z) - y) / float(w.sum())
    return weighted_logloss(z, y, w), net.mlp_backward(codes, cache, r)


# ---- stage 1: knots, per-level shifts, linear numeric terms ------------------------------


def shift_step(
    off: np.ndarray, y: np.ndarray, w: np.ndarray, c: np.ndarray, shift: np.ndarray, tau2: float
) -> tuple[np.ndarray, float, float]:
    """One Newton step on one column's shifts, then one update of their prior variance.

    Minimises sum_i w_i logloss(off_i + s[c_i]) + sum_v s_v^2 / (2 tau2): the Hessian is
    diagonal (each row has one level), so every level takes its own 1-D step. The variance
    update is MacKay's evidence fixed point tau2 = sum s_v^2 / sum gamma_v with
    gamma_v = tau2 H_v / (1 + tau2 H_v), H_v the level's data curvature.
    Returns (shifts, tau2, largest step).
    """
    size = shift.size
    p = sigmoid(off + shift[c])
    grad = np.bincount(c, weights=w * (p - y), minlength=size) + shift / tau2
    curv = np.bincount(c, weights=w * p * (1.0 - p), minlength=size)
    step = np.clip(grad / (curv + 1.0 / tau2), -_MAX_STEP, _MAX_STEP)
    step[0] = 0.0  # the unknown level has no rows: its shift stays at the prior mean
    shift = shift - step
    gamma = float(np.sum(tau2 * curv[1:] / (1.0 + tau2 * curv[1:])))
    if gamma > 0.0:
        tau2 = float(np.clip(np.sum(shift[1:] ** 2) / gamma, *_TAU2_RANGE))
    return shift, tau2, float(np.max(np.abs(step)))


def linear_step(off: np.ndarray, y: np.ndarray, w: np.ndarray, x: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """One damped Newton step on beta for sum_i w_i logloss(off_i + x_i . beta) + ridge/2 |beta|^2."""

    def value(bt, z=None):
        z = off + x @ bt if z is None else z
        return float(np.sum(w * (np.logaddexp(0.0, z) - y * z))) + 0.5 * _LINEAR_RIDGE * float(bt @ bt)

    z0 = off + x @ beta
    p = sigmoid(z0)
    grad = x.T @ (w * (p - y)) + _LINEAR_RIDGE * beta
    hess = (x * (w * p * (1.0 - p))[:, None]).T @ x + _LINEAR_RIDGE * np.eye(beta.size)
    step = np.linalg.solve(hess, grad)
    f0, alpha = value(beta, z0), 1.0
    while alpha > 1e-10:
        cand = beta - alpha * step
        if value(cand) <= f0 - 1e-4 * alpha * float(grad @ step):
            return cand
        alpha *= 0.5
    return beta


@dataclass
class Rows:
    """The training rows stage 1 reads: score logits, targets, weights, level codes, numeric columns."""

    l: np.ndarray
    y: np.ndarray
    w: np.ndarray
    codes: np.ndarray
    xnum: np.ndarray

    def take(self, index: np.ndarray) -> "Rows":
        return Rows(self.l[index], self.y[index], self.w[index], self.codes[index], self.xnum[index])


def fit_additive(a: np.ndarray, rows: Rows, sizes: list[int], lam: float, ridge: float,
                 start: tuple[Network, list[float]] | None = None) -> tuple[Network, dict[str, Any]]:
    """Stage 1: eta, shifts (empirical Bayes) and beta by block-coordinate Newton sweeps.

    Starts from `start` (a stage-1 Network and its prior variances) or from the exact
    score-only ILPS fit; each sweep takes one Newton step per column of shifts (and one
    variance update), one on beta and one on the knots with the rest of the logit as an
    offset, until the rows' logits move less than _SWEEP_TOL (RMS) in a sweep.
    Returns a Network with an empty g and the diagnostics (prior variances under "tau2").
    """
    l, y, w, codes, xnum = rows.l, rows.y, rows.w, rows.codes, rows.xnum
    if start is None:
        b, _ = fit_ilps(l, y, w, a, lam, ridge)
        shifts = [np.zeros(v) for v in sizes]
        tau2 = [1.0] * len(sizes)
        beta = np.zeros(xnum.shape[1])
    else:
        b, shifts, beta, tau2 = start[0].b, [v.copy() for v in start[0].shifts], start[0].linear, list(start[1])
    parts = [v[codes[:, f]] for f, v in enumerate(shifts)]
    lin = xnum @ beta
    k, t = segments(l, a)
    eta = b[k] + t * (b[k + 1] - b[k])
    moved, sweep = np.inf, 0
    for sweep in range(1, _MAX_SWEEPS + 1):
        before = eta + lin + sum(parts)
        for f in range(len(sizes)):
            off = eta + lin + sum(parts[:f]) + sum(parts[f + 1 :])
            shifts[f], tau2[f], _ = shift_step(off, y, w, codes[:, f], shifts[f], tau2[f])
            # Adding c to every shift and -c to eta leaves the likelihood and the knot penalty
            # unchanged, so at the optimum the levels' shifts have mean 0: move that mean into
            # eta exactly (backfitting alone would converge slowly along this direction).
            centre = float(np.mean(shifts[f][1:]))
            shifts[f][1:] -= centre
            b = b + centre
            eta = eta + centre
            parts[f] = shifts[f][codes[:, f]]
        if beta.size:
            beta = linear_step(eta + sum(parts), y, w, xnum, beta)
            lin = xnum @ beta
        b, _ = fit_ilps(l, y, w, a, lam, ridge, offset=lin + sum(parts), b0=b, max_iter=1, segs=(k, t))
        eta = b[k] + t * (b[k + 1] - b[k])
        with np.errstate(over="ignore", invalid="ignore"):  # logits near +-1e300: moved is inf, go on
            moved = float(np.sqrt(np.mean((eta + lin + sum(parts) - before) ** 2)))
        if moved < _SWEEP_TOL:
            break
    empty = np.zeros(0)
    net = Network(b, shifts, beta, [], [], [], empty, np.zeros(1))
    info = {"sweeps": sweep, "last_change": moved, "shift_sd": [float(np.sqrt(t)) for t in tau2], "tau2": tau2}
    return net, info


def fit_stage1(a: np.ndarray, rows: Rows, sizes: list[int], p: Mapping[str, Any], tr: np.ndarray,
               val: np.ndarray) -> tuple[np.ndarray, Network, dict[str, Any]]:
    """Stage 1 with eta chosen on held-out rows: ILPS on the K+1 splits, or linear in the logit.

    A linear eta (one ILPS piece, extended linearly: c + m l) makes stage 1 the one-hot-field
    logistic regression with shrunk coefficients; the K-piece ILPS contains it but pays for
    its extra knots in variance when the true map is close to linear. Both are fitted on the
    training rows (at most _SELECT_ROWS of them), the one with the lower held-out log-loss is
    refitted on all rows (warm start). Without held-out rows eta is ILPS. Returns (splits, Network, diagnostics).
    """
    args = (p["lam"], p["ridge"])
    if not val.size:
        net, info = fit_additive(a, rows, sizes, *args)
        return a, net, dict(info, eta="ilps")
    held_out = {}
    fits = {}
    if tr.size > _SELECT_ROWS:  # the first _SELECT_ROWS of a seeded shuffle (tr is sorted)
        tr = np.sort(np.random.default_rng(p["seed"]).permutation(tr)[:_SELECT_ROWS])
    for name, splits in (("linear", ilps_splits(1)), ("ilps", a)):
        fits[name] = (splits, *fit_additive(splits, rows.take(tr), sizes, *args))
        held = rows.take(val)
        z = fits[name][1].additive(splits, held.l, held.codes, held.xnum)
        held_out[name] = weighted_logloss(z, held.y, held.w)
    name = min(held_out, key=lambda k: (held_out[k], k == "ilps"))  # a tie goes to the simpler eta
    splits, start, first = fits[name]
    net, info = fit_additive(splits, rows, sizes, *args, start=(start, first["tau2"]))
    return splits, net, dict(info, eta=name, held_out_logloss=held_out)


# ---- stage 2: the network on the stage-1 logit --------------------------------------------


def init_mlp(net: Network, sizes: list[int], n_num: int, p: Mapping[str, Any], rng: np.random.Generator) -> None:
    """Random embeddings and hidden layers (He), zero output layer: g starts at exactly 0."""
    net.embeddings = [rng.normal(0.0, 0.1, size=(v, p["embed_dim"])) for v in sizes]
    width = len(sizes) * p["embed_dim"] + n_num
    net.weights, net.biases = [], []
    for _ in range(p["layers"]):
        net.weights.append(rng.normal(0.0, np.sqrt(2.0 / width), size=(width, p["hidden"])))
        net.biases.append(np.zeros(p["hidden"]))
        width = p["hidden"]
    net.out_w, net.out_b = np.zeros(width), np.zeros(1)


def train(
    a: np.ndarray,
    l: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    codes: np.ndarray,
    counts: list[np.ndarray],
    xnum: np.ndarray,
    p: Mapping[str, Any],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, Network, dict[str, Any]]:
    """Fit the field-aware logit on rows in canonical order; `p` holds the method's parameters.

    `codes[:, f]` are 1..V_f level codes, `counts[f]` the rows per level (index 0 unused),
    `xnum` the standardised numeric columns. Stage 1 uses every row; stage 2 trains g on the
    rows outside the seeded validation share and keeps its best state on that share.
    Returns (the splits of eta, the Network, diagnostics).
    """
    sizes = [c.size for c in counts]
    rng = np.random.default_rng(p["seed"])
    n = l.size
    n_val = int(round(p["valid_fraction"] * n))
    if n_val < 1 or n - n_val < 1:
        n_val = 0
    perm = rng.permutation(n)
    val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    a, net, stage1 = fit_stage1(a, Rows(l, y, w, codes, xnum), sizes, p, tr, val)
    init_mlp(net, sizes, xnum.shape[1], p, rng)
    # Rare levels look up the unknown embedding (their shift stays their own).
    emb_codes = codes.copy()
    for f, cnt in enumerate(counts):
        emb_codes[:, f] = np.where(cnt[codes[:, f]] >= p["min_count"], codes[:, f], 0)
    base = net.additive(a, l, codes, xnum)

    def val_loss() -> float:
        return weighted_logloss(net.logits(a, l[val], codes[val], xnum[val], emb_codes[val]), y[val], w[val])

    params = net.trainable()
    adam_m = [np.zeros_like(q) for q in params]
    adam_v = [np.zeros_like(q) for q in params]
    beta1, beta2, eps, lr = 0.9, 0.999, 1e-8, p["lr"]
    bs = p["batch_size"]
    steps_per_epoch = -(-tr.size // bs)
    total = p["epochs"] * steps_per_epoch
    step, epoch, since_check, stop = 0, 0, 0, False
    best_loss = val_loss() if n_val else np.inf
    best, best_check, bad, history = [q.copy() for q in params], 0, 0, [best_loss] if n_val else []
    for epoch in range(1, p["epochs"] + 1):
        shuffled = tr[rng.permutation(tr.size)]
        for start in range(0, tr.size, bs):
            idx = shuffled[start : start + bs]
            cb = emb_codes[idx]
            if p["unknown_rate"] > 0 and codes.shape[1]:
                cb = np.where(rng.random(cb.shape) < p["unknown_rate"], 0, cb)
            _, grads = loss_and_grads(net, base[idx], cb, xnum[idx], y[idx], w[idx])
            step += 1
            c1, c2 = 1.0 - beta1**step, 1.0 - beta2**step
            for q, g, m, v in zip(params, grads, adam_m, adam_v):
                m *= beta1
                m += (1.0 - beta1) * g
                v *= beta2
                v += (1.0 - beta2) * g * g
                q -= lr * (m / c1) / (np.sqrt(v / c2) + eps)
            if progress is not None:
                progress(step, total)
            since_check += idx.size
            if n_val and (since_check >= _CHECK_ROWS or start + bs >= tr.size):
                since_check = 0
                history.append(val_loss())
                if history[-1] < best_loss:
                    best_loss, best_check, bad = history[-1], len(history) - 1, 0
                    best = [q.copy() for q in params]
                else:
                    bad += 1
                    stop = bad >= p["patience"]
                    if stop:
                        break
        if stop:
            break
    if not n_val:
        best, best_check = params, None
    if progress is not None:
        progress(total, total)
    for q, kept in zip(params, best):
        q[...] = kept
    for emb, cnt in zip(net.embeddings, counts):
        emb[cnt < p["min_count"]] = emb[0]  # stored rows of rare levels equal the unknown row
    stage1.pop("tau2")
    info = {
        "stage1": stage1,
        "train_rows": int(tr.size),
        "valid_rows": int(n_val),
        "epochs_run": epoch,
        "best_check": best_check,
        "valid_logloss": [float(v) for v in history],
    }
    return a, net, info


# ---- the calibrator ---------------------------------------------------------------------


@register
class FieldAwareCalibrator(FeatureCalibrator):
    """Field-aware calibration: ILPS(logit) + shrunk per-level shifts + linear numeric + MLP."""

    name = "field-aware"
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
        self.needs_probabilities = self.params["score_kind"] == "probability"
        self.progress: Callable[[int, int], None] | None = None  # called as progress(step, total)

    def _fit(self, s, y, w, features):
        p = self.params
        a = ilps_splits(p["K"])
        l = to_logit(s, p["score_kind"])
        cat, num = split_features(features, s.size, FitError)
        if not cat and not num:
            b, info = fit_ilps(l, y, w, a, p["lam"], p["ridge"])
            b, viol = project_monotone(b)
            empty = {"categorical": [], "numeric": [], "vocab": [], "mean": [], "std": [], "shifts": [], "linear": []}
            self._set_state(dict(empty, a=a, b=b))
            self.info_ = {"ilps": info, "max_violation": viol, "projection_changed": viol > 0.0}
            return
        keep = w > 0
        l, y, w = l[keep], y[keep], w[keep]
        cat_names, num_names = sorted(cat), sorted(num)
        vocabs, code_cols, counts = [], [], []
        for name in cat_names:
            levels, col, cnt = levels_and_codes(cat[name][keep])
            vocabs.append(levels)
            code_cols.append(col)
            counts.append(cnt)
        xnum = np.column_stack([num[c][keep] for c in num_names]) if num_names else np.zeros((l.size, 0))
        codes = np.column_stack(code_cols) if code_cols else np.zeros((l.size, 0), dtype=np.int64)
        # Canonical row order (sorted by logit; ties broken by label, weight, codes, values) so the
        # fit ignores input order; every sum below (scaling, Newton sums, the split) runs in it.
        order = np.argsort(l, kind="stable")
        if np.any(l[order][1:] == l[order][:-1]):  # tied logits: break ties by the other columns
            keys = [xnum[:, j] for j in range(xnum.shape[1])[::-1]] + [codes[:, j] for j in range(codes.shape[1])[::-1]]
            order = np.lexsort(keys + [w, y, l])
        l, y, w, codes, xnum = l[order], y[order], w[order], codes[order], xnum[order]
        mean = xnum.mean(axis=0)
        std = xnum.std(axis=0)
        std[~(std > 0)] = 1.0
        a, net, info = train(a, l, y, w, codes, counts, (xnum - mean) / std, p, self.progress)
        net.b, viol = project_monotone(net.b)
        self.a_, self.net_ = a, net
        self.cat_, self.num_, self.vocab_, self.mean_, self.std_ = cat_names, num_names, vocabs, mean, std
        info["vocabulary_sizes"] = {c: int(v.size) for c, v in zip(cat_names, vocabs)}
        self.info_ = dict(info, max_violation=viol, projection_changed=viol > 0.0)

    def _inputs(self, s: np.ndarray, features) -> tuple[np.ndarray, np.ndarray]:
        """(level codes, standardised numeric matrix) for the map's feature columns."""
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
        return codes, xnum

    def _predict(self, s, features):
        l = to_logit(s, self.params["score_kind"])
        if not self.cat_ and not self.num_:
            return sigmoid(ilps_eta(l, self.a_, self.net_.b))
        codes, xnum = self._inputs(s, features)
        return sigmoid(self.net_.logits(self.a_, l, codes, xnum))

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
        Field("weights", "arrays", ndim=2, low=-NET_LIMIT, high=NET_LIMIT, max_size=lambda p: p["layers"]),
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

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"knots": int(self.a_.size), "categorical": self.cat_, "numeric": self.num_}
        out.update(getattr(self, "info_", {}))
        return out
