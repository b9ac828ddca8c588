"""`calib evaluate` through the real CLI: gates, baselines, bootstrap, per-field view, diagrams,
and the numbers that must not mislead (the rows behind MCE)."""

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.evaluation.state.binary import EvalState

runner = CliRunner()


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    """2 000 rows: `good` is calibrated, `bad` over-predicts field f3 by a lot."""
    rng = np.random.default_rng(3)
    n = 2000
    field = rng.choice(["f0", "f1", "f2", "f3"], n, p=[0.4, 0.3, 0.2, 0.1])
    good = rng.uniform(0.05, 0.95, n)
    label = (rng.random(n) < good).astype(int)
    bad = np.where(field == "f3", np.minimum(good + 0.4, 0.99), good)
    path = tmp_path_factory.mktemp("evaluate") / "scores.csv"
    lines = ["field,good,bad,label"] + [f"{f},{g:.6f},{b:.6f},{y}" for f, g, b, y in zip(field, good, bad, label)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run(*args):
    return runner.invoke(app, ["evaluate", *map(str, args)])


def metrics_of(scores, col):
    out = json.loads(run(scores, "--prob-col", col, "--field-col", "field", "--json").stdout)
    return out["results"][0]["metrics"]


def test_passing_gates_exit_0_with_the_table_on_stdout(scores):
    result = run(scores, "--prob-col", "good", "--field-col", "field",
                 "--fail-above", "field-rce=0.5", "--fail-above", "log_loss=0.9", "--fail-below", "auc=0.6")
    assert result.exit_code == 0, result.stderr
    assert "good" in result.stdout and "Field-RCE" in result.stdout
    assert "gates passed: 3 checks" in result.stderr


def test_failing_gate_exits_1_and_says_which_for_what_and_by_how_much(scores):
    m = metrics_of(scores, "bad")
    result = run(scores, "--prob-col", "good", "--prob-col", "bad", "--field-col", "field",
                 "--fail-above", "field-rce=0.05", "--fail-below", "auc=0.6")
    assert result.exit_code == 1
    assert "bad" in result.stdout  # the data still goes to stdout
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("gate failed")]
    assert lines == [f"gate failed: Field-RCE of 'bad' is {m['field_rce']:.4g}, above the threshold 0.05 "
                     f"by {m['field_rce'] - 0.05:.4g}"]
    assert "1 of 4 gate checks failed" in result.stderr


def test_quiet_hides_the_summary_but_never_a_failed_gate(scores):
    passed = runner.invoke(app, ["-q", "evaluate", scores, "--prob-col", "good", "--fail-below", "auc=0.5"])
    assert passed.exit_code == 0 and passed.stderr == ""
    failed = runner.invoke(app, ["-q", "evaluate", scores, "--prob-col", "good", "--fail-below", "auc=0.9"])
    assert failed.exit_code == 1 and failed.stderr.startswith("gate failed: AUC of 'good'")


def test_json_report_carries_the_gate_result(scores):
    result = run(scores, "--prob-col", "bad", "--field-col", "field", "--json", "--fail-above", "field-rce=0.05")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["format"] == "calibcli.evaluation" and doc["schema_version"] == 4
    assert set(doc["results"][0]["metrics"]) == {"log_loss", "brier", "auc", "ece", "mce", "calbin", "cal_slope",
                                                 "cal_intercept", "spiegelhalter_z", "spiegelhalter_p",
                                                 "field_ece", "field_rce", "brier_mcb", "brier_dsc",
                                                 "brier_unc", "log_loss_mcb", "log_loss_dsc", "log_loss_unc"}
    gate = doc["gate"]
    assert gate["passed"] is False and gate["checked"] == 1
    (failed,) = gate["failed"]
    assert failed["result"] == "bad" and failed["metric"] == "field_rce" and failed["kind"] == "above"
    assert failed["threshold"] == 0.05 and failed["excess"] == pytest.approx(failed["value"] - 0.05)


def test_without_gates_the_json_says_passed(scores):
    doc = json.loads(run(scores, "--prob-col", "good", "--json").stdout)
    assert doc["gate"] == {"passed": True, "gate_on": "point", "baseline": None, "checked": 0,
                           "failed": [], "checks": []}
    assert doc["bootstrap"] is None and doc["results"][0]["intervals"] is None


@pytest.mark.parametrize("args, message", [
    (["--fail-above", "fild-rce=0.1"], "error: --fail-above: unknown metric 'fild-rce'"),
    (["--fail-below", "auc"], "error: --fail-below 'auc' is not [COLUMN:]METRIC=VALUE"),
    (["--fail-above", "brier=lots"], "error: --fail-above 'brier=lots': 'lots' is not a number"),
    (["--max-regression", "brier=1%"], "error: --max-regression needs --baseline FILE"),
    (["--gate-on", "upper", "--fail-above", "brier=0.3"], "error: --gate-on upper needs confidence intervals"),
    (["--bootstrap", "20", "--gate-on", "worst", "--fail-above", "brier=0.3", "--fail-above", "mce=0.3"],
     "error: --gate-on worst on mce: it has no bootstrap interval (a maximum over bins, biased up beyond what "
     "resampling corrects)"),
    (["--fail-above", "field-ece=0.1"], "error: a gate on field-ece needs --field-col"),
    (["--by-field"], "error: --by-field needs --field-col"),
    (["--save-baseline", "-"], "error: --save-baseline needs a file name"),
    (["--bootstrap", "-3"], "error: --bootstrap -3 is out of range: it must be in [0, 10000]"),
    (["--field-col", "field", "--by-field", "--top", "0"], "error: --top 0 is out of range: it must be in [1, 10000]"),
])
def test_usage_errors_exit_2_with_one_line(scores, args, message):
    result = run(scores, "--prob-col", "good", *args)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == message
    assert result.stdout == ""


def test_baseline_round_trip_passes_then_catches_a_regression(scores, tmp_path):
    base = tmp_path / "base.json"
    saved = run(scores, "--prob-col", "good", "--field-col", "field", "--save-baseline", base)
    assert saved.exit_code == 0 and "good" in saved.stdout
    assert json.loads(base.read_text())["results"][0]["name"] == "good"
    same = run(scores, "--prob-col", "good", "--field-col", "field", "--baseline", base,
               "--max-regression", "field-rce=0", "--max-regression", "log-loss=1%")
    assert same.exit_code == 0, same.stderr

    # The same column name, now holding the over-predicting scores: a regression.
    worse = tmp_path / "worse.csv"
    text = open(scores).read().splitlines()
    rows = [ln.split(",") for ln in text[1:]]
    worse.write_text("field,good,label\n" + "".join(f"{r[0]},{r[2]},{r[3]}\n" for r in rows))
    m_old = json.loads(base.read_text())["results"][0]["metrics"]
    m_new = metrics_of(str(worse), "good")
    result = run(worse, "--prob-col", "good", "--field-col", "field", "--baseline", base,
                 "--max-regression", "field-rce=10%", "--max-regression", "auc=0.5")
    assert result.exit_code == 1
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("gate failed")]
    allowed = 0.1 * m_old["field_rce"]
    assert line == (f"gate failed: Field-RCE of 'good' is {m_new['field_rce']:.4g}, above the baseline "
                    f"{m_old['field_rce']:.4g} by {m_new['field_rce'] - m_old['field_rce']:.4g}: more than "
                    f"the allowed {allowed:.4g} (10% of the baseline), over by "
                    f"{m_new['field_rce'] - m_old['field_rce'] - allowed:.4g}")


def test_bad_baselines_exit_2(scores, tmp_path):
    gate = ["--field-col", "field", "--max-regression", "brier=0.01"]
    missing = run(scores, "--prob-col", "good", "--baseline", tmp_path / "none.json", *gate)
    assert missing.exit_code == 2 and "no such baseline file" in missing.stderr
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 2, "results": [')
    bad = run(scores, "--prob-col", "good", "--baseline", corrupt, *gate)
    assert bad.exit_code == 2 and "baseline is not JSON" in bad.stderr
    base = tmp_path / "base.json"
    assert run(scores, "--prob-col", "good", "--save-baseline", base).exit_code == 0
    other = run(scores, "--prob-col", "bad", "--baseline", base, *gate)
    assert other.exit_code == 2
    assert other.stderr.splitlines()[0] == (f"error: {base}: baseline is for 'good', this run evaluates 'bad'")


@pytest.mark.parametrize("saved, now, gate, line", [
    (["--ece-bins", "5"], [], "ece=0.01", "baseline was computed with --ece-bins 5, this run uses --ece-bins 10"),
    (["--ece-strategy", "quantile"], [], "mce=0.01",
     "baseline was computed with --ece-strategy 'quantile', this run uses --ece-strategy 'uniform'"),
    ([], ["--weight-col", "label"], "log-loss=1%", "baseline was computed with no --weight-col, this run uses "
     "--weight-col 'label'"),
    (["--step", "0.01"], [], "auc=0.01", "baseline was computed with --step 0.01, this run uses no --step"),
    (["--calbin-window", "50"], [], "calbin=0.01", "baseline was computed with --calbin-window 50, this run uses "
     "--calbin-window 100"),
])
def test_a_baseline_with_other_settings_is_refused(scores, tmp_path, saved, now, gate, line):
    base = tmp_path / "base.json"
    assert run(scores, "--prob-col", "good", *saved, "--save-baseline", base).exit_code == 0
    other = run(scores, "--prob-col", "good", *now, "--baseline", base, "--max-regression", gate)
    assert other.exit_code == 2, other.stderr
    assert other.stderr.splitlines() == [f"error: {base}: {line}" + other.stderr.split(line, 1)[1].rstrip("\n")]
    assert line in other.stderr and len(other.stderr.splitlines()) == 1
    same = run(scores, "--prob-col", "good", *saved, "--baseline", base, "--max-regression", gate)
    assert same.exit_code == 0, same.stderr
    unaffected = run(scores, "--prob-col", "good", *now, "--baseline", base, "--max-regression", "brier=100%")
    assert unaffected.exit_code == (2 if "--weight-col" in now else 0), unaffected.stderr


def test_bootstrap_intervals_and_gating_on_the_interval(scores):
    args = [scores, "--prob-col", "bad", "--field-col", "field", "--json", "--bootstrap", 60, "--seed", 4]
    first = json.loads(run(*args).stdout)
    assert first == json.loads(run(*args).stdout)  # seeded
    assert first["bootstrap"] == {"replicates": 60, "seed": 4, "level": 0.95, "method": "recentred-percentile",
                                  "resampling": "poisson"}
    point = first["results"][0]["metrics"]["field_rce"]
    lo, hi = first["results"][0]["intervals"]["field_rce"]
    assert lo < point < hi
    threshold = f"field-rce={(lo + point) / 2}"  # inside the noise: point fails, interval passes
    assert run(*args, "--fail-above", threshold).exit_code == 1
    best = run(*args, "--fail-above", threshold, "--gate-on", "best")  # fails only when the whole interval fails
    assert best.exit_code == 0, best.stderr
    assert json.loads(best.stdout)["gate"]["checks"][0]["compared"] == lo
    assert run(*args, "--fail-above", f"field-rce={lo / 2}", "--gate-on", "best").exit_code == 1
    worst = run(*args, "--fail-above", f"field-rce={(point + hi) / 2}", "--gate-on", "worst")
    assert worst.exit_code == 1 and json.loads(worst.stdout)["gate"]["checks"][0]["compared"] == hi
    assert run(*args, "--fail-above", f"field-rce={hi * 1.01}", "--gate-on", "worst").exit_code == 0
    assert first["results"][0]["intervals"]["mce"] == [None, None]  # no interval: module docstring of bootstrap
    assert run(*args, "--fail-above", "mce=0.99").exit_code == 0  # MCE gates on its point value


def test_bootstrap_table_shows_intervals(scores):
    result = run(scores, "--prob-col", "good", "--bootstrap", 20)
    assert result.exit_code == 0
    assert "95% intervals from 20 resamples" in result.stdout and "[0." in result.stdout


def test_by_field_lists_the_worst_fields(scores):
    result = runner.invoke(app, ["evaluate", str(scores), "--prob-col", "bad", "--field-col", "field", "--by-field",
                                 "--top", "2"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "the 2 of 4 values of 'field' with the strongest evidence of a gap" in result.stdout.replace("\n", " ")
    table = result.stdout[result.stdout.index("strongest evidence"):]
    assert next(line for line in table.splitlines() if "f" in line and "│" in line and "field" not in line
                ).split("│")[1].strip() == "f3"  # the over-predicted field comes first
    doc = json.loads(run(scores, "--prob-col", "bad", "--field-col", "field", "--by-field", "--json").stdout)
    worst = doc["results"][0]["by_field"]["values"][0]
    assert worst["field"] == "f3" and worst["bias"] < 0 and worst["rows"] > 100
    assert worst["mean_p"] > worst["positive_rate"]


def test_text_reliability_diagram(scores):
    result = run(scores, "--prob-col", "good", "--prob-col", "bad", "--plot", "-")
    assert result.exit_code == 0
    doc = json.loads(run(scores, "--prob-col", "good", "--prob-col", "bad", "--plot", "-", "--json").stdout)
    for r in doc["results"]:
        bins = r["reliability"]
        assert f"reliability of '{r['name']}': {len(bins)} bins of ECE" in result.stdout
        assert sum(b["rows"] for b in bins) == 2000
        for b in bins:  # one line per bin: mean p, rate and rows as the JSON has them
            assert f"{b['mean_p']:8.4f} {b['positive_rate']:7.4f} {b['rows']:8d}  " in result.stdout


def test_png_reliability_diagram(scores, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "reliability.png"
    result = run(scores, "--prob-col", "good", "--prob-col", "bad", "--plot", out, "--json")
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bins = json.loads(result.stdout)["results"][1]["reliability"]
    assert len(bins) == 10 and sum(b["rows"] for b in bins) == 2000


def test_png_without_matplotlib_is_a_usage_error(scores, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "reliability.png"
    result = run(scores, "--prob-col", "good", "--plot", out)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --plot FILE needs matplotlib",
        "hint: install it from the calibcli repository: pip install -e '.[plot]', or use --plot - "
        "for a text diagram"]
    assert not out.exists() and result.stdout == ""


def test_subprocess_gate_failure_keeps_json_on_stdout(scores):
    proc = subprocess.run(
        [sys.executable, "-m", "calibcli", "evaluate", scores, "--prob-col", "bad", "--field-col", "field",
         "--json", "--fail-above", "field-rce=0.05", "--fail-below", "auc=0.99"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["gate"]["passed"] is False
    failed = [ln for ln in proc.stderr.splitlines() if ln.startswith("gate failed")]
    assert [ln.split(" of ")[0] for ln in failed] == ["gate failed: Field-RCE", "gate failed: AUC"]
    assert "below the threshold 0.99" in failed[1]


def test_weight_col_weights_every_metric_like_repeated_rows(tmp_path):
    rng = np.random.default_rng(8)
    n = 300
    p = np.round(rng.random(n), 2)
    y = (rng.random(n) < p).astype(int)
    w = rng.integers(0, 4, n)
    f = rng.choice(["a", "b", "c"], n)
    weighted = tmp_path / "w.csv"
    weighted.write_text("p,label,w,f\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in zip(p, y, w, f)))
    idx = np.repeat(np.arange(n), w)
    repeated = tmp_path / "r.csv"
    repeated.write_text("p,label,f\n" + "".join(f"{p[i]},{y[i]},{f[i]}\n" for i in idx))
    a = json.loads(run(weighted, "--prob-col", "p", "--weight-col", "w", "--field-col", "f", "--json").stdout)
    b = json.loads(run(repeated, "--prob-col", "p", "--field-col", "f", "--json").stdout)
    assert a["weight_col"] == "w" and a["rows"] == n and b["rows"] == idx.size
    for key, value in b["results"][0]["metrics"].items():
        assert a["results"][0]["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_step_reports_bounds_and_stays_within_them(scores):
    exact = json.loads(run(scores, "--prob-col", "good", "--field-col", "field", "--json").stdout)
    out = json.loads(run(scores, "--prob-col", "good", "--field-col", "field", "--step", "0.01", "--json").stdout)
    assert out["step"] == 0.01 and exact["results"][0]["step_bounds"] is None
    got, ref = out["results"][0], exact["results"][0]
    for key in ("auc", "calbin"):
        assert abs(got["metrics"][key] - ref["metrics"][key]) <= got["step_bounds"][key]
    for key in ("log_loss", "brier", "ece", "mce", "spiegelhalter_z", "spiegelhalter_p", "field_ece", "field_rce"):
        assert got["step_bounds"][key] == 0
        assert got["metrics"][key] == pytest.approx(ref["metrics"][key], rel=1e-9), key
    assert got["metrics"]["cal_slope"] is None and got["step_bounds"]["cal_slope"] is None
    assert got["metrics"]["cal_intercept"] is None and got["step_bounds"]["cal_intercept"] is None
    table = run(scores, "--prob-col", "good", "--step", "0.01", "--ece-bins", "7", "--json")
    seven = json.loads(run(scores, "--prob-col", "good", "--ece-bins", "7", "--json").stdout)["results"][0]
    for key in ("ece", "mce"):
        assert json.loads(table.stdout)["results"][0]["metrics"][key] == pytest.approx(seven["metrics"][key], rel=1e-9)


@pytest.mark.parametrize("args, message", [
    (["--bootstrap", "5", "--weight-col", "good"], "cannot resample weighted rows"),
    (["--bootstrap", "5", "--step", "0.01"], "cannot be combined with --step"),
    (["--step", "0"], "--step 0.0 is out of range"),
    (["--step", "0.01", "--ece-strategy", "quantile"], "it cannot be combined with --step"),
    (["--step", "0.01", "--fail-above", "cal-slope=1.2"], "a gate on cal-slope needs the exact probabilities"),
    (["--weight-col", "nope"], "nope"),
])
def test_step_weight_and_bootstrap_usage_errors(scores, args, message):
    result = run(scores, "--prob-col", "good", *args)
    assert result.exit_code == 2 and message in result.stderr


def test_reliability_bands_are_wilson_intervals_and_histogram_counts_rows(scores):
    from calibcli.evaluation.metrics.diagnostics import histogram, wilson_interval

    # Wilson (1927), 50 of 100, z = 1.959964: 0.5 -+ z*sqrt(.25/100 + z^2/40000)/(1 + z^2/100)
    lo, hi = wilson_interval(0.5, 100)
    assert (lo, hi) == pytest.approx((0.403832, 0.596168), abs=2e-6)
    assert wilson_interval(0.0, 10)[0] == 0.0 and wilson_interval(1.0, 10)[1] == pytest.approx(1.0, abs=1e-15)
    p = np.array([0.0, 0.049, 0.05, 0.5, 0.999, 1.0])
    counts = histogram(p)
    assert len(counts) == 20 and counts[0] == 2 and counts[1] == 1 and counts[10] == 1 and counts[19] == 2
    result = run(scores, "--prob-col", "good", "--plot", "-", "--json")
    row = json.loads(result.stdout)["results"][0]
    assert sum(row["histogram"]) == 2000
    for b in row["reliability"]:
        assert b["rate_low"] <= b["positive_rate"] <= b["rate_high"]


def test_html_report_is_self_contained_with_table_gates_and_figure(scores, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report.html"
    result = run(scores, "--prob-col", "good", "--prob-col", "bad", "--plot", out,
                 "--fail-above", "ece=0.5")
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</html>" in page
    assert "<th>good</th>" in page and "<th>bad</th>" in page and "gates passed: 2 checks" in page
    assert "src=" not in page and "<link" not in page  # nothing is fetched from elsewhere


@pytest.mark.parametrize("columns", [40, 60, 80, 200])
def test_table_never_cuts_a_number_at_any_width(scores, columns, monkeypatch):
    """Narrow terminals get one block per column/map instead of a squeezed table."""
    monkeypatch.setenv("COLUMNS", str(columns))
    result = run(scores, "--prob-col", "good", "--prob-col", "bad", "--field-col", "field",
                 "--bootstrap", "20")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(run(scores, "--prob-col", "good", "--prob-col", "bad", "--field-col", "field",
                         "--bootstrap", "20", "--json").stdout)
    for r in doc["results"]:
        for key, value in r["metrics"].items():
            assert f"{value:.4f}" in result.stdout, (key, result.stdout)
    assert "…" not in result.stdout
    if columns <= 80:
        # the input's path is one word, never broken: it may be wider than the terminal
        assert max(len(line) for line in result.stdout.splitlines() if scores not in line) <= max(columns, 70)


def test_csv_and_markdown_outputs_hold_every_metric(scores):
    doc = json.loads(run(scores, "--prob-col", "good", "--json").stdout)
    csv_out = run(scores, "--prob-col", "good", "--output-format", "csv")
    header, row = list(csv.reader(io.StringIO(csv_out.stdout)))
    values = dict(zip(header, row))
    assert header[2:4] == ["calibrated", "direction"] and values["verdict"].startswith("calibrated within noise")
    assert values["name"] == "good" and values["kind"] == "column"
    for key, value in doc["results"][0]["metrics"].items():
        assert float(values[key]) == value  # full precision
    md = run(scores, "--prob-col", "good", "--output-format", "markdown").stdout
    assert "| good |" in md and "|---|" in md
    assert run(scores, "--output-format", "xml").exit_code == 2


@pytest.mark.parametrize("kind", ["table", "json", "csv", "markdown"])
def test_deprecated_output_prints_what_output_format_prints_with_one_warning(scores, kind):
    new = run(scores, "--prob-col", "good", "--output-format", kind)
    old = run(scores, "--prob-col", "good", "--output", kind)
    assert new.exit_code == old.exit_code == 0, old.stderr
    assert old.stdout == new.stdout and new.stderr == ""
    lines = old.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning:"), old.stderr
    assert "--output is deprecated" in lines[0] and "--output-format" in lines[0]
    quiet = runner.invoke(app, ["-q", "evaluate", scores, "--prob-col", "good", "--output", kind])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == new.stdout


def test_output_and_output_format_together_are_a_usage_error(scores):
    both = run(scores, "--prob-col", "good", "--output", "csv", "--output-format", "csv")
    assert both.exit_code == 2 and both.stdout == ""
    assert both.stderr.startswith("error:") and "--output-format" in both.stderr
    bad = run(scores, "--output", "xml")
    assert bad.exit_code == 2 and "--output 'xml'" in bad.stderr


def test_help_names_output_format_not_the_deprecated_output():
    text = runner.invoke(app, ["evaluate", "--help"]).stdout
    assert "--output-format" in text and "--output " not in text


# The rows behind MCE: a bin of two rows must not pass for a finding.

def _brute_mce(y, p, bins, strategy):
    """(MCE, rows of its bin) by binning every row, as scikit-learn's calibration_curve bins."""
    if strategy == "uniform":
        b = np.minimum((p * bins).astype(np.int64), bins - 1)
    else:
        b = np.searchsorted(np.percentile(p, np.linspace(0, 100, bins + 1))[1:-1], p)
    count = np.bincount(b, minlength=bins)
    keep = count > 0
    gap = np.abs(np.bincount(b, weights=p, minlength=bins)[keep] - np.bincount(b, weights=y, minlength=bins)[keep])
    gap /= count[keep]
    top = np.flatnonzero(gap == gap.max())
    return gap.max(), count[keep][top].max()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("strategy,bins", [("uniform", 10), ("uniform", 7), ("quantile", 10), ("quantile", 4)])
def test_mce_count_is_the_rows_of_the_bin_mce_comes_from(seed, strategy, bins):
    rng = np.random.default_rng(seed)
    n = 300
    p = np.round(rng.beta(0.6, 2.5, n), 2)  # ties, and sparse bins near 1
    y = (rng.random(n) < np.clip(p + 0.1, 0, 1)).astype(float)
    state = EvalState.from_arrays(y, p)
    mce, count = _brute_mce(y, p, bins, strategy)
    got = state.metrics(ece_bins=bins, ece_strategy=strategy)["mce"]
    assert got == pytest.approx(mce, abs=1e-12)
    assert state.mce_count(bins, strategy) == count
    if strategy == "uniform":  # the bucketed state keeps each bin's exact sums
        bucketed = EvalState.from_arrays(y, p, step=0.05, ece_bins=bins)
        assert bucketed.mce_count(bins, strategy) == count


def test_mce_from_a_two_row_bin_shows_its_count(tmp_path):
    """The case that misled: the largest gap comes from a bin of 2 rows, and says so."""
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(0.05, 0.45, 400), [0.95, 0.96]])
    y = np.concatenate([(rng.random(400) < p[:400]).astype(int), [0, 0]])
    path = tmp_path / "s.csv"
    path.write_text("p,label\n" + "".join(f"{a!r},{b}\n" for a, b in zip(p.tolist(), y.tolist())))
    doc = json.loads(runner.invoke(app, ["evaluate", str(path), "--prob-col", "p", "--json"]).stdout)
    r = doc["results"][0]
    assert r["metrics"]["mce"] == pytest.approx(0.955)
    assert r["mce_count"] == 2
    table = runner.invoke(app, ["evaluate", str(path), "--prob-col", "p"], env={"COLUMNS": "250"})
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    if any("┃" in line for line in lines):  # one row per column
        header = next(line for line in lines if "MCE rows" in line)
        row = next(line for line in lines if line.lstrip("│┃| ").startswith("p ") and "│" in line)
        cols = [c.strip() for c in row.split("│")]
        heads = [c.strip() for c in header.replace("┃", "│").split("│")]
        assert cols[heads.index("MCE rows")] == "2" and cols[heads.index("MCE rows") - 1] == "0.9550"
    else:  # stacked blocks: a line per metric
        assert next(line for line in lines if line.strip().startswith("MCE rows")).split()[-1] == "2"
        assert next(line for line in lines if line.strip().startswith("MCE ↓")).split()[-1] == "0.9550"
