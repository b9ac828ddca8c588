"""Corrupt maps (JSON and Parquet) for every registered method: each is refused with exit 2
and one line, or applies to finite probabilities in [0, 1], monotone where promised.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibcli.calibrators import registry

from .mutants import (ARRAY_MUTATIONS, ARRAYS, HUGE, PROBABILITIES, SCALAR_MUTATIONS, SCALARS,
                      apply_mutant, check_refused_or_sound, dumps, load_envelope, mutate_state,
                      parquet_map)


def test_every_registered_method_is_covered():
    assert set(ARRAYS) | set(SCALARS) == set(registry.available())


# Each array method gets four (side, mutation) kinds in turn, so every kind meets two methods.
ARRAY_KINDS = [
    ("knots", "nan"), ("knots", "huge"), ("knots", "reversed"), ("knots", "swapped"),
    ("knots", "longer"), ("knots", "string"), ("knots", "null"), ("knots", "empty"),
    ("knots", "delete"), ("values", "inf"), ("values", "-inf"), ("values", "above-1"),
    ("values", "below-0"), ("values", "decreasing"), ("values", "bool"), ("values", "shorter"),
    ("values", "nested"), ("values", "text"),
]
ARRAY_CASES = [
    (method, *ARRAY_KINDS[(4 * i + j) % len(ARRAY_KINDS)])
    for i, method in enumerate(sorted(ARRAYS)) for j in range(4)
]
SCALAR_KINDS = ["nan", "inf", "huge", "string", "bool", "null", "list", "negative", "1e308", "delete"]
SCALAR_CASES = [
    (method, SCALARS[method][j % len(SCALARS[method])], SCALAR_KINDS[(4 * i + j) % len(SCALAR_KINDS)])
    for i, method in enumerate(sorted(SCALARS)) for j in range(4)
]


@pytest.fixture
def mapdir(work):
    work.put("grid.csv")
    return work.path


@pytest.mark.parametrize("method, side, mutation", ARRAY_CASES,
                         ids=[f"{m}-{s}-{k}" for m, s, k in ARRAY_CASES])
def test_json_map_with_a_corrupt_array(assets, mapdir, method, side, mutation):
    key = ARRAYS[method][0 if side == "knots" else 1]
    envelope = load_envelope(assets, method)
    doc = mutate_state(envelope, key, mutation)
    assert doc != envelope
    run = apply_mutant(mapdir, method, dumps(doc))
    if mutation in {"nan", "huge", "inf", "-inf", "string", "null", "bool", "nested", "text",
                    "delete", "empty", "longer", "shorter"}:
        run.refused("m.json")  # not a usable map under any reading
    if (mutation in {"reversed", "swapped"} and side == "knots") or (
            key in PROBABILITIES and mutation in {"above-1", "below-0"}):
        run.refused("m.json")  # knots out of order / probabilities outside [0, 1]
    if mutation == "decreasing" and registry.get(method).monotone:
        run.refused("m.json")  # the method promises a monotone map


@pytest.mark.parametrize("method, key, mutation", SCALAR_CASES,
                         ids=[f"{m}-{k}-{x}" for m, k, x in SCALAR_CASES])
def test_json_map_with_a_corrupt_number(assets, mapdir, method, key, mutation):
    envelope = load_envelope(assets, method)
    doc = mutate_state(envelope, key, mutation)
    run = apply_mutant(mapdir, method, dumps(doc))
    if mutation in {"nan", "inf", "huge", "string", "bool", "null", "list", "delete"}:
        run.refused("m.json")


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


def _envelope_cases():
    """(id, bytes builder from the isotonic envelope, must refuse)."""
    def with_(**changes):
        def build(env):
            doc = json.loads(json.dumps(env))
            for k, v in changes.items():
                if v is None:
                    doc.pop(k, None)
                else:
                    doc[k] = v
            return dumps(doc)
        return build

    def deep_in_state(env):
        text = dumps(env).decode()
        return text.replace('"x": [', '"x": ' + "[" * 100_000 + "[", 1).replace(
            "]", "]" + "]" * 100_000, 1).encode()

    return [
        ("empty-file", lambda env: b"", True),
        ("whitespace-only", lambda env: b"  \n", True),
        ("truncated", lambda env: dumps(env)[: len(dumps(env)) // 2], True),
        ("deep-nesting-100000", lambda env: _deep(100_000), True),
        ("deep-nesting-in-state", deep_in_state, True),
        ("object-nesting-100000", lambda env: b'{"a":' * 100_000 + b"1" + b"}" * 100_000, True),
        ("not-utf8", lambda env: dumps(env).replace(b'"isotonic"', b'"isot\xff\xfenic"'), True),
        ("schema-version-huge", with_(schema_version=HUGE), True),
        ("schema-version-string", with_(schema_version="1"), True),
        ("schema-version-float", with_(schema_version=1.5), True),
        ("no-state", with_(state=None), True),
        ("state-is-a-list", with_(state=[1, 2]), True),
        ("method-is-a-list", with_(method=["isotonic"]), True),
        ("params-is-a-string", with_(params="platt_correction=true"), True),
        ("long-number", lambda env: dumps(env).replace(b'"schema_version": 1', b'"schema_version": 1' + b"0" * 100_000 + b"e-100000"), True),
        ("extra-state-key", lambda env: dumps({**env, "state": {**env["state"], "zzz": [1, 2]}}), False),
        ("extra-top-level-key", with_(unknown={"a": 1}), False),
        ("utf8-bom", lambda env: b"\xef\xbb\xbf" + dumps(env), False),
    ]


ENVELOPE_CASES = _envelope_cases()


@pytest.mark.parametrize("build, must_refuse", [c[1:] for c in ENVELOPE_CASES],
                         ids=[c[0] for c in ENVELOPE_CASES])
def test_json_map_file_level_corruption(assets, mapdir, build, must_refuse):
    run = apply_mutant(mapdir, "isotonic", build(load_envelope(assets, "isotonic")))
    assert run.seconds < 20, run
    if must_refuse:
        run.refused("m.json")


def test_valid_maps_of_every_method_apply(assets, mapdir):
    """The unmutated maps pass the same check (the mutants are judged against a working base)."""
    for method in ("isotonic", "beta", "field-aware"):
        run = apply_mutant(mapdir, method, (assets / f"{method}.json").read_bytes())
        assert check_refused_or_sound(run, method, 201) == "sound"


# ---------------------------------------------------------------------------- Parquet maps

def _column_mutation(key: str, values: list) -> callable:
    return lambda env: parquet_map(env, columns={key: pa.array([values], pa.list_(pa.float64()))})


def _parquet_cases():
    iso = [0.0, 0.2, 0.4, 0.6, 1.0]
    return [
        ("isotonic", "nan-in-knots", _column_mutation("x", [0.1, math.nan, 0.5, 0.7, 0.9]), True),
        ("isotonic", "inf-in-values", _column_mutation("y", [0.1, 0.2, 0.3, 0.4, math.inf]), True),
        ("isotonic", "decreasing-knots", _column_mutation("x", [0.9, 0.7, 0.5, 0.3, 0.1]), True),
        ("isotonic", "values-above-1", _column_mutation("y", [0.1, 0.2, 0.3, 0.4, 7.0]), True),
        ("isotonic", "lengths-differ", _column_mutation("x", iso + [1.1]), True),
        ("isotonic", "non-monotone-values", _column_mutation("y", [0.9, 0.1, 0.8, 0.2, 0.5]), True),
        ("binning", "nan-edges", _column_mutation("edges", [math.nan] * 9), True),
        ("ilps", "knots-swapped", lambda env: parquet_map(env, columns={
            "a": pa.array([list(reversed(env["state"]["a"]))], pa.list_(pa.float64()))}), True),
        ("isotonic", "zero-rows", lambda env: parquet_map(env, rows=0), True),
        ("isotonic", "two-rows", lambda env: parquet_map(env, rows=2), True),
        ("isotonic", "string-column", lambda env: parquet_map(env, columns={
            "x": pa.array([["0.1", "0.2", "0.3", "0.4", "0.5"]])}), True),
        ("isotonic", "no-metadata", lambda env: parquet_map(env, metadata=b""), True),
        ("isotonic", "metadata-not-json", lambda env: parquet_map(env, metadata=b"{oops"), True),
        ("isotonic", "metadata-deep-nesting", lambda env: parquet_map(env, metadata=_deep(100_000)), True),
        ("isotonic", "truncated", lambda env: parquet_map(env)[:-40], True),
        ("isotonic", "magic-only", lambda env: b"PAR1", True),
        ("isotonic", "round-trip", lambda env: parquet_map(env), False),
    ]


PARQUET_CASES = _parquet_cases()


@pytest.mark.parametrize("method, build, must_refuse", [(c[0], c[2], c[3]) for c in PARQUET_CASES],
                         ids=[f"{c[0]}-{c[1]}" for c in PARQUET_CASES])
def test_parquet_map_corruption(assets, mapdir, method, build, must_refuse):
    run = apply_mutant(mapdir, method, build(load_envelope(assets, method)), name="m.parquet")
    if must_refuse:
        run.refused("m.parquet")
    else:
        run.ok()


@pytest.mark.parametrize("method", sorted(registry.available()))
def test_parquet_map_of_every_method_with_a_nan(assets, mapdir, method):
    """NaN in the knots (a state column) or in a number of the metadata's state."""
    envelope = load_envelope(assets, method)
    if method in ARRAYS:
        key = ARRAYS[method][0]
        doc = mutate_state(envelope, key, "nan")
        data = parquet_map(envelope, columns={key: pa.array([doc["state"][key]], pa.list_(pa.float64()))})
    else:
        data = parquet_map(mutate_state(envelope, SCALARS[method][0], "nan"))
    apply_mutant(mapdir, method, data, name="m.parquet").refused("m.parquet")


def test_parquet_decompression_bomb_is_refused_fast_and_small(assets, mapdir):
    """A few KB that decompress to 400 MB of zeros: refused from the metadata, not read."""
    env = load_envelope(assets, "isotonic")
    zeros = np.zeros(50_000_000)
    bomb = pa.ListArray.from_arrays(pa.array([0, zeros.size], pa.int32()), pa.array(zeros))
    data = parquet_map(env, columns={"x": bomb, "y": bomb}, compression="zstd")
    del zeros, bomb
    assert len(data) < 1_000_000, len(data)
    small = apply_mutant(mapdir, "isotonic", b"", name="empty.parquet")
    run = apply_mutant(mapdir, "isotonic", data, name="m.parquet", timeout=60)
    run.refused("m.parquet")
    assert run.seconds < 15, run
    assert run.maxrss_kb < small.maxrss_kb + 150_000, (
        f"peak memory {run.maxrss_kb // 1024} MB against {small.maxrss_kb // 1024} MB for an empty map")


# ---------------------------------------------------------------------------- generated mutants

def _kinds(value) -> list[str]:
    """The mutations that apply to one state entry."""
    if isinstance(value, list) and value and not isinstance(value[0], (list, dict)):
        return ["delete", *sorted(ARRAY_MUTATIONS)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ["delete", *sorted(SCALAR_MUTATIONS)]
    return ["delete", "null", "string"]


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_generated_state_mutants_are_refused_or_sound(assets, mapdir, data):
    """Field by field: delete, retype, NaN, swap order, extend length, huge numbers."""
    method = data.draw(st.sampled_from(sorted(registry.available())), label="method")
    envelope = load_envelope(assets, method)
    key = data.draw(st.sampled_from(sorted(envelope["state"])), label="key")
    mutation = data.draw(st.sampled_from(_kinds(envelope["state"][key])), label="mutation")
    if mutation in ("null", "string") and not isinstance(envelope["state"][key], (list, int, float)):
        envelope["state"][key] = None if mutation == "null" else "x"
        doc = envelope
    else:
        doc = mutate_state(envelope, key, mutation)
    apply_mutant(mapdir, method, dumps(doc))
