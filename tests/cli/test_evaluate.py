"""`calib evaluate` answers first (issue #34): the verdict opens every output format, --by-field
ranks field values by evidence in every format, --summary, gates per column, baselines on
resolved columns, --gate-on's old spelling; and `calib apply` counts unseen field values."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.evaluation.metrics.significance import benjamini_hochberg

runner = CliRunner()


def _sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))


@pytest.fixture(scope="module")
def binary_file(tmp_path_factory):
    """4 000 rows: `calibrated` (labels drawn from it), `over` (logit doubled), `high` (logit
    + 0.5); field `f` with 6 values, value `e` shifted up by 0.15 in `fieldbad`, value `z` 12 rows."""
    rng = np.random.default_rng(5)
    n = 4000
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < p).astype(int)
    lg = np.log(p / (1 - p))
    field = rng.choice(list("abcde"), n)
    field[:12] = "z"
    fieldbad = np.where(field == "e", np.clip(p + 0.15, 0, 1), p)
    w = rng.integers(1, 4, n).astype(float)
    path = tmp_path_factory.mktemp("answers") / "scores.csv"
    rows = zip(*(np.asarray(c).tolist() for c in (y, p, _sigmoid(2 * lg), _sigmoid(lg + 0.5), fieldbad, field, w)))
    path.write_text("label,calibrated,over,high,fieldbad,f,w\n" + "".join(
        f"{a},{b!r},{c!r},{d!r},{e!r},{f},{g}\n" for a, b, c, d, e, f, g in rows))
    return path, dict(y=y, p=p, fieldbad=fieldbad, field=field, w=w)


@pytest.fixture(scope="module")
def kclass_file(tmp_path_factory):
    rng = np.random.default_rng(8)
    n = 3000
    z = rng.normal(size=(n, 3)) * 1.5
    P = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    Q = np.exp(2 * z) / np.exp(2 * z).sum(1, keepdims=True)
    y = np.array(list("abc"))[(rng.random((n, 1)) > P.cumsum(1)).sum(1).clip(0, 2)]
    path = tmp_path_factory.mktemp("kanswers") / "k.csv"
    table = np.column_stack([P, Q]).tolist()
    path.write_text("label,p_a,p_b,p_c,q_a,q_b,q_c\n" + "".join(
        f"{label}," + ",".join(map(repr, row)) + "\n" for label, row in zip(y.tolist(), table)))
    return path


def _run(*args, code=0, columns=None):
    env = None if columns is None else {"COLUMNS": str(columns)}
    res = runner.invoke(app, ["evaluate", *map(str, args)], env=env)
    assert res.exit_code == code, res.stderr + res.stdout
    return res


def test_the_verdict_opens_the_table_and_markdown(binary_file):
    path, _ = binary_file
    res = _run(path, "--prob-col", "calibrated", "--prob-col", "over", "--prob-col", "high", columns=400)
    lines = res.stdout.splitlines()
    verdicts = [i for i, line in enumerate(lines) if line.startswith("verdict of")]
    assert verdicts[:3] == [1, 2, 3] or verdicts[0] == 1
    text = res.stdout
    assert "verdict of 'calibrated': calibrated within noise" in text
    assert "verdict of 'over': miscalibrated:" in text and "over-confident" in text
    assert "verdict of 'high': miscalibrated: too high on average" in text
    assert "invalid" not in res.stderr.lower() and "invalid" not in text.lower()  # no line about none
    md = _run(path, "--prob-col", "over", "--output-format", "markdown").stdout
    assert md.index("**Verdict**") < md.index("| probabilities")
    assert "**over**: miscalibrated:" in md


def test_json_and_csv_carry_the_verdict_first(binary_file):
    path, _ = binary_file
    doc = json.loads(_run(path, "--prob-col", "calibrated", "--prob-col", "over", "--json").stdout)
    first = doc["results"][0]
    assert list(first)[:3] == ["name", "kind", "verdict"]
    assert first["verdict"]["calibrated"] is True
    over = doc["results"][1]["verdict"]
    assert over["calibrated"] is False and "over-confident" in over["direction"]
    assert {"p_min", "p_max", "predicted", "observed", "observed_low", "observed_high"} <= set(over["where"])
    assert [e["test"] for e in over["evidence"]] == ["mean", "spread", "kuiper", "bins"]
    rows = list(csv.DictReader(io.StringIO(_run(path, "--prob-col", "over", "--output-format", "csv").stdout)))
    assert list(rows[0])[2:5] == ["calibrated", "direction", "where_p_min"]
    assert rows[0]["calibrated"] == "false" and "over-confident" in rows[0]["direction"]


def test_kclass_verdict_in_every_format(kclass_file):
    args = [kclass_file, "--prob-cols", "p_*", "--prob-cols", "q_*"]
    table = _run(*args).stdout
    assert "verdict of 'p_*': calibrated within noise" in table
    assert "verdict of 'q_*': miscalibrated: over-confident" in table
    doc = json.loads(_run(*args, "--json").stdout)
    assert [r["verdict"]["calibrated"] for r in doc["results"]] == [True, False]
    assert len(doc["results"][1]["verdict"]["evidence"]) == 4 + 2 * 3
    assert "**q_\\*\\*" in _run(*args, "--output-format", "markdown").stdout or \
        "miscalibrated: over-confident" in _run(*args, "--output-format", "markdown").stdout


def test_a_small_file_says_too_few_rows_to_tell(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("label,p\n" + "".join(f"{i % 2},{0.3 + 0.01 * i}\n" for i in range(25)))
    res = _run(path, "--prob-col", "p")
    assert "verdict of 'p': too few rows to tell" in res.stdout
    doc = json.loads(_run(path, "--prob-col", "p", "--json").stdout)
    assert doc["results"][0]["verdict"]["calibrated"] is None


def test_by_field_ranks_by_evidence_with_exact_tests_in_json_and_csv(binary_file):
    path, d = binary_file
    doc = json.loads(_run(path, "--prob-col", "fieldbad", "--field-col", "f", "--by-field", "--json").stdout)
    bf = doc["results"][0]["by_field"]
    assert bf["fields"] == 6 and bf["tested"] == 5 and bf["min_rows"] == 30  # z has 12 rows
    values = bf["values"]
    assert values[0]["field"] == "e" and values[0]["significant"] and values[0]["gap"] > 0.1
    assert "z" not in [v["field"] for v in values]
    # the exact binomial test and BH over the tested values, by brute force
    raw = {}
    for name in "abcde":
        rows = d["field"] == name
        k, n, mean_p = int(d["y"][rows].sum()), int(rows.sum()), float(d["fieldbad"][rows].mean())
        raw[name] = min(1.0, 2 * min(stats.binom.cdf(k, n, mean_p), stats.binom.sf(k - 1, n, mean_p)))
    adjusted = dict(zip(raw, benjamini_hochberg(list(raw.values()))))
    for v in values:
        assert v["p_value"] == pytest.approx(raw[v["field"]], rel=1e-7, abs=1e-300)
        assert v["adjusted_p"] == pytest.approx(adjusted[v["field"]], rel=1e-7, abs=1e-300)
    assert [v["adjusted_p"] for v in values] == sorted(v["adjusted_p"] for v in values)
    out = _run(path, "--prob-col", "fieldbad", "--field-col", "f", "--by-field", "--min-rows", "10",
               "--output-format", "csv").stdout
    fields = [r for r in csv.DictReader(io.StringIO(out)) if r["kind"] == "field"]
    assert fields[0]["field"] == "e" and fields[0]["field_significant"] == "true"
    assert "z" in [r["field"] for r in fields]  # 12 rows >= --min-rows 10


def test_by_field_with_weights_tests_the_weighted_counts(binary_file):
    path, d = binary_file
    doc = json.loads(_run(path, "--prob-col", "fieldbad", "--field-col", "f", "--by-field", "--weight-col", "w",
                          "--json").stdout)
    e = next(v for v in doc["results"][0]["by_field"]["values"] if v["field"] == "e")
    rows = d["field"] == "e"
    w = d["w"][rows]
    assert e["rows"] == pytest.approx(w.sum()) and e["positives"] == pytest.approx((w * d["y"][rows]).sum())
    assert e["mean_p"] == pytest.approx(np.average(d["fieldbad"][rows], weights=w))


def test_min_rows_needs_by_field(binary_file):
    path, _ = binary_file
    res = _run(path, "--prob-col", "calibrated", "--min-rows", "5", code=2)
    assert "--min-rows applies to --by-field" in res.stderr


def test_summary_is_written_whatever_the_exit_code_with_gates_per_column(binary_file, tmp_path):
    path, _ = binary_file
    summary = tmp_path / "s.md"
    res = _run(path, "--prob-col", "calibrated", "--prob-col", "over", "--fail-above", "over:ece=0.01",
               "--fail-above", "log-loss=5", "--summary", summary, "--title", "Nightly check", code=1)
    assert "ECE of 'over'" in res.stderr and "ECE of 'calibrated'" not in res.stderr
    text = summary.read_text()
    assert text.startswith("## Nightly check")
    assert "**Exit 1**" in text and "1 of 3 gate checks failed" in text
    assert "**over**: miscalibrated" in text and "**calibrated**: calibrated within noise" in text
    assert "| over | ECE | above |" in text and "| 0.0100 | FAILED |" in text
    ok = tmp_path / "ok.md"
    _run(path, "--prob-col", "calibrated", "--fail-above", "calibrated:log-loss=5", "--summary", ok)
    assert "**Exit 0**" in ok.read_text() and "passed" in ok.read_text()


def test_a_gate_naming_an_unknown_column_is_refused(binary_file):
    path, _ = binary_file
    res = _run(path, "--prob-col", "calibrated", "--fail-above", "nosuch:ece=0.1", code=2)
    assert "nosuch" in res.stderr


def test_baselines_match_a_pattern_and_the_list_it_expands_to(kclass_file, tmp_path):
    base = tmp_path / "base.json"
    _run(kclass_file, "--prob-cols", "p_*", "--save-baseline", base)
    res = _run(kclass_file, "--prob-cols", "p_a,p_b,p_c", "--baseline", base, "--max-regression", "log-loss=0.001",
               "--json")
    checks = json.loads(res.stdout)["gate"]["checks"]
    assert len(checks) == 1 and checks[0]["passed"] and checks[0]["baseline"] == pytest.approx(checks[0]["value"])


def test_gate_on_upper_still_works_and_warns(binary_file):
    path, _ = binary_file
    args = [path, "--prob-col", "over", "--bootstrap", "30", "--fail-above", "ece=0.5"]
    old = _run(*args, "--gate-on", "upper", "--json")
    assert "deprecated" in old.stderr and "worst" in old.stderr
    new = _run(*args, "--gate-on", "worst", "--json")
    assert json.loads(old.stdout)["gate"] == json.loads(new.stdout)["gate"]
    gate = json.loads(new.stdout)["gate"]
    ece_high = json.loads(new.stdout)["results"][0]["intervals"]["ece"][1]
    assert gate["gate_on"] == "worst" and gate["checks"][0]["compared"] == pytest.approx(ece_high)


def test_gate_on_worst_takes_the_lower_end_for_fail_below(binary_file):
    path, _ = binary_file
    doc = json.loads(_run(path, "--prob-col", "calibrated", "--bootstrap", "30", "--gate-on", "worst",
                          "--fail-below", "auc=0.5", "--json").stdout)
    low = doc["results"][0]["intervals"]["auc"][0]
    assert doc["gate"]["checks"][0]["compared"] == pytest.approx(low)


def test_apply_says_once_how_many_rows_had_an_unseen_field_value(tmp_path):
    rng = np.random.default_rng(2)
    fit = tmp_path / "fit.csv"
    s = rng.random(2000)
    fit.write_text("score,label,field\n" + "".join(
        f"{a!r},{int(rng.random() < a)},{rng.choice(list('abc'))}\n" for a in s.tolist()))
    new = tmp_path / "new.csv"
    fields = ["a", "x", "b", "y", "x", "c"] * 10
    new.write_text("score,field\n" + "".join(f"{0.1 + 0.01 * i},{f}\n" for i, f in enumerate(fields)))
    m = tmp_path / "m.json"
    assert runner.invoke(app, ["fit", str(fit), "--method", "field-aware", "--field-col", "field",
                               "-o", str(m)]).exit_code == 0
    res = runner.invoke(app, ["apply", str(m), str(new), "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if "never saw" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: 30 of 60 rows")
    seen_only = tmp_path / "seen.csv"
    seen_only.write_text("score,field\n0.2,a\n0.3,b\n")
    res = runner.invoke(app, ["apply", str(m), str(seen_only), "-o", str(tmp_path / "out2.csv")])
    assert "never saw" not in res.stderr


def test_summary_is_written_when_the_input_stops_the_run(binary_file, tmp_path):
    path, _ = binary_file
    summary = tmp_path / "stopped.md"
    _run(path, "--prob-col", "nosuch", "--summary", summary, code=2)
    text = summary.read_text()
    assert "**Exit 2**: the run stopped before a verdict" in text and "nosuch" in text


def test_kclass_by_field_points_to_the_top_label_segments(kclass_file, tmp_path):
    """K-class predictions have no --field-col/--by-field: the refusal names the command that
    answers "where" for them, and that command gives each value's top-label gap with a p-value."""
    res = _run(kclass_file, "--prob-cols", "q_*", "--field-col", "label", "--by-field", code=2)
    assert "hint: for K classes, --segment-col COL --segment-depth 1 --segment-top K" in res.stderr
    doc = json.loads(_run(kclass_file, "--prob-cols", "q_*", "--segment-col", "label", "--segment-depth", "1",
                          "--segment-top", "3", "--json").stdout)
    segments = doc["results"][0]["segments"]
    assert {s["segment"] for s in segments} == {"all rows", "label=a", "label=b", "label=c"}
    ranked = [s["ecce_sigma"] for s in segments]
    assert ranked == sorted(ranked, reverse=True)
    assert all(0 <= s["p"] <= 1 and s["predicted"] > s["observed"] for s in segments)  # q_* is over-confident
