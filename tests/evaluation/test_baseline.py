"""Baselines (`evaluate --baseline`) are read strictly: finite metrics or null, distinct result
names, the documented types; a corrupt baseline can never switch --max-regression off."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibcli.evaluation import baseline, gates, results
from calibcli.errors import InputError

BASELINE = {
    "format": "calibcli.evaluation", "schema_version": 2, "calibcli_version": "0.1.0",
    "input": "test.csv", "rows": 200, "positives": 90, "field_col": None, "calbin_window": 100,
    "results": [
        {"name": "p", "kind": "column", "metrics": {"log_loss": 0.61, "brier": 0.21, "auc": 0.7, "ece": None},
         "intervals": None, "by_field": None, "reliability": None},
        {"name": "q", "kind": "column", "metrics": {"log_loss": 0.65, "brier": 0.23, "auc": 0.66, "ece": 0.05},
         "intervals": None, "by_field": None, "reliability": None},
    ],
    "bootstrap": None,
    "gate": {"passed": True, "gate_on": "point", "baseline": None, "checked": 0, "failed": 0, "checks": []},
}
SENTINELS = {"__nan__": "NaN", "__inf__": "Infinity", "__minf__": "-Infinity", "__big__": "1e999999"}
BAD_VALUES = ["x", True, None, [], {}, [0.5], -1.0, 0, 2**70, *SENTINELS]


def _text(doc) -> str:
    text = json.dumps(doc)
    for key, literal in SENTINELS.items():
        text = text.replace(f'"{key}"', literal)
    return text


def _load(tmp_path, doc):
    path = tmp_path / "base.json"
    path.write_text(doc if isinstance(doc, str) else _text(doc))
    return baseline.load_baseline(str(path))


@st.composite
def mutated(draw):
    doc = copy.deepcopy(BASELINE)
    i = draw(st.integers(0, 1))
    where = draw(st.sampled_from(["metric", "name", "kind", "field_col", "calbin_window", "schema_version",
                                  "format", "results", "entry", "metrics", "duplicate"]))
    value = draw(st.sampled_from(BAD_VALUES))
    if where == "metric":
        doc["results"][i]["metrics"][draw(st.sampled_from(["log_loss", "ece", "new_metric"]))] = value
    elif where == "name":
        doc["results"][i]["name"] = value
    elif where in ("kind", "metrics"):
        doc["results"][i][where] = value
    elif where == "entry":
        doc["results"][i] = value
    elif where == "duplicate":
        doc["results"][1]["name"] = doc["results"][0]["name"]
    elif where == "results":
        doc["results"] = value
    else:
        doc[where] = value
    return doc


@given(mutated())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_mutated_baseline_is_refused_or_well_typed(tmp_path, doc):
    try:
        base = _load(tmp_path, doc)
    except InputError as exc:
        assert "\n" not in exc.message and exc.message.startswith(str(tmp_path))
        return
    assert base.field_col is None or isinstance(base.field_col, str)
    assert base.calbin_window is None or (isinstance(base.calbin_window, int) and base.calbin_window >= 1)
    for name, values in base.metrics.items():
        assert isinstance(name, str)
        for v in values.values():
            assert v is None or (isinstance(v, float) and math.isfinite(v))
    names = [r["name"] for r in doc["results"]]
    assert len(base.metrics) == len(names)  # no name silently dropped


@pytest.mark.parametrize("literal", list(SENTINELS))
def test_non_finite_metrics_are_refused(tmp_path, literal):
    doc = copy.deepcopy(BASELINE)
    doc["results"][0]["metrics"]["log_loss"] = literal
    with pytest.raises(InputError, match="baseline is not JSON"):
        _load(tmp_path, doc)


def test_duplicate_names_and_keys_are_refused(tmp_path):
    doc = copy.deepcopy(BASELINE)
    doc["results"][1]["name"] = "p"
    with pytest.raises(InputError, match=r"results\[1\]: the name 'p' appears twice"):
        _load(tmp_path, doc)
    text = _text(BASELINE).replace('"log_loss": 0.61', '"log_loss": 0.61, "log_loss": 9.0')
    with pytest.raises(InputError, match="duplicate key 'log_loss'"):
        _load(tmp_path, text)
    with pytest.raises(InputError, match="levels deep"):
        _load(tmp_path, "[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize("key, value, message", [
    ("format", "calibcli.map", "'format' is 'calibcli.map'"),
    ("schema_version", True, "no valid schema_version"),
    ("field_col", 3, "'field_col' is 3"),
    ("calbin_window", 0, "'calbin_window' is 0"),
    ("calbin_window", "100", "'calbin_window' is '100'"),
])
def test_documented_types_are_required(tmp_path, key, value, message):
    doc = copy.deepcopy(BASELINE)
    doc[key] = value
    with pytest.raises(InputError, match=message):
        _load(tmp_path, doc)


def test_a_nan_baseline_metric_fails_its_regression_gate():
    """Even a Baseline built in code with NaN cannot pass a --max-regression check."""
    spec = gates.GateSpec(max_regression=[gates.Limit("log_loss", 0.01)], baseline="b.json")
    for base in (math.nan, None):
        report = gates.decide(spec, [("p", {"log_loss": 0.6}, None)],
                              results.Baseline("b.json", None, 100, {"p": {"log_loss": base}}))
        assert not report.passed


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999999"])
def test_cli_refuses_non_finite_baseline_instead_of_passing_the_gate(tmp_path, literal):
    rng = np.random.default_rng(0)
    s = rng.random(200)
    y = (rng.random(200) < s).astype(int)
    (tmp_path / "test.csv").write_text("p,label\n" + "".join(f"{a:.4f},{b}\n" for a, b in zip(s, y)))
    doc = copy.deepcopy(BASELINE)
    doc["results"] = doc["results"][:1]
    text = _text(doc).replace('"log_loss": 0.61', f'"log_loss": {literal}')
    (tmp_path / "base.json").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "calibcli", "evaluate", "test.csv", "--prob-col", "p",
                           "--baseline", "base.json", "--max-regression", "log-loss=0.01"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "gates passed" not in proc.stderr
    assert proc.stderr.startswith("error: base.json: baseline is not JSON")
    assert proc.stdout == ""
