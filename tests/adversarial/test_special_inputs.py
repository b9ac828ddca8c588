"""Special files as inputs: devices, directories and /dev/stdin are read or refused in one line,
fast and without reading forever.
"""

from __future__ import annotations

import json

import pytest

from .harness import calib

REFUSED = {
    "fit-dev-null": ["fit", "/dev/null"],
    "fit-dev-zero": ["fit", "/dev/zero"],
    "apply-dev-zero": ["apply", "m.json", "/dev/zero"],
    "map-from-dev-null": ["apply", "/dev/null", "in.csv"],
    "map-from-dev-zero": ["apply", "/dev/zero", "in.csv"],
    "baseline-from-dev-zero": ["evaluate", "in.csv", "--baseline", "/dev/zero", "--max-regression", "auc=0.1"],
    "fit-a-directory": ["fit", "adir"],
    "map-is-a-directory": ["apply", "adir", "in.csv"],
    "summary-from-dev-zero": ["fit", "--from-summary", "/dev/zero"],
    "map-and-input-both-stdin": ["apply", "-", "-"],
}


@pytest.mark.parametrize("case", REFUSED)
def test_special_input_is_refused_fast(work, case):
    work.put("small.csv", "in.csv")
    work.put("isotonic.json", "m.json")
    (work.path / "adir").mkdir()
    run = calib(REFUSED[case], work.path, reads=["in.csv", "m.json"], timeout=30, stdin=b"")
    run.refused()
    assert run.seconds < 20, run
    assert run.maxrss_kb < 1_500_000, f"{run.maxrss_kb // 1024} MB to refuse {case}"


@pytest.mark.parametrize("command", ["apply", "evaluate", "fit"])
def test_dev_stdin_as_input_reads_stdin(work, command):
    work.put("isotonic.json", "m.json")
    payload = work.put("small.csv", "in.csv").read_bytes()
    args = {"apply": ["apply", "m.json", "/dev/stdin", "--format", "csv"],
            "evaluate": ["evaluate", "/dev/stdin", "--format", "csv", "--json"],
            "fit": ["fit", "/dev/stdin", "--format", "csv"]}[command]
    run = calib(args, work.path, reads=["m.json", "in.csv"], stdin=payload).ok()
    if command == "apply":
        assert run.text.count("\n") == 41
    else:
        doc = json.loads(run.out)
        assert doc.get("rows") == 40 or doc.get("training", {}).get("rows") == 40
