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

import math
from typing import Any, Mapping, Sequence

import numpy as np

from calibcli.calibrators import Calibrator, registry
from calibcli.errors import UsageError, Where
from calibcli.kinds import BINARY, KCLASS, kind_of
from calibcli.maps.classmap import ClassMap

__all__ = ["Calibrator", "ClassMap", "compare", "evaluate", "fit", "load_map", "methods", "save_map"]


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
    score_cols: Sequence[str] | None = None,
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

    `score_cols` (K classes) names the K score columns, recorded in the map for `calib apply`.
    `features` maps column names to arrays for feature methods: numbers are numeric, strings
    and booleans categorical (booleans as the levels true, false, as a Parquet boolean column). `weight_kind`: "frequency" (weight k = k rows) or "importance" (only the
    weights' ratios matter), as `calib fit --weight-kind`; `sample_weight`: one weight per row
    (`weights=` is its old name, deprecated); `seed` as `calib fit --seed`. The
    options are checked as the command checks them, with its messages (`requests.FitRequest`).
    Returns the fitted calibrator (`.predict(scores, features=...)`).
    """
    sample_weight = _sample_weight(sample_weight, weights)
    kind = kind_of(scores)
    return _FITS[kind](scores, labels, method, sample_weight=sample_weight, features=features,
                       weight_kind=weight_kind, classes=classes, score_kind=score_kind, seed=seed,
                       pos_label=pos_label, score_cols=score_cols, params=params)


def _fit_binary(scores, labels, method, *, sample_weight, features, weight_kind, classes, score_kind, seed,
                pos_label, score_cols, params) -> Calibrator:
    from calibcli.kinds.labels import BinaryLabels
    from calibcli.requests import Columns, FitRequest

    if score_kind != "auto":  # the binary methods' own score_kind parameter
        params["score_kind"] = score_kind
    feats = _feature_arrays(features)
    columns = Columns(fields=tuple(k for k, v in (feats or {}).items() if v.dtype == object),
                      features=tuple(k for k, v in (feats or {}).items() if v.dtype != object),
                      pos_label=pos_label, classes=None if classes is None else tuple(classes))
    request = FitRequest.build(method, params, seed=seed, weight_kind=weight_kind, columns=columns,
                               weighted=sample_weight is not None, kind=BINARY)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = BinaryLabels(pos_label).read(labels, Where(column="labels"))
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    fitted = request.calibrator.fit(s, y, sample_weight=w, features=feats, weight_kind=request.weight_kind)
    from calibcli.calibrators import fitcheck  # worse than the scores on its own rows, or 0 on a seen label

    fitcheck.check_binary(fitted, s, y, w, feats, request.weight_kind)
    return fitted


def _feature_arrays(features: Mapping[str, Sequence[Any]] | None) -> dict[str, np.ndarray] | None:
    """Feature columns in memory: numbers as float64, booleans as the levels true/false, else strings."""
    if features is None:
        return None
    return {k: (np.asarray(v, dtype=np.float64) if np.asarray(v).dtype.kind in "fiu"
                else np.where(np.asarray(v), "true", "false").astype(object) if np.asarray(v).dtype.kind == "b"
                else np.asarray([str(x) for x in v], dtype=object)) for k, v in features.items()}


def _fit_kclass(scores, labels, method, *, sample_weight, features, weight_kind, classes, score_kind, seed,
                pos_label, score_cols, params) -> ClassMap:
    from calibcli.calibrators import kscores
    from calibcli.kinds import labels as reading, probabilities
    from calibcli.requests import Columns, FitRequest

    if features is not None:
        raise UsageError("features is for binary scores of shape (n,), not K-class scores of shape (n, K)")
    request = FitRequest.build(method, params, seed=seed, weight_kind=weight_kind,
                               columns=Columns(pos_label=pos_label, classes=None if classes is None else tuple(classes),
                                               score_kind=score_kind),
                               weighted=sample_weight is not None, kind=KCLASS)
    P = kscores.as_score_matrix(scores)
    kind, warning = probabilities.resolve_kind(P, score_kind, Where(column="scores"), hint=probabilities.ARRAY_HINT)
    probabilities.warn(warning, stacklevel=4)
    names = _class_names(labels, P.shape[1], classes)
    codes = reading.ClassLabels(names).read(labels, Where(column="labels"))
    cal = request.calibrator.set_params(score_kind=kind)
    cal.fit(P, codes, sample_weight=sample_weight, weight_kind=request.weight_kind)
    return ClassMap(cal, names, score_cols)


_FITS = {BINARY: _fit_binary, KCLASS: _fit_kclass}


def _class_names(labels: Any, k: int, classes: Sequence[Any] | None) -> list[Any]:
    """The K class names: `classes` (one per column) or inferred from the labels (`kinds.labels`)."""
    from calibcli.kinds.labels import infer_classes

    if classes is None:
        return infer_classes(labels, k)
    if len(classes) != k:
        raise UsageError(f"classes names {len(classes)} classes but the scores have {k} columns")
    return list(classes)


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


def save_map(calibrator: Calibrator | ClassMap, path: str, training: Mapping[str, Any] | None = None) -> None:
    """Write a fitted calibrator as a map file (.json or .parquet), as `calib fit -o` does; a
    fitted `calibcli.sklearn.Calibrator` is saved as the map it holds (two classes: the map of
    `classes_[1]`'s probability, the classes recorded in the training block)."""
    from calibcli.maps import envelope as maps

    fitted, note = _unwrapped(calibrator)
    maps.save_map(fitted, path, {**note, **dict(training or {})})


def _unwrapped(calibrator: Any) -> tuple[Any, dict[str, Any]]:
    """A fitted `calibcli.sklearn.Calibrator` as (its calibcli map, a training note of its
    classes); anything else as it is."""
    if type(calibrator).__module__ != "calibcli.sklearn":
        return calibrator, {}
    from calibcli.errors import NotFittedError

    if not hasattr(calibrator, "calibrator_"):
        raise NotFittedError(f"this {type(calibrator).__name__} is not fitted yet: call fit first")
    classes = [str(c) for c in calibrator.classes_.tolist()]
    return calibrator.calibrator_, ({"classes": classes, "positive_class": classes[1]} if len(classes) == 2 else {})


def load_map(path: str) -> Calibrator | ClassMap:
    """Read a map file written by `calib fit` or `save_map` (checked like every map calib reads):
    a `ClassMap` for a K-class map."""
    from calibcli.maps import envelope as maps

    return maps.load_map(path)[0]


def evaluate(
    labels: Sequence[float] | np.ndarray,
    probs: Sequence[float] | np.ndarray,
    *,
    map: Any = None,
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
    min_rows: float = 30,
    segments: Mapping[str, Sequence[Any] | np.ndarray] | None = None,
    segment_bins: int | None = None,
    segment_top: int | None = None,
    segment_depth: int | None = None,
    segment_min_rows: int | None = None,
    segment_max: int | None = None,
) -> dict[str, float]:
    """Every metric `calib evaluate` reports for one probability column (NaN where n/a).

    With `map` (a fitted calibrator or `ClassMap`, a map file's path, or a fitted
    `calibcli.sklearn.Calibrator`), `probs` are the scores it calibrates and its predictions
    are evaluated, as `calib evaluate --map` does (a scikit-learn wrapper's labels are its
    `classes_`; two classes: the probability of `classes_[1]`).

    `probs` of shape (n, K), K >= 2, is one K-class prediction: the result has the K-class
    keys (`evaluation.kclass_metrics`), `labels` any values, matched to the columns by
    `classes` (the class of each column; default: the labels' sorted distinct values, or
    column indices for integer labels in 0 .. K-1) and `metrics` of the K-class table
    (`all` or names such as "top_label_smece": the binary metric of the confidence against
    whether the top class is right); `fields` and `interval` are for binary probabilities only.
    `sample_weight` (row weights, as `--weight-col`; `weights=` is its deprecated old name)
    and `ece_bins`/`ece_strategy` (`--ece-bins`, `--ece-strategy`) apply to both.

    The result is a dict of the metrics with the verdict as `.verdict` (`evaluation.verdict`:
    `.calibrated`, `.direction`, `.where`, `.evidence`, `.text`) and, with `fields`, the
    values with at least `min_rows` rows (weight) ranked by evidence of a gap as `.by_field`
    (`calib evaluate --by-field --min-rows`: exact binomial tests, Benjamini-Hochberg).

    `fields` (any values, e.g. country names) adds Field-ECE and Field-RCE; `interval`
    ((low, high), e.g. a Venn-Abers map's `predict_interval`) the interval width and
    coverage (NaN without it). `metrics`, `bands`, `seed`, `ece_bins`, `hl_groups`: as
    `--metrics` ("default", "all" or a comma list), `--bands`, ... of `calib evaluate`
    (snake_case keys: `brier_mcb`, `smece`, ...). Invalid input (lengths, labels, probabilities, a
    `calbin_window` outside `calib evaluate --calbin-window`'s range) raises
    `calibcli.errors.UsageError` with the CLI's message.

    `segments` ({name: one value per row}, as `calib evaluate --segment-col`; float arrays are
    numeric and cut into `segment_bins` quantile bins, text, integer and boolean ones
    categorical) adds the multicalibration error `multical`, `multical_sigma` and `multical_p`
    (for probs of shape (n, K), `top_label_multical`, ...), with `segment_bins`, `segment_top`,
    `segment_depth`, `segment_min_rows`, `segment_max` as the options of the same names
    (docs/multicalibration.md); the same numbers as the command on the same rows.
    """
    from calibcli.requests import EvaluateOptions
    from calibcli.requests.evaluate import field_min_rows

    min_rows = field_min_rows(min_rows)
    sample_weight = _sample_weight(sample_weight, weights)
    if segments is not None and not isinstance(segments, Mapping):
        raise UsageError(f"segments must map column names to values, got {type(segments).__name__}",
                         hint='e.g. segments={"country": countries, "age": ages}')
    if map is not None:
        labels, probs, classes = _map_predictions(map, labels, probs, classes)
    options = EvaluateOptions.build(calbin_window=calbin_window, ece_bins=ece_bins, ece_strategy=ece_strategy,
                                    metrics=metrics, bands=bands, seed=seed, hl_groups=hl_groups,
                                    classes=None if classes is None else tuple(classes), kind=kind_of(probs),
                                    segment_cols=tuple(segments or ()), segment_bins=segment_bins,
                                    segment_top=segment_top, segment_depth=segment_depth,
                                    segment_min_rows=segment_min_rows, segment_max=segment_max)
    if sample_weight is not None and np.all(np.isfinite(sample_weight)) and np.all(np.asarray(sample_weight) >= 0):
        from calibcli.evaluation.weighttotal import check_weights

        check_weights(np.asarray(sample_weight, dtype=np.float64))  # the total: calib evaluate's rule
    out = _EVALUATIONS[options.kind](labels, probs, fields=fields, interval=interval, classes=classes,
                                     sample_weight=sample_weight, options=options, segments=segments)
    if fields is not None:  # K-class predictions refuse fields above
        out.by_field = _by_field(labels, probs, fields, sample_weight, min_rows)
    return out


def _by_field(labels, probs, fields, sample_weight, min_rows) -> dict[str, Any]:
    """`--by-field` of checked arrays: every value with at least `min_rows` rows, by evidence."""
    from calibcli.evaluation.metrics import diagnostics, kernels
    from calibcli.io.columns import encode_fields
    from calibcli.kinds.labels import BinaryLabels

    y = BinaryLabels().read(labels, Where(column="labels"))
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    codes, names = encode_fields(fields)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    sums = kernels.field_sums(y.astype(np.float64), p, codes, w, len(names))
    return diagnostics.field_breakdown_sums(*sums, names, max(1, len(names)), min_rows)


def _multicalibration(y: np.ndarray, p: np.ndarray, segments: Mapping[str, Any], sample_weight: Any,
                      options: Any, prefix: str = "") -> dict[str, float]:
    """The multicalibration error of (y, p) over the segments of `segments` (`evaluation.multical`),
    its keys after `prefix` ("top_label_" for K classes); {} without segments."""
    from calibcli.evaluation import multical

    if options.segments is None:
        return {}
    columns = {}
    for name, values in segments.items():
        column = values if hasattr(values, "__array__") or hasattr(values, "type") else np.asarray(values)
        if len(column) != y.size:
            raise UsageError(f"segments[{name!r}] has {len(column)} values for {y.size} labels")
        columns[name] = column
    collector = multical.SegmentCollector(options.segments, 1)
    collector.add(columns, [y], [p], None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64),
                  "segments", 0)
    result = collector.results()[0]
    return {prefix + k: v for k, v in result.metrics().items()}


def _evaluate_binary(labels, probs, *, fields, interval, classes, sample_weight, options, segments) -> dict[str, float]:
    from calibcli.evaluation import verdict
    from calibcli.evaluation.metrics import intervals
    from calibcli.evaluation.state import binary as state
    from calibcli.io.columns import encode_fields
    from calibcli.kinds.labels import BinaryLabels

    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    y = BinaryLabels().read(labels, Where(column="labels"))
    if y.shape != p.shape or y.size == 0:
        raise UsageError(f"labels and probs must be 1-D of one length, got {np.shape(labels)} and {np.shape(probs)}")
    if not np.all((p >= 0) & (p <= 1)):
        raise UsageError("probs must be probabilities in [0, 1]")
    groups = None if fields is None else encode_fields(fields)[0]
    if groups is not None and groups.size != y.size:
        raise UsageError(f"fields has {groups.size} values for {y.size} labels")
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if w is not None and (w.shape != y.shape or not np.all(np.isfinite(w) & (w >= 0))):
        raise UsageError(f"weights must be {y.size} finite, non-negative values")
    rows = state.state_of(y, p, groups, w)
    with np.errstate(all="ignore"):
        out = rows.metrics(options.calbin_window, options.ece_bins, options.ece_strategy, options.choice)
        judged = verdict.binary_verdict(*rows.pooled(), options.ece_bins, options.ece_strategy, out)
    if interval is None:
        return verdict.Evaluated({**out, **dict.fromkeys(intervals.KEYS, math.nan),
                                  **_multicalibration(y, p, segments, w, options)}, judged)
    low, high = (np.asarray(v, dtype=np.float64) for v in interval)
    if low.shape != p.shape or high.shape != p.shape:
        raise UsageError(f"interval bounds must have {p.size} values each, got {low.shape} and {high.shape}")
    if (row := intervals.reversed_row(low, high)) is not None:
        raise UsageError(f"interval row {row}: the high end {float(high[row])!r} is below the low end "
                         f"{float(low[row])!r}", hint="interval=(low, high): the low ends first")
    return verdict.Evaluated({**out, **intervals.interval_metrics(p, y, low, high, w, options.ece_bins,
                                                                  options.ece_strategy),
                              **_multicalibration(y, p, segments, w, options)}, judged)


def _map_predictions(map: Any, labels: Any, scores: Any, classes: Any) -> tuple[Any, np.ndarray, Any]:
    """(labels, the map's predictions of `scores`, classes) for `evaluate(map=...)`."""
    import os

    if isinstance(map, (str, os.PathLike)):
        map = load_map(os.fspath(map))
    if type(map).__module__ == "calibcli.sklearn":
        _unwrapped(map)  # not fitted: the NotFittedError
        P = map.predict_proba(scores)
        if P.shape[1] > 2:
            return labels, P, map.classes_.tolist() if classes is None else classes
        y = np.asarray(labels)
        unknown = ~np.isin(y, map.classes_)
        if unknown.any():
            raise UsageError(f"label {y[unknown][:1].tolist()[0]!r} is not one of the map's classes "
                             f"{map.classes_.tolist()}")
        return (y == map.classes_[1]).astype(np.float64), P[:, 1], classes
    if not hasattr(map, "envelope_fields"):
        raise UsageError(f"map must be a fitted calibrator, a ClassMap, a map file or a fitted "
                         f"calibcli.sklearn.Calibrator, got {type(map).__name__}")
    return _MAP_PREDICTIONS[kind_of(map)](map, labels, scores, classes)


def _binary_map_predictions(map: Any, labels: Any, scores: Any, classes: Any) -> tuple[Any, np.ndarray, Any]:
    if map.uses_features:
        raise UsageError(f"a {map.name} map reads feature columns: predict with them and pass the probabilities")
    return labels, map.predict(scores), classes


def _kclass_map_predictions(map: Any, labels: Any, scores: Any, classes: Any) -> tuple[Any, np.ndarray, Any]:
    return labels, map.predict(scores), map.classes_.tolist() if classes is None else classes


_MAP_PREDICTIONS = {BINARY: _binary_map_predictions, KCLASS: _kclass_map_predictions}


def _evaluate_kclass(labels, probs, *, fields, interval, classes, sample_weight, options, segments) -> dict[str, float]:
    """`evaluate` of one K-class prediction (the mergeable state the CLI and engines use)."""
    from calibcli.evaluation.state.kclass import KClassState
    from calibcli.kinds import probabilities
    from calibcli.kinds.labels import ClassLabels

    given = [name for name, value in (("fields", fields), ("interval", interval)) if value is not None]
    if given:
        raise UsageError(f"{given[0]} applies to binary probabilities, not to probs of shape (n, K)")
    P = np.asarray(probs, dtype=np.float64)
    probabilities.refuse_rows(P, Where(column="probs"))
    names = _class_names(labels, P.shape[1], classes)
    codes = ClassLabels(names).read(labels, Where(column="labels"))
    if codes.size != P.shape[0]:
        raise UsageError(f"labels has {codes.size} values for {P.shape[0]} rows of probs")
    from calibcli.evaluation import verdict

    rows = KClassState.from_arrays(codes, P, sample_weight, names)
    with np.errstate(all="ignore"):
        judged = verdict.kclass_verdict(rows.top.pooled(), [s.pooled() for s in rows.per_class], names,
                                        options.ece_bins, options.ece_strategy)
    out = rows.metrics(options.ece_bins, options.ece_strategy, options.choice)
    if options.segments is not None:
        from calibcli.evaluation.multical import top_label
        from calibcli.requests.metrics import TOP_LABEL

        out = {**out, **_multicalibration(*top_label(codes, P), segments, sample_weight, options, TOP_LABEL)}
    return verdict.Evaluated(out, judged)


_EVALUATIONS = {BINARY: _evaluate_binary, KCLASS: _evaluate_kclass}


def compare(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[Any] | np.ndarray,
    methods: str | Sequence[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    metric: str = "log_loss",
    *,
    classes: Sequence[Any] | None = None,
    score_kind: str = "auto",
    pos_label: Any = None,
    pick: str = "recommended",
    out: str | None = None,
    progress: bool = False,
    features: Mapping[str, Sequence[Any]] | None = None,
) -> Any:
    """Which method calibrates these scores, if any: `calib compare` on arrays (the same code).

    Every method in `methods` (names, a comma list or a preset: "fast", "default" (None),
    "all") and the uncalibrated scores, `none`, are scored on the same `folds` (seeded by
    `seed`) by the out-of-fold `metric`. The result (`fitting.comparison.Comparison`) has
    `.recommended` (`none` when calibration does not help, else the simplest method tied with
    the best), `.reason`, `.best`, `.tied`, per-method `.scores` and `.to_json()` (the JSON
    of `calib compare --json`). `out`: save the `pick` ("recommended" or "best") map refitted
    on all rows, as `-o` does (nothing is written when it is `none`: `.saved` stays None).

    Binary: scores of shape (n,) and 0/1 labels (or two values with `pos_label`); `none`
    is the scores when all lie in [0, 1], else sigmoid(score). K classes: scores (n, K),
    labels any values (`classes`: the class of each column, as in `fit`), `score_kind` as in
    `fit`; `none` is the probabilities as given or the softmax of logits.

    `features` (binary): column name -> one value per row, as in `fit`; with them the default
    and all presets add multicalibration, fitted on them fold by fold.

        >>> result = calibcli.compare(scores, labels, methods="fast")
        >>> result.recommended, result.reason
    """
    from calibcli.fitting import compare as comparing
    from calibcli.requests import CompareRequest

    kind = kind_of(scores)
    request = CompareRequest.build(folds, seed, metric, _COMPARE_COLUMNS[kind](classes, score_kind, pos_label))
    feats = _COMPARE_FEATURES[kind](features)
    chosen = comparing.methods_of([methods] if isinstance(methods, str) else methods, kind, bool(feats))
    comparing.check_pick(pick)
    comparing.check_out(out)
    S, y, extra = _COMPARE_ROWS[kind](scores, labels, classes, score_kind, pos_label)
    if feats and any(v.shape != (y.size,) for v in feats.values()):
        raise UsageError("features must map column names to 1-D arrays with one value per row of binary scores")
    return comparing.compare_arrays("scores", S, y, chosen, request, kind=kind, out=out, pick=pick,
                                    show_progress=progress, features=feats, **extra)


def _compare_binary_rows(scores, labels, classes, score_kind, pos_label):
    from calibcli.kinds.labels import BinaryLabels

    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = BinaryLabels(pos_label).read(labels, Where(column="labels"))
    if s.shape != y.shape:
        raise UsageError(f"scores and labels must be 1-D of one length, got {s.shape} and {y.shape}")
    if not np.all(np.isfinite(s)):
        raise UsageError(f"scores must be finite: row {int(np.argmin(np.isfinite(s)))} is {s[~np.isfinite(s)][0]!r}")
    return s, y, {}


def _compare_kclass_rows(scores, labels, classes, score_kind, pos_label):
    from calibcli.calibrators import kscores
    from calibcli.kinds import labels as reading, probabilities

    P = kscores.as_score_matrix(scores)
    kind, warning = probabilities.resolve_kind(P, score_kind, Where(column="scores"), hint=probabilities.ARRAY_HINT)
    probabilities.warn(warning, stacklevel=4)
    names = _class_names(labels, P.shape[1], classes)
    codes = reading.ClassLabels(names).read(labels, Where(column="labels"))
    return P, codes, {"score_kind": kind, "classes": names, "training": {"score_kind": kind}}


def _compare_columns(kind_columns: str | None):
    from calibcli.requests import Columns

    def columns(classes, score_kind, pos_label):
        return Columns(pos_label=pos_label, classes=None if classes is None else tuple(classes),
                       score_kind=score_kind, score_cols=kind_columns)

    return columns


_COMPARE_ROWS = {BINARY: _compare_binary_rows, KCLASS: _compare_kclass_rows}


def _no_features(features: Any) -> None:
    if features is not None:
        raise UsageError("features is for binary scores of shape (n,), not K-class scores of shape (n, K)")


_COMPARE_FEATURES = {BINARY: _feature_arrays, KCLASS: _no_features}
_COMPARE_COLUMNS = {BINARY: _compare_columns(None), KCLASS: _compare_columns("scores")}  # the K columns: an array's
