"""The evaluation JSON report on disk: `save_evaluation` writes it, `load_baseline` reads it back
for `--baseline`, checking it against the schema of `results.Evaluation.to_json`.
"""

from __future__ import annotations

import math
from typing import Any

from calibcli.requests import bounds
from calibcli.calibrators import params as options
from calibcli import io
from calibcli.maps import strictjson
from calibcli.io import targets
from calibcli.errors import InputError
from calibcli.evaluation.metrics import binary as metrics_table
from calibcli.evaluation.results import EVALUATION_FORMAT, SCHEMA_VERSION, Baseline, Evaluation


def save_evaluation(evaluation: Evaluation, path: str) -> None:
    """Write the JSON report where a later `--baseline` can read it (atomically)."""
    targets.write_bytes_atomic(path, evaluation.to_json_bytes())


BASELINE_LIMITS = strictjson.Limits(max_bytes=256 << 20)
MAX_RESULTS = 100_000  # results (columns and maps) a baseline may hold


def load_baseline(path: str) -> Baseline:
    """Read a baseline file strictly; a missing, corrupt, crafted or newer file is an InputError.

    The text goes through `strictjson` (no NaN/Infinity, overflowing numbers or duplicate
    keys), and the documented types are required (see `Evaluation.to_json`): result names
    are distinct strings, a result's `columns` (schema 4) a list of names or null, every metric is a finite number or null, `field_col` a string or
    null, `calbin_window` a positive integer or null. A NaN or infinite baseline metric would
    otherwise make every --max-regression check pass.
    """
    raw = io.read_bytes(path, "baseline file", limit=BASELINE_LIMITS.max_bytes)

    def bad(problem: str) -> InputError:
        return InputError(f"{path}: {problem}",
                          hint="write it with `calib evaluate ... --json` or --save-baseline")

    try:
        doc = strictjson.loads(raw, BASELINE_LIMITS)
    except strictjson.StrictJSONError as exc:
        raise bad(f"baseline is not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise bad("not a `calib evaluate --json` report (no 'results' list)")
    if doc.get("format", EVALUATION_FORMAT) != EVALUATION_FORMAT:
        raise bad(f"baseline 'format' is {doc['format']!r:.40}, not {EVALUATION_FORMAT!r}")
    version = doc.get("schema_version")
    if not _is_int(version) or version < 1:
        raise bad(f"baseline has no valid schema_version (got {version!r:.40})")
    if version > SCHEMA_VERSION:
        raise InputError(f"{path}: baseline schema version {version} is newer than this calibcli "
                         f"reads (up to {SCHEMA_VERSION})", hint="upgrade calibcli")
    field_col, window = doc.get("field_col"), doc.get("calbin_window")
    if field_col is not None and not isinstance(field_col, str):
        raise bad(f"baseline 'field_col' is {field_col!r:.40}, not a column name or null")
    window_ok, window_is = _at_least("--calbin-window", True)
    if window is not None and not window_ok(window):
        raise bad(f"baseline 'calbin_window' is {window!r:.40}, not {window_is} or null")
    settings = {}
    for key, valid, what in _SETTING_TYPES:
        value = doc.get(key)
        if value is not None and not valid(value):
            raise bad(f"baseline {key!r} is {value!r:.40}, not {what} or null")
        settings[key] = value
    if len(doc["results"]) > MAX_RESULTS:
        raise bad(f"baseline has {len(doc['results'])} results, more than {MAX_RESULTS}")
    results: dict[str, dict[str, float | None]] = {}
    columns: dict[str, list[str] | None] = {}
    for i, entry in enumerate(doc["results"]):
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
                or not isinstance(entry.get("metrics"), dict)):
            raise bad(f"results[{i}] has no name or metrics")
        name = entry["name"]
        if name in results:
            raise bad(f"results[{i}]: the name {name!r:.60} appears twice")
        if entry.get("kind", "column") not in ("column", "map"):
            raise bad(f"results[{i}] kind is {entry['kind']!r:.40}, not 'column' or 'map'")
        values = {}
        for key, value in entry["metrics"].items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise bad(f"results[{i}] metric {key!r:.40} is {value!r:.40}, not a number")
            values[key] = None if value is None else float(value)  # strictjson: always finite
        infinite = entry.get("infinite") or []
        if not isinstance(infinite, list) or any(not isinstance(k, str) or k not in values or values[k] is not None
                                                 for k in infinite):
            raise bad(f"results[{i}] 'infinite' is {infinite!r:.40}, not a list of its metrics written null")
        values.update(dict.fromkeys(infinite, math.inf))  # +inf, which JSON cannot hold (`Evaluation.to_json`)
        results[name] = values
        cols = entry.get("columns")
        if cols is not None and (not isinstance(cols, list) or not all(isinstance(c, str) for c in cols)):
            raise bad(f"results[{i}] columns is {cols!r:.40}, not a list of column names or null")
        columns[name] = cols
    return Baseline(path, field_col, window, results, settings, columns)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _at_least(option: str, integer: bool) -> tuple[Any, str]:
    """A test that a baseline setting is a number `option` may take (its lower bound in
    `bounds.OPTIONS`), and what it must be, for the refusal."""
    bound = bounds.OPTIONS[option]
    number = _is_int if integer else (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
    above = (lambda v: v > bound.low) if bound.low_open else (lambda v: v >= bound.low)
    low = f"{bound.low:g}"
    what = (("a positive integer" if bound.low == 1 else f"an integer of at least {low}") if integer else
            "a positive number" if bound.low_open and bound.low == 0 else f"a number above {low}")
    return (lambda v: number(v) and above(v)), what


_SETTING_TYPES = (
    ("ece_bins", *_at_least("--ece-bins", True)),
    ("hl_groups", *_at_least("--hl-groups", True)),
    ("ece_strategy", lambda v: v in options.ECE_STRATEGIES, " or ".join(map(repr, options.ECE_STRATEGIES))),
    ("weight_col", lambda v: isinstance(v, str), "a column name"),
    ("step", *_at_least("--step", False)),
    ("label_col", lambda v: isinstance(v, str), "a column name"),
    ("score_col", lambda v: isinstance(v, str), "a column name"),
    ("segment_cols", lambda v: isinstance(v, list) and all(isinstance(c, str) and c for c in v),
     "a list of column names"),
    ("segment_bins", *_at_least("--segment-bins", True)),
    ("segment_top", *_at_least("--segment-top", True)),
    ("segment_depth", *_at_least("--segment-depth", True)),
    ("segment_min_rows", *_at_least("--segment-min-rows", True)),
    ("segment_max", *_at_least("--segment-max", True)),
)
