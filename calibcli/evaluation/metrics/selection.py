"""Which metrics `calib evaluate` computes and shows (`--metrics`), and the metrics beyond the
original set, read off an evaluation state: the CORP decomposition and test (`corp.py`),
the smooth ECE (`smooth.py`), the debiased ECE, Hosmer-Lemeshow, KS and Kuiper (`gof.py`).

Each costs at most a pass over the distinct p (PAV is linear on them), except `corp_p`,
which refits PAV once per resampling round (`--bands N`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import binary as metrics

DECOMPOSITION = ("brier_mcb", "brier_dsc", "brier_unc", "log_loss_mcb", "log_loss_dsc", "log_loss_unc")
EXTRA = ("corp_p", "smece", "ece_debiased", "hl_stat", "hl_p", "ks", "ks_p", "kuiper", "kuiper_p")
NEW = DECOMPOSITION + EXTRA
# The metrics of the first releases, in table order (field metrics only with --field-col).
BASE = tuple(k for k in metrics.METRICS if k not in NEW and k not in metrics.INTERVAL_KEYS)
DEFAULT = BASE + DECOMPOSITION
ALL = BASE + NEW
# p-values and resampling tests get no bootstrap interval (an interval of a p-value says nothing)
NO_INTERVAL = frozenset({"corp_p", "hl_p", "ks_p", "kuiper_p"})
BANDS_WITH_PLOT = 100  # rounds of the consistency bands when --plot is asked and --bands is not
CORP_ROUNDS = 100  # rounds of corp-p asked for by name without --bands
HL_GROUPS = 10
# K-class predictions: their first table, and every metric of `NEW` on the top label
TOP_LABEL = tuple(metrics.TOP_LABEL + k for k in NEW)
KCLASS_DEFAULT = metrics.KCLASS_BASE
KCLASS_ALL = KCLASS_DEFAULT + TOP_LABEL


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

    @classmethod
    def parse(cls, text: str | None = None, *, required: Iterable[str] = (), bands: int | None = None,
              plot: bool = False, seed: int = 0, hl_groups: int = HL_GROUPS) -> "MetricChoice":
        """`--metrics TEXT` ("default", "all", or a comma list of names, which may include
        "default"); `required`: metrics a gate reads (always computed). `bands`: --bands
        (None: `BANDS_WITH_PLOT` rounds with --plot, else none); corp-p is computed when
        bands are, or when named (then with `CORP_ROUNDS` rounds unless --bands says). `bands`
        and `hl_groups` are trusted: `EvaluateOptions.build` checks them against `bounds`."""
        rounds = (BANDS_WITH_PLOT if plot else 0) if bands is None else bands
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
            if key not in ALL and key not in KCLASS_ALL:
                names = ", ".join(k.replace("_", "-") for k in ALL + tuple(k for k in KCLASS_ALL if k not in ALL))
                raise UsageError(f"--metrics: unknown metric {word!r}", hint=f"default, all, or of: {names}")
            named.add(key)
        asked = named | set(required)
        chosen |= asked & set(ALL)
        kchosen |= asked & set(KCLASS_ALL)
        for test, keys in (("corp_p", chosen), (metrics.TOP_LABEL + "corp_p", kchosen)):
            if test in asked and rounds == 0:
                if bands == 0:
                    raise UsageError(f"{test.replace('_', '-')} is a resampling test: it needs --bands N with N > 0")
                rounds = CORP_ROUNDS
        if rounds > 0:  # binary: the bands' test comes with them; K-class: when asked for or by `all`
            chosen.add("corp_p")
        else:
            chosen.discard("corp_p")
            kchosen.discard(metrics.TOP_LABEL + "corp_p")
        return cls(tuple(k for k in ALL if k in chosen), rounds, seed, hl_groups,
                   tuple(k for k in KCLASS_ALL if k in kchosen), tuple(sorted(named - set(KCLASS_ALL))),
                   tuple(sorted(named - set(ALL))))

    def wants(self, *keys: str) -> bool:
        return any(k in self.keys for k in keys)

    def without_tests(self) -> "MetricChoice":
        """The same choice less the p-values and resampling tests (what a bootstrap replicates)."""
        return MetricChoice(tuple(k for k in self.keys if k not in NO_INTERVAL), 0, self.seed, self.hl_groups,
                            tuple(k for k in self.kclass_keys if k.removeprefix(metrics.TOP_LABEL) not in NO_INTERVAL))

    def under_step(self) -> "MetricChoice":
        """The same choice less what is n/a under `--step` (`requests.params.STEP_NA`): not computed."""
        from calibcli.requests.params import STEP_NA

        return MetricChoice(tuple(k for k in self.keys if k not in STEP_NA), 0, self.seed, self.hl_groups,
                            self.kclass_keys)

    def top_label(self) -> "MetricChoice":
        """The binary choice of the chosen top-label metrics (`kclass_keys` less the prefix)."""
        keys = tuple(k.removeprefix(metrics.TOP_LABEL) for k in self.kclass_keys if k in TOP_LABEL)
        return MetricChoice(keys, self.bands, self.seed, self.hl_groups)


def new_metrics(v, n0, n1, choice: MetricChoice, ece_bins: int, brier: float | None = None,
                log_loss: float | None = None) -> dict[str, float]:
    """The chosen metrics of `NEW` from a distribution of p (ascending distinct p `v`, the
    weight n0 of negatives and n1 of positives at each) and the exact mean Brier score and
    log-loss (None: from the distribution, exact when p is not bucketed)."""
    from calibcli.evaluation.metrics import corp, gof, smooth
    from calibcli.evaluation.metrics.prefix import Prefix

    out: dict[str, float] = {}
    if choice.wants(*DECOMPOSITION):
        out.update(corp.decomposition(v, n1, n0, brier, log_loss))
    if choice.wants("corp_p"):
        out["corp_p"] = corp_test(v, n0, n1, choice)
    # one pass of running sums serves smECE's grids, the debiased ECE's bins, HL's groups and KS
    pre = Prefix(v, n0, n1) if choice.wants("smece", "ece_debiased", "hl_stat", "hl_p", "ks", "ks_p", "kuiper",
                                             "kuiper_p") else None
    if choice.wants("smece"):
        out["smece"] = smooth.smece(v, n0, n1, pre)[0]
    if choice.wants("ece_debiased"):
        out["ece_debiased"] = gof.ece_debiased(v, n0, n1, ece_bins, pre)
    if choice.wants("hl_stat", "hl_p"):
        out["hl_stat"], out["hl_p"] = gof.hosmer_lemeshow(v, n0, n1, choice.hl_groups, pre)
    if choice.wants("ks", "ks_p", "kuiper", "kuiper_p"):
        out.update(gof.cumulative_tests(v, n0, n1, pre))
    return out


def row_metrics(state, calbin_window: int, ece_bins: int, ece_strategy: str, choice: MetricChoice,
                diagram: str | None = None) -> tuple[dict[str, float], dict | None, dict | None]:
    """(metrics, CORP diagram data, smooth diagram data) of one state: `diagram` "corp" adds
    the PAV curve and its consistency band (whose resamples also give corp-p, so they are
    drawn once), "smooth" the smoothed curve (`smooth.smooth_curve`); None, "binned": neither."""
    from calibcli.evaluation.metrics import corp, smooth

    resample = diagram == "corp" and choice.bands > 0 and "corp_p" in choice.keys and state.step is None
    if resample:
        choice_now = MetricChoice(choice.keys, 0, choice.seed, choice.hl_groups)
        values = state.metrics(calbin_window, ece_bins, ece_strategy, choice_now)
    else:
        values = state.metrics(calbin_window, ece_bins, ece_strategy, choice)
    v, n0, n1 = state.pooled()
    corp_data = smooth_data = None
    if diagram == "corp" and v.size and state.weight > 0:
        corp_data = corp.diagram(v, n1, n0, choice.bands, choice.seed)
        if resample:
            values["corp_p"] = corp_data["p_value"]
    if diagram == "smooth" and v.size and state.weight > 0:
        t, rate, density = smooth.smooth_curve(v, n0, n1)
        smooth_data = {"p": t.tolist(), "rate": rate.tolist(), "density": density.tolist()}
    return values, corp_data, smooth_data


def corp_test(v, n0, n1, choice: MetricChoice) -> float:
    from calibcli.evaluation.metrics import corp
    from calibcli.numeric.pooling import as_weights

    pos = as_weights(n1)
    bands = corp.consistency_bands(v, as_weights(n0) + pos, choice.bands, choice.seed, pos_w=pos, points=2)
    return float("nan") if bands.p_value is None else bands.p_value


__all__ = ["ALL", "BASE", "DECOMPOSITION", "DEFAULT", "EXTRA", "KCLASS_ALL", "KCLASS_DEFAULT", "MetricChoice", "NEW",
           "NO_INTERVAL", "TOP_LABEL", "new_metrics"]
