"""Training the field-aware network: stage 1 (eta, per-level shifts with empirical-Bayes
shrinkage, linear numeric terms, by block-coordinate Newton sweeps) and stage 2 (g by Adam on
the stage-1 logit, early stopping on held-out rows). See `field_aware.py` for the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from calibcli.calibrators.field_network import Network, loss_and_grads, weighted_logloss
from calibcli.calibrators.ilps import fit_ilps, ilps_splits, segments
from calibcli.calibrators.logistic import sigmoid

_MAX_SWEEPS = 30  # stage 1: block-coordinate sweeps over (shifts, beta, knots)
_SWEEP_TOL = 1e-4  # stage 1 stops when the rows' logits moved less than this (RMS) in a sweep
_SELECT_ROWS = 50_000  # stage 1 chooses linear or ILPS eta on at most this many training rows
_CHECK_ROWS = 1 << 18  # stage 2 checks the held-out loss after this many training rows (or an epoch)
_TAU2_RANGE = (1e-8, 100.0)  # prior variance of the shifts is kept in this range
_MAX_STEP = 2.0  # largest Newton step of one shift (logit units) per iteration
_LINEAR_RIDGE = 1e-3  # ridge on beta (sum scale): only makes beta unique for constant columns


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

    logit: np.ndarray
    y: np.ndarray
    w: np.ndarray
    codes: np.ndarray
    xnum: np.ndarray

    def take(self, index: np.ndarray) -> "Rows":
        return Rows(self.logit[index], self.y[index], self.w[index], self.codes[index], self.xnum[index])


def fit_additive(a: np.ndarray, rows: Rows, sizes: list[int], lam: float, ridge: float,
                 start: tuple[Network, list[float]] | None = None) -> tuple[Network, dict[str, Any]]:
    """Stage 1: eta, shifts (empirical Bayes) and beta by block-coordinate Newton sweeps.

    Starts from `start` (a stage-1 Network and its prior variances) or from the exact
    score-only ILPS fit; each sweep takes one Newton step per column of shifts (and one
    variance update), one on beta and one on the knots with the rest of the logit as an
    offset, until the rows' logits move less than _SWEEP_TOL (RMS) in a sweep.
    Returns a Network with an empty g and the diagnostics (prior variances under "tau2").
    """
    logit, y, w, codes, xnum = rows.logit, rows.y, rows.w, rows.codes, rows.xnum
    if start is None:
        b, _ = fit_ilps(logit, y, w, a, lam, ridge)
        shifts = [np.zeros(v) for v in sizes]
        tau2 = [1.0] * len(sizes)
        beta = np.zeros(xnum.shape[1])
    else:
        b, shifts, beta, tau2 = start[0].b, [v.copy() for v in start[0].shifts], start[0].linear, list(start[1])
    parts = [v[codes[:, f]] for f, v in enumerate(shifts)]
    lin = xnum @ beta
    k, t = segments(logit, a)
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
        b, _ = fit_ilps(logit, y, w, a, lam, ridge, offset=lin + sum(parts), b0=b, max_iter=1, segs=(k, t))
        eta = b[k] + t * (b[k + 1] - b[k])
        with np.errstate(over="ignore", invalid="ignore"):  # logits near +-1e300: moved is inf, go on
            moved = float(np.sqrt(np.mean((eta + lin + sum(parts) - before) ** 2)))
        if moved < _SWEEP_TOL:
            break
    empty = np.zeros(0)
    net = Network(b, shifts, beta, [], [], [], empty, np.zeros(1))
    info = {"sweeps": sweep, "last_change": moved, "shift_sd": [float(np.sqrt(t)) for t in tau2], "tau2": tau2}
    return net, info


def fit_stage1(a: np.ndarray, rows: Rows, sizes: list[int], params: Mapping[str, Any], tr: np.ndarray,
               val: np.ndarray) -> tuple[np.ndarray, Network, dict[str, Any]]:
    """Stage 1 with eta chosen on held-out rows: ILPS on the K+1 splits, or linear in the logit.

    A linear eta (one ILPS piece, extended linearly: c + m logit) makes stage 1 the one-hot-field
    logistic regression with shrunk coefficients; the K-piece ILPS contains it but pays for
    its extra knots in variance when the true map is close to linear. Both are fitted on the
    training rows (at most _SELECT_ROWS of them), the one with the lower held-out log-loss is
    refitted on all rows (warm start). Without held-out rows eta is ILPS. Returns (splits, Network, diagnostics).
    """
    args = (params["lam"], params["ridge"])
    if not val.size:
        net, info = fit_additive(a, rows, sizes, *args)
        return a, net, dict(info, eta="ilps")
    held_out = {}
    fits = {}
    if tr.size > _SELECT_ROWS:  # the first _SELECT_ROWS of a seeded shuffle (tr is sorted)
        tr = np.sort(np.random.default_rng(params["seed"]).permutation(tr)[:_SELECT_ROWS])
    for name, splits in (("linear", ilps_splits(1)), ("ilps", a)):
        fits[name] = (splits, *fit_additive(splits, rows.take(tr), sizes, *args))
        held = rows.take(val)
        z = fits[name][1].additive(splits, held.logit, held.codes, held.xnum)
        held_out[name] = weighted_logloss(z, held.y, held.w)
    name = min(held_out, key=lambda k: (held_out[k], k == "ilps"))  # a tie goes to the simpler eta
    splits, start, first = fits[name]
    net, info = fit_additive(splits, rows, sizes, *args, start=(start, first["tau2"]))
    return splits, net, dict(info, eta=name, held_out_logloss=held_out)


# ---- stage 2: the network on the stage-1 logit --------------------------------------------


def init_mlp(net: Network, sizes: list[int], n_num: int, params: Mapping[str, Any], rng: np.random.Generator) -> None:
    """Random embeddings and hidden layers (He), zero output layer: g starts at exactly 0."""
    net.embeddings = [rng.normal(0.0, 0.1, size=(v, params["embed_dim"])) for v in sizes]
    width = len(sizes) * params["embed_dim"] + n_num
    net.weights, net.biases = [], []
    for _ in range(params["layers"]):
        net.weights.append(rng.normal(0.0, np.sqrt(2.0 / width), size=(width, params["hidden"])))
        net.biases.append(np.zeros(params["hidden"]))
        width = params["hidden"]
    net.out_w, net.out_b = np.zeros(width), np.zeros(1)


def train(a: np.ndarray, logit: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray, counts: list[np.ndarray],
          xnum: np.ndarray, params: Mapping[str, Any], progress: Callable[[int, int], None] | None = None,
          ) -> tuple[np.ndarray, Network, dict[str, Any]]:
    """Fit the field-aware logit on rows in canonical order; `params` holds the method's parameters.

    `codes[:, f]` are 1..V_f level codes, `counts[f]` the rows per level (index 0 unused),
    `xnum` the standardised numeric columns. Stage 1 uses every row; stage 2 trains g on the
    rows outside the seeded validation share and keeps its best state on that share.
    Returns (the splits of eta, the Network, diagnostics).
    """
    sizes = [c.size for c in counts]
    rng = np.random.default_rng(params["seed"])
    n = logit.size
    n_val = int(round(params["valid_fraction"] * n))
    if n_val < 1 or n - n_val < 1:
        n_val = 0
    perm = rng.permutation(n)
    val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    a, net, stage1 = fit_stage1(a, Rows(logit, y, w, codes, xnum), sizes, params, tr, val)
    init_mlp(net, sizes, xnum.shape[1], params, rng)
    # Rare levels look up the unknown embedding (their shift stays their own).
    emb_codes = codes.copy()
    for f, cnt in enumerate(counts):
        emb_codes[:, f] = np.where(cnt[codes[:, f]] >= params["min_count"], codes[:, f], 0)
    base = net.additive(a, logit, codes, xnum)

    def val_loss() -> float:
        return weighted_logloss(net.logits(a, logit[val], codes[val], xnum[val], emb_codes[val]), y[val], w[val])

    trainable = net.trainable()
    adam_m = [np.zeros_like(q) for q in trainable]
    adam_v = [np.zeros_like(q) for q in trainable]
    beta1, beta2, eps, lr = 0.9, 0.999, 1e-8, params["lr"]
    bs = params["batch_size"]
    steps_per_epoch = -(-tr.size // bs)
    total = params["epochs"] * steps_per_epoch
    step, epoch, since_check, stop = 0, 0, 0, False
    best_loss = val_loss() if n_val else np.inf
    best, best_check, bad, history = [q.copy() for q in trainable], 0, 0, [best_loss] if n_val else []
    for epoch in range(1, params["epochs"] + 1):
        shuffled = tr[rng.permutation(tr.size)]
        for start in range(0, tr.size, bs):
            idx = shuffled[start : start + bs]
            cb = emb_codes[idx]
            if params["unknown_rate"] > 0 and codes.shape[1]:
                cb = np.where(rng.random(cb.shape) < params["unknown_rate"], 0, cb)
            _, grads = loss_and_grads(net, base[idx], cb, xnum[idx], y[idx], w[idx])
            step += 1
            c1, c2 = 1.0 - beta1**step, 1.0 - beta2**step
            for q, g, m, v in zip(trainable, grads, adam_m, adam_v):
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
                    best = [q.copy() for q in trainable]
                else:
                    bad += 1
                    stop = bad >= params["patience"]
                    if stop:
                        break
        if stop:
            break
    if not n_val:
        best, best_check = trainable, None
    if progress is not None:
        progress(total, total)
    for q, kept in zip(trainable, best):
        q[...] = kept
    for emb, cnt in zip(net.embeddings, counts):
        emb[cnt < params["min_count"]] = emb[0]  # stored rows of rare levels equal the unknown row
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
