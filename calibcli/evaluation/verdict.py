"""The verdict of `calib evaluate`: calibrated within noise or not, in which direction and where,
from a fixed family of tests and one documented rule (docs/verdict.md). Pure functions of a
distribution of p (ascending distinct p with the weight n0 of negatives and n1 of positives
at each: what every evaluation state keeps), so the CLI, `calibcli.evaluate` and the engines
give the same verdict; the cost is a few passes over the distinct p.

The rule, at level `LEVEL` = 0.01 (a calibrated forecast must be called calibrated in
at least 95% of data sets whatever the tests' small-sample error; 1% leaves that margin):

- Binary probabilities: four tests (`significance`): *mean* (calibration in the large),
  *spread* (the score test of calibration slope 1, intercept free), *Kuiper* (the
  cumulative-differences test of `gof.cumulative_tests`) and *bins* (the exact binomial test
  of every non-empty bin of ECE, `--ece-bins`/`--ece-strategy`, its smallest p-value times
  the number of bins: Bonferroni). Their p-values are adjusted together by Holm's method;
  miscalibrated when an adjusted p-value is at most `LEVEL`, so a calibrated forecast is
  called miscalibrated in at most 1% of data sets.
- Direction: the mean test, when significant, says "too high on average" or "too low on
  average"; the spread test "over-confident" (slope below 1: p too far from the middle) or
  "under-confident"; when only Kuiper or the bins are significant, "uneven" (a gap in part
  of the range that neither a shift nor a spread explains).
- Where: of the bins whose gap is significant at `LEVEL` after Holm's adjustment over the bins,
  the one with the largest |predicted - observed|, with the 95% Wilson band of its rate.
- K classes: the four tests of the top label (the confidence max_k p_k against whether the
  top class is right; the mean test's direction reads "over-confident" when the confidence
  is above the accuracy) and, per class, the mean and spread tests of p_k against 1[y = k]
  ("class c predicted too often / too rarely", "class c over-/under-confident"): 4 + 2K
  tests, adjusted together by Holm's method. Where: the top label's bins.
- Too few rows to tell: when sum p (1 - p) (the variance of the number of positives under
  calibration) is below `MIN_VARIANCE` the normal approximations behind the mean, spread and
  Kuiper tests do not hold, and the verdict says so (`calibrated` None) unless a row's
  label contradicts a p of exactly 0 or 1.

The other tests `evaluate` reports (Spiegelhalter, Hosmer-Lemeshow, CORP) are not in the
family: the verdict does not change with `--metrics`, and HL's p-value is too small for
forecasts not fitted on the rows evaluated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibcli.evaluation.metrics import gof, significance
from calibcli.numeric.pooling import as_weights

LEVEL = 0.01
MIN_VARIANCE = 10.0  # sum of p (1 - p): about ten rows' worth of coin flips
POWER_Z = 0.8416212335729143  # the normal quantile of 80% power, for the detectable gaps


@dataclass
class Verdict:
    """What the tests say about one prediction (JSON: `to_json`)."""

    calibrated: bool | None  # None: too few rows to tell
    direction: list[str] = field(default_factory=list)
    where: dict[str, Any] | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    detectable: dict[str, float] | None = None  # the gaps the tests would likely have found

    @property
    def label(self) -> str:
        """A word or two for a table cell: calibrated, miscalibrated, too few rows."""
        return {True: "calibrated", False: "miscalibrated", None: "too few rows"}[self.calibrated]

    def to_json(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float):
                return None if v != v else (v if math.isfinite(v) else (1e308 if v > 0 else -1e308))
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return clean({"calibrated": self.calibrated, "direction": list(self.direction), "where": self.where,
                      "evidence": self.evidence, "text": self.text, "level": LEVEL,
                      "detectable": self.detectable})


def _num(v: float, digits: int = 3) -> str:
    if v != v:
        return "n/a"
    return f"{v:.{digits}g}" if abs(v) < 1e-3 and v != 0 else f"{v:.{digits}f}".rstrip("0").rstrip(".") or "0"


def _pval(p: float) -> str:
    if p != p:
        return "n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}" if p >= 0.1 else f"p = {p:.3g}"


def _test(name: str, what: str, result: dict[str, float], statistic: str = "z", **extra: Any) -> dict[str, Any]:
    return {"test": name, "what": what, "statistic": float(result.get(statistic, math.nan)),
            "p_value": float(result["p_value"]), **extra}


def binary_tests(v: np.ndarray, n0, n1, bins: int, strategy: str, prefix: str = "") -> tuple[list[dict], list[dict]]:
    """(the four tests of the module docstring, the bins' tests) of a distribution of p."""
    mean = significance.mean_test(v, n0, n1)
    spread = significance.spread_test(v, n0, n1)
    cumulative = gof.cumulative_tests(v, n0, n1)
    binned = significance.bin_tests(v, n0, n1, bins, strategy)
    tested = [b["p_value"] for b in binned if b["p_value"] == b["p_value"]]
    bins_p = min(1.0, len(tested) * min(tested)) if tested else math.nan
    adjusted = significance.holm([b["p_value"] for b in binned])
    for b, a in zip(binned, adjusted):
        b["adjusted_p"] = float(a)
    tests = [
        _test(prefix + "mean", "calibration in the large: predicted against observed positives", mean,
              predicted=mean["predicted"], observed=mean["observed"]),
        _test(prefix + "spread", "score test of calibration slope 1 (intercept free)", spread, se=spread["se"]),
        {"test": prefix + "kuiper", "what": "Kuiper's test of the cumulative differences (Tygert)",
         "statistic": cumulative["kuiper"], "p_value": cumulative["kuiper_p"]},
        {"test": prefix + "bins", "what": f"exact binomial test of each of {len(tested)} bins of ECE, "
                                          "the smallest p-value times the bins (Bonferroni)",
         "statistic": float(len(tested)), "p_value": bins_p},
    ]
    tests[0]["_z"], tests[0]["_variance"] = mean["z"], mean["variance"]
    tests[1]["_z"] = spread["z"]
    return tests, binned


def _where(binned: list[dict]) -> dict[str, Any] | None:
    significant = [b for b in binned if b["adjusted_p"] <= LEVEL]
    return dict(max(significant, key=lambda b: abs(b["gap"]))) if significant else None


def _decide(tests: list[dict], variance: float) -> bool | None:
    adjusted = significance.holm([t["p_value"] for t in tests])
    for t, a in zip(tests, adjusted):
        t["adjusted_p"] = float(a)
        t["significant"] = bool(a <= LEVEL)
    if any(t["significant"] for t in tests):
        if variance < MIN_VARIANCE and not any(t["p_value"] == 0 for t in tests):
            return None
        return False
    return None if variance < MIN_VARIANCE else True


def _public(tests: list[dict]) -> list[dict]:
    return [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in t.items() if not k.startswith("_")}
            for t in tests]


def _detectable(weight: float, variance: float, se: float, family: int) -> dict[str, float]:
    """The average gap and slope the family would find with 80% power (one effect alone)."""
    z = _normal_quantile(1 - LEVEL / (2 * family)) + POWER_Z
    gap = z * math.sqrt(variance) / weight if weight > 0 and variance > 0 else math.nan
    return {"mean_gap": gap, "slope_low": 1 - z * se, "slope_high": 1 + z * se}


def _normal_quantile(q: float) -> float:
    """The standard normal quantile (bisection on erfc: enough for the few levels used here)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _binary_direction(tests: list[dict], high: str, low: str, over: str, under: str) -> list[str]:
    out = []
    mean, spread = tests[0], tests[1]
    if mean["significant"]:
        out.append(high if mean["_z"] < 0 else low)
    if spread["significant"]:
        out.append(over if spread["_z"] < 0 else under)
    return out


def _range(b: dict, what: str = "p") -> str:
    return f"{what} {_num(b['p_min'])}–{_num(b['p_max'])}"


def _where_text(where: dict | None, what: str = "p", observed: str = "observed") -> str:
    if where is None:
        return ""
    rows = where["rows"]
    return (f"; the largest significant gap is at {_range(where, what)}: predicted {_num(where['predicted'])}, "
            f"{observed} {_num(where['observed'])} (95% band {_num(where['observed_low'])}–"
            f"{_num(where['observed_high'])}, {rows:g} rows)")


def binary_verdict(v: np.ndarray, n0, n1, bins: int = 10, strategy: str = "uniform",
                   metrics: dict[str, float] | None = None) -> Verdict:
    """The verdict of binary probabilities (module docstring); `metrics` (the row's) adds the
    fitted calibration slope and intercept to the words when they were computed."""
    tests, binned = binary_tests(v, n0, n1, bins, strategy)
    variance = tests[0]["_variance"]
    calibrated = _decide(tests, variance)
    weight = float(as_weights(n0).sum() + as_weights(n1).sum())
    detectable = _detectable(weight, variance, tests[1]["se"], len(tests))
    verdict = Verdict(calibrated, evidence=_public(tests), detectable=detectable)
    if calibrated is False:
        verdict.direction = _binary_direction(tests, "too high on average", "too low on average",
                                              "over-confident", "under-confident") or ["uneven"]
        verdict.where = _where(binned)
    verdict.text = _binary_text(verdict, tests, weight, variance, metrics or {})
    return verdict


def _binary_text(verdict: Verdict, tests: list[dict], weight: float, variance: float, metrics: dict) -> str:
    if verdict.calibrated is None:
        return (f"too few rows to tell: {weight:g} rows carry too little information for the tests "
                f"(sum of p(1 − p) is {_num(variance)}, below {MIN_VARIANCE:g})")
    if verdict.calibrated:
        d = verdict.detectable or {}
        parts = []
        if d.get("mean_gap") == d.get("mean_gap"):
            parts.append(f"a gap of {_num(d['mean_gap'])} in the average")
        if d.get("slope_low") == d.get("slope_low"):
            parts.append(f"a slope outside {_num(d['slope_low'], 2)}–{_num(d['slope_high'], 2)}")
        found = f"; on these {weight:g} rows {' or '.join(parts)} would likely have been found" if parts else ""
        return f"calibrated within noise: no test finds a gap at the {LEVEL:.0%} level ({len(tests)} tests, Holm){found}"
    words = []
    mean, spread = tests[0], tests[1]
    for d in verdict.direction:
        if d.startswith("too"):
            words.append(f"{d} (predicted {_num(mean['predicted'])}, observed {_num(mean['observed'])})")
        elif d.endswith("confident"):
            slope = metrics.get("cal_slope", math.nan)
            fitted = f"slope {_num(slope, 2)}, " if slope == slope else ""
            words.append(f"{d} ({fitted}{_pval(spread['adjusted_p'])})")
        else:
            words.append("uneven: a gap in part of the range that neither a shift nor a spread explains")
    return "miscalibrated: " + " and ".join(words) + _where_text(verdict.where)


def kclass_verdict(top: tuple, per_class: Sequence[tuple], classes: Sequence[str], bins: int = 10,
                   strategy: str = "uniform") -> Verdict:
    """The verdict of a K-class prediction (module docstring): `top` the distribution of the
    confidence against whether the top class is right, `per_class` that of each p_k."""
    tests, binned = binary_tests(*top, bins, strategy, prefix="top-label ")
    variance = tests[0]["_variance"]
    for name, dist in zip(map(str, classes), per_class):
        mean = significance.mean_test(*dist)
        spread = significance.spread_test(*dist)
        tests.append({**_test(f"class {name!r} mean", f"share of class {name!r}: predicted against observed", mean,
                              predicted=mean["predicted"], observed=mean["observed"]), "_z": mean["z"],
                      "_class": name})
        tests.append({**_test(f"class {name!r} spread", f"score test of slope 1 of p_{name}", spread, se=spread["se"]),
                      "_z": spread["z"], "_class": name})
    calibrated = _decide(tests, variance)
    weight = float(as_weights(top[1]).sum() + as_weights(top[2]).sum())
    verdict = Verdict(calibrated, evidence=_public(tests),
                      detectable=_detectable(weight, variance, tests[1]["se"], len(tests)))
    if calibrated is False:
        direction = _binary_direction(tests, "over-confident", "under-confident", "over-confident at high confidence",
                                      "under-confident at high confidence")
        for t in tests[4:]:
            if t["significant"]:
                kind = "too often" if t["_z"] < 0 else "too rarely"
                if t["test"].endswith("spread"):
                    kind = "over-confident" if t["_z"] < 0 else "under-confident"
                    direction.append(f"class {t['_class']} {kind}")
                else:
                    direction.append(f"class {t['_class']} predicted {kind}")
        verdict.direction = direction or ["uneven"]
        verdict.where = _where(binned)
    verdict.text = _kclass_text(verdict, tests, weight, variance)
    return verdict


def _kclass_text(verdict: Verdict, tests: list[dict], weight: float, variance: float) -> str:
    if verdict.calibrated is None:
        return (f"too few rows to tell: {weight:g} rows carry too little information for the tests "
                f"(sum of c(1 − c) over the confidences is {_num(variance)}, below {MIN_VARIANCE:g})")
    if verdict.calibrated:
        gap = (verdict.detectable or {}).get("mean_gap", math.nan)
        found = (f"; on these {weight:g} rows a gap of {_num(gap)} between confidence and accuracy would likely "
                 "have been found") if gap == gap else ""
        return (f"calibrated within noise: no test finds a gap at the {LEVEL:.0%} level ({len(tests)} tests of the top label "
                f"and each class, Holm){found}")
    top = tests[0]
    words = []
    grouped: dict[str, list[str]] = {}  # "predicted too often" -> the classes, in order
    for d in verdict.direction:
        if d in ("over-confident", "under-confident"):
            words.append(f"{d} (mean confidence {_num(top['predicted'])}, accuracy {_num(top['observed'])})")
        elif d.startswith("class "):
            name, _, what = d[len("class "):].rpartition(" predicted ") if " predicted " in d else \
                d[len("class "):].rpartition(" ")
            grouped.setdefault(("predicted " + what) if " predicted " in d else what, []).append(name)
        else:
            words.append(d if d != "uneven" else "uneven: a gap in part of the confidence range")
    for what, names in grouped.items():
        words.append(f"class{'es' if len(names) > 1 else ''} {', '.join(names)} {what}")
    return ("miscalibrated: " + "; ".join(words)
            + _where_text(verdict.where, "confidence", "accuracy").replace("predicted", "mean confidence"))


class Evaluated(dict):
    """What `calibcli.evaluate` returns: the metrics as a dict (`["log_loss"]` as before), and
    the verdict as the attribute `verdict` (a `Verdict`: `.calibrated`, `.direction`, `.where`,
    `.evidence`, `.text`, `.to_json()`)."""

    verdict: Verdict | None = None
    by_field: dict[str, Any] | None = None  # with `fields`: `diagnostics.field_breakdown_sums`

    def __init__(self, metrics: dict[str, float], verdict: Verdict | None = None,
                 by_field: dict[str, Any] | None = None):
        super().__init__(metrics)
        self.verdict = verdict
        self.by_field = by_field

    def __reduce__(self):  # pickles (multiprocessing, joblib) keep the verdict
        return (Evaluated, (dict(self), self.verdict, self.by_field))


def interval_verdict(p_label: np.ndarray, y: np.ndarray, w: np.ndarray | None, bins: int, strategy: str) -> Verdict:
    """The verdict of the label-side end of probability intervals (the high end for a
    positive, the low end for a negative), which a valid Venn predictor keeps calibrated."""
    from calibcli.evaluation.metrics import binary as metrics

    v, n0, n1 = metrics.distribution(np.asarray(y, dtype=np.float64), np.asarray(p_label, dtype=np.float64), w)
    return binary_verdict(v, n0, n1, bins, strategy)


__all__ = ["Evaluated", "LEVEL", "MIN_VARIANCE", "Verdict", "binary_tests", "binary_verdict", "interval_verdict",
           "kclass_verdict"]
