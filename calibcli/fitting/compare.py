"""`calib compare`: which method calibrates these scores best? k-fold cross-validation.

Every method is fitted on k-1 folds and scored on the held-out fold with the same shuffled
split (one `--seed`), so the methods are compared on identical data. Per method the
out-of-fold log-loss, Brier, ECE and CalBin are reported as mean ± sd over the folds; the
best mean of the chosen metric wins, and its map can be refitted on all rows and saved.
A method that cannot fit a fold (one class in it, say) is reported as failed, not fatal.

A best mean alone overstates a win that the folds cannot resolve, so each method also gets
its paired difference to the best in the chosen metric, fold by fold on the same held-out
rows: d_k = m_k - best_k (oriented so that positive is worse), its mean and standard error
sd(d) / sqrt(k). A method is clearly worse when the paired t statistic mean / se passes
the two-sided 5 % Student t quantile with k - 1 degrees of freedom (or, every d_k equal,
when they are positive); every other method is tied with the best.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibcli import io
from calibcli.maps import envelope as maps
from calibcli.evaluation.metrics import binary as metrics
from calibcli.calibrators import registry
from calibcli.requests.params import COMPARED, KCLASS_COMPARED
from calibcli.requests import CompareRequest
from calibcli.requests.names import column_options
from calibcli.errors import CalibError, CalibWarning, InputError, UsageError
from calibcli.io import targets

LOWER_IS_BETTER = {"log_loss": True, "brier": True, "ece": True, "calbin": True, "top_label_ece": True,
                   "classwise_ece": True}
TIE_LEVEL = 0.05  # two-sided level of the paired t test that makes a method clearly worse


@dataclass
class Difference:
    """A method's paired difference to the best over the same folds (positive: worse)."""

    mean: float
    se: float
    tied: bool

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "se": None if self.se != self.se else self.se, "tied": self.tied}


def paired_difference(values: Sequence[float], best: Sequence[float], lower_is_better: bool = True,
                      level: float = TIE_LEVEL) -> Difference:
    """`values` against `best` fold by fold (module docstring): mean and standard error of the
    differences, and whether a paired t test at `level` leaves them tied."""
    from scipy.stats import t as student_t

    d = np.asarray(values, dtype=np.float64) - np.asarray(best, dtype=np.float64)
    d = d if lower_is_better else -d
    mean = float(np.mean(d))
    se = float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    if not se > 0:  # every fold the same difference (or one fold): worse only when it is positive
        return Difference(mean, se, not mean > 0)
    return Difference(mean, se, bool(mean / se <= student_t.ppf(1 - level / 2, d.size - 1)))


@dataclass
class MethodScore:
    """Out-of-fold results of one method: per-fold metric values, or why it failed."""

    method: str
    folds: dict[str, list[float]] = field(default_factory=dict)
    error: str | None = None

    def mean(self, metric: str) -> float:
        return float(np.mean(self.folds[metric])) if not self.error else float("nan")

    def sd(self, metric: str) -> float:
        values = self.folds.get(metric, [])
        return float(np.std(values, ddof=1)) if not self.error and len(values) > 1 else float("nan")

    def to_json(self) -> dict[str, Any]:
        if self.error:
            return {"method": self.method, "error": self.error}
        return {"method": self.method, "folds": self.folds,
                "mean": {m: self.mean(m) for m in self.folds}, "sd": {m: self.sd(m) for m in self.folds}}


@dataclass
class Comparison:
    input: str
    rows: int
    folds: int
    seed: int
    metric: str
    scores: list[MethodScore]
    compared: tuple[str, ...] = COMPARED  # the metrics each fold reports (KCLASS_COMPARED for K classes)

    @property
    def best(self) -> MethodScore | None:
        ok = [s for s in self.scores if not s.error]
        if not ok:
            return None
        sign = 1 if LOWER_IS_BETTER[self.metric] else -1
        return min(ok, key=lambda s: sign * s.mean(self.metric))

    def difference(self, score: MethodScore) -> Difference | None:
        """`score`'s paired difference to the best in the chosen metric (None when it failed)."""
        best = self.best
        if best is None or score.error:
            return None
        return paired_difference(score.folds[self.metric], best.folds[self.metric], LOWER_IS_BETTER[self.metric])

    @property
    def tied(self) -> list[str]:
        """The methods not clearly worse than the best (the best among them)."""
        return [s.method for s in self.scores if (d := self.difference(s)) is not None and d.tied]

    def to_json(self) -> dict[str, Any]:
        """Version 1 schema; `tied` and each method's `difference_to_best` {mean, se, tied} were added to it."""
        best = self.best
        methods = []
        for s in self.scores:
            entry = s.to_json()
            if (d := self.difference(s)) is not None:
                entry["difference_to_best"] = d.to_json()
            methods.append(entry)
        return {"format": "calibcli.comparison", "schema_version": 1, "input": self.input,
                "rows": self.rows, "folds": self.folds, "seed": self.seed, "metric": self.metric,
                "best": best.method if best else None, "tied": self.tied, "methods": methods}


def default_methods() -> list[str]:
    """Every registered method that needs only the score."""
    return [m for m in registry.available() if not registry.get(m).uses_features]


def fold_ids(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number of each row: a seeded shuffle cut into k near-equal folds."""
    ids = np.empty(n, dtype=np.int64)
    ids[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return ids


def _fold_metrics(y: np.ndarray, p: np.ndarray, calbin_window: int) -> dict[str, float]:
    return {"log_loss": metrics.log_loss(y, p), "brier": metrics.brier(y, p),
            "ece": metrics.prob_ece(y, p), "calbin": metrics.calbin(y, p, min(calbin_window, y.size))}


def unfitted(build, seed: int):
    """`make(method)`: a fresh unfitted calibrator of `method`, a copy of one built by
    `build(method)` on first use (one look-up per method), `seed` (checked by `CompareRequest`)
    set where the method samples, not checked again per fold."""
    built: dict[str, Any] = {}

    def make(method: str):
        if method not in built:
            cal = build(method)
            if "seed" in cal.params:
                cal.params["seed"] = seed
            built[method] = cal
        return copy.deepcopy(built[method])

    return make


def compare(s: np.ndarray, y: np.ndarray, methods: Sequence[str], folds: int, seed: int,
            calbin_window: int = metrics.CALBIN_WINDOW, make=None, fold_metrics=None) -> list[MethodScore]:
    """Cross-validated scores of each method on scores `s` ((n,), or (n, K) with class codes
    `y`) and labels `y`. `make(method)` gives an unfitted calibrator (default: the binary
    method with `seed`), `fold_metrics(y, p)` a fold's metrics (default: `COMPARED`)."""
    make = make or unfitted(registry.create, seed)
    fold_metrics = fold_metrics or (lambda y_test, p: _fold_metrics(y_test, p, calbin_window))
    ids = fold_ids(len(s), folds, seed)
    results = []
    for method in methods:
        score = MethodScore(method, {})
        k = 0
        try:
            for k in range(folds):
                test = ids == k
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", CalibWarning)
                    cal = make(method).fit(s[~test], y[~test])
                    p = cal.predict(s[test])
                for m, v in fold_metrics(y[test], p).items():
                    score.folds.setdefault(m, []).append(v)
        except CalibError as exc:
            score.error = fold_error(exc.message, k, folds, y, ids)
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


def compare_file(path: str, methods: Sequence[str] | None = None, folds: int = 5, seed: int = 0,
                 metric: str = "log_loss", score_col: str = "score", label_col: str = "label",
                 fmt: str | None = None, out: str | None = None,
                 calbin_window: int = metrics.CALBIN_WINDOW, pos_label: str | None = None) -> Comparison:
    """Compare methods on a score/label file; with `out`, save the best method's map fitted on all rows."""
    folds, seed, metric = CompareRequest.build(folds, seed, metric)
    column_options([("--score-col", score_col), ("--label-col", label_col)])
    chosen = list(methods) if methods else default_methods()
    for m in chosen:
        if registry.binary(m).uses_features:  # a K-class method: refused as `calib fit` refuses it
            raise UsageError(f"method {m!r} needs feature columns; compare takes score-only methods")
    if out is not None:
        targets.check_output(out, [path])
        maps.map_format(out)
        maps.source_date_epoch()
    source = io.display_name(path)
    table = io.read_table(path, fmt)
    s = io.scores_from(table, score_col, source)
    y = io.labels_from(table, label_col, source, pos_label=io.PosLabel(pos_label) if pos_label else None)
    if s.size < 2 * folds:
        raise InputError(f"{source}: {s.size} rows are too few for {folds} folds")
    make = unfitted(registry.create, seed)
    result = Comparison(source, int(s.size), folds, seed, metric,
                        compare(s, y, chosen, folds, seed, calbin_window, make=make))
    return save_best(result, out, lambda method: make(method).fit(s, y))


def save_best(result: Comparison, out: str | None, refit, training: dict[str, Any] | None = None) -> Comparison:
    """A comparison's tail: no method fitted is an error; with `out`, the best method refitted on
    every row (`refit(method)`: the fitted map) is saved with how it was chosen."""
    best = result.best
    if best is None:
        raise InputError(f"{result.input}: no method could be fitted: {result.scores[0].error}")
    if out is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibWarning)
            fitted = refit(best.method)
        maps.save_map(fitted, out, {"input": result.input, "rows": result.rows, **(training or {}), "chosen_by": {
            "compare": result.metric, "folds": result.folds, "seed": result.seed}})
    return result


def grid(result: Comparison):
    """The comparison as a `report.Grid`: mean ± sd per metric, the best method marked with *,
    then each method's paired difference to the best ± its standard error, `tied` or `worse`."""
    from calibcli.io.console import cell
    from calibcli.evaluation.render.report import Grid

    best = result.best
    names = {"log_loss": "log-loss", "brier": "Brier", "ece": "ECE", "calbin": "CalBin",
             "top_label_ece": "top-label ECE", "classwise_ece": "classwise ECE"}
    title = [f"{cell(result.input)}:", *(f"{result.rows} rows, {result.folds}-fold cross-validation "
                                           f"(seed {result.seed}), best by {names[result.metric]}; tied: not "
                                           f"clearly worse than the best (paired t test, 5%)").split()]
    rows = []
    for s in result.scores:
        mark = " *" if best is not None and s.method == best.method else ""
        d = result.difference(s)
        if s.error or d is None:
            rows.append([s.method, f"failed: {cell(s.error)}", *[""] * len(result.compared)])
        else:
            versus = f"{d.mean:+.4f} ± {d.se:.4f} {'tied' if d.tied else 'worse'}"
            rows.append([s.method + mark, *[f"{s.mean(m):.4f} ± {s.sd(m):.4f}" for m in result.compared], versus])
    heads = [*(f"{names[m]} ↓" for m in result.compared), f"Δ {names[result.metric]} to best ± se"]
    return Grid(title, ["method", *heads], rows, left=1)


def table(result: Comparison):
    """The comparison as a rich Table (`grid`)."""
    return grid(result).table()
