"""The strict map loader: every corrupt map is refused with one MapError line, every map it
accepts predicts like a fitted one (finite, in [0, 1], monotone where promised).

Maps of every registered method are fitted once, saved as JSON and Parquet, and mutated field
by field by hypothesis (delete, retype, NaN/inf/1e999999, swap, reverse, extend, shorten, huge
and negative numbers, deep nesting). Parquet-specific refusals (row count, decompression
bombs, metadata tampering) and the strict JSON parser are tested directly.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contract
from calibcli.maps import envelope as maps, strictjson
from calibcli.calibrators import registry
from calibcli.errors import CalibWarning, MapError

METHODS = registry.available()
FAST = {"bayes-iso": {"samples": 2000}, "field-aware": {"epochs": 2}, "boot-isotonic": {"r": 5},
        "boot-binning": {"r": 5}}
# Scores every accepted map is checked on (fixed; independent of the loader's own probe).
GRID = np.unique(np.concatenate([
    [-1e300, -1e6, -3.0, -1e-300, 0.0, 5e-324, 1e-300, 1e-12, 1.0, 1 + 1e-12, 3.0, 1e6, 1e300],
    np.linspace(-0.5, 1.5, 201),
]))
BIG_SENTINEL = "__1e999999__"  # replaced by the literal 1e999999 in the JSON text


def _features(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"city": rng.choice(np.array(["a", "b", "c", "d"]), n), "x": rng.normal(size=n)}


@functools.cache
def fitted_envelope(method: str) -> dict:
    """A valid map envelope of `method`, fitted on 300 synthetic rows (as plain JSON data)."""
    s, y = contract.synthetic(300, seed=5)
    cls = registry.get(method)
    features = _features(s.size, np.random.default_rng(0)) if cls.uses_features else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibWarning)
        cal = cls(**FAST.get(method, {})).fit(s, y, features=features)
    return json.loads(maps.envelope_to_json(maps.make_envelope(cal)))


def grid_features(method: str) -> dict[str, np.ndarray] | None:
    if not registry.get(method).uses_features:
        return None
    return {"city": np.full(GRID.size, "b", dtype=object), "x": np.full(GRID.size, 0.3)}


def to_json_bytes(env: dict) -> bytes:
    """JSON with NaN/Infinity literals allowed, and 1e999999 where the sentinel stands."""
    text = json.dumps(env, allow_nan=True)
    return text.replace(f'"{BIG_SENTINEL}"', "1e999999").encode()


def to_parquet_bytes(env: dict, rows: int = 1) -> bytes:
    """The Parquet map layout (numeric state lists as columns) without the writer's checks."""
    meta = copy.deepcopy(env)
    state = meta.get("state")
    columns = {}
    if isinstance(state, dict):
        for key in list(state):
            value = state[key]
            if isinstance(value, list):
                try:
                    column = pa.array([value] * rows)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                    continue
                if maps._numeric_leaves(column.type):
                    columns[key] = column
                    del state[key]
        meta["state_columns"] = sorted(columns)
    table = pa.table(columns) if columns else pa.table({"_empty": pa.array([None] * rows, pa.null())})
    raw = json.dumps(meta, allow_nan=True).replace(f'"{BIG_SENTINEL}"', "1e999999")
    table = table.replace_schema_metadata({maps.PARQUET_KEY: raw.encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def load(data: bytes):
    return maps.envelope_to_calibrator(maps.parse_map_bytes(data, "m.json"), "m.json")


def assert_predicts_like_a_fitted_map(cal, method: str) -> None:
    p = cal.predict(GRID, features=grid_features(method))
    assert np.all(np.isfinite(p)), f"{method}: non-finite prediction"
    assert np.all((p >= 0) & (p <= 1)), f"{method}: prediction outside [0, 1]"
    if cal.monotone:
        assert np.all(np.diff(p) >= -1e-12), f"{method}: monotone method predicts a decreasing map"


# ----------------------------------------------------------------------------- mutations

REPLACEMENTS = ["x", True, False, None, [], {}, [[1.0]], {"a": 1}, float("nan"), float("inf"),
                float("-inf"), BIG_SENTINEL, 1e300, -1e300, -1.0, 0.0, 2.0, 0.5, 10**30, -(10**30),
                5e-324]


def _targets(env: dict) -> list[tuple[str, ...]]:
    """Paths that mutations act on: every state field, every param, the envelope fields."""
    paths = [("state", k) for k in env["state"]] + [("params", k) for k in env["params"]]
    return paths + [(k,) for k in ("format", "schema_version", "method", "params", "state")]


def _get(env, path):
    for key in path:
        env = env[key]
    return env


@st.composite
def mutants(draw, method: str):
    """A fitted envelope of `method` with one field mutated (plus a description)."""
    env = copy.deepcopy(fitted_envelope(method))
    path = draw(st.sampled_from(_targets(env)))
    parent, key = _get(env, path[:-1]), path[-1]
    value = parent[key]
    op = draw(st.sampled_from(["delete", "replace", "element", "swap", "reverse", "extend",
                               "shorten", "empty", "nest", "scale"]))
    if op == "delete":
        del parent[key]
    elif op == "replace":
        parent[key] = draw(st.sampled_from(REPLACEMENTS))
    elif op == "nest":
        parent[key] = [value] if draw(st.booleans()) else functools.reduce(lambda v, _: [v], range(70), value)
    elif isinstance(value, list) and value:
        # act on the list itself or, for nested lists (field-aware), one inner list
        target = value
        if isinstance(value[0], list) and value[0] and draw(st.booleans()):
            target = value[draw(st.integers(0, len(value) - 1))]
        i = draw(st.integers(0, len(target) - 1))
        if op == "element":
            target[i] = draw(st.sampled_from(REPLACEMENTS))
        elif op == "swap" and len(target) > 1:
            j = draw(st.integers(0, len(target) - 1))
            target[i], target[j] = target[j], target[i]
        elif op == "reverse":
            target.reverse()
        elif op == "extend":
            target.extend(draw(st.sampled_from([[target[-1]], target[:3], [2.0], ["x"]])))
        elif op == "shorten":
            del target[i]
        elif op == "empty":
            target.clear()
        elif op == "scale" and isinstance(target[i], (int, float)) and not isinstance(target[i], bool):
            target[i] = target[i] * draw(st.sampled_from([-1.0, 1e10, 1e300, -1e300, 1 + 1e-9]))
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and op == "scale":
        parent[key] = value * draw(st.sampled_from([-1.0, 1e10, 1e300, -1e300, 2.0]))
    return env, f"{op} {'/'.join(path)}"


def _check_mutant(method: str, env: dict, fmt: str) -> None:
    data = to_json_bytes(env) if fmt == "json" else to_parquet_bytes(env)
    try:
        cal = load(data)
    except MapError as exc:
        assert "\n" not in exc.message and exc.message.startswith("m.json: "), exc.message
        return
    assert_predicts_like_a_fitted_map(cal, method)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
@pytest.mark.parametrize("method", METHODS)
def test_every_mutant_is_refused_or_predicts_like_a_fitted_map(method, fmt):
    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutants(method))
    def check(mutant):
        _check_mutant(method, mutant[0], fmt)

    check()


@pytest.mark.parametrize("fmt", ["json", "parquet"])
@pytest.mark.parametrize("method", METHODS)
def test_unmutated_maps_load_and_predict_bit_for_bit(method, fmt):
    env = fitted_envelope(method)
    data = to_json_bytes(env) if fmt == "json" else to_parquet_bytes(env)
    cal = load(data)
    assert_predicts_like_a_fitted_map(cal, method)
    again = load(maps.envelope_to_json(env).encode())
    f = grid_features(method)
    assert np.array_equal(cal.predict(GRID, features=f), again.predict(GRID, features=f))


# Hand-written mutants with the exact message each must give.
KNOWN = [
    ("isotonic", lambda e: e["state"]["y"].__setitem__(3, 1.5),
     "m.json: isotonic map state 'y'[3] = 1.5 is not a probability in [0, 1]"),
    ("isotonic", lambda e: e["state"]["x"].reverse(), "m.json: isotonic map state 'x'[1]"),
    ("isotonic", lambda e: e["state"]["y"].pop(), "they must have the same length"),
    ("isotonic", lambda e: e["state"]["x"].__setitem__(0, "0.1"), "'x'[0] = '0.1' is not a number"),
    ("isotonic", lambda e: e["state"]["x"].__setitem__(0, True), "'x'[0] = True is not a number"),
    ("isotonic", lambda e: e["state"].update(extra=[1.0]), "'extra' is not a field"),
    ("binning", lambda e: e["state"]["edges"].pop(), "needs one more"),
    ("binning", lambda e: e["params"].update(n_bins=2), "at most 2 allowed"),
    ("beta", lambda e: e["state"].update(a=-1.0), "'a' = -1.0 is outside [0, 1e+100]"),
    ("beta", lambda e: e["state"].update(c=None), "'c' = None is not a number"),
    ("logistic", lambda e: e["state"].update(a="1"), "'a' = '1' is not a number"),
    ("ilps", lambda e: e["params"].update(K=50), "has 101 values, expected 51"),
    ("bayes-iso", lambda e: e["state"].update(blocks=0), "'blocks' = 0 is outside"),
    ("field-aware", lambda e: e["state"]["vocab"][0].reverse(), "entries must be sorted and distinct"),
    ("field-aware", lambda e: e["state"]["weights"][0].pop(), "has shape"),
    ("field-aware", lambda e: e["params"].update(layers=1), "'weights' has 2 values, at most 1 allowed"),
    ("enir", lambda e: e["params"].update(models=10**6), "parameter 'models' must be in [2, 1000]"),
    ("boot-isotonic", lambda e: e["state"]["y"].reverse(), "non-decreasing (the method is monotone)"),
    ("isotonic", lambda e: e.update(method={"a": 1}), "field 'method' must be a method name"),
]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
@pytest.mark.parametrize("method, change, message", KNOWN)
def test_known_mutants_name_field_and_index(method, change, message, fmt):
    env = copy.deepcopy(fitted_envelope(method))
    change(env)
    data = to_json_bytes(env) if fmt == "json" else to_parquet_bytes(env)
    with pytest.raises(MapError) as err:
        load(data)
    assert message in err.value.message


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999999"])
def test_non_finite_literals_anywhere_are_refused(literal):
    text = maps.envelope_to_json(fitted_envelope("isotonic"))
    bad = text.replace('"training": {}', f'"training": {{"rows": {literal}}}')
    assert bad != text
    with pytest.raises(MapError, match="m.json: not a calibcli map: "):
        load(bad.encode())


def test_deep_nesting_and_duplicate_keys_are_refused():
    with pytest.raises(MapError, match="nested 100000 levels deep"):
        load(b"[" * 100_000 + b"]" * 100_000)
    text = maps.envelope_to_json(fitted_envelope("isotonic"))
    with pytest.raises(MapError, match="duplicate key 'method'"):
        load(text.replace('"method":', '"method": "isotonic", "method":', 1).encode())


# ------------------------------------------------------------------------------ the CLI

def _calib(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calibcli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def _assert_one_line_error(proc: subprocess.CompletedProcess) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), proc.stderr
    assert len(lines) == 1 or lines[1].startswith("hint: "), proc.stderr


@pytest.mark.parametrize("method", METHODS)
def test_cli_refuses_mutants_with_one_line(tmp_path, method):
    env = copy.deepcopy(fitted_envelope(method))
    floats = [k for k, v in env["state"].items() if isinstance(v, list) and v and isinstance(v[0], float)]
    if floats:
        env["state"][floats[0]][0] = "garbage"
    else:
        env["state"][next(iter(env["state"]))] = "garbage"
    (tmp_path / "m.json").write_bytes(to_json_bytes(env))
    (tmp_path / "m.parquet").write_bytes(to_parquet_bytes(env))
    (tmp_path / "in.csv").write_text("score,label,city,x\n0.2,0,a,0.1\n0.7,1,b,0.3\n")
    for name in ("m.json", "m.parquet"):
        proc = _calib("apply", name, "in.csv", "-o", "out.csv", cwd=tmp_path)
        _assert_one_line_error(proc)
        assert proc.stderr.startswith(f"error: {name}: {method} map "), proc.stderr
        assert not (tmp_path / "out.csv").exists()


# ---------------------------------------------------------------------------- Parquet

def test_parquet_with_zero_or_two_rows_is_refused_accurately():
    env = fitted_envelope("isotonic")
    for rows in (0, 2):
        with pytest.raises(MapError, match=f"exactly one row, this file has {rows}"):
            load(to_parquet_bytes(env, rows=rows))


def _bomb(path, n_values: int) -> None:
    """A one-row Parquet map whose state column holds n_values zeros (a few KB on disk)."""
    env = copy.deepcopy(fitted_envelope("isotonic"))
    del env["state"]["x"]
    env["state_columns"] = ["x"]
    values = pa.array(np.zeros(n_values))
    column = pa.ListArray.from_arrays(pa.array([0, n_values], pa.int32()), values)
    table = pa.table({"x": column}).replace_schema_metadata({maps.PARQUET_KEY: json.dumps(env).encode()})
    pq.write_table(table, path, compression="zstd")


def test_decompression_bomb_is_refused_before_reading(tmp_path):
    path = tmp_path / "bomb.parquet"
    _bomb(path, 62_500_000)  # 500 MB of zeros
    size = path.stat().st_size
    assert size < 100_000
    code = textwrap.dedent(f"""
        import resource, sys
        from calibcli import maps
        from calibcli.errors import CalibWarning, MapError
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            maps.load_map({str(path)!r})
        except MapError as exc:
            print(exc.message)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    message, grown_kb = proc.stdout.splitlines()
    assert "decompression bomb" in message and f"{size} bytes" in message
    assert int(grown_kb) < 100_000, f"loading the bomb grew memory by {grown_kb} KB"
    proc = _calib("apply", str(path), "-", cwd=tmp_path)
    _assert_one_line_error(proc)


@pytest.mark.parametrize("tamper, message", [
    (lambda raw: raw.replace(b'"schema_version": 1', b'"schema_version": NaN'), "NaN is not a JSON number"),
    (lambda raw: raw.replace(b'"schema_version": 1', b'"schema_version": 1, "schema_version": 1'),
     "duplicate key"),
    (lambda raw: b"[" * 5000 + raw + b"]" * 5000, "levels deep"),
    (lambda raw: raw[:-5], "invalid JSON"),
    (lambda raw: raw.replace(b'"state_columns": ["x", "y"]', b'"state_columns": "xy"'), "state_columns"),
    (lambda raw: raw.replace(b'"state_columns": ["x", "y"]', b'"state_columns": ["x", "y", "z"]'),
     "column 'z' is missing"),
    (lambda raw: raw.replace(b'"state_columns": ["x", "y"]', b'"state_columns": ["x"]'),
     "missing state field 'y'"),
    (lambda raw: raw.replace(b'"state": {}', b'"state": {"x": [0.5]}'), "both a column and in the metadata"),
])
def test_parquet_metadata_tampering_is_refused(tamper, message):
    data = maps.envelope_to_parquet_bytes(fitted_envelope("isotonic"))
    table = pq.read_table(pa.BufferReader(data))
    raw = json.dumps(json.loads(table.schema.metadata[maps.PARQUET_KEY]), sort_keys=True).encode()
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata({maps.PARQUET_KEY: tamper(raw)}), sink)
    with pytest.raises(MapError, match=message):
        load(sink.getvalue().to_pybytes())


def test_parquet_maps_keep_strings_in_metadata_and_numbers_as_float64_columns():
    data = maps.envelope_to_parquet_bytes(fitted_envelope("field-aware"))
    table = pq.read_table(pa.BufferReader(data))
    assert "vocab" not in table.column_names and "categorical" not in table.column_names
    assert table.schema.field("a").type == pa.list_(pa.float64())


# ------------------------------------------------------------------------- strict JSON

@pytest.mark.parametrize("text, reason", [
    ("[1, NaN]", "NaN is not a JSON number"),
    ("[-Infinity]", "-Infinity is not a JSON number"),
    ("[1e999999]", "overflows"),
    ("[-1E+400]", "overflows"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ("[" * 65 + "]" * 65, "nested 65 levels deep"),
    ("[" + "1" * 65 + "]", "number literal of 65 characters"),
    ("[1, 2", "invalid JSON (line 1, column 6)"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_strict_json_refuses(text, reason):
    with pytest.raises(strictjson.StrictJSONError, match=reason.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        strictjson.loads(text)


def test_strict_json_accepts_what_json_writes():
    doc = {"a": [0.1, -0.0, 1e-320, 1.7976931348623157e308, 2**63 - 1], "s": 'x"[{\\', "n": None,
           "deep": [[[[[]]]]], "t": True, "e": 1e-300}
    assert strictjson.loads(json.dumps(doc)) == doc
    assert strictjson.loads("[" * 64 + "]" * 64) is not None
    assert strictjson.loads('["[[[[", "]]]"]') == ["[[[[", "]]]"]


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text()
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                    max_leaves=20))
@settings(max_examples=200, deadline=None)
def test_strict_json_round_trips_json_documents(doc):
    assert strictjson.loads(json.dumps(doc)) == doc


def test_ilps_logit_map_with_a_flat_end_segment_is_finite_at_the_largest_scores():
    env = copy.deepcopy(fitted_envelope("ilps"))
    env["params"]["score_kind"] = "logit"
    env["state"]["b"][-1] = env["state"]["b"][-2]
    env["state"]["b"][0] = env["state"]["b"][1]
    p = load(to_json_bytes(env)).predict(np.array([-1.7976931348623157e308, 1.7976931348623157e308]))
    assert np.all(np.isfinite(p))
