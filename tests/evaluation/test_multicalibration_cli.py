"""`calib evaluate --segment-col` through the real CLI: the multicalibration error equals the
library's (`calibcli.evaluate(segments=...)` and `multicalibration` itself) on the same rows, for
binary and K-class predictions; gates and baselines work on it; every output carries the worst
segments; an infinite value is written honestly; bad options are refused at the door."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.cli.app import app
from calibcli.evaluation.metrics.multicalibration import MulticalOptions, multicalibration
from calibcli.evaluation.render.report import SEGMENT_CSV

runner = CliRunner()
KEYS = ("multical", "multical_sigma", "multical_p")


def run(*args):
    return runner.invoke(app, ["evaluate", *map(str, args)])


def report(*args) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def rows():
    """3 000 rows: `good` calibrated, `bad` 0.25 too low for country DE members; segment columns
    of every kind: text, integer, boolean, float and float with missing values; dyadic weights."""
    rng = np.random.default_rng(11)
    n = 3000
    country = rng.choice(["US", "DE", "FR", "IN"], n, p=[0.4, 0.3, 0.2, 0.1])
    device = rng.integers(0, 4, n)
    member = rng.random(n) < 0.4
    age = np.round(rng.normal(45.0, 15.0, n), 1)
    income = rng.lognormal(10.0, 1.0, n)
    income[rng.random(n) < 0.05] = np.nan
    good = rng.uniform(0.02, 0.98, n)
    label = (rng.random(n) < good).astype(np.int64)
    bad = np.where((country == "DE") & member, np.maximum(good - 0.25, 0.0), good)
    weight = rng.integers(1, 8, n) / 4.0
    return {"country": country, "device": device, "member": member, "age": age, "income": income,
            "good": good, "bad": bad, "label": label, "weight": weight}


@pytest.fixture(scope="module")
def parquet(rows, tmp_path_factory):
    path = tmp_path_factory.mktemp("multical") / "rows.parquet"
    table = pa.table({k: pa.array(v, from_pandas=True) for k, v in rows.items()})
    pq.write_table(table, path, row_group_size=700)
    return str(path)


SEGMENT_FLAGS = ["--segment-col", "country", "--segment-col", "device", "--segment-col", "member",
                 "--segment-col", "age", "--segment-col", "income"]
COLUMNS = ["country", "device", "member", "age", "income"]


def test_cli_equals_the_library_and_the_metric_itself(rows, parquet):
    """Two probability columns (sharing the segment columns), weighted and not: every number and
    segment of the CLI equals `calibcli.evaluate(segments=...)` and `multicalibration`."""
    for weighted in (False, True):
        w = rows["weight"] if weighted else None
        extra = ["--weight-col", "weight"] if weighted else []
        got = report(parquet, "--prob-col", "good", "--prob-col", "bad", *SEGMENT_FLAGS, *extra, "--segments", "1000")
        for r in got["results"]:
            p = rows[r["name"]]
            direct = multicalibration(rows["label"], p, {c: rows[c] for c in COLUMNS}, w)
            assert {k: r["metrics"][k] for k in KEYS} == direct.metrics()
            api = calibcli.evaluate(rows["label"], p, segments={c: rows[c] for c in COLUMNS}, sample_weight=w)
            assert {k: api[k] for k in KEYS} == direct.metrics()
            assert r["segments_checked"] == len(direct.segments) and r["segments_capped"] is False
            assert [s["segment"] for s in r["segments"]] == [s.definition for s in direct.segments]
            assert [s["ecce_sigma"] for s in r["segments"]] == [s.ecce_sigma for s in direct.segments]
            assert r["segments"][0]["rows"] == direct.segments[0].rows
    bad = got["results"][1]
    worst = bad["segments"][0]["segment"]  # the planted miscalibration
    assert worst.startswith("country=DE & ") and worst.endswith("member=True")
    assert bad["metrics"]["multical_sigma"] > 5 > got["results"][0]["metrics"]["multical_sigma"]
    assert got["segment_cols"] == COLUMNS and got["segment_bins"] == 3 and got["segment_max"] == 1000


def test_the_options_reach_the_metric(rows, parquet):
    got = report(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--segment-bins", "5", "--segment-top", "1",
                 "--segment-depth", "2", "--segment-min-rows", "50", "--segment-max", "40", "--segments", "3")
    direct = multicalibration(rows["label"], rows["bad"], {c: rows[c] for c in COLUMNS},
                              options=MulticalOptions(bins=5, top=1, depth=2, min_rows=50, max_segments=40))
    r = got["results"][0]
    assert {k: r["metrics"][k] for k in KEYS} == direct.metrics()
    assert len(r["segments"]) == 3 and r["segments_checked"] == 40 and r["segments_capped"] is True
    api = calibcli.evaluate(rows["label"], rows["bad"], segments={c: rows[c] for c in COLUMNS}, segment_bins=5,
                            segment_top=1, segment_depth=2, segment_min_rows=50, segment_max=40)
    assert {k: api[k] for k in KEYS} == direct.metrics()


def test_kclass_predictions_get_the_top_label_multicalibration_error(tmp_path):
    """Whether the top class (the first largest p_k) is right, against the confidence max_k p_k."""
    rng = np.random.default_rng(5)
    n = 2000
    P = rng.dirichlet(np.ones(3), n)
    P[:50, 1] = P[:50, 0]  # ties for the top class: the first column wins
    P /= P.sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > P.cumsum(axis=1)).sum(axis=1).clip(0, 2)
    names = np.array(["cat", "dog", "eel"])
    region = rng.choice(["n", "s", "e"], n)
    size = rng.normal(size=n)
    path = tmp_path / "k.csv"
    path.write_text("label,p_cat,p_dog,p_eel,region,size\n" + "".join(
        f"{names[k]},{a!r},{b!r},{c!r},{g},{s!r}\n" for k, (a, b, c), g, s in zip(y, P.tolist(), region, size.tolist())))
    got = report(path, "--prob-cols", "p_*", "--segment-col", "region", "--segment-col", "size")
    r = got["results"][0]
    correct = (np.argmax(P, axis=1) == y).astype(int)
    direct = multicalibration(correct, P.max(axis=1), {"region": region, "size": size})
    assert {k: r["metrics"]["top_label_" + k] for k in KEYS} == direct.metrics()
    assert "multical" not in r["metrics"]
    api = calibcli.evaluate(names[y], P, classes=list(names), segments={"region": region, "size": size})
    assert {k: api["top_label_" + k] for k in KEYS} == direct.metrics()
    assert [s["segment"] for s in r["segments"]] == [s.definition for s in direct.worst(10)]
    gated = run(path, "--prob-cols", "p_*", "--segment-col", "region", "--fail-above", "top-label-multical-sigma=0.1")
    assert gated.exit_code == 1 and "top-label multical σ of 'p_*'" in gated.stderr


def test_gates_fire_on_the_multicalibration_error(parquet):
    r = report(parquet, "--prob-col", "bad", *SEGMENT_FLAGS)["results"][0]["metrics"]
    result = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--fail-above", "multical-sigma=5",
                 "--fail-below", "multical-p=0.01")
    assert result.exit_code == 1
    failed = [ln for ln in result.stderr.splitlines() if ln.startswith("gate failed")]
    assert failed[0] == (f"gate failed: multical σ of 'bad' is {r['multical_sigma']:.4g}, above the threshold 5 by "
                         f"{r['multical_sigma'] - 5:.4g}")
    assert failed[1] == (f"gate failed: multical p of 'bad' is {r['multical_p']:.4g}, below the threshold 0.01 by "
                         f"{0.01 - r['multical_p']:.4g}")
    passed = run(parquet, "--prob-col", "good", *SEGMENT_FLAGS, "--fail-above", "multical-sigma=5")
    assert passed.exit_code == 0 and "gates passed: 1 check" in passed.stderr


def test_baselines_record_the_segment_options_and_refuse_others(parquet, tmp_path):
    base = tmp_path / "base.json"
    saved = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--save-baseline", base)
    assert saved.exit_code == 0, saved.output
    ok = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--baseline", base, "--max-regression", "multical-sigma=0.5",
             "--max-regression", "multical=5%")
    assert ok.exit_code == 0 and "gates passed: 2 checks" in ok.stderr
    cases = [
        (SEGMENT_FLAGS[:4], "--segment-col 'country' --segment-col 'device' --segment-col 'member' --segment-col "
                            "'age' --segment-col 'income', this run uses --segment-col 'country' --segment-col 'device'"),
        ([*SEGMENT_FLAGS, "--segment-bins", "4"], "--segment-bins 3, this run uses --segment-bins 4"),
        ([*SEGMENT_FLAGS, "--segment-max", "100"], "--segment-max 1000, this run uses --segment-max 100"),
    ]
    for flags, words in cases:
        refused = run(parquet, "--prob-col", "bad", *flags, "--baseline", base, "--max-regression", "multical-sigma=0.5")
        assert refused.exit_code == 2 and words in refused.stderr, refused.stderr
        assert "multical σ cannot be compared" in refused.stderr and len(refused.stderr.splitlines()) == 1
    # the table shown never matters, nor does an option no gated metric reads
    assert run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--segments", "2", "--baseline", base,
               "--max-regression", "multical-sigma=0.5").exit_code == 0
    plain = tmp_path / "plain.json"
    assert run(parquet, "--prob-col", "bad", "--save-baseline", plain).exit_code == 0
    refused = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--baseline", plain, "--max-regression",
                  "multical-sigma=0.5")
    assert refused.exit_code == 2 and "computed with no --segment-col" in refused.stderr


def test_every_output_carries_the_worst_segments(parquet):
    table = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--segments", "4")
    assert table.exit_code == 0
    assert "'bad': the 4 worst of" in table.stdout and "country=DE & " in table.stdout
    assert "multical σ ↓" in table.stdout and "ECCE/σ" in table.stdout
    markdown = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--segments", "4", "--output-format", "markdown")
    lines = markdown.stdout.splitlines()
    at = lines.index("| segment | rows | predicted | observed | ECCE | σ | ECCE/σ | p |")
    assert lines[at + 2].startswith("| country=DE & ") and len(lines) == at + 6
    text = run(parquet, "--prob-col", "good", "--prob-col", "bad", *SEGMENT_FLAGS, "--segments", "4",
               "--weight-col", "weight", "--output-format", "csv").stdout
    metrics_part, segments_part = text.split("\n\n")
    head = next(csv.reader(io.StringIO(metrics_part)))
    assert head[-3:] == ["multical", "multical_sigma", "multical_p"]
    found = list(csv.reader(io.StringIO(segments_part)))
    assert found[0] == list(SEGMENT_CSV) and len(found) == 1 + 2 * 4
    assert [r[:2] for r in found[1:3]] == [["good", "1"], ["good", "2"]] and found[5][2].startswith("country=DE & ")
    weighted = report(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--weight-col", "weight")
    first = weighted["results"][0]["segments"][0]
    assert set(first) == {"segment", "rows", "weight", "predicted", "observed", "ecce", "sigma", "ecce_sigma", "p",
                          "infinite"}
    assert first["weight"] != first["rows"] and first["infinite"] == []
    assert float(found[5][4]) == first["weight"]


def test_without_segment_columns_nothing_changes(parquet):
    got = report(parquet, "--prob-col", "bad")
    r = got["results"][0]
    assert not set(KEYS) & set(r["metrics"]) and r["segments"] is None and r["segments_checked"] is None
    assert got["segment_cols"] is None and r["infinite"] == []
    assert "\n\n" not in run(parquet, "--prob-col", "bad", "--output-format", "csv").stdout


@pytest.fixture
def certain(tmp_path):
    """p exactly 0 or 1 in the segment g=a, and one row there of the other label: its σ is 0 and
    its ECCE not, so ECCE/σ, multical σ and multical are +inf."""
    n = 200
    rng = np.random.default_rng(2)
    g = np.where(np.arange(n) < 40, "a", "b")
    p = np.where(g == "a", (np.arange(n) % 2).astype(float), rng.uniform(0.2, 0.8, n))
    y = np.where(g == "a", p.astype(int), (rng.random(n) < p).astype(int))
    y[0] = 1 - y[0]
    path = tmp_path / "certain.csv"
    path.write_text("p,label,g\n" + "".join(f"{a!r},{b},{c}\n" for a, b, c in zip(p.tolist(), y.tolist(), g)))
    return path


def test_an_infinite_multicalibration_error_is_written_as_null_and_listed(certain, tmp_path):
    got = report(certain, "--prob-col", "p", "--segment-col", "g")
    r = got["results"][0]
    assert r["metrics"]["multical"] is None and r["metrics"]["multical_sigma"] is None
    assert r["infinite"] == ["multical", "multical_sigma"] and r["metrics"]["multical_p"] == 2.220446049250313e-16
    worst = r["segments"][0]
    assert worst["segment"] == "g=a" and worst["ecce_sigma"] is None and worst["infinite"] == ["ecce_sigma"]
    assert worst["sigma"] == 0.0 and worst["ecce"] > 0
    table = run(certain, "--prob-col", "p", "--segment-col", "g")
    assert "inf" in table.stdout
    gated = run(certain, "--prob-col", "p", "--segment-col", "g", "--fail-above", "multical-sigma=5", "--json")
    assert gated.exit_code == 1 and "multical σ of 'p' is inf, above the threshold 5 by inf" in gated.stderr
    check = json.loads(gated.stdout)["gate"]["checks"][0]
    assert check["value"] is None and set(check["infinite"]) == {"value", "compared", "excess"}
    # a baseline reads +inf back: inf against inf is no regression, a finite value is better
    base = tmp_path / "inf.json"
    assert run(certain, "--prob-col", "p", "--segment-col", "g", "--save-baseline", base).exit_code == 0
    same = run(certain, "--prob-col", "p", "--segment-col", "g", "--baseline", base, "--max-regression",
               "multical-sigma=0.5")
    assert same.exit_code == 0, same.stderr


def test_the_bootstrap_withholds_the_multicalibration_error(parquet):
    got = report(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--bootstrap", "5")
    intervals = got["results"][0]["intervals"]
    assert all(intervals[k] == [None, None] for k in KEYS) and intervals["log_loss"][0] is not None
    refused = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--bootstrap", "5", "--gate-on", "upper",
                  "--fail-above", "multical-sigma=5")
    assert refused.exit_code == 2 and "it has no bootstrap interval (a maximum over many overlapping segments" \
        in refused.stderr


@pytest.mark.parametrize("args, message", [
    (["--segment-bins", "4"], "error: --segment-bins needs --segment-col"),
    (["--segments", "5"], "error: --segments needs --segment-col"),
    (["--metrics", "default,multical-p"], "error: --metrics multical-p needs --segment-col"),
    (["--fail-above", "multical-sigma=5"], "error: a gate on multical-sigma needs --segment-col"),
    (["--segment-col", "g", "--segment-bins", "0"], "error: --segment-bins 0 is out of range: it must be in [1, 100]"),
    (["--segment-col", "g", "--segment-top", "101"], "error: --segment-top 101 is out of range"),
    (["--segment-col", "g", "--segment-depth", "11"], "error: --segment-depth 11 is out of range"),
    (["--segment-col", "g", "--segment-min-rows", "0"], "error: --segment-min-rows 0 is out of range"),
    (["--segment-col", "g", "--segment-max", "0"], "error: --segment-max 0 is out of range"),
    (["--segment-col", "g", "--segments", "-1"], "error: --segments -1 is out of range"),
    (["--segment-col", "g", "--segment-col", "g"], "error: --segment-col g is given twice"),
    ([f"--segment-col=c{i}" for i in range(31)], "error: --segment-col: 31 columns of up to 4 levels each"),
    (["--segment-col", "g", "--metrics", "top-label-multical"], "error: --metrics top-label-multical: it is a K-class"),
])
def test_bad_options_are_refused_with_one_line_before_reading(args, message):
    result = run("absent.csv", *args)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(message), result.stderr
    assert len(lines) <= 2 and "Traceback" not in result.stderr and "absent.csv" not in result.stderr


def test_a_missing_segment_column_is_named(parquet):
    result = run(parquet, "--prob-col", "bad", "--segment-col", "contry")
    assert result.exit_code == 2 and "'contry'" in result.stderr and "--segment-col" in result.stderr


def test_segments_given_to_python_must_match_the_rows(rows):
    from calibcli.errors import UsageError

    with pytest.raises(UsageError, match=r"segments\['g'\] has 3 values for 3000 labels"):
        calibcli.evaluate(rows["label"], rows["good"], segments={"g": ["a", "b", "c"]})
    assert math.isfinite(calibcli.evaluate(rows["label"], rows["good"], segments={"g": list(rows["country"])})
                         ["multical_sigma"])


def test_the_html_report_carries_the_worst_segments(parquet, tmp_path):
    """`--plot FILE.html`: a "Worst segments" section whose rows are the JSON's table, cell by cell."""
    pytest.importorskip("matplotlib")
    from html.parser import HTMLParser

    page = tmp_path / "report.html"
    doc = report(parquet, "--prob-col", "good", "--prob-col", "bad", *SEGMENT_FLAGS, "--segments", "3",
                 "--plot", page)

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.tables[-1][-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    text = page.read_text()
    assert ">Worst segments" in text  # the section's heading
    parser = Cells()
    parser.feed(text[text.index(">Worst segments"):])
    headers = ["segment", "rows", "predicted", "observed", "ECCE", "σ", "ECCE/σ", "p"]
    tables = [t for t in parser.tables if t and t[0] == headers]
    assert len(tables) == 2  # one table per prediction
    for table, result in zip(tables, doc["results"]):
        assert [row[0] for row in table[1:]] == [s["segment"] for s in result["segments"]]
        assert [int(row[1]) for row in table[1:]] == [s["rows"] for s in result["segments"]]
        shown = [float(row[6]) for row in table[1:]]
        assert shown == pytest.approx([s["ecce_sigma"] for s in result["segments"]], rel=5e-3)
    assert tables[1][1][0].startswith("country=DE & ")
    plain = tmp_path / "plain.html"
    assert run(parquet, "--prob-col", "bad", "--plot", plain).exit_code == 0
    assert "Worst segments" not in plain.read_text()


@pytest.mark.parametrize("name", ["categorical", "numeric", "mixed", "many", "degenerate"])
def test_the_command_equals_mcgrad_on_the_committed_references(name, tmp_path):
    """`calib evaluate FILE --segment-col ...` on MCGrad's cases written to Parquet (None and NaN
    as nulls, weights with zeros) gives MCGrad 0.1.5's mce, mce_sigma and mce_pvalue
    (tests/fixtures/mcgrad/) to 1e-9, +inf written as null and listed."""
    from mcgrad_cases import CASES
    from repo import FIXTURES

    ref = json.loads((FIXTURES / "mcgrad" / f"{name}.json").read_text())["float64"]
    case = CASES[name]()
    data = {"p": case["p"], "y": case["y"], **case["columns"]}
    if case["w"] is not None:
        data["w"] = case["w"]
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({k: pa.array(v, from_pandas=True) for k, v in data.items()}), path)
    args = [path, "--prob-col", "p", "--label-col", "y", *(["--weight-col", "w"] if case["w"] is not None else []),
            *[a for c in case["columns"] for a in ("--segment-col", c)]]
    got = report(*args)["results"][0]
    metrics = {k: (math.inf if k in got["infinite"] else got["metrics"][k]) for k in KEYS}
    for key, theirs in (("multical", "mce"), ("multical_sigma", "mce_sigma"), ("multical_p", "mce_pvalue")):
        want = ref[theirs]
        if math.isinf(want):
            assert metrics[key] == math.inf, key
        else:
            assert abs(metrics[key] - want) <= 1e-9 * max(1.0, abs(want)), (key, metrics[key], want)
    assert got["segments_checked"] == len(ref["segments"]["rows"])
    assert got["segments_capped"] == (name == "many")


def test_the_summary_carries_the_worst_segments(parquet, tmp_path):
    """`--summary FILE.md`: after the verdict and the gates, "### Worst segments" with each
    prediction's table, its rows the JSON's (worst first), whether the gate passed or failed."""
    summary = tmp_path / "summary.md"
    doc = report(parquet, "--prob-col", "good", "--prob-col", "bad", *SEGMENT_FLAGS, "--segments", "3",
                 "--summary", summary)
    lines = summary.read_text().splitlines()
    at = lines.index("### Worst segments")
    assert lines.index("### Gates") < at
    header = "| segment | rows | predicted | observed | ECCE | σ | ECCE/σ | p |"
    starts = [i for i, line in enumerate(lines) if line == header]
    assert len(starts) == 2 and all(i > at for i in starts)
    for start, result in zip(starts, doc["results"]):
        rows = lines[start + 2:start + 2 + len(result["segments"])]
        shown = [line.split(" | ")[0].removeprefix("| ").replace("\\", "") for line in rows]
        assert shown == [s["segment"] for s in result["segments"]]
        assert [float(line.split(" | ")[6]) for line in rows] == pytest.approx(
            [s["ecce_sigma"] for s in result["segments"]], rel=5e-3)
    failed = tmp_path / "failed.md"
    gated = run(parquet, "--prob-col", "bad", *SEGMENT_FLAGS, "--fail-above", "multical-sigma=5", "--summary", failed)
    assert gated.exit_code == 1
    text = failed.read_text()
    assert "**Exit 1**" in text and "### Worst segments" in text and "| country=DE & " in text
    plain = tmp_path / "plain.md"
    assert run(parquet, "--prob-col", "bad", "--summary", plain).exit_code == 0
    assert "Worst segments" not in plain.read_text()
