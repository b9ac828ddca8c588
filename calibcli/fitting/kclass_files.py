"""K-class fits on score files: `calib fit --score-cols SPEC` and `calib compare --score-cols`.

A file's K score columns (`io.score_cols`) become an (n, K) array, its labels class codes; the
score kind is resolved (`auto`: rows of probabilities are probabilities) and recorded in the
map with the class names and the score columns. The fit shares the binary path's tail
(`fitting._fit_and_save`: warnings, `--strict`, the training block, the map saved).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from calibcli import io
from calibcli.calibrators import registry
from calibcli.calibrators.fitdata import unit_scaled
from calibcli.requests import kclass_calibrator
from calibcli.maps.classmap import ClassMap
from calibcli.requests import CompareRequest
from calibcli.fitting.compare import KCLASS_COMPARED, Comparison, compare, save_best, unfitted
from calibcli.errors import InputError, UsageError
from calibcli.evaluation.metrics import kclass as kclass_metrics
from calibcli.fitting.pipeline import FitResult, _claim_map_output, _fit_and_save
from calibcli.io import score_cols

MISSING_CLASS = "have no rows in the calibration set"  # the calibrator's own warning, said here by name


@dataclass(frozen=True)
class KColumns:
    """Which input columns hold what for K classes (--score-cols, --label-col, --weight-col),
    the class names (--classes) and --score-kind."""

    spec: str
    label: str = "label"
    weight: str | None = None
    classes: tuple[str, ...] | None = None
    score_kind: str = "auto"


@dataclass
class KData:
    """A file's K-class rows: scores (n, K), class codes, weights, and how they were read."""

    source: str
    scores: np.ndarray
    codes: np.ndarray
    weights: np.ndarray | None
    cols: score_cols.ScoreCols
    kind: str
    labels_as: str


def read_kclass(path: str, cols: KColumns, fmt: str | None = None) -> KData:
    """Read and check a whole K-class score file (every refusal names file, column and row)."""
    source = io.display_name(path)
    table = io.read_table(path, fmt)
    if table.num_rows == 0:
        raise InputError(f"{source}: no data rows")
    resolved = score_cols.resolve(cols.spec, table.schema, source, cols.classes)
    P = score_cols.matrix_from(table, resolved, source)
    if resolved.k is None:
        resolved = resolved.with_k(P.shape[1], source, cols.classes)
    kind = score_cols.score_kind_of(P, cols.score_kind, resolved, source)
    codes, how = score_cols.label_codes(table, cols.label, resolved.classes, source)
    w = io.weights_from(table, cols.weight, source) if cols.weight else None
    return KData(source, P, codes, w, resolved, kind, how)


def quality(y: np.ndarray, P: np.ndarray, w: np.ndarray | None = None) -> tuple[dict[str, float], float]:
    """The training log-loss and Brier of rows (`kclass_metrics`' definitions) and their weight."""
    total = float(y.size if w is None else np.sum(w))
    if total == 0:
        return {"log_loss": 0.0, "brier": 0.0}, 0.0
    return {"log_loss": kclass_metrics.log_loss(y, P, sample_weight=w),
            "brier": kclass_metrics.brier(y, P, sample_weight=w)}, total


def fit_kclass_file(path: str, method: str, params: Mapping[str, str] | Sequence[str] | None = None, *, cols: KColumns,
                    fmt: str | None = None, seed: int | None = None, out: str | None = None,
                    out_format: str | None = None, strict: bool = False,
                    weight_kind: str = "frequency") -> FitResult:
    """Fit `method` on a K-class score file and, when `out` is given, save the map there."""
    _claim_map_output(out, out_format, [path])
    cal = kclass_calibrator(method, params, texts=True, seed=seed, score_kind=cols.score_kind)  # before reading
    data = read_kclass(path, cols, fmt)
    cal.set_params(score_kind=data.kind)
    classes = data.cols.classes
    counts = np.bincount(data.codes, minlength=len(classes))
    missing = [classes[i] for i in np.flatnonzero(counts == 0)]
    auto_logits = cols.score_kind == "auto" and data.kind == "logit"
    notes = [note for note in [auto_logits and score_cols.auto_logits_note(data.scores, data.cols)] if note]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        notes.append(f"class(es) {shown} have no rows in {data.source}: the map still gives them a probability")
    training: dict[str, Any] = {
        "input": data.source,
        "rows": int(data.codes.size),
        "label_col": cols.label,
        "class_rows": dict(zip(classes, counts.tolist())),
        "score_kind_option": cols.score_kind,
        **_kinds(data),
    }
    if cols.weight:
        training["weight_col"] = cols.weight
        training["weight_kind"] = weight_kind
    P, y, w = data.scores, data.codes, data.weights
    saved = ClassMap(cal, classes, data.cols.columns or None)

    wq = unit_scaled(w)  # the report's weighted means, whatever the weights' scale

    def part_quality(p: np.ndarray, part: slice) -> tuple[dict[str, float], float]:
        return quality(y[part], p, None if wq is None else wq[part])

    return _fit_and_save(cal, data.source, dict(scores=P, labels=y, sample_weight=w, weight_kind=weight_kind),
                         training, notes, strict, out, out_format, part_quality, P,
                         lambda part: cal.predict(P[part]), saved=saved, raw=data.kind == "probability",
                         said=MISSING_CLASS)


def _kinds(data: KData) -> dict[str, Any]:
    """What a K-class map's training block says of how its file was read."""
    listed = {} if data.cols.list_column is None else {"score_list_col": data.cols.list_column}
    return {"score_kind": data.kind, "labels_read_as": data.labels_as, **listed}


def default_methods() -> list[str]:
    """What `calib compare --score-cols` compares by default: the native K-class methods and
    one-vs-rest isotonic."""
    return [*registry.kclass_native(), "isotonic"]


def _fold_metrics(y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    return {"log_loss": kclass_metrics.log_loss(y, P), "brier": kclass_metrics.brier(y, P),
            "top_label_ece": kclass_metrics.top_label_ece(y, P),
            "classwise_ece": kclass_metrics.classwise_ece(y, P)}


def compare_kclass_file(path: str, methods: Sequence[str] | None, folds: int, seed: int, metric: str,
                        cols: KColumns, fmt: str | None = None, out: str | None = None) -> Comparison:
    """K-class methods compared on the same folds (as the binary `compare_file`); with `out`,
    the best method's map refitted on all rows."""
    folds, seed, metric = CompareRequest.build(folds, seed, metric, kclass=True)
    chosen = list(methods) if methods else default_methods()
    for m in chosen:
        registry.kclass(m, {"score_kind": "probability"})  # a method that cannot take K columns, refused first
    _claim_map_output(out, None, [path])
    data = read_kclass(path, cols, fmt)
    n = data.codes.size
    if n < 2 * folds:
        raise InputError(f"{data.source}: {n} rows are too few for {folds} folds")
    make = unfitted(lambda m: registry.kclass(m, {"score_kind": data.kind}), seed)
    scores = compare(data.scores, data.codes, chosen, folds, seed, make=make, fold_metrics=_fold_metrics)
    result = Comparison(data.source, int(n), folds, seed, metric, scores, KCLASS_COMPARED)

    def refit(method: str) -> ClassMap:
        return ClassMap(make(method).fit(data.scores, data.codes), data.cols.classes,
                        data.cols.columns or None)

    return save_best(result, out, refit, _kinds(data))
