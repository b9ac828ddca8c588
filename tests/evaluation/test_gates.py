"""Library side of `calib evaluate` gates: parsing, baselines, decisions, bootstrap, breakdowns."""

import json
import math

import numpy as np
import pytest

from calibcli.evaluation import baseline, bootstrap, gates, results
from calibcli.evaluation.metrics import diagnostics, binary as metrics
from calibcli.errors import InputError, UsageError
from calibcli.evaluation.state.binary import EvalState, compute_all


def test_metric_names_accept_hyphens_underscores_and_case():
    assert gates.metric_key("field-rce", "--fail-above") == "field_rce"
    assert gates.metric_key("Log_Loss", "--fail-above") == "log_loss"
    with pytest.raises(UsageError, match="--fail-above: unknown metric 'fild-rce'") as exc:
        gates.metric_key("fild-rce", "--fail-above")
    assert "field-rce" in exc.value.hint


def test_parse_limits_values_and_percentages():
    assert gates.parse_limits(["field-rce=0.12", "auc = 0.7"], "--fail-above") == [
        gates.Limit("field_rce", 0.12), gates.Limit("auc", 0.7)]
    assert gates.parse_limits(["log-loss=5%"], "--max-regression", allow_percent=True) == [
        gates.Limit("log_loss", 0.05, relative=True)]


@pytest.mark.parametrize("spec, message", [
    ("field-rce", r"is not \[COLUMN:\]METRIC=VALUE"),
    ("=0.1", r"is not \[COLUMN:\]METRIC=VALUE"),
    ("auc=", r"is not \[COLUMN:\]METRIC=VALUE"),
    ("auc=high", "'high' is not a number"),
    ("auc=nan", "must be finite"),
    ("auc=5%", "'5%' is not a number"),
])
def test_parse_limits_rejects_malformed_thresholds(spec, message):
    with pytest.raises(UsageError, match=message):
        gates.parse_limits([spec], "--fail-above")


def test_parse_limits_rejects_negative_regression_and_duplicates():
    with pytest.raises(UsageError, match="cannot be negative"):
        gates.parse_limits(["brier=-0.1"], "--max-regression", allow_percent=True)
    with pytest.raises(UsageError, match="given twice for field-rce"):
        gates.parse_limits(["field-rce=0.1", "field_rce=0.2"], "--fail-above")


@pytest.mark.parametrize("kwargs, message", [
    (dict(gate_on="upper", bootstrap=0), "--gate-on upper needs confidence intervals"),
    (dict(gate_on="lower"), "--gate-on 'lower'"),
    (dict(max_regression=["auc=0.01"]), "--max-regression needs --baseline"),
    (dict(baseline="b.json"), "--baseline needs --max-regression"),
])
def test_gate_spec_cross_checks(kwargs, message):
    from calibcli.requests import EvaluateOptions

    with pytest.raises(UsageError, match=message):
        EvaluateOptions.build(**kwargs)


def _spec(**kw):
    return gates.GateSpec(**kw)


def test_thresholds_pass_and_fail_with_the_excess():
    spec = _spec(fail_above=[gates.Limit("field_rce", 0.12)], fail_below=[gates.Limit("auc", 0.7)])
    report = gates.decide(spec, [("good", {"field_rce": 0.10, "auc": 0.8}, None),
                                 ("bad", {"field_rce": 0.15, "auc": 0.65}, None)])
    assert [c.passed for c in report.checks] == [True, True, False, False]
    above, below = report.failed
    assert above.excess == pytest.approx(0.03) and below.excess == pytest.approx(0.05)
    assert above.describe() == "Field-RCE of 'bad' is 0.15, above the threshold 0.12 by 0.03"
    assert below.describe() == "AUC of 'bad' is 0.65, below the threshold 0.7 by 0.05"
    assert not report.passed and report.to_json()["checked"] == 4


def test_regression_is_direction_aware_and_relative():
    base = results.Baseline("b.json", "f", 100, {"m": {"log_loss": 0.50, "auc": 0.80}})
    spec = _spec(max_regression=[gates.Limit("log_loss", 0.05, relative=True), gates.Limit("auc", 0.01)],
                 baseline="b.json")
    ok = gates.decide(spec, [("m", {"log_loss": 0.52, "auc": 0.795}, None)], base)
    assert ok.passed
    bad = gates.decide(spec, [("m", {"log_loss": 0.53, "auc": 0.78}, None)], base)
    ll, auc = bad.failed
    assert ll.limit == pytest.approx(0.525) and ll.excess == pytest.approx(0.005)
    assert "above the baseline 0.5 by 0.03: more than the allowed 0.025 (5% of the baseline)" in ll.describe()
    assert auc.limit == pytest.approx(0.79) and auc.excess == pytest.approx(0.01)
    assert "below the baseline 0.8 by 0.02" in auc.describe()


def test_an_improvement_never_fails_a_regression_gate():
    base = results.Baseline("b.json", None, 100, {"m": {"brier": 0.2}})
    spec = _spec(max_regression=[gates.Limit("brier", 0.0)], baseline="b.json")
    assert gates.decide(spec, [("m", {"brier": 0.1}, None)], base).passed
    assert not gates.decide(spec, [("m", {"brier": 0.2000001}, None)], base).passed


def test_na_values_fail_their_gate():
    spec = _spec(fail_below=[gates.Limit("auc", 0.7)])
    report = gates.decide(spec, [("m", {"auc": math.nan}, None)])
    assert not report.passed
    assert "n/a" in report.failed[0].describe()
    assert report.to_json()["failed"][0]["value"] is None


def test_gate_on_upper_compares_the_interval_end_nearest_to_passing():
    values = {"field_rce": 0.13, "auc": 0.69}
    intervals = {"field_rce": (0.11, 0.15), "auc": (0.66, 0.72)}
    spec = _spec(fail_above=[gates.Limit("field_rce", 0.12)], fail_below=[gates.Limit("auc", 0.7)])
    assert not gates.decide(spec, [("m", values, intervals)]).passed
    spec.gate_on = "upper"
    report = gates.decide(spec, [("m", values, intervals)])
    assert report.passed and [c.compared for c in report.checks] == [0.11, 0.72]
    spec.fail_above = [gates.Limit("field_rce", 0.10)]
    failed = gates.decide(spec, [("m", values, intervals)]).failed
    assert [c.metric for c in failed] == ["field_rce"]
    assert "(confidence interval end 0.11)" in failed[0].describe()


def test_field_gates_need_a_field_column():
    with pytest.raises(UsageError, match="a gate on field-ece needs --field-col"):
        gates.require_field_col(_spec(fail_above=[gates.Limit("field_ece", 0.1)]), None)


def _write(tmp_path, doc):
    path = tmp_path / "base.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_load_baseline_reads_v1_and_v2(tmp_path):
    v1 = {"schema_version": 1, "field_col": None, "calbin_window": 100,
          "results": [{"name": "p", "kind": "column", "metrics": {"auc": 0.8, "brier": None}}]}
    base = baseline.load_baseline(_write(tmp_path, v1))
    assert base.metrics == {"p": {"auc": 0.8, "brier": None}}


@pytest.mark.parametrize("doc, message", [
    ("{not json", "baseline is not JSON"),
    ({"schema_version": 2}, "no 'results' list"),
    ({"schema_version": 9, "results": []}, "schema version 9 is newer"),
    ({"results": []}, "no valid schema_version"),
    ({"schema_version": 2, "results": [{"name": "p"}]}, r"results\[0\] has no name or metrics"),
    ({"schema_version": 2, "results": [{"name": "p", "metrics": {"auc": "x"}}]}, "'x', not a number"),
])
def test_load_baseline_refuses_corrupt_files(tmp_path, doc, message):
    with pytest.raises(InputError, match=message):
        baseline.load_baseline(_write(tmp_path, doc))


def test_load_baseline_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such baseline file"):
        baseline.load_baseline(str(tmp_path / "nope.json"))


def test_check_baseline_refuses_other_columns_and_settings():
    spec = _spec(max_regression=[gates.Limit("field_rce", 0.01)], baseline="b.json")
    base = results.Baseline("b.json", "field", 100, {"p1": {"field_rce": 0.1}})
    gates.check_baseline(base, ["p1"], "field", 100, spec)
    with pytest.raises(UsageError, match="baseline is for 'p1', this run evaluates 'p2'"):
        gates.check_baseline(base, ["p2"], "field", 100, spec)
    with pytest.raises(UsageError, match="--field-col 'field', this run uses --field-col 'other'"):
        gates.check_baseline(base, ["p1"], "other", 100, spec)
    spec.max_regression = [gates.Limit("auc", 0.01)]
    with pytest.raises(UsageError, match="baseline has no auc for 'p1'"):
        gates.check_baseline(base, ["p1"], "field", 100, spec)


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    n = 1500
    p = np.round(rng.random(n), 2)  # many ties, as in real calibrated output
    y = (rng.random(n) < p ** 1.3).astype(np.int8)
    g = rng.integers(0, 9, n)
    return y, p, g


@pytest.mark.parametrize("ties", [True, False])
def test_bootstrap_replicates_equal_the_metrics_of_materialised_resamples(data, ties):
    """Each replicate is the metrics of the rows its Poisson cell counts materialise
    (the bootstrap was multinomial over rows; it is now a Poisson bootstrap drawn per
    (p, field) cell of the evaluation state, which is what this checks)."""
    y, p, g = data
    if not ties:
        p = p * 0.999 + np.linspace(0, 1e-3, p.size)  # distinct values in [0, 1]: the no-tie path
    plan = bootstrap.BootstrapPlan(4, seed=11)
    reps = bootstrap.bootstrap_replicates(y, p, g, 40, plan)
    st = EvalState.from_arrays(y, p, fields=(g, [str(i) for i in range(g.max() + 1)]), field_cells=True)
    m = st.p.size
    for b, counts in enumerate(bootstrap.poisson_counts(st, plan)):
        k = counts.astype(np.int64)
        rows_p = np.repeat(np.concatenate([st.p, st.p]), k)
        rows_y = np.repeat(np.concatenate([np.zeros(m), np.ones(m)]), k)
        rows_g = np.repeat(np.concatenate([st.cell_field, st.cell_field]), k)
        expected = compute_all(rows_y, rows_p, rows_g, 40)
        for key, value in expected.items():
            assert reps[key][b] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_poisson_cell_counts_sum_to_the_row_count_on_average(data):
    y, p, g = data
    st = EvalState.from_arrays(y, p)
    totals = [c.sum() for c in bootstrap.poisson_counts(st, bootstrap.BootstrapPlan(400, seed=3))]
    assert abs(np.mean(totals) - y.size) < 4 * np.sqrt(y.size / 400)


def test_bootstrap_intervals_are_seeded_and_cover_the_estimate(data):
    y, p, g = data
    a = bootstrap.bootstrap_intervals(y, p, g, 100, bootstrap.BootstrapPlan(150, seed=1))
    assert a == bootstrap.bootstrap_intervals(y, p, g, 100, bootstrap.BootstrapPlan(150, seed=1))
    assert a != bootstrap.bootstrap_intervals(y, p, g, 100, bootstrap.BootstrapPlan(150, seed=2))
    point = compute_all(y, p, g, 100)
    assert all(math.isnan(end) for end in a.pop("mce"))  # a maximum over bins gets no interval
    for key, (lo, hi) in a.items():
        assert lo < hi and lo <= point[key] <= hi, key


def test_bootstrap_with_one_class_leaves_auc_na(data):
    _, p, _ = data
    out = bootstrap.bootstrap_intervals(np.ones(p.size, np.int8), p, None, 100, bootstrap.BootstrapPlan(5, 0))
    assert math.isnan(out["auc"][0]) and "field_rce" not in out


def test_field_breakdown_by_hand():
    """Exact binomial per value at its mean p, BH over the values tested, ranked by evidence."""
    from scipy import stats

    y = np.array([1, 0, 0, 1, 1, 0])
    p = np.array([0.2, 0.2, 0.2, 0.9, 0.5, 0.5])
    codes = np.array([0, 0, 0, 1, 2, 2])
    out = diagnostics.field_breakdown(y, p, codes, ["a", "b", "c"], top=2, min_rows=1)
    assert out["fields"] == 3 and out["tested"] == 3 and out["top"] == 2
    raw = {"a": stats.binomtest(1, 3, 0.2).pvalue, "b": 2 * min(1.0, stats.binom.sf(0, 1, 0.9)),
           "c": 1.0}
    raw["b"] = min(1.0, raw["b"])
    by_name = {v["field"]: v for v in diagnostics.field_breakdown(y, p, codes, ["a", "b", "c"], 3, 1)["values"]}
    first = by_name["a"]
    assert first["rows"] == 3 and first["positives"] == 1 and first["gap"] == pytest.approx(0.2 - 1 / 3)
    assert first["bias"] == pytest.approx(0.4) and first["relative_bias"] == pytest.approx(0.4 / 1.03)
    assert by_name["a"]["p_value"] == pytest.approx(min(1.0, 2 * min(stats.binom.cdf(1, 3, 0.2),
                                                                      stats.binom.sf(0, 3, 0.2))))
    assert by_name["b"]["p_value"] == pytest.approx(min(1.0, 2 * min(stats.binom.cdf(1, 1, 0.9),
                                                                      stats.binom.sf(0, 1, 0.9))))
    assert by_name["c"]["p_value"] == pytest.approx(1.0)
    assert [v["adjusted_p"] for v in out["values"]] == sorted(v["adjusted_p"] for v in out["values"])
    assert diagnostics.field_breakdown(y, p, codes, ["a", "b", "c"], 3)["tested"] == 0  # default --min-rows 30


def test_reliability_bins_have_equal_mass():
    p = np.linspace(0, 1, 1000)
    y = (p > 0.5).astype(np.int8)
    bins = diagnostics.reliability_bins(y, p, 10)
    assert [b["rows"] for b in bins] == [100] * 10
    assert bins[0]["mean_p"] == pytest.approx(p[:100].mean()) and bins[0]["positive_rate"] == 0
    assert bins[-1]["positive_rate"] == 1 and bins[-1]["p_max"] == 1


# Settings a run can use, and a strategy for one full set of them.
_SETTING_VALUES = {
    "field_col": [None, "field", "other"],
    "calbin_window": [100, 50],
    "ece_bins": [10, 20],
    "ece_strategy": ["uniform", "quantile"],
    "weight_col": [None, "w", "v"],
    "step": [None, 0.01, 1e-6],
    "label_col": ["label", "y"],
    "score_col": [None, "score", "s"],  # None: no map evaluated
    "hl_groups": [10, 5],
    "segment_cols": [None, ["country"], ["country", "age"]],
    "segment_bins": [3, 5],
    "segment_top": [2, 4],
    "segment_depth": [3, 1],
    "segment_min_rows": [10, 100],
    "segment_max": [1000, 50],
}


def _settings():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({k: st.sampled_from(v) for k, v in _SETTING_VALUES.items()})


def _saved_baseline(tmp_path, settings, metrics_):
    """A baseline file as `evaluate --save-baseline` writes it, with `settings`."""
    report = results.Evaluation("t.csv", 10, 5, settings["field_col"], settings["calbin_window"],
                                 [results.EvalRow("p", "column", dict(metrics_))],
                                 weight_col=settings["weight_col"], step=settings["step"],
                                 ece_bins=settings["ece_bins"], ece_strategy=settings["ece_strategy"],
                                 label_col=settings["label_col"], score_col=settings["score_col"],
                                 hl_groups=settings["hl_groups"],
                                 **{k: v for k, v in settings.items() if k.startswith("segment_")})
    path = tmp_path / "base.json"
    path.write_bytes(report.to_json_bytes())
    return baseline.load_baseline(str(path))


def test_gated_settings_cover_every_option_that_changes_a_metric():
    assert set(results.GATED_SETTINGS) == set(_SETTING_VALUES)
    for key, gated in results.GATED_SETTINGS.items():
        assert gated.metrics and gated.metrics <= set(metrics.ALL_METRICS), key


def test_settings_refused_or_compared_property(tmp_path):
    """Over pairs of settings and gated metrics: a mismatch in a setting that changes a gated
    metric is refused (one line naming the option and both values); otherwise it compares."""
    from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

    regressable = [m for m, (_, d) in metrics.METRICS.items() if d not in ("target", "data")]

    @given(_settings(), _settings(), st.sets(st.sampled_from(regressable), min_size=1, max_size=4))
    @hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    def check(saved, ours, gated):
        base = _saved_baseline(tmp_path, saved, {m: 0.5 for m in metrics.METRICS})
        spec = _spec(max_regression=[gates.Limit(m, 0.01) for m in sorted(gated)], baseline="b.json")
        def differ(k):
            if k == "score_col":  # only a run that applies maps reads the score column
                return ours[k] is not None and (saved[k] or "score") != ours[k]
            return saved[k] != ours[k]

        mismatched = [k for k, g in results.GATED_SETTINGS.items() if differ(k) and g.metrics & gated]
        call = dict(ours)
        args = (base, ["p"], call.pop("field_col"), call.pop("calbin_window"), spec)
        if not mismatched:
            gates.check_baseline(*args, **call)
            values = {"p": {m: 0.5 for m in metrics.METRICS}}
            assert gates.decide(spec, [("p", values["p"], None)], base).passed
            return
        with pytest.raises(UsageError) as exc:
            gates.check_baseline(*args, **call)
        message = exc.value.message
        assert "\n" not in message and exc.value.hint is None
        option = next(results.GATED_SETTINGS[k].option for k in results.GATED_SETTINGS if k in mismatched)
        key = next(k for k in results.GATED_SETTINGS if k in mismatched)
        assert option in message
        for value in ((saved[key] or "score") if key == "score_col" else saved[key], ours[key]):
            if isinstance(value, list):  # --segment-col, repeated
                assert " ".join(f"{option} {v!r}" for v in value) in message
                continue
            assert (f"no {option}" if value is None else repr(value) if isinstance(value, str) else str(value)) \
                in message

    check()


def test_old_baselines_without_settings_mean_the_defaults_of_their_time(tmp_path):
    v1 = {"schema_version": 1, "field_col": None,
          "results": [{"name": "p", "kind": "column", "metrics": {"ece": 0.1, "calbin": 0.1, "auc": 0.8}}]}
    base = baseline.load_baseline(_write(tmp_path, v1))
    for key, default in (("calbin_window", 100), ("ece_bins", 10), ("ece_strategy", "uniform"),
                         ("weight_col", None), ("step", None)):
        assert base.setting(key) == default
    spec = _spec(max_regression=[gates.Limit("ece", 0.01), gates.Limit("calbin", 0.01), gates.Limit("auc", 0.01)],
                 baseline="b.json")
    gates.check_baseline(base, ["p"], None, 100, spec)
    for key, value, option in (("ece_bins", 20, "--ece-bins"), ("weight_col", "w", "--weight-col"),
                               ("step", 0.01, "--step"), ("ece_strategy", "quantile", "--ece-strategy")):
        with pytest.raises(UsageError, match=f"baseline was computed with no {option}|with {option} "):
            gates.check_baseline(base, ["p"], None, 100, spec, **{key: value})
    with pytest.raises(UsageError, match="--calbin-window 100, this run uses --calbin-window 50"):
        gates.check_baseline(base, ["p"], None, 50, spec)


@pytest.mark.parametrize("key, value", [("ece_bins", 0), ("ece_bins", "10"), ("ece_strategy", "equal"),
                                        ("weight_col", 3), ("step", -1), ("step", True)])
def test_baseline_settings_are_type_checked(tmp_path, key, value):
    doc = {"schema_version": 2, key: value, "results": [{"name": "p", "metrics": {"auc": 0.8}}]}
    with pytest.raises(InputError, match=f"'{key}' is"):
        baseline.load_baseline(_write(tmp_path, doc))
