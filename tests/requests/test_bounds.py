"""Bounds of every option: declared for every numeric Param and CLI option, stated in the help
and the generated Commands and options page, enforced before any input is read; seeds are exact 64-bit integers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibcli.requests import bounds
from calibcli.maps import envelope as maps
from calibcli.calibrators import registry
from calibcli.errors import ParamError, UsageError

NUMERIC = [(name, p) for name in registry.available() for p in registry.get(name).params
           if p.type in (int, float)]


def _calib(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calibcli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def _refused(proc: subprocess.CompletedProcess, *parts: str) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), proc.stderr
    for part in parts:
        assert part in lines[0], proc.stderr


@pytest.mark.parametrize("method, param", NUMERIC, ids=[f"{m}-{p.name}" for m, p in NUMERIC])
def test_every_numeric_param_has_both_bounds_around_its_default(method, param):
    assert param.low is not None and param.high is not None
    assert param.low <= param.high
    if param.default is not None:
        assert param.low <= param.default <= param.high
    if param.type is int:
        assert isinstance(param.low, int) and isinstance(param.high, int)
    assert param.range_text() in param.describe()  # `calib methods` states the bounds


@pytest.mark.parametrize("method, param", NUMERIC, ids=[f"{m}-{p.name}" for m, p in NUMERIC])
@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_out_of_range_values_are_refused(method, param, data):
    above = data.draw(st.one_of(st.just(param.high * 10 + 1), st.floats(float(param.high), 1e300, exclude_min=True),
                                st.integers(int(math.floor(param.high)) + 1, 2**80)))
    below = data.draw(st.one_of(st.floats(-1e300, float(param.low), exclude_max=True),
                                st.integers(-(2**80), int(math.ceil(param.low)) - 1)))
    for value in (above, below):
        text = repr(value) if isinstance(value, float) else str(value)
        with pytest.raises(ParamError):
            param.check(param.parse(text))  # converted, then checked by the constructor
        with pytest.raises(ParamError):
            param.check(value)


@pytest.mark.parametrize("method, param", NUMERIC, ids=[f"{m}-{p.name}" for m, p in NUMERIC])
def test_non_numbers_and_non_finite_values_are_refused(method, param):
    for text in ("nan", "inf", "-inf", "1e999999999", "x", "0x10", "1e-999999999" if param.type is int else "y"):
        with pytest.raises(ParamError):
            param.check(param.parse(text))


def test_integers_parse_exactly():
    seed = dict((p.name, p) for p in registry.get("bayes-iso").params)["seed"]
    assert seed.parse("9007199254740993") == 9007199254740993
    assert seed.parse(str(2**63 - 1)) == 2**63 - 1
    assert seed.parse("1e3") == 1000 and seed.parse("2.0") == 2
    for bad in ("1.5", "-1", str(2**63), "1e19"):
        with pytest.raises(ParamError):
            seed.check(seed.parse(bad))


@pytest.mark.parametrize("option", sorted(bounds.OPTIONS))
def test_cli_option_table_checks_both_ends(option):
    b = bounds.OPTIONS[option]
    key = option[2:].replace("-", "_")
    bounds.check(**{key: b.high})
    if not b.low_open:
        bounds.check(**{key: b.low})
    outside = [b.high * 2 + 1, b.low - 1, b.low] if b.low_open else [b.high * 2 + 1, b.low - 1]
    if isinstance(b.high, float):
        outside += [math.nan, math.inf]
    for value in outside:
        with pytest.raises(UsageError, match=option):
            bounds.check(**{key: value})


# Each runs on an input that does not exist: the bound must be checked before it is opened.
CLI_CASES = [
    (["evaluate", "absent.csv", "--bootstrap", "1000000000"], "--bootstrap"),
    (["evaluate", "absent.csv", "--top", "0"], "--top"),
    (["evaluate", "absent.csv", "--calbin-window", "100000000"], "--calbin-window"),
    (["evaluate", "absent.csv", "--seed", "-1"], "--seed"),
    (["evaluate", "absent.csv", "--seed", str(2**63)], "--seed"),
    (["summarize", "absent.csv", "--step", "0"], "--step"),
    (["summarize", "absent.csv", "--step", "1e309"], "--step"),
    (["fit", "absent.csv", "-m", "bayes-iso", "--seed", str(2**63)], "--seed"),
    (["fit", "absent.csv", "-m", "bayes-iso", "-p", "samples=1e9"], "'samples'"),
    (["fit", "absent.csv", "-m", "field-aware", "-p", "hidden=1e9"], "'hidden'"),
    (["fit", "absent.csv", "-m", "boot-isotonic", "-p", "seed=-1"], "'seed'"),
]


@pytest.mark.parametrize("args, option", CLI_CASES, ids=[" ".join(a[2:]) for a, _ in CLI_CASES])
def test_cli_refuses_out_of_range_before_reading_input(tmp_path, args, option):
    proc = _calib(*args, cwd=tmp_path)
    _refused(proc, option)
    assert "absent.csv" not in proc.stderr


def test_help_states_the_bounds(tmp_path):
    text = _calib("fit", "--help", cwd=tmp_path).stdout
    assert "samples" in text and "[1, 1000000]" in text and "[0, 9223372036854775807]" in text
    text = _calib("evaluate", "--help", cwd=tmp_path).stdout
    assert "[0, 10000]" in " ".join(text.split())
    methods = _calib("methods", cwd=tmp_path).stdout
    for _, p in NUMERIC:
        assert p.range_text() in methods


@pytest.mark.parametrize("seed", [0, 2**53 + 1, 2**63 - 1])
@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_seeds_round_trip_exactly_through_cli_maps(tmp_path, seed, suffix):
    (tmp_path / "cal.csv").write_text("score,label\n" + "".join(
        f"{i / 40:.3f},{int(i % 3 == 0 or i > 25)}\n" for i in range(40)))
    proc = _calib("fit", "cal.csv", "-m", "boot-isotonic", "-p", "r=3", "--seed", str(seed),
                  "-o", f"map{suffix}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / f"map{suffix}"
    if suffix == ".json":
        stored = json.loads(path.read_text())["params"]["seed"]
    else:
        stored = json.loads(pq.read_schema(path).metadata[maps.PARQUET_KEY])["params"]["seed"]
    assert stored == seed and isinstance(stored, int)
    cal, env = maps.load_map(str(path))
    assert cal.params["seed"] == seed and env["training"]["seed"] == seed


def test_the_baseline_loader_reads_its_lower_limits_from_bounds():
    from calibcli.evaluation.baseline import _at_least

    for option, integer in (("--ece-bins", True), ("--hl-groups", True), ("--calbin-window", True),
                            ("--step", False)):
        ok, _ = _at_least(option, integer)
        low = bounds.OPTIONS[option].low
        assert ok(low) != bounds.OPTIONS[option].low_open and not ok(low - 1)
