"""What `calib compare` and `calibcli.compare` answer: every method's out-of-fold metrics
(`MethodScore`), the paired differences to the best (`Difference`), and the recommendation
(`Comparison.recommended`, `reason`), with the table and the JSON that show them.

A best mean alone overstates a win that the folds cannot resolve, so each method also gets
its paired difference to the best in the chosen metric, fold by fold on the same held-out
rows: d_k = m_k - best_k (oriented so that positive is worse), its mean and standard error
sd(d) / sqrt(k). A method is clearly worse when the paired t statistic mean / se passes
the two-sided 5 % Student t quantile with k - 1 degrees of freedom (or, every d_k equal,
when they are positive); every other method is tied with the best.

The recommendation picks among the tied: `none` when the uncalibrated scores are tied with
the best (calibration does not help here), else the simplest tied method: the lowest
`complexity` (each method class declares it: fitted parameters per class column, or a rank
for maps that grow with the data), then the smallest sd of the metric over the folds (the
most stable), then the name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibcli.calibrators import registry
from calibcli.calibrators.params import COMPARED

LOWER_IS_BETTER = {"log_loss": True, "brier": True, "ece": True, "calbin": True, "top_label_ece": True,
                   "classwise_ece": True}
TIE_LEVEL = 0.05  # two-sided level of the paired t test that makes a method clearly worse
NONE = "none"  # the row of the uncalibrated scores
PICKS = ("recommended", "best")  # what `-o` saves
NAMES = {"log_loss": "log-loss", "brier": "Brier", "ece": "ECE", "calbin": "CalBin",
         "top_label_ece": "top-label ECE", "classwise_ece": "classwise ECE"}

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
