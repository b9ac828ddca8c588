"""Bootstrap confidence intervals of the evaluation metrics (`calib evaluate --bootstrap N`).

A Poisson bootstrap drawn from the evaluation state (`state.py`), never from a copy of the
rows: every row gets an independent Poisson(1) count, so the rows of one cell (one distinct
p, or one (p, field value) pair, and one class) together get a Poisson(cell count) count.
Drawing one Poisson number per cell and class is therefore exactly the row-level Poisson
bootstrap, and each replicate is evaluated by the metric functions themselves
(`state.compute_all` with the drawn counts as `sample_weight`; CalBin counts a cell of
count k as k rows). The field metrics need the state kept per (p, field value) cell
(`field_cells=True`); the other metrics only per distinct p. Intervals are percentile
intervals of the replicates moved onto the estimate, seeded (`BootstrapPlan.seed`).

Why moved: a resample repeats rows, and statistics that look at neighbouring rows (CalBin's
windows of s consecutive rows hold fewer distinct rows, so their positive rates are
noisier) or at a maximum over bins (MCE) come out systematically larger on resamples than
on the data: a plain percentile interval can then miss its own estimate entirely. The
bootstrap measures that shift itself: with T the estimate and m the median of the
replicates, the interval is [q_lo - (m - T), q_hi - (m - T)] (the percentile interval
re-centred by the bootstrap's median bias; q_lo <= m <= q_hi, so it always holds T),
clipped to the metric's range. MCE and top-label MCE get no interval (NaN, null in JSON):
a maximum over bins, some of a few rows, is biased up far beyond its spread, and moving
the interval by the bootstrap's bias still left the truth outside it in most simulated
data sets; `--gate-on upper` on them is refused where the options are checked. Spiegelhalter's p-value is a fold of z, not an estimate of
its own: its interval is the p-values of z's interval (up to 1 when that holds 0).
`benchmarks/bootstrap_coverage.py` measures the coverage by simulation.

When it is not exact, it is refused: with row weights (a cell's resampled weight depends on
which of its rows are drawn, not only how many) and with `step` bucketing (the state no
longer holds each row's p, so log-loss, Brier and ECE of a resample could not be exact).

Cost per replicate: one Poisson draw per cell and the metrics on the cells, O(cells) plus
CalBin's O(rows) windows; the sort of the cells is done once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from calibcli.errors import UsageError
from calibcli.evaluation import metrics
from calibcli.evaluation.state import EvalState, compute_all

CONFIDENCE = 0.95


@dataclass
class BootstrapPlan:
    """How many resamples, with which seed, for which interval level."""

    replicates: int
    seed: int
    level: float = CONFIDENCE

    def to_json(self) -> dict[str, Any]:
        return {"replicates": self.replicates, "seed": self.seed, "level": self.level,
                "method": "recentred-percentile", "resampling": "poisson"}


def poisson_counts(state: EvalState, plan: BootstrapPlan) -> Iterator[np.ndarray]:
    """Per replicate, the Poisson counts of the cells' negatives then positives (2 * cells), of
    an unweighted state of exact probabilities (`EvaluateOptions.build` refuses the others)."""
    if state.field_names is not None and state.cell_field is None:
        raise UsageError("a bootstrap of the field metrics needs a state built with field_cells=True")
    rng = np.random.default_rng(plan.seed)
    lam = np.concatenate([state.n0, state.n1], dtype=np.float64)
    for _ in range(plan.replicates):
        yield rng.poisson(lam).astype(np.float64)


def state_replicates(state: EvalState, calbin_window: int, plan: BootstrapPlan, choice: Any = None, **ece: Any
                     ) -> dict[str, np.ndarray]:
    """Every metric (of `selection.BASE`, or those of a `selection.MetricChoice` but its
    p-values and tests) on `plan.replicates` Poisson resamples of the rows behind `state`."""
    from calibcli.evaluation import selection

    choice = None if choice is None else choice.without_tests()
    m = state.p.size
    y = np.concatenate([np.zeros(m), np.ones(m)])
    p = np.concatenate([state.p, state.p])
    groups = None if state.cell_field is None else np.concatenate([state.cell_field, state.cell_field])
    order = np.argsort(p, kind="stable")
    keys = [k for k in (selection.BASE if choice is None else choice.keys)
            if groups is not None or not k.startswith("field_")]
    out = {k: np.full(plan.replicates, math.nan) for k in keys}
    for b, w in enumerate(poisson_counts(state, plan)):
        if w.sum() > 0:
            for k, v in compute_all(y, p, groups, calbin_window, sample_weight=w, order=order,
                                    choice=choice, **ece).items():
                out[k][b] = v
    return out




def percentile_intervals(replicates: Mapping[str, np.ndarray], level: float = CONFIDENCE
                         ) -> dict[str, tuple[float, float]]:
    """Percentile interval of each metric; n/a replicates (AUC with one class) are left out."""
    tail = (1 - level) / 2 * 100
    out = {}
    for key, values in replicates.items():
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            out[key] = (math.nan, math.nan)
        else:
            lo, hi = np.percentile(finite, [tail, 100 - tail])
            out[key] = (float(lo), float(hi))
    return out


UNIT_RANGE = frozenset({"brier", "auc", "ece", "mce", "calbin", "spiegelhalter_p", "interval_width",
                        "interval_coverage", "accuracy", "top_label_ece", "top_label_mce", "classwise_ece"})
NON_NEGATIVE = frozenset({"log_loss", "field_ece", "field_rce"})
NO_INTERVAL = frozenset({"mce", "top_label_mce"})


def recentred_intervals(replicates: Mapping[str, np.ndarray], estimates: Mapping[str, float],
                        level: float = CONFIDENCE, bare: frozenset[str] = NO_INTERVAL
                        ) -> dict[str, tuple[float, float]]:
    """Each metric's percentile interval moved by the bootstrap's median bias onto its
    estimate, clipped to the metric's range (module docstring); a metric n/a on the data
    keeps its plain percentile interval; those in `bare` get none (NaN)."""
    tail = (1 - level) / 2 * 100
    out = percentile_intervals(replicates, level)
    for key, values in replicates.items():
        finite = values[np.isfinite(values)]
        point = estimates.get(key, math.nan)
        if key in bare:
            out[key] = (math.nan, math.nan)
            continue
        if finite.size == 0 or point != point:
            continue
        lo, mid, hi = np.percentile(finite, [tail, 50, 100 - tail])
        shift = mid - point
        lo, hi = float(min(lo - shift, point)), float(max(hi - shift, point))
        if key in UNIT_RANGE or key in NON_NEGATIVE:
            lo = max(lo, 0.0)
        if key in UNIT_RANGE:
            hi = min(hi, 1.0)
        out[key] = (lo, hi)
    if "spiegelhalter_p" in out and "spiegelhalter_z" in out and estimates.get("spiegelhalter_p") == estimates.get(
            "spiegelhalter_p"):
        out["spiegelhalter_p"] = _p_values_of(*out["spiegelhalter_z"])
    return out


def _p_values_of(z_lo: float, z_hi: float) -> tuple[float, float]:
    """The two-sided normal p-values over [z_lo, z_hi]: from the largest |z| up to the smallest
    (1 when the interval holds 0)."""
    far = max(abs(z_lo), abs(z_hi))
    near = 0.0 if z_lo <= 0 <= z_hi else min(abs(z_lo), abs(z_hi))
    return math.erfc(far / math.sqrt(2)), math.erfc(near / math.sqrt(2))


def _rows_state(y: np.ndarray, p: np.ndarray, groups: np.ndarray | None) -> EvalState:
    """The evaluation state of rows in memory (field codes `groups` kept per cell)."""
    fields = None if groups is None else (groups, [str(i) for i in range(int(groups.max()) + 1 if groups.size else 0)])
    return EvalState.from_arrays(y, p, fields=fields, field_cells=groups is not None)


def bootstrap_replicates(y: np.ndarray, p: np.ndarray, groups: np.ndarray | None,
                         calbin_window: int, plan: BootstrapPlan) -> dict[str, np.ndarray]:
    """Every metric on `plan.replicates` Poisson resamples of the rows (y, p, field codes)."""
    return state_replicates(_rows_state(y, p, groups), calbin_window, plan)


def bootstrap_intervals(y: np.ndarray, p: np.ndarray, groups: np.ndarray | None,
                        calbin_window: int, plan: BootstrapPlan) -> dict[str, tuple[float, float]]:
    """Seeded confidence intervals of every metric of one probability column (`state_intervals`)."""
    return state_intervals(_rows_state(y, p, groups), calbin_window, plan)


def kclass_intervals(y: np.ndarray, P: np.ndarray, plan: BootstrapPlan, ece_bins: int = metrics.ECE_BINS,
                     ece_strategy: str = "uniform", choice: Any = None) -> dict[str, tuple[float, float]]:
    """Seeded intervals of the K-class metrics of rows (codes y, probabilities P), re-centred
    on the estimates as the binary ones are (`recentred_intervals`)."""
    return recentred_intervals(*kclass_replicates(y, P, plan, ece_bins, ece_strategy, choice), plan.level)


def kclass_replicates(y: np.ndarray, P: np.ndarray, plan: BootstrapPlan, ece_bins: int = metrics.ECE_BINS,
                      ece_strategy: str = "uniform", choice: Any = None
                      ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(replicates, estimates) of the K-class metrics (`choice`: those of its `kclass_keys`, as
    `kclass_state.metrics_of`): each replicate draws a Poisson(1) count per row, the same for
    every class, and reads the metrics off the resampled sums and distributions. The rows are
    sorted once per distribution; a replicate costs K + 1 `bincount`s over the rows."""
    from calibcli.evaluation import kclass_metrics as km
    from calibcli.evaluation.kclass_state import metrics_of

    conf, right = km.top_label(y, P)
    terms = np.stack([np.ones(y.size), km.log_loss_terms(y, P), km.brier_terms(y, P), right])
    pairs = [(right, conf)] + [((y == k).astype(np.float64), P[:, k]) for k in range(P.shape[1])]
    prepared = []
    for y01, p in pairs:
        xs, group = np.unique(p, return_inverse=True)
        prepared.append((xs, group, y01))
    rng = np.random.default_rng(plan.seed)

    def resampled(w: np.ndarray) -> dict[str, float]:
        dists = [(xs, np.bincount(g, w * (1 - y01), xs.size), np.bincount(g, w * y01, xs.size))
                 for xs, g, y01 in prepared]
        return metrics_of(terms @ w, dists[0], dists[1:], ece_bins, ece_strategy, choice)

    estimates = resampled(np.ones(y.size))
    out = {k: np.full(plan.replicates, math.nan) for k in estimates}
    for b in range(plan.replicates):
        for k, v in resampled(rng.poisson(1.0, y.size).astype(np.float64)).items():
            out[k][b] = v
    return out, estimates


def state_intervals(state: EvalState, calbin_window: int, plan: BootstrapPlan, choice: Any = None, **ece: Any
                    ) -> dict[str, tuple[float, float]]:
    """Seeded confidence intervals of every metric, drawn from an evaluation state (`choice`:
    as `state_replicates`; `ece`: the ECE/MCE bin options of `state.compute_all`): percentile
    intervals re-centred on the estimate (`recentred_intervals`)."""
    return recentred_intervals(state_replicates(state, calbin_window, plan, choice, **ece),
                               state.metrics(calbin_window, choice=choice, **ece), plan.level)
