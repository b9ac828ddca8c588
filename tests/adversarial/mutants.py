"""Corrupt variants of valid map and baseline files, and the check every map mutant must pass.

A mutant map is acceptable in exactly two ways: `calib apply` refuses it (exit 2, one line),
or it applies to a sorted score grid giving finite probabilities in [0, 1], non-decreasing
where the method promises monotonicity.
"""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from calibcli.calibrators import registry

from .harness import Run, calib

HUGE = "__HUGE__"  # replaced by the literal 1e999999 (overflows to inf in most parsers)

# (knots, values) arrays per method; scalar-state methods list their numbers.
ARRAYS = {
    "isotonic": ("x", "y"), "boot-isotonic": ("x", "y"), "enir": ("x", "y"),
    "near-isotonic": ("x", "y"), "bayes-iso": ("x", "y"), "binning": ("edges", "values"),
    "boot-binning": ("edges", "values"), "ilps": ("a", "b"), "field-aware": ("a", "b"),
    "venn-abers": ("c", "p0"),
    "bbq": ("edges", "values"), "spline": ("knots", "a"),
}
SCALARS = {"logistic": ("a", "b"), "beta": ("a", "b", "c"), "beta-ab": ("a", "b", "c"),
           "beta-am": ("a", "b", "c"), "multicalibration": ("intercept", "slope")}
PROBABILITIES = {"y", "values"}  # state arrays whose entries are probabilities


def dumps(doc: Any) -> bytes:
    """JSON with NaN/Infinity literals kept and HUGE turned into 1e999999."""
    return json.dumps(doc, allow_nan=True).replace(f'"{HUGE}"', "1e999999").encode()


def _mid(values: list) -> int:
    return len(values) // 2


def _set(index: Callable[[list], int], value: Any):
    def mutate(values: list) -> list:
        out = list(values)
        out[index(out)] = value
        return out
    return mutate


def _swap(values: list) -> list:
    out = list(values)
    i = max(1, _mid(out))
    out[i - 1], out[i] = out[i], out[i - 1]
    return out


# Mutations of one state array: name -> list -> list (or a non-list replacement).
ARRAY_MUTATIONS: dict[str, Callable[[list], Any]] = {
    "nan": _set(_mid, math.nan),
    "inf": _set(lambda v: -1, math.inf),
    "-inf": _set(lambda v: 0, -math.inf),
    "huge": _set(_mid, HUGE),
    "reversed": lambda v: list(reversed(v)),
    "swapped": _swap,
    "longer": lambda v: list(v) + [v[-1]],
    "shorter": lambda v: list(v)[:-1],
    "empty": lambda v: [],
    "string": _set(_mid, "0.5"),
    "bool": _set(_mid, True),
    "null": _set(_mid, None),
    "nested": _set(_mid, [0.5]),
    "scalar": lambda v: 0.5,
    "text": lambda v: "0,0.5,1",
    "above-1": _set(_mid, 1.5),
    "below-0": _set(lambda v: 0, -0.25),
    "decreasing": lambda v: sorted(v, reverse=True),
}
SCALAR_MUTATIONS: dict[str, Callable[[Any], Any]] = {
    "nan": lambda v: math.nan, "inf": lambda v: math.inf, "-inf": lambda v: -math.inf,
    "huge": lambda v: HUGE, "string": lambda v: str(v), "bool": lambda v: True,
    "null": lambda v: None, "list": lambda v: [v], "negative": lambda v: -5.0,
    "1e308": lambda v: 1e308,
}


def mutate_state(envelope: dict, key: str, mutation: str) -> dict:
    """A deep copy of `envelope` with `state[key]` mutated (`delete` removes it)."""
    doc = copy.deepcopy(envelope)
    state = doc["state"]
    if mutation == "delete":
        del state[key]
    elif isinstance(state[key], list):
        state[key] = ARRAY_MUTATIONS[mutation](state[key])
    else:
        state[key] = SCALAR_MUTATIONS[mutation](state[key])
    return doc


def load_envelope(assets: Path, method: str) -> dict:
    return json.loads((assets / f"{method}.json").read_text())


def parquet_map(envelope: dict, *, rows: int = 1, columns: dict | None = None,
                metadata: bytes | None = None, compression: str = "snappy") -> bytes:
    """A Parquet map laid out like `calib fit -o x.parquet`: list state entries as columns."""
    meta = copy.deepcopy(envelope)
    state = meta.pop("state")
    cols = {k: v for k, v in state.items() if isinstance(v, list) and v and not isinstance(v[0], (list, dict, str))}
    meta["state"] = {k: v for k, v in state.items() if k not in cols}
    meta["state_columns"] = sorted(cols)
    arrays = {k: pa.array([v] * rows, pa.list_(pa.float64())) for k, v in cols.items()}
    arrays.update(columns or {})
    if not arrays:
        arrays = {"_empty": pa.array([None] * rows, pa.null())}
    table = pa.table(arrays)
    raw = metadata if metadata is not None else json.dumps(meta, sort_keys=True).encode()
    table = table.replace_schema_metadata({b"calibcli.map": raw})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression)
    return sink.getvalue().to_pybytes()


def check_refused_or_sound(run: Run, method: str, grid_rows: int) -> str:
    """Either a clean refusal or sound predictions on the sorted grid; returns which."""
    if run.code != 0:
        run.refused()
        return "refused"
    run.ok()
    table = pacsv.read_csv(io.BytesIO(run.out))
    assert table.num_rows == grid_rows, run
    p = np.asarray(table.column("calibrated").to_pylist(), dtype=np.float64)
    assert np.all(np.isfinite(p)), f"{method}: accepted map predicts non-finite values {p[~np.isfinite(p)][:5]}"
    assert np.all((p >= 0) & (p <= 1)), f"{method}: accepted map predicts outside [0, 1]: {p.min()}, {p.max()}"
    if registry.get(method).monotone:
        assert np.all(np.diff(p) >= -1e-12), f"{method}: accepted map is not monotone in the score"
    return "sound"


def apply_mutant(root: Path, method: str, data: bytes, name: str = "m.json", timeout: float = 60) -> Run:
    """Write the mutant, `calib apply` it to the grid, check refusal or soundness."""
    (root / name).write_bytes(data)
    run = calib(["apply", name, "grid.csv"], root, reads=[name, "grid.csv"], timeout=timeout)
    check_refused_or_sound(run, method, 201)
    return run
