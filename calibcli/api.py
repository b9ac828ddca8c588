"""The Python API: fit, save, load and evaluate calibration maps without the CLI.

Everything here is what the `calib` commands do, minus the files: the same registry, the
same calibrators, the same map schema, the same metrics, so a map fitted here and saved
predicts bit-for-bit what `calib fit` + `calib apply` give.

    >>> import calibcli
    >>> cal = calibcli.fit(scores, labels, method="bayes-iso", seed=1)
    >>> p = cal.predict(new_scores)
    >>> calibcli.save_map(cal, "map.json"); cal2 = calibcli.load_map("map.json")
    >>> calibcli.evaluate(labels, p, fields=countries)   # {"log_loss": ..., "field_rce": ...}

K classes: scores of shape (n, K) and labels of any hashable values give a `ClassMap`:

    >>> cm = calibcli.fit(P, y, method="temperature")   # or "dirichlet", "isotonic" (one-vs-rest), ...
    >>> cm.classes_, cm.predict(P_new), cm.predict_labels(P_new)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from calibcli.calibrators import Calibrator, registry
from calibcli.errors import UsageError
from calibcli.maps import classmap
from calibcli.maps.classmap import ClassMap

__all__ = ["Calibrator", "ClassMap", "evaluate", "fit", "load_map", "methods", "save_map"]


def methods() -> list[str]:
    """The registered method names (`calib methods`)."""
    return registry.available()


def fit(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    method: str = "isotonic",
    *,
    sample_weight: Sequence[float] | np.ndarray | None = None,
    features: Mapping[str, Sequence[Any]] | None = None,
    weight_kind: str = "frequency",
    classes: Sequence[Any] | None = None,
    score_kind: str = "auto",
    seed: int | None = None,
    pos_label: Any = None,
    weights: Sequence[float] | np.ndarray | None = None,
    **params: Any,
) -> Calibrator | ClassMap:
    """Fit `method` on scores and 0/1 labels; `params` are the method's options (`calib methods`).
    Binary labels of two other values (-1/1, "churn"/"stay") need `pos_label`, the positive
    one (`calib fit --pos-label`).

    Scores of shape (n, K), K >= 2, take the K-class path and return a `ClassMap`: labels may
    be any hashable values (`classes` gives the class of each column in order, else the sorted
    distinct labels), `score_kind` is "auto" (rows of non-negative values summing to 1 within
    1e-6 are probabilities), "probability" or "logit"; `method` a native K-class method
    (temperature, vector, dirichlet) or a score-only binary method, fitted one-vs-rest.

    `features` maps column names to arrays for field-aware methods (categorical values may be
    any strings). `weight_kind`: "frequency" (weight k = k rows) or "importance" (only the
    weights' ratios matter), as `calib fit --weight-kind`; `sample_weight`: one weight per row
    (`weights=` is its old name, deprecated); `seed` as `calib fit --seed`. The
    options are checked as the command checks them, with its messages (`requests.FitRequest`).
    Returns the fitted calibrator (`.predict(scores, features=...)`).
    """
    from calibcli.requests import Columns, FitRequest, binary_scores, weight_kind_option

    sample_weight = _sample_weight(sample_weight, weights)
    if np.ndim(scores) == 2:
        if features is not None or pos_label is not None:
            raise UsageError(f"{'features' if pos_label is None else 'pos_label'} is for binary scores of shape (n,), "
                             "not K-class scores (their labels may be any values)")
        from calibcli.io import score_cols

        weight_kind = weight_kind_option(weight_kind, sample_weight is not None)
        score_cols.check_score_kind(score_kind)  # the checks and words of `calib fit --score-cols`
        if classes is not None:
            score_cols.check_classes(classes)
        return classmap.fit(scores, labels, method, classes=classes, score_kind=score_kind, sample_weight=sample_weight,
                            weight_kind=weight_kind, seed=seed, **params)
    binary_scores(classes)  # score_kind on binary scores: the method's own parameter
    if score_kind != "auto":  # the binary methods' own score_kind parameter
        params["score_kind"] = score_kind
    feats = None
    if features is not None:
        feats = {k: (np.asarray(v, dtype=np.float64) if np.asarray(v).dtype.kind in "fiub"
                     else np.asarray([str(x) for x in v], dtype=object)) for k, v in features.items()}
    columns = Columns(fields=tuple(k for k, v in (feats or {}).items() if v.dtype == object),
                      features=tuple(k for k, v in (feats or {}).items() if v.dtype != object))
    request = FitRequest.build(method, params, seed=seed, weight_kind=weight_kind, columns=columns,
                               weighted=sample_weight is not None)
    s, y = np.asarray(scores, dtype=np.float64), _binary_labels(labels, pos_label)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    fitted = request.calibrator.fit(s, y, sample_weight=w, features=feats, weight_kind=request.weight_kind)
    from calibcli.calibrators import fitcheck  # worse than the scores on its own rows, or 0 on a seen label

    fitcheck.check_binary(fitted, s, y, w, feats, request.weight_kind)
    return fitted


def _sample_weight(sample_weight: Any, weights: Any) -> Any:
    """`sample_weight`, or `weights`, its old name (a FutureWarning), never both."""
    if weights is None:
        return sample_weight
    if sample_weight is not None:
        raise UsageError("give sample_weight only: weights is its old name")
    import warnings

    warnings.warn("weights= is now sample_weight=, as in scikit-learn; weights= will be removed",
                  FutureWarning, stacklevel=3)
    return weights


def _binary_labels(labels: Any, pos_label: Any) -> np.ndarray:
    """0/1 labels as float64: numbers as they are, or 1 where a label equals `pos_label` (two
    values, `pos_label` one of them); text labels without `pos_label` are refused, naming it."""
    from calibcli.errors import FitError

    if pos_label is None:
        try:
            return np.asarray(labels, dtype=np.float64)
        except (TypeError, ValueError):
            distinct = sorted(str(v) for v in np.unique(np.asarray(labels).astype(str)).tolist())
            shown = ", ".join(repr(v) for v in distinct[:5]) + (", ..." if len(distinct) > 5 else "")
            raise FitError(f"labels must be 0 or 1 (numbers or booleans), got the values {shown}",
                           hint=f"name the positive label with pos_label=, e.g. pos_label={distinct[-1]!r} "
                                "(as calib fit --pos-label)") from None
    classmap.refuse_mixed_labels(labels)
    y = np.asarray(labels)
    distinct = np.unique(y).tolist()
    shown = ", ".join(repr(v) for v in distinct[:5]) + (", ..." if len(distinct) > 5 else "")
    if pos_label not in distinct:
        raise FitError(f"pos_label {pos_label!r} is not a label (its values: {shown})")
    if len(distinct) > 2:
        raise FitError(f"pos_label is for labels with two values; these have {len(distinct)}: {shown}")
    return (y == pos_label).astype(np.float64)


def save_map(calibrator: Calibrator | ClassMap, path: str, training: Mapping[str, Any] | None = None) -> None:
    """Write a fitted calibrator as a map file (.json or .parquet), as `calib fit -o` does."""
    from calibcli.maps import envelope as maps

    maps.save_map(calibrator, path, training)


def load_map(path: str) -> Calibrator | ClassMap:
    """Read a map file written by `calib fit` or `save_map` (checked like every map calib reads):
    a `ClassMap` for a K-class map."""
    from calibcli.maps import envelope as maps

    return maps.load_map(path)[0]


def evaluate(
    labels: Sequence[float] | np.ndarray,
    probs: Sequence[float] | np.ndarray,
    *,
    fields: Sequence[Any] | np.ndarray | None = None,
    calbin_window: int = 100,
    interval: tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray] | None = None,
    classes: Sequence[Any] | None = None,
    sample_weight: Sequence[float] | np.ndarray | None = None,
    ece_bins: int = 10,
    ece_strategy: str = "uniform",
    metrics: str = "default",
    bands: int | None = None,
    seed: int = 0,
    hl_groups: int = 10,
    weights: Sequence[float] | np.ndarray | None = None,
) -> dict[str, float]:
    """Every metric `calib evaluate` reports for one probability column (NaN where n/a).

    `probs` of shape (n, K), K >= 2, is one K-class prediction: the result has the K-class
    keys (`evaluation.kclass_metrics`), `labels` any values, matched to the columns by
    `classes` (the class of each column; default: the labels' sorted distinct values, or
    column indices for integer labels in 0 .. K-1) and `metrics` of the K-class table
    (`all` or names such as "top_label_smece": the binary metric of the confidence against
    whether the top class is right); `fields` and `interval` are for binary probabilities only.
    `sample_weight` (row weights, as `--weight-col`; `weights=` is its deprecated old name)
    and `ece_bins`/`ece_strategy` (`--ece-bins`, `--ece-strategy`) apply to both.

    `fields` (any values, e.g. country names) adds Field-ECE and Field-RCE; `interval`
    ((low, high), e.g. a Venn-Abers map's `predict_interval`) the interval width and
    coverage (NaN without it). `metrics`, `bands`, `seed`, `ece_bins`, `hl_groups`: as
    `--metrics` ("default", "all" or a comma list), `--bands`, ... of `calib evaluate`
    (snake_case keys: `brier_mcb`, `smece`, ...). Invalid input (lengths, labels, probabilities, a
    `calbin_window` outside `calib evaluate --calbin-window`'s range) raises
    `calibcli.errors.UsageError` with the CLI's message.
    """
    from calibcli.evaluation.state import binary as state
    from calibcli.errors import UsageError
    from calibcli.io.columns import encode_fields
    from calibcli.requests import EvaluateOptions

    from calibcli.evaluation.weighttotal import check_weights

    sample_weight = _sample_weight(sample_weight, weights)
    options = EvaluateOptions.build(calbin_window=calbin_window, ece_bins=ece_bins, ece_strategy=ece_strategy,
                                    metrics=metrics, bands=bands, seed=seed, hl_groups=hl_groups,
                                    classes=None if classes is None else tuple(classes))
    if sample_weight is not None and np.all(np.isfinite(sample_weight)) and np.all(np.asarray(sample_weight) >= 0):
        check_weights(np.asarray(sample_weight, dtype=np.float64))  # the total: calib evaluate's rule
    if np.ndim(probs) == 2:
        given = [name for name, value in (("fields", fields), ("interval", interval)) if value is not None]
        if given:
            raise UsageError(f"{given[0]} applies to binary probabilities, not to probs of shape (n, K)")
        options.check_kind(kclass=True)
        return _evaluate_kclass(labels, probs, classes, sample_weight, options)
    options.check_kind(kclass=False)
    y = np.asarray(labels, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    if y.shape != p.shape or y.ndim != 1 or y.size == 0:
        raise UsageError(f"labels and probs must be 1-D of one length, got {y.shape} and {p.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise UsageError("labels must be 0 or 1")
    if not np.all((p >= 0) & (p <= 1)):
        raise UsageError("probs must be probabilities in [0, 1]")
    groups = None if fields is None else encode_fields(fields)[0]
    if groups is not None and groups.size != y.size:
        raise UsageError(f"fields has {groups.size} values for {y.size} labels")
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if w is not None and (w.shape != y.shape or not np.all(np.isfinite(w) & (w >= 0))):
        raise UsageError(f"weights must be {y.size} finite, non-negative values")
    out = state.compute_all(y, p, groups, options.calbin_window, sample_weight=w, ece_bins=options.ece_bins,
                            ece_strategy=options.ece_strategy, choice=options.choice)
    import math

    from calibcli.evaluation.metrics import intervals

    if interval is None:
        return {**out, **dict.fromkeys(intervals.KEYS, math.nan)}
    low, high = (np.asarray(v, dtype=np.float64) for v in interval)
    if low.shape != p.shape or high.shape != p.shape:
        raise UsageError(f"interval bounds must have {p.size} values each, got {low.shape} and {high.shape}")
    if (row := intervals.reversed_row(low, high)) is not None:
        raise UsageError(f"interval row {row}: the high end {float(high[row])!r} is below the low end "
                         f"{float(low[row])!r}", hint="interval=(low, high): the low ends first")
    return {**out, **intervals.interval_metrics(p, y, low, high)}


def _evaluate_kclass(labels, probs, classes, sample_weight, options) -> dict[str, float]:
    """`evaluate` of one K-class prediction (the mergeable state the CLI and engines use)."""
    from calibcli.evaluation.metrics import kclass as kclass_metrics
    from calibcli.evaluation.state.kclass import KClassState

    P = np.asarray(probs, dtype=np.float64)
    codes, names = kclass_metrics.label_codes(labels, P.shape[1], classes)
    return KClassState.from_arrays(codes, P, sample_weight, names).metrics(options.ece_bins, options.ece_strategy,
                                                                     options.choice)
