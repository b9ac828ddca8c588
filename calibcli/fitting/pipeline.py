"""`calib fit`: a calibration map from a score/label file, or from a score summary.

No printing here: functions return a `FitResult` (the fitted calibrator, the training block
saved in the map, warnings for the CLI to show) and raise `CalibError`s. Both paths share one
tail (`_fit_and_save`): warnings collected, `--strict` turning the first into an error, the
training block finished and the map saved through the output policy.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibcli import io
from calibcli.calibrators import Calibrator, fitcheck
from calibcli.calibrators.fitdata import unit_scaled
from calibcli.errors import CalibWarning, FitError, InputError
from calibcli.evaluation.metrics import binary as metrics, kclass as kclass_metrics
from calibcli.fitting import summary
from calibcli.fitting.rows import MISSING_CLASS, Rows, read_rows
from calibcli.io import targets
from calibcli.kinds import BINARY, KCLASS
from calibcli.maps import envelope as maps
from calibcli.maps.classmap import ClassMap
from calibcli.requests import Columns, FitRequest

__all__ = ["Columns", "FitRequest", "FitResult", "fit_file", "fit_summary", "fit_summary_file"]


_QUALITY_CHUNK = 1 << 16  # rows per chunk of the training-quality report


@dataclass
class FitResult:
    calibrator: Calibrator
    training: dict[str, Any]
    envelope: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def fit_file(
    path: str,
    request: FitRequest,
    *,
    fmt: str | None = None,
    out: str | None = None,
    out_format: str | None = None,
    strict: bool = False,
) -> FitResult:
    """Fit the request's calibrator (binary or K-class) on a score file and, when `out` is
    given, save the map there. With `strict` the first warning is a FitError and no map is written.
    """
    _claim_map_output(out, out_format, [path])
    rows = read_rows(path, request.columns, fmt, request.kind)
    return _FITS[request.kind](rows, request, strict, out, out_format)


def _fit_binary(rows: Rows, request: FitRequest, strict: bool, out: str | None, out_format: str | None) -> FitResult:
    calibrator, cols, weight_kind = request.calibrator, request.columns, request.weight_kind
    s, y, w, feats = rows.scores, rows.labels, rows.weights, rows.features
    io.check_scores_for(calibrator, s, cols.score, rows.source, None)
    if calibrator.uses_features and not (cols.fields or cols.features):
        rows.notes.insert(0, f"{request.method} without --field-col or --feature-col is ilps with extra steps: "
                             "fit --method ilps, or name the feature columns")
    _weights_block(rows.training, cols, weight_kind)

    quality = _quality(metrics, y, w)

    def predict(part: slice) -> np.ndarray:
        return calibrator.predict(s[part], features=None if feats is None else {k: v[part] for k, v in feats.items()})

    return _fit_and_save(calibrator, rows.source, dict(scores=s, labels=y, sample_weight=w, features=feats,
                                                       weight_kind=weight_kind),
                         rows.training, rows.notes, strict, out, out_format, quality, s, predict, check_report=True)


def _fit_kclass(rows: Rows, request: FitRequest, strict: bool, out: str | None, out_format: str | None) -> FitResult:
    cal, P, y, w = request.calibrator, rows.scores, rows.labels, rows.weights
    cal.set_params(score_kind=rows.score_kind)
    _weights_block(rows.training, request.columns, request.weight_kind)
    saved = ClassMap(cal, rows.classes, rows.score_cols or None)

    quality = _quality(kclass_metrics, y, w)

    return _fit_and_save(cal, rows.source, dict(scores=P, labels=y, sample_weight=w, weight_kind=request.weight_kind),
                         rows.training, rows.notes, strict, out, out_format, quality, P,
                         lambda part: cal.predict(P[part]), saved=saved, raw=rows.score_kind == "probability",
                         said=MISSING_CLASS)


_FITS = {BINARY: _fit_binary, KCLASS: _fit_kclass}


def _quality(of: Any, y: np.ndarray, w: np.ndarray | None):
    """`quality(p, part)`: the training log-loss and Brier score (`of`'s definitions, binary or
    K-class) of the rows `part` predicted `p`, weighted like the fit (the weights brought near 1,
    so the weighted means hold whatever their scale), and their weight."""
    w = unit_scaled(w)

    def quality(p: np.ndarray, part: slice) -> tuple[dict[str, float], float]:
        sw = None if w is None else w[part]
        total = float(len(p) if sw is None else np.sum(sw))
        if total == 0:  # a chunk of zero-weight rows adds nothing
            return {"log_loss": 0.0, "brier": 0.0}, 0.0
        return ({"log_loss": of.log_loss(y[part], p, sample_weight=sw),
                 "brier": of.brier(y[part], p, sample_weight=sw)}, total)

    return quality


def _weights_block(training: dict[str, Any], cols: Any, weight_kind: str) -> None:
    if cols.weight:
        training["weight_col"] = cols.weight
        training["weight_kind"] = weight_kind


def fit_summary_file(summary_path: str, request: FitRequest, **options: Any) -> FitResult:
    """Fit a score-only method on a summary (`calib summarize`, or Spark/Dask) instead of rows.

    `options` are `fit_summary`'s (out, out_format, strict); the summary's n0/n1 are the
    weights of each score's rows, of the request's weight kind.
    """
    _claim_map_output(options.get("out"), options.get("out_format"), [summary_path])
    return fit_summary(summary.load(summary_path), request, io.display_name(summary_path), **options)


def fit_summary(summ: summary.ScoreSummary, request: FitRequest, source: str, *, out: str | None = None,
                out_format: str | None = None, strict: bool = False) -> FitResult:
    """Fit a request built `from_summary` on a summary (from a file, or built by an engine)."""
    calibrator, weight_kind = request.calibrator, request.weight_kind
    if summ.size == 0:
        raise InputError(f"{source}: the summary holds no scores")
    _check_summary_classes(summ, calibrator, source)
    s, y, w = summary.fit_rows(summ)
    scale = unit_scaled(np.concatenate([summ.n0, summ.n1]))  # the report's means, whatever the counts' scale
    n0, n1 = scale[:summ.size], scale[summ.size:]
    training: dict[str, Any] = {
        "input": source,
        "from_summary": {"entries": summ.size, "step": summ.step, "weighted": summ.weighted},
        "weight_kind": weight_kind,
        "rows": summ.rows,
        "positives": summ.positives,
        "negatives": summ.rows - summ.positives,
        "score_range": list(summ.score_range),
    }

    def quality(p: np.ndarray, part: slice) -> tuple[dict[str, float], float]:
        a, b = n0[part], n1[part]
        return ({"log_loss": metrics.log_loss_counts(p, a, b), "brier": metrics.brier_counts(p, a, b)},
                float(np.sum(a) + np.sum(b)))

    return _fit_and_save(calibrator, source, dict(scores=s, labels=y, sample_weight=w, weight_kind=weight_kind),
                         training, [], strict, out, out_format, quality, summ.score,
                         lambda part: calibrator.predict(summ.score[part]))


def _check_summary_classes(summ: summary.ScoreSummary, calibrator: Calibrator, source: str) -> None:
    """A summary without weight on both classes, refused with its true cause (its rows have
    only one label, or the rows of a class all weigh zero)."""
    total0, total1 = float(np.sum(summ.n0)), float(np.sum(summ.n1))
    if total0 > 0 and total1 > 0:
        return
    if total0 <= 0 and total1 <= 0:
        cause = "all weights are zero: n0 and n1 are 0 for every score"
    else:
        label = 1 if total1 <= 0 else 0
        rows_with_label = summ.positives if label == 1 else summ.rows - summ.positives
        cause = (f"every row with label {label} has weight zero" if summ.weighted and rows_with_label > 0
                 else f"every label is {1 - label} ({'positive' if label == 0 else 'negative'}): "
                 f"n{label} is 0 for every score")
    raise FitError(f"{source}: cannot fit {calibrator.name}: {cause}: calibration needs both classes",
                   hint="check the labels (and weights) the summary was made from")


def _fit_and_save(calibrator: Calibrator, source: str, fit_args: dict[str, Any], training: dict[str, Any],
                  notes: list[str], strict: bool, out: str | None, out_format: str | None,
                  quality, scores: np.ndarray, predict, saved: Any = None, raw: bool | None = None,
                  said: str | None = None, check_report: bool = False) -> FitResult:
    """The tail every fit shares: fit with warnings collected, --strict, the training block, save.

    `quality(p, part)` gives the training log-loss and Brier of probabilities `p` for the rows
    `part` with their weight, `predict(part)` the fitted map's probabilities for those rows.
    `scores` are (n,) or (n, K); `raw` says whether they are probabilities whose quality is
    reported as "before" (default: all in [0, 1]). `saved` is what the map file holds (default
    the calibrator; a K-class `ClassMap`), `said` a warning text the caller's notes already
    say better (dropped from the calibrator's warnings).
    """
    chunks = [slice(lo, lo + _QUALITY_CHUNK) for lo in range(0, len(scores), _QUALITY_CHUNK)]

    def report(predicted, mapper=map) -> dict[str, float]:
        """Quality of all rows, chunk by chunk (cache-sized temporaries, no n-long ones; with
        `pool.map` as `mapper` the chunks are split between two threads, numpy releasing the
        GIL): the weighted mean of the chunks' means."""
        parts = list(mapper(lambda part: quality(predicted(part), part), chunks))
        total = sum(weight for _, weight in parts)
        return {k: sum(q[k] * weight for q, weight in parts) / total if total > 0 else float("nan")
                for k in parts[0][0]}

    # The raw scores' quality needs only the input: one worker thread computes it while the
    # fit runs (numpy releases the GIL in both); the fitted map's quality then uses both.
    with ThreadPoolExecutor(max_workers=2) as pool:
        raw = scores.min() >= 0 and scores.max() <= 1 if raw is None else raw
        before = pool.submit(report, lambda part: scores[part]) if raw else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CalibWarning)
            try:
                calibrator.fit(**fit_args)
            except FitError as exc:
                raise FitError(f"{source}: cannot fit {calibrator.name}: {exc.message}", hint=exc.hint) from None
        messages = [str(c.message) for c in caught if issubclass(c.category, CalibWarning)
                    and (said is None or said not in str(c.message))]
        messages += [note(calibrator) if callable(note) else note for note in notes]
        if strict and messages:
            raise FitError(f"{source}: {calibrator.name}: {messages[0]} (an error with --strict)")
        training["seed"] = calibrator.params.get("seed")
        training["fit"] = calibrator.summary()
        if before is not None:
            training["before"] = before.result()
        training["after"] = report(predict, pool.map)
    if before is not None and check_report:  # worse than the scores, from the report (K-class fits check themselves)
        cause = fitcheck.weights_cause(fit_args.get("sample_weight"), fit_args.get("weight_kind", "frequency"))
        worse = fitcheck.worse_than_scores(calibrator.name, training["before"]["log_loss"],
                                           training["after"]["log_loss"], cause)
        if worse is not None:
            if strict:
                raise FitError(f"{source}: {calibrator.name}: {worse} (an error with --strict)")
            messages.append(worse)
    result = FitResult(calibrator, training, warnings=messages)
    if out is not None:
        result.envelope = maps.save_map(calibrator if saved is None else saved, out, training, out_format)
    return result


def _claim_map_output(out: str | None, out_format: str | None, reads: Sequence[str]) -> None:
    """Check a map output against the output policy and its format before any work."""
    if out is not None:
        targets.check_output(out, reads)
        maps.map_format(out, out_format)
        maps.source_date_epoch()
