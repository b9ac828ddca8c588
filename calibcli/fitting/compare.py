"""`calib compare`: which method calibrates these scores, if any? k-fold cross-validation.

Every method is fitted on k-1 folds and scored on the held-out fold with the same shuffled
split (one `--seed`), so the methods are compared on identical data. Per method the
out-of-fold log-loss, Brier, ECE and CalBin are reported as mean ± sd over the folds. The
first row, `none`, is the uncalibrated scores scored on the same folds (`Uncalibrated`), so
the comparison also says whether calibrating helps at all. A method that cannot fit a fold
(one class in it, say) is reported as failed, not fatal.

A best mean alone overstates a win that the folds cannot resolve, so each method also gets
its paired difference to the best in the chosen metric, fold by fold on the same held-out
rows: d_k = m_k - best_k (oriented so that positive is worse), its mean and standard error
sd(d) / sqrt(k). A method is clearly worse when the paired t statistic mean / se passes
the two-sided 5 % Student t quantile with k - 1 degrees of freedom (or, every d_k equal,
when they are positive); every other method is tied with the best.

The recommendation (`Comparison.recommended`) picks among the tied: `none` when the
uncalibrated scores are tied with the best (calibration does not help here), else the
simplest tied method: the lowest `complexity` (each method class declares it: fitted
parameters per class column, or a rank for maps that grow with the data), then the smallest
sd of the metric over the folds (the most stable), then the name.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from calibcli import io
from calibcli.maps import envelope as maps
from calibcli.evaluation.metrics import binary as metrics
from calibcli.calibrators import registry
from calibcli.requests.params import COMPARED, KCLASS_COMPARED
from calibcli.requests import CompareRequest
from calibcli.errors import CalibError, CalibWarning, InputError, UsageError
from calibcli.io import progress, targets

LOWER_IS_BETTER = {"log_loss": True, "brier": True, "ece": True, "calbin": True, "top_label_ece": True,
                   "classwise_ece": True}
TIE_LEVEL = 0.05  # two-sided level of the paired t test that makes a method clearly worse
NONE = "none"  # the row of the uncalibrated scores
PICKS = ("recommended", "best")  # what `-o` saves
NAMES = {"log_loss": "log-loss", "brier": "Brier", "ece": "ECE", "calbin": "CalBin",
         "top_label_ece": "top-label ECE", "classwise_ece": "classwise ECE"}

# Method presets of `-m` (docs/algorithms.md, "Which method"; timings: benchmarks/bench_compare.py).
# Binary: `fast` are the methods whose 5 folds at 1e5 rows take about a second or less each;
# the default is every score-only method but those in SLOW; `all` every score-only method.
FAST = ("logistic", "beta", "beta-ab", "beta-am", "binning", "isotonic", "bbq", "venn-abers")
SLOW = ("bayes-iso",)
# K classes (5 folds at 1e5 rows, 10 classes): one-vs-rest costs K binary fits a fold.
KCLASS_FAST = ("temperature", "logistic", "isotonic")
KCLASS_DEFAULT = ("temperature", "dirichlet", "logistic", "beta", "isotonic")
PRESETS = ("fast", "default", "all")


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


def complexity(method: str) -> int:
    """A method's place in the simplicity order: 0 for `none`, else its class's `complexity`."""
    return 0 if method == NONE else int(registry.get(method).complexity)


@dataclass
class MethodScore:
    """Out-of-fold results of one method: per-fold metric values, or why it failed."""

    method: str
    folds: dict[str, list[float]] = field(default_factory=dict)
    error: str | None = None

    @property
    def complexity(self) -> int:
        return complexity(self.method)

    def mean(self, metric: str) -> float:
        return float(np.mean(self.folds[metric])) if not self.error else float("nan")

    def sd(self, metric: str) -> float:
        values = self.folds.get(metric, [])
        return float(np.std(values, ddof=1)) if not self.error and len(values) > 1 else float("nan")

    def to_json(self) -> dict[str, Any]:
        if self.error:
            return {"method": self.method, "complexity": self.complexity, "error": self.error}
        return {"method": self.method, "complexity": self.complexity, "folds": self.folds,
                "mean": {m: self.mean(m) for m in self.folds}, "sd": {m: self.sd(m) for m in self.folds}}


@dataclass
class Comparison:
    """The result of `calib compare` and `calibcli.compare`: every method's out-of-fold metrics,
    the `best` mean, the methods `tied` with it, the `recommended` method and the `reason`."""

    input: str
    rows: int
    folds: int
    seed: int
    metric: str
    scores: list[MethodScore]
    compared: tuple[str, ...] = COMPARED  # the metrics each fold reports (KCLASS_COMPARED for K classes)
    uncalibrated: str = "the scores as they are"  # what the `none` row predicts
    pick: str = "recommended"  # what `-o` saves: the recommended method or the best mean
    saved: dict[str, str] | None = None  # {"method", "path"} once a map was written

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

    def score(self, method: str) -> MethodScore | None:
        return next((s for s in self.scores if s.method == method), None)

    @property
    def recommended(self) -> str | None:
        """`none` when the uncalibrated scores are tied with the best, else the simplest tied
        method (least complexity, then smallest sd of the metric, then name); None when nothing fitted."""
        tied = [s for s in self.scores if s.method in self.tied]
        if not tied:
            return None
        if any(s.method == NONE for s in tied):
            return NONE
        return min(tied, key=lambda s: (s.complexity, s.sd(self.metric), s.method)).method

    @property
    def reason(self) -> str:
        """Why `recommended`, in plain words with the evidence (the paired differences to the best)."""
        best, chosen = self.best, self.recommended
        if best is None or chosen is None:
            return "no method could be fitted"
        name, at = NAMES[self.metric], f"{best.mean(self.metric):.4f}"
        plain = self.score(NONE)
        if chosen == NONE:
            if best.method == NONE:
                return f"calibration does not help here, no method has a better out-of-fold {name} than the " \
                       f"uncalibrated scores ({at})"
            return (f"calibration does not help here, the uncalibrated scores are tied with the best out-of-fold "
                    f"{name} ({best.method}, {at}; none is {_gap(self.difference(plain))} behind, within the fold "
                    f"noise)")
        worse = "" if plain is None or plain.error else \
            f"; the uncalibrated scores are clearly worse ({_gap(self.difference(plain))})"
        ties = len(self.tied)
        if chosen == best.method:
            alone = "no other method is tied with it" if ties == 1 else \
                f"it is the simplest of the {ties} methods tied with it"
            return f"the best out-of-fold {name} ({at}), and {alone}{worse}"
        return (f"the simplest of the {ties} methods tied with the best out-of-fold {name} ({best.method}, {at}; "
                f"{chosen} is {_gap(self.difference(self.score(chosen)))} behind, within the fold noise){worse}")

    @property
    def chosen(self) -> str | None:
        """The method `-o` saves (`pick`): the recommended one, or the best mean."""
        best = self.best
        return self.recommended if self.pick == "recommended" else best.method if best else None

    def to_json(self) -> dict[str, Any]:
        """Version 1 schema; added to it since: `tied` and each method's `difference_to_best` {mean,
        se, tied}; the `none` row first, each method's `complexity`, `uncalibrated` (what `none`
        predicts), `recommended`, `reason`, `pick` and `saved` ({method, path} or null)."""
        best = self.best
        methods = []
        for s in self.scores:
            entry = s.to_json()
            if (d := self.difference(s)) is not None:
                entry["difference_to_best"] = d.to_json()
            methods.append(entry)
        return {"format": "calibcli.comparison", "schema_version": 1, "input": self.input,
                "rows": self.rows, "folds": self.folds, "seed": self.seed, "metric": self.metric,
                "uncalibrated": self.uncalibrated, "best": best.method if best else None, "tied": self.tied,
                "recommended": self.recommended, "reason": self.reason, "pick": self.pick, "saved": self.saved,
                "methods": methods}

    def sentence(self) -> str:
        """The answer under the table: the recommendation and why."""
        return f"Recommended: {self.recommended}: {self.reason}."

    def __repr__(self) -> str:
        name, best, chosen = NAMES[self.metric], self.best, self.recommended
        lines = [f"Comparison on {self.input}: {self.rows} rows, {self.folds}-fold cross-validation "
                 f"(seed {self.seed}), by out-of-fold {name} (* best, ✓ recommended)"]
        marked = {s.method: s.method + (" *" if best is not None and s.method == best.method else "")
                  + (" ✓" if s.method == chosen else "") for s in self.scores}
        width = max(len(m) for m in [*marked.values(), "method"])
        lines.append(f"  {'method':<{width}}  complexity  {name:<15}  Δ to best ± se")
        for s in self.scores:
            d = self.difference(s)
            tail = f"failed: {s.error}" if d is None else (
                f"{s.mean(self.metric):.4f} ± {s.sd(self.metric):.4f}  {d.mean:+.4f} ± {d.se:.4f} "
                f"{'tied' if d.tied else 'worse'}")
            lines.append(f"  {marked[s.method]:<{width}}  {s.complexity:>10}  {tail}")
        lines.append(self.sentence())
        return "\n".join(lines)


def _gap(d: Difference | None) -> str:
    return "n/a" if d is None else f"{d.mean:+.4f} ± {d.se:.4f}" if d.se == d.se else f"{d.mean:+.4f}"


class Uncalibrated:
    """The `none` row: the scores through a fixed map (`transform`), nothing fitted."""

    name = NONE

    def __init__(self, transform: Callable[[np.ndarray], np.ndarray]):
        self.transform = transform

    def fit(self, scores: Any, labels: Any) -> "Uncalibrated":
        return self

    def predict(self, scores: np.ndarray) -> np.ndarray:
        return self.transform(scores)


def binary_uncalibrated(s: np.ndarray) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """What `none` predicts for binary scores: the scores themselves when every one lies in
    [0, 1] (probabilities), else sigmoid(score) (log-odds, as `--score-kind auto` reads K-class
    scores that are not probabilities as logits)."""
    if s.size and float(s.min()) >= 0 and float(s.max()) <= 1:
        return "the scores as they are (probabilities)", lambda x: x
    from scipy.special import expit

    return "sigmoid(score): the scores are not all in [0, 1], so they are read as log-odds", expit


def methods_of(given: Sequence[str] | None, kclass: bool = False) -> list[str]:
    """The methods `-m` names, in order, canonical names, each once: method names, comma lists
    and the presets `fast`, `default` and `all` (no `-m`: `default`); `none` is always compared."""
    chosen: list[str] = []
    for item in given or ["default"]:
        for name in (part.strip() for part in str(item).split(",")):
            if not name or name == NONE:
                continue
            names = preset(name, kclass) if name in PRESETS else [registry.canonical(name)]
            chosen.extend(n for n in names if n not in chosen)
    if not chosen:
        raise UsageError("-m none alone compares nothing: the uncalibrated scores (none) are always compared",
                         hint="name methods to compare with them, or a preset: fast, default, all")
    for m in chosen:
        if kclass:
            registry.kclass(m, {"score_kind": "probability"})  # a method that cannot take K columns, refused first
        elif registry.get(m).uses_features:
            raise UsageError(f"method {m!r} needs feature columns; compare takes score-only methods")
    return chosen


def preset(name: str, kclass: bool = False) -> list[str]:
    """The methods of preset `name` (`fast`, `default`, `all`) for binary or K-class scores."""
    score_only = [m for m in registry.available() if not registry.get(m).uses_features]
    if kclass:
        every = [*registry.kclass_native(), *(m for m in score_only if registry.classes(m) == "one-vs-rest")]
        return {"fast": list(KCLASS_FAST), "default": list(KCLASS_DEFAULT), "all": every}[name]
    return {"fast": list(FAST), "default": [m for m in score_only if m not in SLOW], "all": score_only}[name]


def default_methods() -> list[str]:
    """What `calib compare` compares without `-m`: the `default` preset."""
    return preset("default")


def fold_ids(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number of each row: a seeded shuffle cut into k near-equal folds."""
    ids = np.empty(n, dtype=np.int64)
    ids[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return ids


def _fold_metrics(y: np.ndarray, p: np.ndarray, calbin_window: int) -> dict[str, float]:
    return {"log_loss": metrics.log_loss(y, p), "brier": metrics.brier(y, p),
            "ece": metrics.prob_ece(y, p), "calbin": metrics.calbin(y, p, min(calbin_window, y.size))}


def unfitted(build, seed: int, uncalibrated: Callable[[np.ndarray], np.ndarray] | None = None):
    """`make(method)`: a fresh unfitted calibrator of `method`, a copy of one built by
    `build(method)` on first use (one look-up per method), `seed` (checked by `CompareRequest`)
    set where the method samples, not checked again per fold; `none` is `Uncalibrated(uncalibrated)`."""
    built: dict[str, Any] = {}

    def make(method: str):
        if method == NONE:
            return Uncalibrated(uncalibrated or (lambda x: x))
        if method not in built:
            cal = build(method)
            if "seed" in cal.params:
                cal.params["seed"] = seed
            built[method] = cal
        return copy.deepcopy(built[method])

    return make


def compare(s: np.ndarray, y: np.ndarray, methods: Sequence[str], folds: int, seed: int,
            calbin_window: int = metrics.CALBIN_WINDOW, make=None, fold_metrics=None,
            steps: progress.Steps | None = None) -> list[MethodScore]:
    """Cross-validated scores of each method on scores `s` ((n,), or (n, K) with class codes
    `y`) and labels `y`. `make(method)` gives an unfitted calibrator (default: the binary
    method with `seed`; `none` the scores as they are), `fold_metrics(y, p)` a fold's metrics
    (default: `COMPARED`); `steps` counts the fits done (a progress bar)."""
    make = make or unfitted(registry.create, seed)
    fold_metrics = fold_metrics or (lambda y_test, p: _fold_metrics(y_test, p, calbin_window))
    steps = steps or progress.Steps()
    ids = fold_ids(len(s), folds, seed)
    results = []
    for method in methods:
        score = MethodScore(method, {})
        done = 0
        try:
            for k in range(folds):
                steps.start(f"{method}, fold {k + 1} of {folds}")
                test = ids == k
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", CalibWarning)
                    cal = make(method).fit(s[~test], y[~test])
                    p = cal.predict(s[test])
                for m, v in fold_metrics(y[test], p).items():
                    score.folds.setdefault(m, []).append(v)
                done += 1
                steps.advance()
        except CalibError as exc:
            score.error = exc.message
            steps.advance(folds - done)
        results.append(score)
    return results


def cross_validate(source: str, s: np.ndarray, y: np.ndarray, methods: Sequence[str], request: CompareRequest, *,
                   make, refit, fold_metrics=None, compared: tuple[str, ...] = COMPARED,
                   uncalibrated: str = "the scores as they are", out: str | None = None, pick: str = "recommended",
                   training: dict[str, Any] | None = None, calbin_window: int = metrics.CALBIN_WINDOW,
                   show_progress: bool = True) -> Comparison:
    """The comparison both kinds share: `none` and `methods` on the same folds, then with
    `out` the chosen method's map refitted on every row (`refit(method)`) and saved. The one
    path of `calib compare` (binary, `--score-cols`) and `calibcli.compare`."""
    folds, seed, metric = request
    if pick not in PICKS:
        raise UsageError(f"--pick {pick!r}: expected recommended or best")
    if y.size < 2 * folds:
        raise InputError(f"{source}: {y.size} rows are too few for {folds} folds")
    rows = [NONE, *(m for m in methods if m != NONE)]
    with progress.steps("compare", len(rows) * folds + (out is not None), "fits", show_progress) as steps:
        scores = compare(s, y, rows, folds, seed, calbin_window, make=make, fold_metrics=fold_metrics, steps=steps)
        result = Comparison(source, int(y.size), folds, seed, metric, scores, compared, uncalibrated, pick)
        return save_best(result, out, refit, training, steps)


def compare_file(path: str, methods: Sequence[str] | None = None, folds: int = 5, seed: int = 0,
                 metric: str = "log_loss", score_col: str = "score", label_col: str = "label",
                 fmt: str | None = None, out: str | None = None,
                 calbin_window: int = metrics.CALBIN_WINDOW, pos_label: str | None = None,
                 pick: str = "recommended", show_progress: bool = True) -> Comparison:
    """Compare methods on a score/label file; with `out`, save the chosen method's map
    (`pick`: the recommended one, or the best mean) fitted on all rows."""
    request = CompareRequest.build(folds, seed, metric)
    chosen = methods_of(methods)
    if pick not in PICKS:
        raise UsageError(f"--pick {pick!r}: expected recommended or best")
    if out is not None:
        targets.check_output(out, [path])
        maps.map_format(out)
        maps.source_date_epoch()
    source = io.display_name(path)
    table = io.read_table(path, fmt)
    s = io.scores_from(table, score_col, source)
    y = io.labels_from(table, label_col, source, pos_label=io.PosLabel(pos_label) if pos_label else None)
    return compare_arrays(source, s, y, chosen, request, out=out, pick=pick, calbin_window=calbin_window,
                          show_progress=show_progress)


def compare_arrays(source: str, s: np.ndarray, y: np.ndarray, methods: Sequence[str], request: CompareRequest, *,
                   out: str | None = None, pick: str = "recommended", calbin_window: int = metrics.CALBIN_WINDOW,
                   show_progress: bool = True) -> Comparison:
    """Binary scores and 0/1 labels, checked: `cross_validate` with the binary methods and metrics."""
    described, transform = binary_uncalibrated(s)
    make = unfitted(registry.create, request.seed, transform)
    return cross_validate(source, s, y, methods, request, make=make, refit=lambda method: make(method).fit(s, y),
                          uncalibrated=described, out=out, pick=pick, calbin_window=calbin_window,
                          show_progress=show_progress)


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
    import os

    which = "the recommendation" if result.pick == "recommended" else "the best out-of-fold mean"
    kept = f"; {out} already exists and was left as it was, not this run's map" if os.path.exists(out) else ""
    return (f"calibration does not help here ({which} is none, the uncalibrated scores): no map written to "
            f"{out}{kept}; use the scores as they are, or --pick best to save the best method's map anyway")


def grid(result: Comparison):
    """The comparison as a `report.Grid`: each method's complexity, mean ± sd per metric, the best
    marked with *, the recommended one with ✓, then each method's paired difference to the best
    ± its standard error, `tied` or `worse`."""
    from calibcli.io.console import cell
    from calibcli.evaluation.render.report import Grid

    best, chosen = result.best, result.recommended
    title = [f"{cell(result.input)}:", *(f"{result.rows} rows, {result.folds}-fold cross-validation "
                                           f"(seed {result.seed}), best (*) by {NAMES[result.metric]}; tied: not "
                                           f"clearly worse than the best (paired t test, 5%); ✓ recommended: the "
                                           f"simplest tied; none: {result.uncalibrated}").split()]
    rows = []
    for s in result.scores:
        mark = (" *" if best is not None and s.method == best.method else "") + (" ✓" if s.method == chosen else "")
        d = result.difference(s)
        if s.error or d is None:
            rows.append([s.method, str(s.complexity), f"failed: {cell(s.error)}", *[""] * len(result.compared)])
        else:
            versus = f"{d.mean:+.4f} ± {d.se:.4f} {'tied' if d.tied else 'worse'}"
            rows.append([s.method + mark, str(s.complexity),
                         *[f"{s.mean(m):.4f} ± {s.sd(m):.4f}" for m in result.compared], versus])
    heads = ["complexity", *(f"{NAMES[m]} ↓" for m in result.compared), f"Δ {NAMES[result.metric]} to best ± se"]
    return Grid(title, ["method", *heads], rows, left=1)


def table(result: Comparison):
    """The comparison as a rich Table (`grid`)."""
    return grid(result).table()
