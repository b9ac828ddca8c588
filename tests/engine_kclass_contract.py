"""K-class `evaluate_kclass` of every engine module, against `calib evaluate --prob-cols`.

Imported by tests/engines/test_spark.py and tests/engines/test_dask.py, which define the fixtures `engine`
and `read` (see engine_contract.py). The rows have ties in the probabilities, integer
weights and string labels; the CLI on the same file is the reference (1e-12).
"""

from __future__ import annotations

import json

import calibcli

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.errors import InputError, UsageError

_runner = CliRunner()
_CLASSES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def kclass_data(tmp_path_factory):
    """3 000 rows, 4 classes: `p_*` rounded (ties), `q_*` sharpened; weights 0..3."""
    rng = np.random.default_rng(21)
    n = 3000
    z = rng.normal(size=(n, 4)) * 1.5
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    P = np.round(P, 2)
    P[:, 3] = 1 - P[:, :3].sum(axis=1)
    P = np.clip(P, 0, 1)
    P /= P.sum(axis=1, keepdims=True)
    Q = P ** 2 / (P ** 2).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(4, p=row) for row in P])
    path = tmp_path_factory.mktemp("kclass-engine") / "k.parquet"
    pq.write_table(pa.table({"label": np.array(_CLASSES)[y],
                             **{f"p_{c}": P[:, j] for j, c in enumerate(_CLASSES)},
                             **{f"q_{c}": Q[:, j] for j, c in enumerate(_CLASSES)},
                             "w": rng.integers(0, 4, n).astype(float)}), path, row_group_size=500)
    return str(path)


def _cli_json(*args: str) -> dict:
    result = _runner.invoke(app, ["-q", "evaluate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("extra", [{}, {"weight_col": "w", "ece_bins": 7, "ece_strategy": "quantile"}])
def test_evaluate_kclass_equals_calib_evaluate(engine, read, kclass_data, extra):
    flags = [f for k, v in extra.items() for f in (f"--{k.replace('_', '-')}", str(v))]
    want = _cli_json(kclass_data, "--prob-cols", "p_*", "--prob-cols", "q_a,q_b,q_c,q_d", *flags)
    got = engine.evaluate_kclass(read(kclass_data), ["p_*", "q_a,q_b,q_c,q_d"], **extra).to_json()
    assert (got["rows"], got["positives"], got["weight_col"], got["ece_bins"], got["ece_strategy"]) == \
        (want["rows"], None, want["weight_col"], want["ece_bins"], want["ece_strategy"])
    for g, w in zip(got["results"], want["results"], strict=True):
        assert (g["name"], g["kind"], g["classes"]) == (w["name"], w["kind"], w["classes"])
        assert list(g["metrics"]) == list(w["metrics"])
        for metric, value in w["metrics"].items():
            assert g["metrics"][metric] == pytest.approx(value, rel=1e-12, abs=1e-12), (g["name"], metric)


def test_evaluate_kclass_counts_bad_rows(engine, read, tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"label": ["a", "b", "z", "a"], "p_a": [0.5, 0.2, 0.3, 0.9],
                             "p_b": [0.5, 0.8, 0.7, 0.9]}), path)
    with pytest.raises(InputError, match="column 'label': 1 row with a label that is not a class"):
        engine.evaluate_kclass(read(str(path)), ["p_*"])
    pq.write_table(pa.table({"label": ["a", "b", "b", "a"], "p_a": [0.5, 0.2, 0.3, 0.9],
                             "p_b": [0.5, 0.8, 0.7, 0.9]}), path)
    with pytest.raises(InputError, match="'p_\\*': 1 row with probabilities that are null, negative or do not sum"):
        engine.evaluate_kclass(read(str(path)), ["p_*"])
    with pytest.raises(UsageError, match="kclass_cols and maps are lists"):
        engine.evaluate_kclass(read(str(path)), "p_*")
    with pytest.raises(InputError, match="matches no column"):
        engine.evaluate_kclass(read(str(path)), ["x_*"])


def test_evaluate_kclass_integer_labels_are_indices_as_in_the_cli(engine, read, kclass_data, tmp_path):
    table = pq.read_table(kclass_data)
    codes = pa.array([_CLASSES.index(v) for v in table.column("label").to_pylist()])
    path = tmp_path / "codes.parquet"
    pq.write_table(table.set_column(0, "label", codes), path, row_group_size=500)
    want = _cli_json(str(path), "--prob-cols", "p_*")["results"][0]["metrics"]
    got = engine.evaluate_kclass(read(str(path)), ["p_*"]).to_json()["results"][0]["metrics"]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    mixed = tmp_path / "mixed.parquet"
    labels = ["a"] * 1500 + [str(_CLASSES.index(v)) for v in table.column("label").to_pylist()[1500:]]
    pq.write_table(table.set_column(0, "label", pa.array(labels)), mixed, row_group_size=500)
    with pytest.raises(InputError, match="label"):
        engine.evaluate_kclass(read(str(mixed)), ["p_*"])


def test_evaluate_kclass_with_multiclass_maps_equals_calib_evaluate(engine, read, kclass_data, tmp_path):
    from calibcli.maps import classmap, envelope as maps

    table = pq.read_table(kclass_data)
    y = np.array(table.column("label").to_pylist())
    Q = np.column_stack([table.column(f"q_{c}").to_numpy() for c in _CLASSES])
    temp = calibcli.fit(Q, y, "temperature", score_cols=[f"q_{c}" for c in _CLASSES])
    ovr = calibcli.fit(Q, y, "isotonic", platt_correction=False)
    temp_path, ovr_path = str(tmp_path / "temp.json"), str(tmp_path / "ovr.parquet")
    maps.save_map(temp, temp_path)
    maps.save_map(ovr, ovr_path)
    want = _cli_json(kclass_data, "--prob-cols", "p_*", "--map", temp_path, "--weight-col", "w")
    got = engine.evaluate_kclass(read(kclass_data), ["p_*"], [temp_path], weight_col="w").to_json()
    assert [(r["name"], r["kind"]) for r in got["results"]] == [(r["name"], r["kind"]) for r in want["results"]]
    for g, w in zip(got["results"], want["results"], strict=True):
        assert g["metrics"] == pytest.approx(w["metrics"], rel=1e-12, abs=1e-12), g["name"]
    # a map without recorded columns reads score_cols; a ClassMap object works as a path does
    want = _cli_json(kclass_data, "--map", ovr_path, "--score-cols", "q_*")["results"][0]["metrics"]
    got = engine.evaluate_kclass(read(kclass_data), maps=[ovr], score_cols="q_*").to_json()
    assert got["results"][0]["metrics"] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert got["results"][0]["name"] == "isotonic" and got["score_col"] == "q_*"
    with pytest.raises(UsageError, match="does not record its score columns"):
        engine.evaluate_kclass(read(kclass_data), maps=[ovr])


def test_evaluate_kclass_top_label_metrics_equal_calib_evaluate(engine, read, kclass_data):
    """`metrics="all"` with band rounds: the merged states give the CLI's top-label metrics."""
    args = ("--prob-cols", "p_*", "--weight-col", "w", "--metrics", "all", "--bands", "20", "--seed", "3",
            "--hl-groups", "8")
    want = _cli_json(kclass_data, *args)["results"][0]["metrics"]
    got = engine.evaluate_kclass(read(kclass_data), ["p_*"], weight_col="w", metrics="all", bands=20, seed=3,
                                 hl_groups=8).to_json()["results"][0]["metrics"]
    assert list(got) == list(want) and "top_label_corp_p" in want and "top_label_kuiper_p" in want
    for metric, value in want.items():
        assert got[metric] == pytest.approx(value, rel=1e-12, abs=1e-12), metric
    with pytest.raises(UsageError, match="--metrics smece: a metric of binary probabilities"):
        engine.evaluate_kclass(read(kclass_data), ["p_*"], metrics="smece")


def test_evaluate_kclass_top_label_multicalibration_equals_calib_evaluate(engine, read, kclass_data, tmp_path):
    """`segment_cols` on K classes: the top-label multicalibration error (whether the top class
    is right against the confidence), bit for bit the CLI's, weighted, over a text, a float and
    an integer column."""
    table = pq.read_table(kclass_data)
    rng = np.random.default_rng(4)
    n = table.num_rows
    path = tmp_path / "segmented.parquet"
    pq.write_table(table.append_column("region", pa.array(rng.choice(["n", "s", "e", "w"], n)))
                   .append_column("age", pa.array(rng.normal(40.0, 12.0, n)))
                   .append_column("tier", pa.array(rng.integers(0, 5, n))), path, row_group_size=500)
    want = _cli_json(str(path), "--prob-cols", "p_*", "--prob-cols", "q_a,q_b,q_c,q_d", "--weight-col", "w",
                     "--segment-col", "region", "--segment-col", "age", "--segment-col", "tier", "--segment-depth", "2")
    from engine_contract import read_in_parts

    got = engine.evaluate_kclass(read_in_parts(read, str(path)), ["p_*", "q_a,q_b,q_c,q_d"], weight_col="w",
                                 segment_cols=["region", "age", "tier"], segment_depth=2).to_json()
    assert got["segment_cols"] == want["segment_cols"] == ["region", "age", "tier"] and got["segment_depth"] == 2
    keys = ("top_label_multical", "top_label_multical_sigma", "top_label_multical_p")
    for g, w in zip(got["results"], want["results"], strict=True):
        assert {k: g["metrics"][k] for k in keys} == {k: w["metrics"][k] for k in keys}
        assert g["segments"] == w["segments"] and g["segments_checked"] == w["segments_checked"]
