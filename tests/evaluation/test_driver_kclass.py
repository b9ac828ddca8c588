"""`calib evaluate --prob-cols` through the real CLI: the K-class metrics (against scikit-learn
and the library functions), streaming in many batches, gates, baselines, bootstrap, plots
and the one-line refusals."""

import json

import calibcli

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.evaluation.metrics import kclass as km

runner = CliRunner()
CLASSES = ["car", "cat", "dog"]  # the natural order of p_car, p_cat, p_dog


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2 400 rows of 3 classes: `p_*` calibrated, `q_*` overconfident (logits x 1.8)."""
    rng = np.random.default_rng(8)
    n = 2400
    z = rng.normal(size=(n, 3)) * 2
    P, Q = softmax(z), softmax(1.8 * z)
    y = np.array([rng.choice(3, p=row) for row in P])
    w = rng.integers(1, 4, n).astype(float)
    table = pa.table({"label": np.array(CLASSES)[y],
                      **{f"p_{c}": P[:, j] for j, c in enumerate(CLASSES)},
                      **{f"q_{c}": Q[:, j] for j, c in enumerate(CLASSES)}, "w": w,
                      "probs": pa.array(list(P), pa.list_(pa.float64()))})
    folder = tmp_path_factory.mktemp("kclass")
    pq.write_table(table, folder / "k.parquet", row_group_size=40)  # 60 batches
    table.drop(["probs"]).to_pandas().to_csv(folder / "k.csv", index=False, float_format="%.17g")
    return {"dir": folder, "y": y, "P": P, "Q": Q, "w": w}


def run(*args):
    return runner.invoke(app, ["evaluate", *map(str, args)])


def report(*args):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", ["k.parquet", "k.csv"])
def test_metrics_match_sklearn_and_the_library(data, name):
    out = report(data["dir"] / name, "--prob-cols", "p_*", "--prob-cols", "q_car,q_cat,q_dog")
    assert out["positives"] is None and out["rows"] == 2400
    y = data["y"]
    for result, P in zip(out["results"], (data["P"], data["Q"])):
        assert result["classes"] == CLASSES
        m = result["metrics"]
        assert list(m) == list(km.KCLASS_METRICS)
        assert m["log_loss"] == pytest.approx(log_loss(y, P), rel=1e-12)
        assert m["accuracy"] == pytest.approx(accuracy_score(y, P.argmax(1)), rel=1e-12)
        assert m["auc"] == pytest.approx(roc_auc_score(y, P, multi_class="ovr"), rel=1e-12)
        direct = km.compute_all(y, P)
        for k in direct:
            assert m[k] == pytest.approx(direct[k], rel=1e-10, abs=1e-14), k
    assert out["results"][1]["metrics"]["top_label_ece"] > 2 * out["results"][0]["metrics"]["top_label_ece"]


def test_weights_bins_strategy_and_a_list_column(data):
    args = ("--weight-col", "w", "--ece-bins", "7", "--ece-strategy", "quantile")
    out = report(data["dir"] / "k.parquet", "--prob-cols", "probs", "--classes", ",".join(CLASSES), *args)
    m = out["results"][0]["metrics"]
    direct = km.compute_all(data["y"], data["P"], data["w"], 7, "quantile")
    for k in direct:
        assert m[k] == pytest.approx(direct[k], rel=1e-10, abs=1e-14), k
    assert out["ece_bins"] == 7 and out["weight_col"] == "w"


def test_integer_labels_are_column_indices(tmp_path, data):
    path = tmp_path / "codes.parquet"
    P = data["P"]
    pq.write_table(pa.table({"label": data["y"], "a": P[:, 0], "b": P[:, 1], "c": P[:, 2]}), path)
    m = report(path, "--prob-cols", "a,b,c")["results"][0]["metrics"]
    assert m["log_loss"] == pytest.approx(log_loss(data["y"], P), rel=1e-12)


def test_gates_with_directions(data):
    path = data["dir"] / "k.parquet"
    failed = run(path, "--prob-cols", "p_*", "--prob-cols", "q_*", "--fail-above", "top-label-ece=0.05")
    assert failed.exit_code == 1
    assert "top-label ECE of 'q_*'" in failed.stderr and "1 of 2 gate checks failed" in failed.stderr
    assert run(path, "--prob-cols", "p_*", "--fail-below", "accuracy=0.5", "--fail-below", "auc=0.8",
               "--fail-above", "classwise-ece=0.05").exit_code == 0
    low = run(path, "--prob-cols", "p_*", "--fail-below", "accuracy=0.99")
    assert low.exit_code == 1 and "accuracy of 'p_*'" in low.stderr and "below" in low.stderr


def test_baseline_regression_follows_each_metric_direction(data, tmp_path):
    path = data["dir"] / "k.parquet"
    base = tmp_path / "base.json"
    assert run(path, "--prob-cols", "p_*", "--save-baseline", base).exit_code == 0
    saved = json.loads(base.read_text())["results"][0]["metrics"]
    same = run(path, "--prob-cols", "p_*", "--baseline", base, "--max-regression", "accuracy=0",
               "--max-regression", "top-label-mce=0")
    assert same.exit_code == 0, same.stderr
    # the same name on worse probabilities: accuracy may drop, ECE may rise
    worse = tmp_path / "worse.parquet"
    t = pq.read_table(path)
    for c in CLASSES:
        t = t.set_column(t.column_names.index(f"p_{c}"), f"p_{c}", t.column(f"q_{c}"))
    pq.write_table(t, worse)
    out = run(worse, "--prob-cols", "p_*", "--baseline", base, "--max-regression", "top-label-ece=10%")
    assert out.exit_code == 1 and "above the baseline" in out.stderr
    assert saved["top_label_ece"] < km.top_label_ece(data["y"], data["Q"])


def test_bootstrap_is_seeded_and_brackets_the_point(data):
    path = data["dir"] / "k.parquet"
    a = report(path, "--prob-cols", "p_*", "--bootstrap", "60", "--seed", "4")["results"][0]
    b = report(path, "--prob-cols", "p_*", "--bootstrap", "60", "--seed", "4")["results"][0]
    c = report(path, "--prob-cols", "p_*", "--bootstrap", "60", "--seed", "5")["results"][0]
    assert a["intervals"] == b["intervals"] != c["intervals"]
    for k in ("log_loss", "brier", "accuracy", "auc"):
        lo, hi = a["intervals"][k]
        assert lo < a["metrics"][k] < hi, k
    assert a["intervals"]["top_label_mce"] == [None, None]
    upper = run(path, "--prob-cols", "p_*", "--bootstrap", "60", "--gate-on", "upper",
                "--fail-below", f"accuracy={a['intervals']['accuracy'][1] + 1e-9}")
    assert upper.exit_code == 1


def test_bootstrap_replicate_is_the_weighted_metric(data):
    """One replicate equals compute_all with that replicate's Poisson counts as weights."""
    from calibcli.evaluation.bootstrap import BootstrapPlan, kclass_replicates

    y, P = data["y"][:300], data["P"][:300]
    got, point = kclass_replicates(y, P, BootstrapPlan(1, 3))
    w = np.random.default_rng(3).poisson(1.0, 300).astype(float)
    direct, whole = km.compute_all(y, P, w), km.compute_all(y, P)
    for k, values in got.items():
        assert values[0] == pytest.approx(direct[k], rel=1e-12), k
        assert point[k] == pytest.approx(whole[k], rel=1e-12), k


def test_plots(data, tmp_path):
    path = data["dir"] / "k.parquet"
    text = run(path, "--prob-cols", "p_*", "--plot", "-")
    assert text.exit_code == 0 and "top-label reliability of 'p_*'" in text.stdout
    png = tmp_path / "r.png"
    assert run(path, "--prob-cols", "p_*", "--plot", png).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = tmp_path / "r.html"
    assert run(path, "--prob-cols", "p_*", "--prob-cols", "q_*", "--plot", page).exit_code == 0
    html = page.read_text()
    assert "2400 rows, 3 classes" in html and "top-label ECE" in html and "confidence" in html
    out = report(path, "--prob-cols", "p_*", "--plot", tmp_path / "s.svg")["results"][0]
    conf, right = data["P"].max(1), data["P"].argmax(1) == data["y"]
    bins = np.minimum((conf * 10).astype(int), 9)  # the bins of top-label ECE: 10 of equal width
    rows = np.bincount(bins, minlength=10)
    assert sum(out["histogram"]) == 2400 and [b["rows"] for b in out["reliability"]] == rows[rows > 0].tolist()
    rate = np.bincount(bins, weights=right, minlength=10)[rows > 0] / rows[rows > 0]
    assert [b["positive_rate"] for b in out["reliability"]] == pytest.approx(rate, abs=1e-12)


def test_csv_and_markdown(data):
    path = data["dir"] / "k.parquet"
    csv = run(path, "--prob-cols", "p_*", "--output-format", "csv").stdout.splitlines()
    assert csv[0] == ("name,kind,calibrated,direction,where_p_min,where_p_max,where_predicted,where_observed,verdict,"
                      + ",".join(km.KCLASS_METRICS))
    assert "top-label ECE" in run(path, "--prob-cols", "p_*", "--output-format", "markdown").stdout


@pytest.mark.parametrize("args, message", [
    (["--prob-cols", "x_*"], "pattern 'x_*' matches no column"),
    (["--prob-cols", "p_cat"], "K-class scores need 2 or more columns"),
    (["--prob-cols", "p_*", "--prob-col", "p_cat"], "cannot be evaluated in one run"),
    (["--prob-cols", "p_*", "--field-col", "label"], "--field-col applies to binary probabilities"),
    (["--prob-cols", "p_*", "--fail-above", "calbin=0.1"], "a gate on calbin: it is not a K-class metric"),
    (["--prob-col", "p_cat", "--fail-above", "accuracy=0.1"], "a gate on accuracy: it is a K-class metric"),
    (["--prob-col", "p_cat", "--classes", "a,b"], "--classes applies to K-class predictions"),
    (["--prob-cols", "p_*", "--classes", "a,b"], "--classes names 2 classes"),
    (["--prob-cols", "p_*", "--classes", "a,b,c"], "row 1: label 'dog' is not a class"),
    (["--prob-cols", "p_*", "--weight-col", "w", "--bootstrap", "5"], "--bootstrap cannot resample weighted"),
    (["--prob-cols", "p_*", "--bootstrap", "5", "--gate-on", "worst", "--fail-above", "top-label-mce=0.9"],
     "--gate-on worst on top-label-mce: it has no bootstrap interval"),
])
def test_refusals_are_one_line_exit_2(data, args, message):
    result = run(data["dir"] / "k.parquet", *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr


def test_bad_rows_name_file_column_and_row(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("label,p_a,p_b\na,0.5,0.5\nb,0.7,0.7\n")
    result = run(path, "--prob-cols", "p_*")
    assert result.exit_code == 2
    assert f"{path}: columns p_a,p_b, row 2: the probabilities sum to 1.4" in result.stderr
    path.write_text("label,p_a,p_b\na,0.5,0.5\nb,-0.5,1.5\n")
    assert "column 'p_a', row 2: probability -0.5 is negative" in run(path, "--prob-cols", "p_*").stderr


@pytest.fixture(scope="module")
def kmaps(data):
    """A temperature map fitted on `q_*` (it records those columns), and a one-vs-rest
    isotonic map fitted on `p_*`, both saved as JSON."""
    from calibcli.maps import classmap, envelope as maps

    y = np.array(CLASSES)[data["y"]]
    temp = calibcli.fit(data["Q"], y, "temperature", score_cols=[f"q_{c}" for c in CLASSES])
    ovr = calibcli.fit(data["P"], y, "isotonic", score_cols=[f"p_{c}" for c in CLASSES])
    paths = []
    for name, fitted in (("temp.json", temp), ("ovr.json", ovr)):
        maps.save_map(fitted, str(data["dir"] / name))
        paths.append(str(data["dir"] / name))
    return {"temp": (paths[0], temp), "ovr": (paths[1], ovr)}


def test_multiclass_maps_read_their_score_columns(data, kmaps):
    temp_path, temp = kmaps["temp"]
    ovr_path, ovr = kmaps["ovr"]
    out = report(data["dir"] / "k.parquet", "--prob-cols", "q_*", "--map", temp_path, "--map", ovr_path)
    assert [(r["name"], r["kind"]) for r in out["results"]] == [("q_*", "column"), (temp_path, "map"),
                                                                 (ovr_path, "map")]
    for r, P in zip(out["results"], (data["Q"], temp.predict(data["Q"]), ovr.predict(data["P"]))):
        direct = km.compute_all(data["y"], P)
        for k in direct:
            assert r["metrics"][k] == pytest.approx(direct[k], rel=1e-10, abs=1e-14), (r["name"], k)
    # temperature scaling fixes the overconfident q_*
    assert out["results"][1]["metrics"]["log_loss"] < out["results"][0]["metrics"]["log_loss"]
    assert out["results"][1]["metrics"]["top_label_ece"] < out["results"][0]["metrics"]["top_label_ece"]


def test_score_cols_points_a_map_at_other_columns(data, kmaps):
    temp_path, temp = kmaps["temp"]
    out = report(data["dir"] / "k.parquet", "--map", temp_path, "--score-cols", "p_*")
    assert out["score_col"] == "p_*"
    direct = km.compute_all(data["y"], temp.predict(data["P"]))
    assert out["results"][0]["metrics"]["log_loss"] == pytest.approx(direct["log_loss"], rel=1e-12)


def test_multiclass_map_refusals(data, kmaps, tmp_path):
    from calibcli.maps import envelope as maps

    temp_path, _ = kmaps["temp"]
    binary = tmp_path / "binary.json"
    import calibcli

    maps.save_map(calibcli.fit(data["P"][:, 0], (data["y"] == 0).astype(float), "logistic"), str(binary))
    mixed = run(data["dir"] / "k.parquet", "--map", temp_path, "--map", binary, "--score-col", "p_car")
    assert mixed.exit_code == 2 and "cannot be evaluated in one run" in mixed.stderr
    wrong_k = run(data["dir"] / "k.parquet", "--map", temp_path, "--score-cols", "p_car,p_cat")
    assert wrong_k.exit_code == 2
    assert f"--score-cols 'p_car,p_cat' gives 2 columns but the map {temp_path} has 3 classes" in wrong_k.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("label,q_car,q_cat,q_dog\ncar,0.2,0.3,0.5\ndog,0.2,0.3,0.6\n")
    out = run(bad, "--map", temp_path)
    assert out.exit_code == 2 and f"{bad}: columns q_car,q_cat,q_dog, row 2: the probabilities sum to" in out.stderr
    assert run(data["dir"] / "k.parquet", "--prob-col", "p_car", "--score-cols", "p_*").exit_code == 2


def test_baseline_with_other_bins_is_refused_for_binned_metrics(data, tmp_path):
    path = data["dir"] / "k.parquet"
    base = tmp_path / "base.json"
    assert run(path, "--prob-cols", "p_*", "--save-baseline", base).exit_code == 0
    refused = run(path, "--prob-cols", "p_*", "--ece-bins", "15", "--baseline", base,
                  "--max-regression", "classwise-ece=0.01")
    assert refused.exit_code == 2
    assert "baseline was computed with --ece-bins 10, this run uses --ece-bins 15" in refused.stderr
    # log-loss does not depend on the bins: the same baseline compares
    assert run(path, "--prob-cols", "p_*", "--ece-bins", "15", "--baseline", base,
               "--max-regression", "log-loss=0").exit_code == 0
    other = run(path, "--prob-cols", "q_*", "--baseline", base, "--max-regression", "log-loss=0")
    assert other.exit_code == 2 and "baseline is for 'p_*', this run evaluates 'q_*'" in other.stderr


def test_diagram_data_is_of_the_top_label(data, tmp_path):
    """--diagram corp / smooth give the binary curves of (confidence, top class right)."""
    from calibcli.evaluation.metrics import corp, binary as metrics, smooth

    path = data["dir"] / "k.parquet"
    conf, right = data["P"].max(1), (data["P"].argmax(1) == data["y"]).astype(float)
    v, n0, n1 = metrics.distribution(right, conf)
    got = report(path, "--prob-cols", "p_*", "--plot", tmp_path / "c.svg", "--bands", "20", "--seed", "2")
    assert got["results"][0]["corp"] == corp.diagram(v, n1, n0, 20, 2)
    got = report(path, "--prob-cols", "p_*", "--plot", tmp_path / "s.svg", "--diagram", "smooth")
    assert got["results"][0]["smooth"]["rate"] == pytest.approx(smooth.smooth_curve(v, n0, n1)[1].tolist(), abs=1e-12)
