"""The metrics `calib evaluate` can be asked for, in one table: each metric's key (JSON and
`--metrics`), its display name and direction (what is better: lower, higher, a target, or
nothing: a property of the labels), which ones a run computes (`MetricChoice`, from
`--metrics`), and which ones the bootstrap gives no interval, with the reason (`WITHHELD`).

Names only, no maths (the definitions are `calibcli.evaluation.metrics`): the door checks
`--metrics` and gate names here, and the report, the gates and the reference read the same
table. The metric names are typed as keys (`field_rce`) or with dashes (`field-rce`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from calibcli.errors import UsageError

# Display name and direction of every metric, in table order: "lower" or "higher" is better,
# "target": best at the value in TARGETS, or "data": a property of the labels alone (the
# uncertainty terms); gates can bound the last two, not count a regression.
METRICS: dict[str, tuple[str, str]] = {
    "log_loss": ("log-loss", "lower"),
    "brier": ("Brier", "lower"),
    "auc": ("AUC", "higher"),
    "ece": ("ECE", "lower"),
    "mce": ("MCE", "lower"),
    "calbin": ("CalBin", "lower"),
    "cal_slope": ("slope", "target"),
    "cal_intercept": ("intercept", "target"),
    "spiegelhalter_z": ("Spiegelhalter z", "target"),
    "spiegelhalter_p": ("Spiegelhalter p", "higher"),
    "field_ece": ("Field-ECE", "lower"),
    "field_rce": ("Field-RCE", "lower"),
    # the CORP decomposition (corp.py): miscalibration, discrimination, uncertainty of each score
    "brier_mcb": ("Brier MCB", "lower"),
    "brier_dsc": ("Brier DSC", "higher"),
    "brier_unc": ("Brier UNC", "data"),
    "log_loss_mcb": ("log-loss MCB", "lower"),
    "log_loss_dsc": ("log-loss DSC", "higher"),
    "log_loss_unc": ("log-loss UNC", "data"),
    "corp_p": ("CORP p", "higher"),  # with consistency bands (--bands) or asked by name
    "smece": ("smECE", "lower"),  # smooth.py
    "ece_debiased": ("ECE debiased", "lower"),  # gof.py, as the tests below
    "hl_stat": ("HL", "lower"),
    "hl_p": ("HL p", "higher"),
    "ks": ("KS", "lower"),
    "ks_p": ("KS p", "higher"),
    "kuiper": ("Kuiper", "lower"),
    "kuiper_p": ("Kuiper p", "higher"),
    "interval_width": ("interval width", "lower"),  # with interval columns (evaluation.intervals)
    "interval_coverage": ("bin-rate coverage", "higher"),  # a proxy: Venn-Abers promises no such coverage
    "interval_label_ece": ("label-side ECE", "lower"),  # what the Venn-Abers guarantee is about
    "interval_label_p": ("label-side p", "higher"),
    # the multicalibration error over the segments of --segment-col (multicalibration.py)
    "multical": ("multical", "lower"),
    "multical_sigma": ("multical σ", "lower"),
    "multical_p": ("multical p", "higher"),
}
# The K-class metrics (`kclass_metrics`), in table order; gates and tables read both tables.
KCLASS_METRICS: dict[str, tuple[str, str]] = {
    "log_loss": ("log-loss", "lower"),
    "brier": ("Brier", "lower"),
    "accuracy": ("accuracy", "higher"),
    "top_label_ece": ("top-label ECE", "lower"),
    "top_label_mce": ("top-label MCE", "lower"),
    "classwise_ece": ("classwise ECE", "lower"),
    "auc": ("AUC", "higher"),
}
INTERVAL_KEYS = ("interval_width", "interval_coverage", "interval_label_ece", "interval_label_p")  # with intervals
# Computed exactly when --segment-col is given (binary: these; K classes: their top-label versions).
SEGMENT = ("multical", "multical_sigma", "multical_p")
KCLASS_BASE = tuple(KCLASS_METRICS)  # the K-class table before the top-label reductions
# The metrics of a distribution of p beyond the first set (`selection.NEW`), which a K-class
# prediction gets on its top label: the confidence max_k p_k against whether the top class is right.
TOP_LABEL = "top_label_"
_NEW = list(METRICS)[list(METRICS).index("brier_mcb"):]
KCLASS_METRICS.update({TOP_LABEL + k: ("top-label " + METRICS[k][0], METRICS[k][1])
                       for k in _NEW if k not in INTERVAL_KEYS})
TOP_LABEL_SEGMENT = tuple(TOP_LABEL + k for k in SEGMENT)
ALL_METRICS: dict[str, tuple[str, str]] = {**METRICS, **KCLASS_METRICS}
TARGETS = {"cal_slope": 1.0, "cal_intercept": 0.0, "spiegelhalter_z": 0.0}

# Metrics no bound from the bucketed p of `--step` covers: n/a under --step, their gates refused
# (`evaluation.stepbounds` bounds the others).
STEP_NA = ("cal_slope", "cal_intercept", "corp_p", "smece", "ece_debiased", "hl_stat", "hl_p", "ks", "ks_p",
           "kuiper", "kuiper_p")


def lower_is_better(metric: str) -> bool:
    return ALL_METRICS[metric][1] == "lower"


def metric_names() -> str:
    """The metric names as typed on the command line, for hints."""
    return ", ".join(k.replace("_", "-") for k in ALL_METRICS)


def metric_key(name: str, flag: str) -> str:
    """The snake_case key of a metric typed as `field-rce`, `field_rce` or `Field-RCE`."""
    key = name.strip().lower().replace("-", "_")
    if key not in ALL_METRICS:
        raise UsageError(f"{flag}: unknown metric {name.strip()!r}", hint=f"metrics: {metric_names()}")
    return key


DECOMPOSITION = ("brier_mcb", "brier_dsc", "brier_unc", "log_loss_mcb", "log_loss_dsc", "log_loss_unc")
EXTRA = ("corp_p", "smece", "ece_debiased", "hl_stat", "hl_p", "ks", "ks_p", "kuiper", "kuiper_p")
NEW = DECOMPOSITION + EXTRA
# The metrics of the first releases, in table order (field metrics only with --field-col).
BASE = tuple(k for k in METRICS if k not in NEW and k not in INTERVAL_KEYS and k not in SEGMENT)
DEFAULT = BASE + DECOMPOSITION
ALL = BASE + NEW
# p-values and resampling tests: not replicated by the bootstrap (an interval of a p-value says nothing)
TESTS = frozenset({"corp_p", "hl_p", "ks_p", "kuiper_p"})
BANDS_WITH_PLOT = 100  # rounds of the consistency bands when --plot is asked and --bands is not
CORP_ROUNDS = 100  # rounds of corp-p asked for by name without --bands
HL_GROUPS = 10
# K-class predictions: their first table, and every metric of `NEW` on the top label
TOP_LABEL_KEYS = tuple(TOP_LABEL + k for k in NEW)
KCLASS_DEFAULT = KCLASS_BASE
KCLASS_ALL = KCLASS_DEFAULT + TOP_LABEL_KEYS


@dataclass(frozen=True)
class MetricChoice:
    """The metrics a run computes (`keys` of binary, `kclass_keys` of K-class predictions, in
    table order) and the settings of the new ones; `binary_only` and `kclass_only`: the names
    asked for that only the one kind has (the other kind's run refuses them)."""

    keys: tuple[str, ...] = DEFAULT
    bands: int = 0  # resampling rounds of the consistency bands and corp-p (0: none)
    seed: int = 0
    hl_groups: int = HL_GROUPS
    kclass_keys: tuple[str, ...] = KCLASS_DEFAULT
    binary_only: tuple[str, ...] = ()
    kclass_only: tuple[str, ...] = ()
    segment_named: tuple[str, ...] = ()  # the SEGMENT metrics named or gated: they need --segment-col

    @classmethod
    def parse(cls, text: str | None = None, *, required: Iterable[str] = (), bands: int | None = None,
              plot: bool = False, seed: int = 0, hl_groups: int = HL_GROUPS) -> "MetricChoice":
        """`--metrics TEXT` ("default", "all", or a comma list of names, which may include
        "default"); `required`: metrics a gate reads (always computed). `bands`: --bands
        (None: `BANDS_WITH_PLOT` rounds with --plot, else none); corp-p is computed when
        bands are, or when named (then with `CORP_ROUNDS` rounds unless --bands says). `bands`
        and `hl_groups` are trusted: `EvaluateOptions.build` checks them against `bounds`."""
        rounds = (BANDS_WITH_PLOT if plot else 0) if bands is None else bands
        binary_names, kclass_names = ALL + SEGMENT, KCLASS_ALL + TOP_LABEL_SEGMENT
        named: set[str] = set()
        chosen: set[str] = set()
        kchosen: set[str] = set()
        for word in ("default" if text is None else text).split(","):
            word = word.strip()
            if word.lower() in ("default", "all"):
                chosen.update(DEFAULT if word.lower() == "default" else ALL)
                kchosen.update(KCLASS_DEFAULT if word.lower() == "default" else KCLASS_ALL)
                continue
            key = word.lower().replace("-", "_")
            if key not in binary_names and key not in kclass_names:
                names = ", ".join(k.replace("_", "-") for k in binary_names + tuple(k for k in kclass_names
                                                                                     if k not in binary_names))
                raise UsageError(f"--metrics: unknown metric {word!r}", hint=f"default, all, or of: {names}")
            named.add(key)
        asked = named | set(required)
        chosen |= asked & set(ALL)
        kchosen |= asked & set(KCLASS_ALL)
        for test, keys in (("corp_p", chosen), (TOP_LABEL + "corp_p", kchosen)):
            if test in asked and rounds == 0:
                if bands == 0:
                    raise UsageError(f"{test.replace('_', '-')} is a resampling test: it needs --bands N with N > 0")
                rounds = CORP_ROUNDS
        if rounds > 0:  # binary: the bands' test comes with them; K-class: when asked for or by `all`
            chosen.add("corp_p")
        else:
            chosen.discard("corp_p")
            kchosen.discard(TOP_LABEL + "corp_p")
        segment = set(SEGMENT + TOP_LABEL_SEGMENT)
        return cls(tuple(k for k in ALL if k in chosen), rounds, seed, hl_groups,
                   tuple(k for k in KCLASS_ALL if k in kchosen), tuple(sorted(named - set(kclass_names))),
                   tuple(sorted(named - set(binary_names))), tuple(sorted(asked & segment)))

    def wants(self, *keys: str) -> bool:
        return any(k in self.keys for k in keys)

    def without_tests(self) -> "MetricChoice":
        """The same choice less the p-values and resampling tests (what a bootstrap replicates)."""
        return MetricChoice(tuple(k for k in self.keys if k not in TESTS), 0, self.seed, self.hl_groups,
                            tuple(k for k in self.kclass_keys if k.removeprefix(TOP_LABEL) not in TESTS))

    def under_step(self) -> "MetricChoice":
        """The same choice less what is n/a under `--step` (`STEP_NA`): not computed."""
        return MetricChoice(tuple(k for k in self.keys if k not in STEP_NA), 0, self.seed, self.hl_groups,
                            self.kclass_keys)

    def top_label(self) -> "MetricChoice":
        """The binary choice of the chosen top-label metrics (`kclass_keys` less the prefix)."""
        keys = tuple(k.removeprefix(TOP_LABEL) for k in self.kclass_keys if k in TOP_LABEL_KEYS)
        return MetricChoice(keys, self.bands, self.seed, self.hl_groups)


def with_top_label(*keys: str) -> frozenset[str]:
    """`keys` and those of their top-label reductions that K-class predictions have."""
    return frozenset(keys) | {TOP_LABEL + k for k in keys if TOP_LABEL + k in KCLASS_METRICS}


# Metrics `--bootstrap` gives no interval (NaN, null in JSON), with the reason (README, `--gate-on
# upper` refusals): by simulation (benchmarks/bootstrap_coverage.py, a miscalibrated and a
# calibrated design) no resampling interval tried covered their true value in 93-97 % of data sets.
_MAXIMUM = "a maximum over bins, biased up beyond what resampling corrects"
_GAPS = "a sum of |gaps|, biased up by the noise of each bin as much as its spread: no interval covers 0 when calibrated"
_PAV = "PAV's in-sample fit biases it up by more than its spread"
_ROOT = "the root of an estimate floored at 0, biased near 0 and in its intervals' coverage"
_TEST = "a test statistic, as large under calibration whatever the rows: no interval covers 0"
_P = "the p-value of a test whose statistic has no interval"
_SEGMENTS = ("a maximum over many overlapping segments, as MCE is over bins: resampled maxima are biased up, "
             "and no interval of it has been checked by simulation")
WITHHELD: dict[str, str] = {
    **dict.fromkeys(with_top_label("mce", "top_label_mce"), _MAXIMUM),
    **dict.fromkeys(with_top_label("smece"), _GAPS),
    **dict.fromkeys(with_top_label("brier_mcb", "log_loss_mcb"), _PAV),
    **dict.fromkeys(with_top_label("ece_debiased"), _ROOT),
    **dict.fromkeys(with_top_label("hl_stat", "ks", "kuiper"), _TEST),
    **dict.fromkeys(with_top_label("hl_p", "ks_p", "kuiper_p", "corp_p", "multical_p"), _P),
    **dict.fromkeys(with_top_label("multical", "multical_sigma"), _SEGMENTS),
}
NO_INTERVAL = frozenset(WITHHELD)


def withheld_reason(key: str) -> str:
    """Why metric `key` has no bootstrap interval (`WITHHELD`), for messages."""
    return WITHHELD[key]


__all__ = ["ALL", "ALL_METRICS", "BASE", "DECOMPOSITION", "DEFAULT", "EXTRA", "INTERVAL_KEYS", "KCLASS_ALL",
           "KCLASS_BASE", "KCLASS_DEFAULT", "KCLASS_METRICS", "METRICS", "MetricChoice", "NEW", "NO_INTERVAL",
           "SEGMENT", "TARGETS", "TESTS", "TOP_LABEL", "TOP_LABEL_KEYS", "TOP_LABEL_SEGMENT", "WITHHELD", "lower_is_better", "metric_key",
           "metric_names", "with_top_label", "withheld_reason"]
