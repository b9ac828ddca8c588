"""Which metrics `calib evaluate` computes and shows (`--metrics`), and the metrics beyond the
original set, read off an evaluation state: the CORP decomposition and test (`corp.py`),
the smooth ECE (`smooth.py`), the debiased ECE, Hosmer-Lemeshow, KS and Kuiper (`gof.py`).

Each costs at most a pass over the distinct p (PAV is linear on them), except `corp_p`,
which refits PAV once per resampling round (`--bands N`).
"""

from __future__ import annotations

from calibcli.evaluation.metrics import binary as metrics

# What a run computes is the door's (`--metrics`): `calibcli.requests.metrics`.
from calibcli.requests.metrics import (ALL, BASE, BANDS_WITH_PLOT, CORP_ROUNDS, DECOMPOSITION, DEFAULT,  # noqa: E402,F401
                                       EXTRA, HL_GROUPS, KCLASS_ALL, KCLASS_DEFAULT, NEW, TESTS, TOP_LABEL_KEYS,
                                       MetricChoice)


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


__all__ = ["corp_test", "new_metrics", "row_metrics"]
