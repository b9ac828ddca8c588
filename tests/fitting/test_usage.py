"""The fit summary's line per field and feature column (`fitting.usage`), checked against the
saved map's own arrays: levels, levels with their own shift, tree splits."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.fitting.usage import column_usage
from calibcli.maps import envelope as maps

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two fields (publisher: 37 levels, device: 3), a text feature (country: 8 values) whose
    effect lives only at high scores (a tree's job), and a numeric feature."""
    rng = np.random.default_rng(3)
    n = 6000
    publisher = np.array([f"pub{k:02d}" for k in rng.integers(0, 37, n)])
    device = np.array(["phone", "tablet", "desktop"])[rng.integers(0, 3, n)]
    country = np.array(["DE", "FR", "GB", "US", "IT", "ES", "NL", "PL"])[rng.integers(0, 8, n)]
    s = rng.uniform(0.02, 0.98, n)
    logit = np.log(s / (1 - s))
    z = logit + 1.2 * (publisher == "pub05") - 0.9 * (publisher == "pub11") + 1.5 * ((country == "DE") & (logit > 0))
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.int64)
    path = tmp_path_factory.mktemp("usage") / "d.parquet"
    pq.write_table(pa.table({"score": s, "label": y, "publisher": publisher, "device": device,
                             "country": country, "age": rng.normal(40, 9, n)}), path)
    return path


def test_fit_summary_says_how_each_field_and_feature_was_used(data, tmp_path):
    out = tmp_path / "m.json"
    res = runner.invoke(app, ["fit", str(data), "--method", "multicalibration", "--field-col", "publisher",
                              "--field-col", "device", "--feature-col", "country", "--feature-col", "age",
                              "--param", "rounds=6", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = [line.strip() for line in res.stderr.splitlines()]
    cal, envelope = maps.load_map(str(out))
    state = cal.get_state()
    cat = state["categorical"]
    nf, nq = len(cat), len(state["numeric"])
    splits = np.bincount(np.asarray(state["node_feature"], dtype=np.int64) + 1, minlength=nf + nq + 2)[1:]
    rounds = len(state["round_intercept"])
    tables = nf + nq + 1
    for name, kind, levels in (("publisher", "field", 37), ("device", "field", 3), ("country", "feature", 8)):
        f = cat.index(name)
        total = np.asarray(state["shifts"][f], dtype=float).copy()
        for r in range(rounds):
            total = total + np.asarray(state["round_shifts"][r * tables + f], dtype=float)
        shifted = int(np.count_nonzero(np.abs(total[1:]) >= 0.1))
        head = f"field '{name}': {levels} levels" if kind == "field" else \
            f"feature '{name}' (categorical): {levels} values"
        line = next(x for x in lines if x.startswith(head))
        assert f", {shifted} with their own shift" in line, line
        assert line.endswith(f"used in {int(splits[f])} tree splits"), line
    age = next(x for x in lines if x.startswith("feature 'age' (numeric)"))
    linear = (state["linear"][0] + sum(state["round_linear"][r * nq] for r in range(rounds))) / state["std"][0]
    assert age == (f"feature 'age' (numeric): coefficient {linear:.3g} per unit, "
                   f"{len(state['bands'][0]) + 1} bands with shrunk shifts, used in {int(splits[nf])} tree splits")
    # the effects the data holds are the ones the summary shows
    pub = next(x for x in lines if x.startswith("field 'publisher'"))
    assert int(re.search(r"(\d+) with their own shift", pub).group(1)) >= 2
    assert splits[cat.index("country")] > 0  # the high-score DE effect needs trees
    assert envelope["training"]["field_cols"] == ["publisher", "device"]
    assert envelope["training"]["feature_cols"] == {"country": "categorical", "age": "numeric"}


def test_field_aware_summary_names_its_use_of_categorical_features(data, tmp_path):
    res = runner.invoke(app, ["fit", str(data), "--method", "field-aware", "--field-col", "publisher",
                              "--feature-col", "country", "--param", "epochs=1"])
    assert res.exit_code == 0, res.output
    assert "field 'publisher': 37 levels (a shrunk shift per level and an embedding in the network)" in res.stderr
    assert ("feature 'country' (categorical): 8 values (a shrunk shift per level and an embedding in the network, "
            "like a field)") in res.stderr


def test_no_lines_without_columns_and_order_as_given():
    assert column_usage({"fit": {"knots": 3}}) == []
    lines = column_usage({"field_cols": ["b", "a"], "feature_cols": {"x": "numeric"},
                          "fit": {"levels": {"a": 2, "b": 5}}})
    assert lines == ["field 'b': 5 levels", "field 'a': 2 levels",
                     "feature 'x' (numeric): a standardised input of the model"]
