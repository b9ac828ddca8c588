"""K-class scores through the CLI: `fit --score-cols` writes a K-class map that predicts what the
Python API predicts, `apply` streams K columns `calibrated_<class>` (files, pipes, parts),
`compare --score-cols`, and every bad input is one line naming file, column and row, exit 2,
no output."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.maps import envelope as maps
from calibcli.cli.app import app
from repo import REPO

DATA = REPO / "examples" / "data"
CLASSES = ["car", "cat", "dog"]
runner = CliRunner()


def _run(args):
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _scores(n=600, seed=0, k=3, logits=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2.0, (n, k))
    y = np.array([rng.choice(k, p=np.exp(r / 2) / np.exp(r / 2).sum()) for r in z])
    if logits:
        return z, y
    P = np.exp(z - z.max(axis=1, keepdims=True))
    return P / P.sum(axis=1, keepdims=True), y


def _table(P, y, names=CLASSES, prefix="p_", labels="names"):
    cols = {"id": pa.array(np.arange(len(y)))}
    cols.update({f"{prefix}{c}": pa.array(P[:, j]) for j, c in enumerate(names)})
    cols["label"] = pa.array([names[i] for i in y]) if labels == "names" else pa.array(y)
    return pa.table(cols)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("k")
    P, y = _scores()
    pacsv.write_csv(_table(P, y), d / "cal.csv")
    Pt, yt = _scores(n=900, seed=1)
    pq.write_table(_table(Pt, yt), d / "test.parquet", row_group_size=200)
    pacsv.write_csv(_table(Pt, yt), d / "test.csv")
    return d, (P, y), (Pt, yt)


@pytest.mark.parametrize("method", ["temperature", "isotonic"])
def test_fit_map_equals_python_api_and_apply_writes_k_columns(files, tmp_path, method):
    d, (P, y), (Pt, yt) = files
    m = tmp_path / "m.json"
    code, _, err = _run(["fit", d / "cal.csv", "--score-cols", "p_*", "--method", method, "-o", m])
    assert code == 0, err
    assert f"fitted {method}" in err and "3 classes (car, cat, dog)" in err
    assert "labels as class names" in err and "scores read as probability (auto)" in err
    env = json.loads(m.read_text())
    assert env["classes"] == CLASSES and env["score_cols"] == ["p_car", "p_cat", "p_dog"]
    assert env["score_kind"] == "probability"
    cmap = calibcli.fit(P, np.array(CLASSES)[y], method=method)
    out = tmp_path / "out.parquet"
    code, _, err = _run(["apply", m, d / "test.parquet", "-o", out])
    assert code == 0, err
    table = pq.read_table(out)
    assert table.column_names[-3:] == [f"calibrated_{c}" for c in CLASSES]
    Q = np.column_stack([table.column(f"calibrated_{c}").to_numpy() for c in CLASSES])
    np.testing.assert_array_equal(Q, cmap.predict(Pt))
    assert np.all(np.abs(Q.sum(axis=1) - 1) <= 1e-12)
    assert table.num_rows == 900 and table.column("id").to_pylist() == list(range(900))


def test_apply_in_a_pipe_and_with_output_col_and_reordered_columns(files, tmp_path):
    d, _, (Pt, yt) = files
    m = tmp_path / "m.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-o", m])[0] == 0
    want = maps.load_map(str(m))[0].predict(Pt)
    bin_ = str(Path(sys.executable).parent / "calib")
    shuffled = tmp_path / "shuffled.csv"
    t = _table(Pt, yt)
    pacsv.write_csv(t.select(["label", "p_dog", "id", "p_car", "p_cat"]), shuffled)
    out = subprocess.run(f"cat '{shuffled}' | '{bin_}' apply '{m}' - --output-col q", shell=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = pacsv.read_csv(pa.py_buffer(out.stdout))
    assert got.column_names == ["label", "p_dog", "id", "p_car", "p_cat", "q_car", "q_cat", "q_dog"]
    Q = np.column_stack([got.column(f"q_{c}").to_numpy() for c in CLASSES])
    np.testing.assert_allclose(Q, want, rtol=0, atol=1e-15)  # CSV text round trip of the scores


def test_score_cols_override_reads_other_columns(files, tmp_path):
    d, _, (Pt, yt) = files
    m = tmp_path / "m.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-o", m])[0] == 0
    renamed = tmp_path / "renamed.parquet"
    pq.write_table(_table(Pt, yt, prefix="prob_"), renamed)
    out = tmp_path / "o.parquet"
    code, _, err = _run(["apply", m, renamed, "-o", out])
    assert code == 2 and "no column 'p_car'" in err and "--score-cols" in err and not out.exists()
    code, _, err = _run(["apply", m, renamed, "--score-cols", "prob_*", "-o", out])
    assert code == 0, err
    got = pq.read_table(out)
    Q = np.column_stack([got.column(f"calibrated_{c}").to_numpy() for c in CLASSES])
    np.testing.assert_array_equal(Q, maps.load_map(str(m))[0].predict(Pt))


def test_list_column_and_parts_directory(files, tmp_path):
    _, (P, y), (Pt, yt) = files
    cal = tmp_path / "cal.parquet"
    pq.write_table(pa.table({"probs": pa.array(list(P)), "label": pa.array(y)}), cal)
    m = tmp_path / "m.json"
    code, _, err = _run(["fit", cal, "--score-cols", "probs", "-m", "temperature", "--classes", "a,b,c", "-o", m])
    assert code == 0, err
    assert "labels as 0-based class indices" in err
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(3):
        rows = slice(300 * i, 300 * (i + 1))
        arr = pa.FixedSizeListArray.from_arrays(pa.array(Pt[rows].ravel()), 3)
        pq.write_table(pa.table({"probs": arr}), parts / f"part-{i}.parquet")
    out = tmp_path / "out"
    code, _, err = _run(["apply", m, parts, "-o", out])
    assert code == 0, err
    got = pq.read_table(out)
    Q = np.column_stack([got.column(f"calibrated_{c}").to_numpy() for c in "abc"])
    np.testing.assert_array_equal(np.sort(Q, axis=0), np.sort(maps.load_map(str(m))[0].predict(Pt), axis=0))


def test_logits_and_index_labels(tmp_path):
    Z, y = _scores(logits=True)
    f = tmp_path / "z.csv"
    pacsv.write_csv(_table(Z, y, names=["0", "1", "2"], prefix="z", labels="index"), f)
    m = tmp_path / "m.json"
    code, _, err = _run(["fit", f, "--score-cols", "z0,z1,z2", "-m", "temperature", "-o", m])
    assert code == 0, err
    assert "scores read as logit (auto)" in err and "labels as class names" in err
    env = json.loads(m.read_text())
    assert env["score_kind"] == "logit" and env["classes"] == ["0", "1", "2"]
    np.testing.assert_array_equal(maps.load_map(str(m))[0].predict(Z), calibcli.fit(
        Z, y.astype(str), method="temperature", score_kind="logit", classes=["0", "1", "2"]).predict(Z))


def test_compare_score_cols_and_best_map(files, tmp_path):
    d, (P, y), _ = files
    best = tmp_path / "best.json"
    code, out, err = _run(["compare", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-m", "isotonic",
                           "--json", "-o", best, "--pick", "best"])
    assert code == 0, err
    report = json.loads(out)
    assert [m["method"] for m in report["methods"]] == ["none", "temperature", "isotonic"]
    assert set(report["methods"][1]["mean"]) == {"log_loss", "brier", "top_label_ece", "classwise_ece"}
    assert report["best"] in ("temperature", "isotonic")
    # the folds' log-loss is the out-of-fold log-loss of the method fitted on the other folds
    from calibcli.fitting.compare import fold_ids
    from calibcli.evaluation.metrics import kclass as kclass_metrics

    ids = fold_ids(y.size, 5, 0)
    first = calibcli.fit(P[ids != 0], np.array(CLASSES)[y[ids != 0]], method="temperature", classes=CLASSES)
    assert report["methods"][1]["folds"]["log_loss"][0] == pytest.approx(
        kclass_metrics.log_loss(y[ids == 0], first.predict(P[ids == 0])), rel=1e-12)
    assert json.loads(best.read_text())["method"] == report["best"]


def _bad_file(tmp_path, name, columns):
    f = tmp_path / name
    pacsv.write_csv(pa.table(columns), f)
    return f


@pytest.mark.parametrize("columns, args, message", [
    ({"p_a": [0.5, 0.5], "q": [0.5, 0.5], "label": ["a", "a"]}, ["--score-cols", "p_a"],
     "--score-cols 'p_a' gives only column 'p_a': K-class scores need 2 or more columns"),
    ({"p_a": [0.5, 0.5], "p_b": [0.5, 0.5], "label": ["a", "b"]}, ["--score-cols", "q_*"],
     "--score-cols pattern 'q_*' matches no column"),
    ({"p_a": [0.5, -0.5], "p_b": [0.5, 1.5], "label": ["a", "b"]}, ["--score-cols", "p_*", "--score-kind", "probability"],
     "column 'p_a', row 2: probability -0.5 is negative"),
    ({"p_a": [0.5, 0.5], "p_b": [0.5, 0.6], "label": ["a", "b"]}, ["--score-cols", "p_*", "--score-kind", "probability"],
     "columns p_a,p_b, row 2: the probabilities sum to 1.1, not 1"),
    ({"p_a": [0.5, float("nan")], "p_b": [0.5, 0.5], "label": ["a", "b"]}, ["--score-cols", "p_*"],
     "column 'p_a', row 2: score nan is not finite"),
    ({"p_a": [0.5, 0.5, 0.5], "p_b": [0.5, 0.5, 0.5], "label": ["a", "b", "c"]}, ["--score-cols", "p_*"],
     "column 'label', row 3: label 'c' is not a class"),
])
def test_bad_input_is_one_line_exit_2_no_output(tmp_path, columns, args, message):
    f = _bad_file(tmp_path, "bad.csv", columns)
    out = tmp_path / "m.json"
    code, stdout, err = _run(["fit", f, *args, "-o", out])
    assert code == 2, err
    assert err.startswith("error: ") and f"bad.csv: {message}" in err.splitlines()[0]
    assert not out.exists() and stdout == ""


def test_k_at_apply_time_differs_from_the_map(files, tmp_path):
    d, _, (Pt, yt) = files
    m = tmp_path / "m.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-o", m])[0] == 0
    four = _bad_file(tmp_path, "four.csv", {"p_a": [0.25], "p_b": [0.25], "p_c": [0.25], "p_d": [0.25]})
    out = tmp_path / "o.csv"
    code, _, err = _run(["apply", m, four, "--score-cols", "p_*", "-o", out])
    assert code == 2 and "four.csv: --score-cols 'p_*' gives 4 columns but the map" in err
    assert "has 3 classes" in err and not out.exists()


def test_absent_class_warns_and_strict_refuses(tmp_path):
    f = _bad_file(tmp_path, "absent.csv", {"p_a": [0.7, 0.2, 0.6, 0.1], "p_b": [0.2, 0.7, 0.3, 0.8],
                                           "p_c": [0.1, 0.1, 0.1, 0.1], "label": ["a", "b", "a", "b"]})
    out = tmp_path / "m.json"
    code, _, err = _run(["fit", f, "--score-cols", "p_*", "-m", "temperature", "-o", out])
    assert code == 0, err
    assert "warning: class(es) c have no rows in" in err and "class code" not in err
    assert maps.load_map(str(out))[0].predict(np.array([[0.1, 0.1, 0.8]]))[0, 2] > 0
    out.unlink()
    code, _, err = _run(["--strict", "fit", f, "--score-cols", "p_*", "-m", "temperature", "-o", out])
    assert code == 2 and "class(es) c have no rows" in err and "(an error with --strict)" in err
    assert not out.exists()


def test_binary_and_kclass_options_do_not_mix(files, tmp_path):
    d, _, _ = files
    code, _, err = _run(["fit", d / "cal.csv", "--score-cols", "p_*", "--score-col", "p_car"])
    assert code == 2 and "--score-cols (K classes) cannot be combined with --score-col" in err
    code, _, err = _run(["fit", d / "cal.csv", "--classes", "a,b,c"])
    assert code == 2 and "--classes is for K-class scores" in err
    code, _, err = _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "field-aware"])
    assert code == 2 and "field-aware" in err


@pytest.mark.parametrize("chunk", [7, 64, 1 << 16])
def test_apply_in_chunks_predicts_the_same_and_names_the_true_row(files, tmp_path, monkeypatch, chunk):
    from calibcli.applying import plans as applying_kclass

    monkeypatch.setattr(applying_kclass, "CHUNK_ROWS", chunk)
    d, _, (Pt, yt) = files
    m = tmp_path / "m.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-o", m])[0] == 0
    out = tmp_path / "o.parquet"
    assert _run(["apply", m, d / "test.parquet", "-o", out])[0] == 0
    got = pq.read_table(out)
    Q = np.column_stack([got.column(f"calibrated_{c}").to_numpy() for c in CLASSES])
    np.testing.assert_array_equal(Q, maps.load_map(str(m))[0].predict(Pt))
    test_apply_names_the_row_that_is_not_a_probability(files, tmp_path)


def test_apply_names_the_row_that_is_not_a_probability(files, tmp_path):
    d, _, (Pt, yt) = files
    m = tmp_path / "m_bad.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-o", m])[0] == 0
    bad = Pt.copy()
    bad[700, 1] += 0.01  # row 701 sums to 1.01
    src = tmp_path / "bad.parquet"
    pq.write_table(_table(bad, yt), src)
    out = tmp_path / "o_bad.parquet"
    code, _, err = _run(["apply", m, src, "-o", out])
    assert code == 2 and "bad.parquet: columns p_car,p_cat,p_dog, row 701: the probabilities sum to" in err
    assert not out.exists()


def test_frequency_weights_are_duplicated_rows(tmp_path):
    P, y = _scores(n=300, seed=5)
    w = np.random.default_rng(6).integers(0, 4, y.size)
    weighted, repeated = tmp_path / "w.csv", tmp_path / "r.csv"
    t = _table(P, y)
    pacsv.write_csv(t.append_column("w", pa.array(w)), weighted)
    pacsv.write_csv(t.take(pa.array(np.repeat(np.arange(y.size), w))), repeated)
    maps_ = []
    for f, extra in ((weighted, ["--weight-col", "w"]), (repeated, [])):
        out = tmp_path / f"{f.stem}.json"
        code, _, err = _run(["fit", f, "--score-cols", "p_*", "-m", "temperature", "-o", out, *extra])
        assert code == 0, err
        maps_.append(json.loads(out.read_text()))
    assert maps_[0]["training"]["weight_col"] == "w"
    assert maps_[0]["state"]["temperature"] == pytest.approx(maps_[1]["state"]["temperature"], rel=1e-9)


@pytest.mark.parametrize("method", ["temperature", "isotonic"])
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_on_invalid_null_and_skip_write_each_valid_row_as_alone(files, tmp_path, method, fmt):
    """Empty, NaN, infinite and not-a-probability rows: K nulls (`null`) or left out (`skip`),
    across batches; every other row gets what the map gives it alone."""
    d, _, (Pt, yt) = files
    m = tmp_path / "m.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", method, "-o", m])[0] == 0
    cmap = maps.load_map(str(m))[0]
    P = Pt.copy()
    P[3, 0], P[250, 2], P[601, 1] = np.nan, np.inf, P[601, 1] + 0.01
    empty = 420
    table = _table(P, yt)
    col = table.column("p_cat").to_numpy().copy()
    table = table.set_column(table.schema.get_field_index("p_cat"), "p_cat",
                             pa.array(col, mask=np.arange(len(col)) == empty))
    src = tmp_path / f"gaps.{fmt}"
    (pq.write_table(table, src, row_group_size=200) if fmt == "parquet" else pacsv.write_csv(table, src))
    bad = np.isin(np.arange(len(yt)), [3, 250, 420, 601])
    expect = np.vstack([cmap.predict(P[i:i + 1]) for i in np.flatnonzero(~bad)])
    for policy in ("null", "skip"):
        out = tmp_path / f"o_{policy}.parquet"
        code, _, err = _run(["apply", m, src, "--on-invalid", policy, "-o", out])
        assert code == 0 and "4 of 900 rows had an invalid score" in err
        got = pq.read_table(out)
        Q = np.column_stack([got.column(f"calibrated_{c}").to_numpy(zero_copy_only=False) for c in CLASSES])
        if policy == "null":
            assert got.num_rows == len(yt)
            assert np.isnan(Q[bad]).all() and all(got.column(f"calibrated_{c}").null_count == 4 for c in CLASSES)
            Q = Q[~bad]
        else:
            assert got.num_rows == len(yt) - 4
            np.testing.assert_array_equal(got.column("id").to_numpy(), np.flatnonzero(~bad))
        np.testing.assert_allclose(Q, expect, rtol=0, atol=1e-15)
        np.testing.assert_allclose(Q.sum(axis=1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["temperature", "vector", "dirichlet", "isotonic"])
def test_apply_on_parquet_equals_load_map_predict_bit_for_bit_k10(tmp_path, method):
    """apply reads each batch's columns into a Fortran-ordered matrix; the map must predict the
    same bits as on the C-ordered array a user passes to `load_map(m).predict`."""
    names = [str(i) for i in range(10)]
    P, y = _scores(n=700, seed=4, k=10)
    pq.write_table(_table(P, y, names=names), tmp_path / "k10.parquet", row_group_size=300)
    m, out = tmp_path / "m.json", tmp_path / "out.parquet"
    args = ["--param", "reg_lambda=0.01", "--param", "reg_mu=0.01"] if method == "dirichlet" else []
    code, _, err = _run(["fit", tmp_path / "k10.parquet", "--score-cols", "p_*", "--method", method, "-o", m, *args])
    assert code == 0, err
    code, _, err = _run(["apply", m, tmp_path / "k10.parquet", "-o", out])
    assert code == 0, err
    table = pq.read_table(out)
    Q = np.column_stack([table.column(f"calibrated_{c}").to_numpy() for c in names])
    assert np.array_equal(Q, calibcli.load_map(str(m)).predict(P))


def test_rows_not_summing_to_1_hint_options_the_command_has(files, tmp_path):
    """apply and evaluate have no --score-kind: their hint names what they offer instead."""
    d, _, (Pt, yt) = files
    m = tmp_path / "m.json"
    assert _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "temperature", "-o", m])[0] == 0
    bad = Pt.copy()
    bad[3] *= 1.1
    src = tmp_path / "nosum.csv"
    pacsv.write_csv(_table(bad, yt), src)
    cases = {("apply", m, src, "-o", tmp_path / "o.csv"): "refit it with calib fit --score-kind logit",
             ("evaluate", src, "--map", m, "--score-cols", "p_*"): "refit it with calib fit --score-kind logit",
             ("evaluate", src, "--prob-cols", "p_*"): "hint: --prob-cols takes probabilities",
             ("fit", src, "--score-cols", "p_*", "--score-kind", "probability"): "hint: give --score-kind logit"}
    for args, hint in cases.items():
        code, _, err = _run(list(args))
        assert code == 2 and "nosum.csv: columns p_car,p_cat,p_dog, row 4: the probabilities sum to" in err
        assert hint in err, (args, err)
        if args[0] != "fit":
            assert "give --score-kind" not in err
    assert not (tmp_path / "o.csv").exists()


def test_duplicate_classes_are_refused_at_the_door_as_by_the_api(files, tmp_path):
    """`--classes x,x` is refused before the file is read, in the words `calibcli.fit(classes=)` uses."""
    d, (P, y), _ = files
    out = tmp_path / "m.json"
    code, stdout, err = _run(["fit", d / "cal.csv", "--score-cols", "p_*", "--classes", "x,y,x", "-o", out])
    assert code == 2 and stdout == "" and not out.exists()
    assert err.splitlines()[0] == "error: --classes 'x,y,x': class name 'x' appears twice"
    with pytest.raises(calibcli.errors.UsageError) as exc:
        calibcli.fit(P, y, method="temperature", classes=["x", "y", "x"])
    assert exc.value.message == "--classes 'x,y,x': class name 'x' appears twice"


def test_methods_that_need_probabilities_fit_and_compare_on_probabilities(files, tmp_path):
    """bbq takes probabilities only: the check before reading the file assumed logits and refused it."""
    d, (P, y), _ = files
    m = tmp_path / "bbq.json"
    code, _, err = _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "bbq", "-o", m])
    assert code == 0, err
    np.testing.assert_array_equal(maps.load_map(str(m))[0].predict(P),
                                  calibcli.fit(P, np.array(CLASSES)[y], method="bbq").predict(P))
    code, _, err = _run(["compare", d / "cal.csv", "--score-cols", "p_*", "-m", "bbq", "-m", "temperature"])
    assert code == 0, err
    code, _, err = _run(["fit", d / "cal.csv", "--score-cols", "p_*", "-m", "bbq", "--score-kind", "logit"])
    assert code == 2 and "method 'bbq' needs probabilities in [0, 1]: it cannot take logits one-vs-rest" in err
