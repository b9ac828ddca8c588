"""`calib compare` and `calibcli.compare`: which method calibrates these scores, if any? k-fold
cross-validation, one driver for both kinds of scores.

Every method is fitted on k-1 folds and scored on the held-out fold with the same shuffled
split (one `--seed`), so the methods are compared on identical data. Per method the
out-of-fold metrics (binary: log-loss, Brier, ECE, CalBin; K classes: log-loss, Brier,
top-label and classwise ECE) are reported as mean ± sd over the folds. The first row, `none`,
is the uncalibrated scores scored on the same folds, so the comparison also says whether
calibrating helps at all; the recommendation and its reason are `comparison.Comparison`'s. A
method that cannot fit a fold (one class in it, say) is reported as failed, not fatal.

What differs between the kinds (the default methods, what `none` predicts, the fold metrics,
what a refitted map is saved as) is in the tables keyed by `kinds.BINARY` and `kinds.KCLASS`.
"""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from calibcli.calibrators import registry
from calibcli.calibrators.params import COMPARED, KCLASS_COMPARED
from calibcli.errors import CalibError, CalibWarning, InputError, UsageError
from calibcli.evaluation.metrics import binary as metrics, kclass as kclass_metrics
from calibcli.fitting.comparison import (NAMES, NONE, PICKS, Comparison, Difference, MethodScore,  # noqa: F401
                                        complexity, grid, paired_difference, table)
from calibcli.fitting.rows import read_rows
from calibcli.io import progress, targets
from calibcli.kinds import BINARY, KCLASS, kind_of
from calibcli.maps import envelope as maps
from calibcli.maps.classmap import ClassMap
from calibcli.requests import CompareRequest

# Method presets of `-m` (docs/algorithms.md, "Which method"; timings: benchmarks/bench_compare.py).
# Binary: `fast` are the methods whose 5 folds at 1e5 rows take about a second or less each;
# the default is every score-only method but those in SLOW; `all` every score-only method.
FAST = ("logistic", "beta", "beta-ab", "beta-am", "binning", "isotonic", "bbq", "venn-abers")
SLOW = ("bayes-iso",)
# K classes (5 folds at 1e5 rows, 10 classes): one-vs-rest costs K binary fits a fold.
KCLASS_FAST = ("temperature", "logistic", "isotonic")
KCLASS_DEFAULT = ("temperature", "dirichlet", "logistic", "beta", "isotonic")
PRESETS = ("fast", "default", "all")
# With --field-col/--feature-col, the feature methods the default and all presets add (binary);
# field-aware (a network, minutes per fold on large files) is compared when named.
FEATURE_DEFAULT = ("multicalibration",)


def _score_only() -> list[str]:
    return [m for m in registry.available() if not registry.get(m).uses_features]


def preset(name: str, kind: str = BINARY, features: bool = False) -> list[str]:
    """The methods of preset `name` (`fast`, `default`, `all`) for scores of `kind`; with
    `features` (field or feature columns given), binary `default` and `all` add `FEATURE_DEFAULT`."""
    methods = _PRESETS[kind][name]()
    if features and name != "fast":
        methods += [m for m in _FEATURE_PRESET[kind] if m not in methods]
    return methods


_FEATURE_PRESET = {BINARY: FEATURE_DEFAULT, KCLASS: ()}  # K-class scores take no feature columns
_PRESETS = {
    BINARY: {"fast": lambda: list(FAST), "default": lambda: [m for m in _score_only() if m not in SLOW],
             "all": _score_only},
    KCLASS: {"fast": lambda: list(KCLASS_FAST), "default": lambda: list(KCLASS_DEFAULT),
             "all": lambda: [*registry.kclass_native(),
                             *(m for m in _score_only() if registry.classes(m) == "one-vs-rest")]},
}


def default_methods() -> list[str]:
    """What `calib compare` compares without `-m`: the `default` preset (binary scores)."""
    return preset("default")


def methods_of(given: Sequence[str] | None, kind: str = BINARY, features: bool = False) -> list[str]:
    """The methods `-m` names, in order, canonical names, each once: method names, comma lists
    and the presets `fast`, `default` and `all` (no `-m`: `default`; with `features`, the field
    or feature columns given, the presets add `FEATURE_DEFAULT`); `none` is always compared."""
    chosen: list[str] = []
    for item in given or ["default"]:
        for name in (part.strip() for part in str(item).split(",")):
            if not name or name == NONE:
                continue
            names = preset(name, kind, features) if name in PRESETS else [registry.canonical(name)]
            chosen.extend(n for n in names if n not in chosen)
    if not chosen:
        raise UsageError("-m none alone compares nothing: the uncalibrated scores (none) are always compared",
                         hint="name methods to compare with them, or a preset: fast, default, all")
    for m in chosen:
        _CHECKS[kind](m)
    return chosen


def _check_binary(method: str) -> None:
    registry.binary(method)  # a feature method named without --field-col/--feature-col fits on the scores alone


def _check_kclass(method: str) -> None:
    registry.kclass(method, {"score_kind": "probability"})  # a method that cannot take K columns, refused first


_CHECKS = {BINARY: _check_binary, KCLASS: _check_kclass}


class Uncalibrated:
    """The `none` row: the scores through a fixed map (`transform`), nothing fitted."""

    name = NONE

    def __init__(self, transform: Callable[[np.ndarray], np.ndarray]):
        self.transform = transform

    def fit(self, scores: Any, labels: Any) -> "Uncalibrated":
        return self

    def predict(self, scores: np.ndarray) -> np.ndarray:
        return self.transform(scores)


def _binary_none(s: np.ndarray, score_kind: str) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """What `none` predicts for binary scores: the scores themselves when every one lies in
    [0, 1] (probabilities), else sigmoid(score) (log-odds, as `--score-kind auto` reads K-class
    scores that are not probabilities as logits)."""
    if s.size and float(s.min()) >= 0 and float(s.max()) <= 1:
        return "the scores as they are (probabilities)", lambda x: x
    from scipy.special import expit

    return "sigmoid(score): the scores are not all in [0, 1], so they are read as log-odds", expit


def _kclass_none(P: np.ndarray, score_kind: str) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """What `none` predicts from (n, K) scores: the probabilities as given, or the softmax of
    logits (temperature scaling with T = 1)."""
    if score_kind == "probability":
        return "the probabilities as given", lambda P: P
    from calibcli.calibrators import kscores

    return "softmax of the logits as given", lambda Z: kscores.softmax(np.ascontiguousarray(Z.T)).T


def _binary_fold(y: np.ndarray, p: np.ndarray, calbin_window: int) -> dict[str, float]:
    return {"log_loss": metrics.log_loss(y, p), "brier": metrics.brier(y, p),
            "ece": metrics.prob_ece(y, p), "calbin": metrics.calbin(y, p, min(calbin_window, y.size))}


def _kclass_fold(y: np.ndarray, P: np.ndarray, calbin_window: int) -> dict[str, float]:
    return {"log_loss": kclass_metrics.log_loss(y, P), "brier": kclass_metrics.brier(y, P),
            "top_label_ece": kclass_metrics.top_label_ece(y, P), "classwise_ece": kclass_metrics.classwise_ece(y, P)}


# Per kind: what `none` predicts, each fold's metrics and their names, what a refitted map is saved as.
_KINDS = {
    BINARY: (_binary_none, _binary_fold, COMPARED, lambda fitted, classes, cols: fitted),
    KCLASS: (_kclass_none, _kclass_fold, KCLASS_COMPARED, lambda fitted, classes, cols: ClassMap(fitted, classes, cols)),
}


def fold_ids(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number of each row: a seeded shuffle cut into k near-equal folds."""
    ids = np.empty(n, dtype=np.int64)
    ids[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return ids


def unfitted(build, seed: int, uncalibrated: Callable[[np.ndarray], np.ndarray] | None = None):
    """`make(method)`: a fresh unfitted calibrator of `method`, a copy of one built by
    `build(method)` on first use (one look-up per method), `seed` (checked by `CompareRequest`)
    set where the method samples (`Estimator.configured`, the one path a seed takes); `none`
    is `Uncalibrated(uncalibrated)`."""
    built: dict[str, Any] = {}

    def make(method: str):
        if method == NONE:
            return Uncalibrated(uncalibrated or (lambda x: x))
        if method not in built:
            cal = build(method)
            built[method] = cal.configured(seed=seed) if "seed" in cal.params else cal
        return copy.deepcopy(built[method])

    return make


def compare(s: np.ndarray, y: np.ndarray, methods: Sequence[str], folds: int, seed: int,
            calbin_window: int = metrics.CALBIN_WINDOW, make=None, fold_metrics=None,
            steps: progress.Steps | None = None, features: dict[str, np.ndarray] | None = None) -> list[MethodScore]:
    """Cross-validated scores of each method on scores `s` ((n,), or (n, K) with class codes
    `y`) and labels `y`. `make(method)` gives an unfitted calibrator (default: the binary
    method with `seed`; `none` the scores as they are), `fold_metrics(y, p)` a fold's metrics
    (default: `COMPARED`); `steps` counts the fits done (a progress bar); `features` (column
    name -> one value per row) go to the methods that read them, split like the scores."""
    make = make or unfitted(lambda m: registry.calibrator(m, BINARY), seed)
    fold_metrics = fold_metrics or (lambda y_test, p: _binary_fold(y_test, p, calbin_window))
    steps = steps or progress.Steps()
    ids = fold_ids(len(s), folds, seed)
    results = []
    for method in methods:
        score = MethodScore(method, {})
        done = k = 0
        try:
            for k in range(folds):
                steps.start(f"{method}, fold {k + 1} of {folds}")
                test = ids == k
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", CalibWarning)
                    cal = make(method)
                    if features and getattr(cal, "uses_features", False):
                        cal.fit(s[~test], y[~test], features={c: v[~test] for c, v in features.items()})
                        p = cal.predict(s[test], features={c: v[test] for c, v in features.items()})
                    else:
                        p = cal.fit(s[~test], y[~test]).predict(s[test])
                for m, v in fold_metrics(y[test], p).items():
                    score.folds.setdefault(m, []).append(v)
                done += 1
                steps.advance()
        except CalibError as exc:
            score.error = fold_error(exc.message, k, folds, y, ids)
            steps.advance(folds - done)
        results.append(score)
    return results


def fold_error(message: str, k: int, folds: int, y: np.ndarray, ids: np.ndarray) -> str:
    """A fold's fit error said as the fold's: a training set (the other folds) without one
    class is named with the counts that explain it and what to do; others get the fold number."""
    train = y[ids != k]
    classes, counts = np.unique(y, return_counts=True)
    if np.unique(train).size < classes.size:
        missing = [c for c in classes.tolist() if c not in set(np.unique(train).tolist())]
        fewest = int(counts.min())
        name = ("positives" if missing == [1] else "negatives" if missing == [0]
                else "rows of class " + ", ".join(map(str, missing[:3])))
        if fewest < 2:
            return (f"fold {k + 1} of {folds}: its training rows (the other folds) have no {name}: the file has "
                    f"{fewest}, and every split leaves a fold without it; add rows of that class to compare methods")
        return (f"fold {k + 1} of {folds}: its training rows (the other folds) have no {name}: the file's "
                f"{fewest} all fell in this fold; try another --seed, fewer --folds, or more data")
    return f"fold {k + 1} of {folds}: {message}"


def compare_file(path: str, request: CompareRequest, methods: Sequence[str] | None = None, fmt: str | None = None,
                 out: str | None = None, pick: str = "recommended", show_progress: bool = True,
                 calbin_window: int = metrics.CALBIN_WINDOW) -> Comparison:
    """Compare methods on a score file (one score column, or K with `request.columns.score_cols`)
    on the same folds; with `out`, save the chosen method's map (`pick`) refitted on all rows."""
    kind = kind_of(request.columns)
    chosen = methods_of(methods, kind, bool(request.columns.fields or request.columns.features))
    check_pick(pick)
    if out is not None:
        targets.check_output(out, [path])
        check_out(out)
    rows = read_rows(path, request.columns, fmt, kind)
    extra = {k: rows.training[k] for k in ("score_kind", "labels_read_as", "score_list_col", "field_cols",
                                           "feature_cols") if k in rows.training}
    return compare_arrays(rows.source, rows.scores, rows.labels, chosen, request, kind=kind,
                          score_kind=rows.score_kind, classes=rows.classes, score_cols=rows.score_cols or None,
                          out=out, pick=pick, training=extra, show_progress=show_progress, calbin_window=calbin_window,
                          features=rows.features)


def compare_arrays(source: str, scores: np.ndarray, labels: np.ndarray, methods: Sequence[str],
                   request: CompareRequest, *, kind: str = BINARY, score_kind: str = "probability",
                   classes: Sequence[Any] = (), score_cols: Sequence[str] | None = None, out: str | None = None,
                   pick: str = "recommended", training: dict[str, Any] | None = None, show_progress: bool = True,
                   calbin_window: int = metrics.CALBIN_WINDOW, features: dict[str, np.ndarray] | None = None
                   ) -> Comparison:
    """The comparison both kinds share, on checked arrays (scores of `kind` and 0/1 labels or
    class codes): `none` and `methods` on the same folds, then with `out` the chosen method's
    map refitted on every row and saved. The one path of `calib compare` and `calibcli.compare`."""
    folds, seed, metric, _ = request
    none, fold_metrics, compared, saved = _KINDS[kind]
    if labels.size < 2 * folds:
        raise InputError(f"{source}: {labels.size} rows are too few for {folds} folds")
    described, transform = none(scores, score_kind)
    make = unfitted(lambda m: registry.calibrator(m, kind, score_kind=score_kind), seed, transform)
    rows = [NONE, *(m for m in methods if m != NONE)]
    with progress.steps("compare", len(rows) * folds + (out is not None), "fits", show_progress) as steps:
        found = compare(scores, labels, rows, folds, seed, calbin_window, make=make,
                        fold_metrics=lambda y, p: fold_metrics(y, p, calbin_window), steps=steps, features=features)
        result = Comparison(source, int(labels.size), folds, seed, metric, found, compared, described, pick)

        def refit(method: str):
            cal = make(method)
            fitted = (cal.fit(scores, labels, features=features) if features and getattr(cal, "uses_features", False)
                      else cal.fit(scores, labels))
            return saved(fitted, classes, score_cols)

        return save_best(result, out, refit, training, steps)


def check_pick(pick: str) -> str:
    if pick not in PICKS:
        raise UsageError(f"--pick {pick!r}: expected recommended or best")
    return pick


def check_out(out: str | None) -> None:
    """`out` checked as every map output is, before any fit (its format, SOURCE_DATE_EPOCH)."""
    if out is not None:
        maps.map_format(out)
        maps.source_date_epoch()


def save_best(result: Comparison, out: str | None, refit, training: dict[str, Any] | None = None,
              steps: progress.Steps | None = None) -> Comparison:
    """A comparison's tail: no method fitted is an error; with `out`, the chosen method (`pick`)
    refitted on every row (`refit(method)`: the fitted map) is saved with how it was chosen.
    When the choice is `none` no map is written (`result.saved` stays None): the caller says so."""
    fitted_any = [s for s in result.scores if s.method != NONE and not s.error]
    if not fitted_any:
        failed = next((s for s in result.scores if s.error), None)
        why = f": {failed.error}" if failed else " (none was given)"
        raise InputError(f"{result.input}: no method could be fitted{why}")
    chosen = result.chosen
    if out is not None and chosen is not None and chosen != NONE:
        if steps is not None:
            steps.start(f"{chosen} refitted on all {result.rows} rows")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibWarning)
            fitted = refit(chosen)
        maps.save_map(fitted, out, {"input": result.input, "rows": result.rows, **(training or {}), "chosen_by": {
            "compare": result.metric, "folds": result.folds, "seed": result.seed, "pick": result.pick}})
        result.saved = {"method": chosen, "path": out}
    return result


def not_saved(result: Comparison, out: str) -> str:
    """What `-o FILE` did when the choice was `none`: no map, and why (stderr; exit 0)."""
    which = "the recommendation" if result.pick == "recommended" else "the best out-of-fold mean"
    kept = f"; {out} already exists and was left as it was, not this run's map" if os.path.exists(out) else ""
    return (f"calibration does not help here ({which} is none, the uncalibrated scores): no map written to "
            f"{out}{kept}; use the scores as they are, or --pick best to save the best method's map anyway")


__all__ = ["FAST", "KCLASS_DEFAULT", "KCLASS_FAST", "PRESETS", "SLOW", "Uncalibrated", "check_out", "check_pick",
           "compare", "compare_arrays", "compare_file", "default_methods", "fold_ids", "methods_of", "not_saved",
           "preset", "save_best", "unfitted"]
