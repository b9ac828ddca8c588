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
clipped to the metric's range (`metric_range`: one class per metric).

Brier's and log-loss's DSC are biased up by PAV's in-sample fit, which resamples that repeat
rows exaggerate: they are drawn from half-samples instead (n // 2 rows without replacement,
`HALF_SAMPLED`), whose spread is that of the data's estimate and whose median shift, scaled
by PAV's n^(-2/3) rate, estimates the bias at n rows; the interval is moved past T by it and
widened to hold T. The metrics of `WITHHELD` get no interval (NaN, null in JSON), each with
its reason: the maxima over bins (MCE), the sums of |gaps| (ECE, classwise and top-label
ECE, smECE, Field-ECE/RCE), PAV's MCB, the debiased ECE and the test statistics (HL, KS,
Kuiper) are biased by as much as their spread or more, and under calibration their true
value is 0 or the bottom of their range, which no interval tried (re-centred, bias-corrected,
half-sampled, extrapolated) covered in 93-97 % of simulated data sets; `--gate-on upper` on
them is refused where the options are checked (`withheld_reason`). A p-value gets the
p-values of its statistic's interval: Spiegelhalter's, the fold of z (up to 1 when z's
interval holds 0); those of HL, KS, Kuiper and CORP none. `benchmarks/bootstrap_coverage.py`
measures the coverage by simulation; `benchmarks/results_bootstrap_coverage.json` has it.

When it is not exact, it is refused: with row weights (a cell's resampled weight depends on
which of its rows are drawn, not only how many) and with `step` bucketing (the state no
longer holds each row's p, so log-loss, Brier and ECE of a resample could not be exact).

Cost per replicate: one Poisson draw per cell and the metrics on the cells, O(cells) plus
CalBin's O(rows) windows (a half-sample for the DSCs: n // 2 row indices drawn, O(n)); the
sort of the cells is done once; withheld metrics beyond the first set are not resampled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

import numpy as np

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import binary as metrics
from calibcli.requests.evaluate import CONFIDENCE, BootstrapPlan  # noqa: F401
from calibcli.requests.metrics import NO_INTERVAL, WITHHELD, with_top_label, withheld_reason  # noqa: F401
from calibcli.evaluation.state.binary import EvalState, compute_all



def poisson_counts(state: EvalState, plan: BootstrapPlan) -> Iterator[np.ndarray]:
    """Per replicate, the Poisson counts of the cells' negatives then positives (2 * cells), of
    an unweighted state of exact probabilities (`EvaluateOptions.build` refuses the others)."""
    if state.field_names is not None and state.cell_field is None:
        raise UsageError("a bootstrap of the field metrics needs a state built with field_cells=True")
    rng = np.random.default_rng(plan.seed)
    lam = np.concatenate([state.n0, state.n1], dtype=np.float64)
    for _ in range(plan.replicates):
        yield rng.poisson(lam).astype(np.float64)


def half_counts(state: EvalState, plan: BootstrapPlan) -> Iterator[np.ndarray]:
    """Per replicate, the counts of a half-sample over the cells' negatives then positives:
    n // 2 of the n rows drawn without replacement, each row standing as its cell's index."""
    rng = np.random.default_rng([plan.seed, 1])
    counts = np.concatenate([state.n0, state.n1]).astype(np.int64)
    cell = np.repeat(np.arange(counts.size), counts)
    for _ in range(plan.replicates):
        yield np.bincount(cell[rng.choice(cell.size, cell.size // 2, replace=False)],
                          minlength=counts.size).astype(np.float64)


def resampled_choices(choice: Any) -> tuple[Any, Any]:
    """(the metrics Poisson resamples evaluate, those half-samples do: None when none) of a
    `selection.MetricChoice` (None: `selection.BASE` by Poisson resamples), without the p-values
    and tests and without the withheld metrics beyond the first set (nothing would use them)."""
    from calibcli.evaluation.metrics import selection

    if choice is None:
        return None, None
    choice = choice.without_tests()

    def kept(keys: tuple[str, ...], base: tuple[str, ...], half: bool) -> tuple[str, ...]:
        return tuple(k for k in keys if (k in base or k not in NO_INTERVAL) and (k in HALF_SAMPLED) == half)

    poisson = replace(choice, keys=kept(choice.keys, selection.BASE, False),
                      kclass_keys=kept(choice.kclass_keys, selection.KCLASS_DEFAULT, False))
    half = replace(choice, keys=kept(choice.keys, selection.BASE, True),
                   kclass_keys=kept(choice.kclass_keys, selection.KCLASS_DEFAULT, True))
    return poisson, (half if half.keys or half.kclass_keys else None)


def state_replicates(state: EvalState, calbin_window: int, plan: BootstrapPlan, choice: Any = None, **ece: Any
                     ) -> dict[str, np.ndarray]:
    """Every metric (of `selection.BASE`, or those of a `selection.MetricChoice` as
    `resampled_choices` keeps them) on `plan.replicates` Poisson resamples of the rows behind
    `state`, the `HALF_SAMPLED` ones on as many half-samples."""
    from calibcli.evaluation.metrics import selection

    m = state.p.size
    y = np.concatenate([np.zeros(m), np.ones(m)])
    p = np.concatenate([state.p, state.p])
    groups = None if state.cell_field is None else np.concatenate([state.cell_field, state.cell_field])
    order = np.argsort(p, kind="stable")
    out: dict[str, np.ndarray] = {}
    poisson, half = resampled_choices(choice)
    passes = [(poisson_counts(state, plan), poisson)] + ([] if half is None else [(half_counts(state, plan), half)])
    for draws, chosen in passes:
        for k in selection.BASE if chosen is None else chosen.keys:
            if groups is not None or not k.startswith("field_"):
                out[k] = np.full(plan.replicates, math.nan)
        for b, w in enumerate(draws):
            if w.sum() > 0:
                for k, v in compute_all(y, p, groups, calbin_window, sample_weight=w, order=order,
                                        choice=chosen, **ece).items():
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


LN2 = math.log(2.0)


# The range of every metric, one class each (tests/evaluation/test_bootstrap_coverage.py checks every key of
# metrics.METRICS and KCLASS_METRICS is in exactly one); intervals are clipped to it. Brier's DSC
# and UNC are at most UNC's largest value ȳ(1 - ȳ) = 1/4, log-loss's at most ln 2; the debiased
# ECE is a square root (of the debiased squared error, floored at 0); p-values are in [0, 1]. The
# K-class Brier score (a sum over the classes) is in [0, 2] (`KCLASS_WIDER`).
UNIT_RANGE = with_top_label("brier", "auc", "ece", "mce", "calbin", "spiegelhalter_p", "interval_width",
                             "interval_coverage", "interval_label_ece", "interval_label_p", "accuracy", "top_label_ece", "top_label_mce", "classwise_ece",
                             "field_ece", "brier_mcb", "smece", "ece_debiased", "corp_p", "hl_p", "ks_p", "kuiper_p",
                             "multical_p")
QUARTER_RANGE = with_top_label("brier_dsc", "brier_unc")
LN2_RANGE = with_top_label("log_loss_dsc", "log_loss_unc")
NON_NEGATIVE = with_top_label("log_loss", "field_rce", "log_loss_mcb", "hl_stat", "ks", "kuiper", "multical",
                              "multical_sigma")
UNBOUNDED = with_top_label("cal_slope", "cal_intercept", "spiegelhalter_z")
RANGES = ((UNIT_RANGE, (0.0, 1.0)), (QUARTER_RANGE, (0.0, 0.25)), (LN2_RANGE, (0.0, LN2)),
          (NON_NEGATIVE, (0.0, math.inf)), (UNBOUNDED, (-math.inf, math.inf)))
KCLASS_WIDER = {"brier": (0.0, 2.0)}


def metric_range(key: str, kclass: bool = False) -> tuple[float, float]:
    """(lowest, highest) value of metric `key` (of K-class predictions when `kclass`)."""
    if kclass and key in KCLASS_WIDER:
        return KCLASS_WIDER[key]
    for members, bounds in RANGES:
        if key in members:
            return bounds
    raise KeyError(f"no range for metric {key!r}")


# Metrics whose interval comes from half-samples (n // 2 rows drawn without replacement,
# `half_counts`), which never repeat a row, with the bias extrapolated: PAV's in-sample bias of
# DSC shrinks as n^(-2/3), so the half-samples' median shift m - T is (2^(2/3) - 1) times the
# bias at n rows, and the interval is centred on T - (m - T) / (2^(2/3) - 1) with the half-samples'
# spread (at n/2 without replacement, the same as the spread at n of the data).
HALF_SAMPLED: dict[str, float] = dict.fromkeys(with_top_label("brier_dsc", "log_loss_dsc"), 1 / (2 ** (2 / 3) - 1))


def recentred_intervals(replicates: Mapping[str, np.ndarray], estimates: Mapping[str, float],
                        level: float = CONFIDENCE, bare: frozenset[str] = NO_INTERVAL, kclass: bool = False
                        ) -> dict[str, tuple[float, float]]:
    """Each metric's percentile interval moved by the bootstrap's median bias onto its
    estimate (for `HALF_SAMPLED` ones past it by the extrapolated bias, then widened to hold
    it), clipped to the metric's range (module docstring); a metric n/a on the data keeps its
    plain percentile interval; those in `bare`, and the estimates without replicates (the
    p-values) but Spiegelhalter's, get none (NaN)."""
    tail = (1 - level) / 2 * 100
    out = percentile_intervals(replicates, level)
    for key in (*replicates, *(k for k in estimates if k not in replicates)):
        point = estimates.get(key, math.nan)
        if key in bare or key not in replicates:
            out[key] = (math.nan, math.nan)
            continue
        finite = replicates[key][np.isfinite(replicates[key])]
        if finite.size == 0 or point != point:
            continue
        lo, mid, hi = np.percentile(finite, [tail, 50, 100 - tail])
        centre = point - HALF_SAMPLED.get(key, 0.0) * (mid - point)
        low, high = metric_range(key, kclass)
        out[key] = (float(max(min(centre - (mid - lo), point), low)), float(min(max(centre + (hi - mid), point), high)))
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
    return recentred_intervals(*kclass_replicates(y, P, plan, ece_bins, ece_strategy, choice), plan.level,
                               kclass=True)


def kclass_replicates(y: np.ndarray, P: np.ndarray, plan: BootstrapPlan, ece_bins: int = metrics.ECE_BINS,
                      ece_strategy: str = "uniform", choice: Any = None
                      ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(replicates, estimates) of the K-class metrics (`choice`: those of its `kclass_keys`, as
    `kclass_state.metrics_of`): each replicate draws a Poisson(1) count per row, the same for
    every class, and reads the metrics off the resampled sums and distributions. The rows are
    sorted once per distribution; a replicate costs K + 1 `bincount`s over the rows."""
    from calibcli.evaluation.metrics import kclass as km
    from calibcli.evaluation.state.kclass import metrics_of

    conf, right = km.top_label(y, P)
    terms = np.stack([np.ones(y.size), km.log_loss_terms(y, P), km.brier_terms(y, P), right])
    pairs = [(right, conf)] + [((y == k).astype(np.float64), P[:, k]) for k in range(P.shape[1])]
    prepared = []
    for y01, p in pairs:
        xs, group = np.unique(p, return_inverse=True)
        prepared.append((xs, group, y01))

    def resampled(w: np.ndarray, chosen: Any) -> dict[str, float]:
        dists = [(xs, np.bincount(g, w * (1 - y01), xs.size), np.bincount(g, w * y01, xs.size))
                 for xs, g, y01 in prepared]
        return metrics_of(terms @ w, dists[0], dists[1:], ece_bins, ece_strategy, chosen)

    estimates = resampled(np.ones(y.size), choice)
    poisson, half = resampled_choices(choice)
    rng, half_rng = np.random.default_rng(plan.seed), np.random.default_rng([plan.seed, 1])
    out: dict[str, np.ndarray] = {}
    for b in range(plan.replicates):
        drawn = resampled(rng.poisson(1.0, y.size).astype(np.float64), poisson)
        if half is not None:
            w = np.zeros(y.size)
            w[half_rng.choice(y.size, y.size // 2, replace=False)] = 1.0
            drawn.update(resampled(w, half))
        for k, v in drawn.items():
            out.setdefault(k, np.full(plan.replicates, math.nan))[b] = v
    return out, estimates


def state_intervals(state: EvalState, calbin_window: int, plan: BootstrapPlan, choice: Any = None, **ece: Any
                    ) -> dict[str, tuple[float, float]]:
    """Seeded confidence intervals of every metric, drawn from an evaluation state (`choice`:
    as `state_replicates`; `ece`: the ECE/MCE bin options of `state.compute_all`): percentile
    intervals re-centred on the estimate (`recentred_intervals`)."""
    return recentred_intervals(state_replicates(state, calbin_window, plan, choice, **ece),
                               state.metrics(calbin_window, choice=choice, **ece), plan.level)
