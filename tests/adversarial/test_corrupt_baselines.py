"""Corrupt baselines for `evaluate --baseline ... --max-regression`: refused with exit 2 and one
line naming the file; never "gates passed".
"""

from __future__ import annotations

import copy
import json

import pytest

from .harness import calib
from .mutants import HUGE, dumps

ARGS = ["evaluate", "in.csv", "--field-col", "field", "--baseline", "b.json", "--max-regression", "log-loss=0.5"]


def _metric(value):
    def build(doc):
        doc["results"][0]["metrics"]["log_loss"] = value
        return dumps(doc)
    return build


def _set(path: tuple, value):
    def build(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return dumps(doc)
    return build


_DELETE = object()


def _duplicate(doc):
    twin = copy.deepcopy(doc["results"][0])
    twin["metrics"]["log_loss"] = 1e-9
    doc["results"].append(twin)
    return dumps(doc)


CASES = {
    "metric-nan": _metric(float("nan")),
    "metric-infinity": _metric(float("inf")),
    "metric-minus-infinity": _metric(float("-inf")),
    "metric-1e999999": _metric(HUGE),
    "metric-string": _metric("0.5"),
    "metric-bool": _metric(True),
    "metric-list": _metric([0.5]),
    "metric-object": _metric({"value": 0.5}),
    "duplicate-result-names": _duplicate,
    "result-without-name": _set(("results", 0, "name"), _DELETE),
    "result-name-not-a-string": _set(("results", 0, "name"), 7),
    "result-without-metrics": _set(("results", 0, "metrics"), _DELETE),
    "metrics-is-a-list": _set(("results", 0, "metrics"), [0.5]),
    "result-is-a-string": _set(("results", 0), "score"),
    "no-results": _set(("results",), _DELETE),
    "results-is-an-object": _set(("results",), {"score": {}}),
    "schema-version-99": _set(("schema_version",), 99),
    "schema-version-0": _set(("schema_version",), 0),
    "schema-version-string": _set(("schema_version",), "2"),
    "schema-version-float": _set(("schema_version",), 1.5),
    "schema-version-bool": _set(("schema_version",), True),
    "schema-version-huge": _set(("schema_version",), HUGE),
    "no-schema-version": _set(("schema_version",), _DELETE),
    "format-of-a-map": _set(("format",), "calibcli.map"),
    "field-col-not-a-string": _set(("field_col",), 123),
    "calbin-window-string": _set(("calbin_window",), "100"),
    "deep-nesting": lambda doc: b"[" * 100_000 + b"]" * 100_000,
    "deep-nesting-in-a-metric": lambda doc: dumps(doc).replace(
        b'"log_loss": ', b'"log_loss": ' + b"[" * 100_000 + b"]" * 100_000 + b", \"x\": ", 1),
    "not-utf8": lambda doc: dumps(doc).replace(b'"in.csv"', b'"in\xff\xfe.csv"', 1)
    if b'"in.csv"' in dumps(doc) else dumps(doc).replace(b'"score"', b'"sc\xffore"', 1),
    "utf16": lambda doc: dumps(doc).decode().encode("utf-16"),
    "empty-file": lambda doc: b"",
    "truncated": lambda doc: dumps(doc)[: len(dumps(doc)) // 2],
    "a-map-not-a-report": None,
}


@pytest.fixture
def baseline_dir(work, assets):
    work.put("small.csv", "in.csv")
    return work.path


@pytest.mark.parametrize("case", CASES)
def test_corrupt_baseline_is_refused(baseline_dir, assets, case):
    doc = json.loads((assets / "baseline.json").read_text())
    data = (assets / "isotonic.json").read_bytes() if CASES[case] is None else CASES[case](doc)
    (baseline_dir / "b.json").write_bytes(data)
    run = calib(ARGS, baseline_dir, reads=["in.csv", "b.json"])
    assert "gates passed" not in run.err, run
    run.refused("b.json")


def test_null_in_the_gated_metric_never_passes(baseline_dir, assets):
    doc = json.loads((assets / "baseline.json").read_text())
    doc["results"][0]["metrics"]["log_loss"] = None
    (baseline_dir / "b.json").write_bytes(dumps(doc))
    run = calib(ARGS, baseline_dir, reads=["in.csv", "b.json"])
    assert run.code in (1, 2) and "gates passed" not in run.err, run


def test_valid_baseline_passes_and_a_better_one_fails_the_gate(baseline_dir, assets):
    """The base the mutants come from works: same data passes, a much better baseline fails."""
    doc = json.loads((assets / "baseline.json").read_text())
    (baseline_dir / "b.json").write_bytes(dumps(doc))
    run = calib(ARGS, baseline_dir, reads=["in.csv", "b.json"]).ok()
    assert "gates passed" in run.err, run
    doc["results"][0]["metrics"]["log_loss"] = 1e-6
    (baseline_dir / "b.json").write_bytes(dumps(doc))
    run = calib(ARGS[:-1] + ["log-loss=0.01"], baseline_dir, reads=["in.csv", "b.json"])
    assert run.code == 1 and "gate failed" in run.err, run
