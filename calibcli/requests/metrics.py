"""The metrics `calib evaluate` can be asked for, in one table: each metric's key (JSON and
`--metrics`), its display name and direction (what is better: lower, higher, a target, or
nothing: a property of the labels), which ones a run computes (`MetricChoice`, from
`--metrics`), and which ones the bootstrap gives no interval, with the reason (`WITHHELD`).

No maths (the computations are `calibcli.evaluation.metrics`; `DEFINITIONS` says each metric in
words, with its reference, for the generated reference of the documentation): the door checks
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


# What each metric is, in words, with its reference: the text of the generated metrics reference
# (docs/gen_reference.py). Every key of METRICS has an entry in DEFINITIONS and every key of
# KCLASS_BASE one in KCLASS_DEFINITIONS (tests/test_docs.py); the top-label metrics of K-class
# predictions are defined by TOP_LABEL_DEFINITION.
# key -> (definition, reference); p the probability, y the 0/1 label, N the rows (weights
# count as rows), in table order.
DEFINITIONS: dict[str, tuple[str, str]] = {
    "log_loss": ("−mean(y ln p + (1−y) ln(1−p)), p clipped to [1e−15, 1−1e−15]; equal to scikit-learn's "
                 "`log_loss`.", "Good 1952"),
    "brier": ("mean((p − y)²); equal to scikit-learn's `brier_score_loss`.", "Brier 1950"),
    "auc": ("the probability that a positive outranks a negative, ties counted half; n/a with one class; "
            "equal to scikit-learn's `roc_auc_score`.", "Hanley & McNeil 1982"),
    "ece": ("10 equal-width bins, Σ (n_b/N)·|mean p − mean y|; `--ece-bins B` and `--ece-strategy quantile` "
            "(equal-mass bins) bin as scikit-learn's `calibration_curve`.",
            "Naeini, Cooper & Hauskrecht (AAAI 2015); Guo et al. (ICML 2017)"),
    "mce": ("the largest |mean p − mean y| over the same non-empty bins as ECE, shown with the rows of that "
            "bin (`MCE rows` in the table, `mce_count` in the JSON; the weight with `--weight-col`). Read the "
            "two together: a bin of n rows has a positive rate that moves by about √(p(1−p)/n) by chance "
            "alone, so an MCE of 0.5 from a bin of 2 rows is noise, while 0.05 from a bin of 5 000 rows is a "
            "real gap; with few rows in the top bin, look at ECE or fewer `--ece-bins`.",
            "Naeini et al. 2015"),
    "calbin": ("sort by p; for each of the n−s windows of s consecutive rows (`--calbin-window`, default 100) "
               "the mean of |p_i − window positive rate|; averaged over windows. The paper sums inside a "
               "window; calibcli divides by s so values lie in [0, 1]. Tied p share their mean label, so row "
               "order does not matter.", "Zitnik et al. 2012"),
    "cal_slope": ("b of the logistic recalibration logit P(y=1) = a + b·logit(p), fitted by maximum "
                  "likelihood; 1 when calibrated, below 1 when overconfident.", "Cox 1958"),
    "cal_intercept": ("a of the same logistic recalibration; 0 when calibrated.", "Cox 1958"),
    "spiegelhalter_z": ("z = Σ(y − p)(1 − 2p) / √Σ(1 − 2p)² p(1 − p), ≈ N(0, 1) under calibration.",
                        "Spiegelhalter 1986"),
    "spiegelhalter_p": ("the two-sided p-value of Spiegelhalter's z.", "Spiegelhalter 1986"),
    "field_ece": ("(1/N) Σ_z |Σ_{i∈z}(y_i − p_i)| over the values z of `--field-col`.",
                  "Pan et al. 2020, eq. 5"),
    "field_rce": ("(1/N) Σ_z N_z |Σ_{i∈z}(y_i − p_i)| / Σ_{i∈z}(y_i + 0.01) over the values z of "
                  "`--field-col`, as a fraction (0.12 = 12%).", "Pan et al. 2020, eq. 6"),
    "brier_mcb": ("CORP decomposition: p̂ = the PAV (isotonic) regression of y on p, tied p pooled, "
                  "weighted; MCB = S(p) − S(p̂) (miscalibration), S the mean Brier score, so "
                  "Brier = MCB − DSC + UNC exactly. Equal to `model_diagnostics.scoring.decompose(..., "
                  "scoring_function=SquaredError())`.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "brier_dsc": ("CORP decomposition: DSC = S(ȳ) − S(p̂) (discrimination), ȳ the positive rate, S the mean "
                  "Brier score.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "brier_unc": ("CORP decomposition: UNC = S(ȳ) (uncertainty, of the labels alone), S the mean Brier score.",
                  "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "log_loss_mcb": ("the Brier MCB with S the log-loss (p clipped as for log-loss in S(p); 0 ln 0 = 0 in "
                     "S(p̂) and S(ȳ)); equal to `decompose(..., LogLoss())`.",
                     "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "log_loss_dsc": ("the Brier DSC with S the log-loss.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "log_loss_unc": ("the Brier UNC with S the log-loss.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "corp_p": ("the resampling test of calibration: `--bands N` rounds draw labels y* ~ Bernoulli(p) at each "
               "row's p, refit PAV and compute Brier MCB*; p = (1 + #{MCB* ≥ MCB}) / (1 + N). Seeded by "
               "`--seed`; shown when bands are drawn (`--bands N`, or `--plot`) or asked for "
               "(`--metrics ...,corp-p`, 100 rounds). With `--weight-col`, the weight at each p is rounded "
               "to a count of rows (at least 1) for the draw and scaled back.",
               "Dimitriadis, Gneiting & Jordan 2021"),
    "smece": ("smooth ECE: the mean absolute kernel-smoothed residual E[p − y | p ≈ t] under the smoothed "
              "density of p, reflected Gaussian kernel of width σ at the σ where smECE_σ = σ; computed as "
              "`relplot.smECE` computes it (its grid and bisection), equal to it to 1e-6.",
              "Błasiok & Nakkiran, ICLR 2024"),
    "ece_debiased": ("√ of the debiased squared L2 calibration error over `--ece-bins` equal-mass bins (edges "
                     "as `calibration.get_equal_bins`), Σ_b (n_b/N)·[(mean p − mean y)² − "
                     "ȳ_b(1 − ȳ_b)/(n_b − 1)] (bins of at least 2 rows), clipped at 0; equal to "
                     "`calibration.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=B)`.",
                     "Kumar, Liang & Ma, NeurIPS 2019"),
    "hl_stat": ("`--hl-groups` g (10) groups of equal mass in ascending p (tied p in one group), "
                "C = Σ_g (O_g − E_g)² / (E_g (1 − E_g/n_g)).", "Hosmer & Lemeshow 1980"),
    "hl_p": ("the p-value of C from χ² with g − 2 degrees of freedom. For forecasts not fitted on the "
             "evaluated rows C is nearer χ² with g degrees of freedom, so HL p is somewhat small: read it "
             "as a screen.", "Hosmer & Lemeshow 1980"),
    "ks": ("C_k = Σ_{i≤k}(y_i − p_i)/N in ascending p, σ = √(Σ p(1 − p))/N; KS = max|C|/σ. Equal to MAPIE's "
           "`kolmogorov_smirnov_statistic` on untied p; tied p form one step (C read at the end of each tie "
           "group, independent of row order) where MAPIE breaks ties by a random 1e-8 jitter.",
           "Arrieta-Ibarra, Gujral, Tannenbaum & Tygert, JMLR 2022"),
    "ks_p": ("the p-value of KS from the maximum of Brownian motion; equal to MAPIE's "
             "`kolmogorov_smirnov_p_value` on untied p.", "Tygert 2022"),
    "kuiper": ("(max C − min C)/σ with C and σ as for KS; equal to MAPIE's `kuiper_statistic` on untied p.",
               "Arrieta-Ibarra, Gujral, Tannenbaum & Tygert, JMLR 2022"),
    "kuiper_p": ("the p-value of Kuiper from the range of Brownian motion; equal to MAPIE's "
                 "`kuiper_p_value` on untied p.", "Tygert 2022"),
    "interval_width": ("beside Venn-Abers interval columns (`<col>_low`/`<col>_high`, or `--interval-cols`): "
                       "the mean width high − low of the rows' intervals.", "Vovk, Petej & Fedorova 2015"),
    "interval_coverage": ("beside interval columns: the share of rows whose interval holds the positive rate "
                          "of their ECE bin of p (the `--ece-bins`/`--ece-strategy` bins). A bin pools rows "
                          "with different intervals, so coverage is a proxy for validity: it falls when the "
                          "intervals are narrower than the spread of p inside a bin (more `--ece-bins` "
                          "sharpen it) and when the map meets data unlike its calibration set. Venn-Abers "
                          "promises no such coverage (its intervals are about 1/(calibration rows) wide), so a "
                          "low value is no failure.", "Vovk, Petej & Fedorova 2015"),
    "interval_label_ece": ("beside interval columns: the ECE (same bins) of each row's label-side end p_y, the "
                           "high end for a positive and the low end for a negative: the probability a Venn "
                           "predictor computes with the true label, perfectly calibrated when the calibration "
                           "rows and these rows are exchangeable (what the Venn-Abers guarantee is about).",
                           "Vovk & Petej 2014, Theorem 1; Vovk, Petej & Fedorova 2015"),
    "interval_label_p": ("beside interval columns: the smallest Holm-adjusted p-value of the verdict's tests of "
                         "the label-side end p_y. A small p says these intervals are not calibrated on these "
                         "rows (a shift since calibration, or too few calibration rows), not that the theorem "
                         "failed: every test row shares one calibration set's sampling errors.",
                         "Vovk & Petej 2014; Vovk, Petej & Fedorova 2015"),
    "multical": ("with `--segment-col`: multical σ times σ of all rows, on the probability scale; equal to "
                 "MCGrad 0.1.5's `mce` to 1e-9.", "Guy et al. 2025; Tax et al. 2026 (MCGrad)"),
    "multical_sigma": ("with `--segment-col`: for each segment S of the rows, the range of its cumulative path "
                       "C_S(j) = Σ_{i∈S, i≤j} w_i(y_i − p_i) / Σ_S w in ascending p (ECCE, the Kuiper statistic "
                       "on the segment) over its noise σ_S = √(Σ_S w²p(1 − p)) / Σ_S w; the largest ECCE/σ over "
                       "the segments (above ~5 is significant). Equal to MCGrad 0.1.5's `mce_sigma` to 1e-9 "
                       "([Multicalibration](../multicalibration.md), [segments](../how-to/segments.md)).",
                       "Guy et al. 2025; Tax et al. 2026 (MCGrad)"),
    "multical_p": ("with `--segment-col`: the smallest p-value of a segment, P(range of a Brownian motion ≥ "
                   "ECCE/σ), **not** corrected for the number of segments; equal to MCGrad 0.1.5's `mce_pvalue` "
                   "to 1e-9.", "Guy et al. 2025; Tax et al. 2026 (MCGrad)"),
}

# K-class predictions: y the true class, p_k the probability of class k (rows summing to 1).
KCLASS_DEFINITIONS: dict[str, tuple[str, str]] = {
    "log_loss": ("−mean ln p_y, p_y clipped to [1e−15, 1−1e−15] as the binary one.", "Good 1952"),
    "brier": ("mean over rows of Σ_k (p_k − 1[y = k])², in [0, 2].", "Brier 1950"),
    "accuracy": ("the share of rows whose top class (the first k with the largest p_k) is y.", ""),
    "top_label_ece": ("the binary ECE (same `--ece-bins`, `--ece-strategy`) of the confidence max_k p_k "
                      "against whether the top class is y.", "Guo et al. 2017"),
    "top_label_mce": ("the binary MCE of the confidence max_k p_k against whether the top class is y.",
                      "Guo et al. 2017"),
    "classwise_ece": ("the mean over the K classes of the binary ECE of p_k against 1[y = k].",
                      "Kull et al. 2019"),
    "auc": ("macro one-vs-rest: the mean over classes of the binary AUC of p_k against 1[y = k], over the "
            "classes that have both positives and negatives in the rows.", "Hanley & McNeil 1982"),
}

TOP_LABEL_DEFINITION = ("the binary metric of the same name (same `--ece-bins`, `--hl-groups`, `--bands`, "
                        "`--seed`) of the confidence max_k p_k against whether the top class is y, exact from "
                        "the mergeable K-class state.")
