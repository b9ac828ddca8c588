"""Saved calibration maps: the versioned envelope, written and read as JSON or Parquet.

Envelope (schema version 1)::

    {"format": "calibcli.map", "schema_version": 1, "calibcli_version": "0.1.0",
     "method": "isotonic", "params": {...}, "state": {...}, "training": {...},
     "created": "2026-11-23T10:00:00+00:00"}

`state` is whatever the calibrator's `get_state()` returns, with numpy arrays as lists.
JSON is written with `sort_keys` and floats at repr precision, so float64 values reload
bit-for-bit. A Parquet map is a one-row table: each list-valued state entry is a column
(float64 stays float64) and the rest of the envelope is JSON in the schema metadata under
`calibcli.map`. Both formats go through the same `envelope_to_calibrator`.

This module is the one place that knows the schema version; a future version 2 adds an
upgrade function here and keeps reading version 1 files.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from calibcli import __version__
from calibcli.calibrators import Calibrator, registry
from calibcli.errors import CalibError, MapError

FORMAT = "calibcli.map"
SCHEMA_VERSION = 1
PARQUET_KEY = b"calibcli.map"
_PARQUET_MAGIC = b"PAR1"
_REQUIRED = ("format", "schema_version", "method", "params", "state")


def to_plain(value: Any) -> Any:
    """numpy scalars and arrays (at any depth) to Python numbers and lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


def make_envelope(calibrator: Calibrator, training: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The complete, JSON-safe description of a fitted calibrator."""
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "calibcli_version": __version__,
        "method": calibrator.name,
        "params": to_plain(calibrator.params),
        "state": to_plain(calibrator.get_state()),
        "training": to_plain(dict(training or {})),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def envelope_to_json(envelope: Mapping[str, Any]) -> str:
    """Serialise an envelope; non-finite numbers are refused (JSON has none)."""
    try:
        return json.dumps(envelope, sort_keys=True, indent=2, allow_nan=False) + "\n"
    except ValueError as exc:
        raise MapError(f"cannot save the map: its state holds a non-finite number ({exc})") from None


def envelope_to_parquet_bytes(envelope: Mapping[str, Any]) -> bytes:
    """A one-row Parquet table: list-valued state as columns, the rest in schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    envelope_to_json(envelope)  # same finiteness rule as JSON
    meta = dict(envelope)
    state = dict(meta.pop("state"))
    columns: dict[str, Any] = {}
    for key in list(state):
        if isinstance(state[key], list):
            try:
                columns[key] = pa.array([state[key]])
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                continue  # ragged or mixed lists stay in the JSON metadata
            del state[key]
    meta["state"] = state
    meta["state_columns"] = sorted(columns)
    table = pa.table(columns) if columns else pa.table({"_empty": pa.array([None], pa.null())})
    table = table.replace_schema_metadata({PARQUET_KEY: json.dumps(meta, sort_keys=True).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


MAP_EXTENSIONS = {".json": "json", ".parquet": "parquet", ".pq": "parquet"}


def map_format(path: str, explicit: str | None = None) -> str:
    """`json` or `parquet`: `explicit`, else the extension (.json, .parquet, .pq), else JSON;
    another extension is refused (a map named .csv is a mistake, not a format)."""
    from calibcli.output import output_format

    return output_format(path, explicit, "json", MAP_EXTENSIONS, ("json", "parquet"))[0]


def save_map(
    calibrator: Calibrator, path: str, training: Mapping[str, Any] | None = None,
    fmt: str | None = None,
) -> dict[str, Any]:
    """Write a fitted calibrator to `path` (JSON or Parquet by `fmt` or extension; `-` = stdout)."""
    from calibcli import output

    envelope = make_envelope(calibrator, training)
    if map_format(path, fmt) == "parquet":
        output.refuse_binary_tty(path, "parquet")
        data = envelope_to_parquet_bytes(envelope)
    else:
        data = envelope_to_json(envelope).encode()
    output.write_bytes_atomic(path, data)
    return envelope


def parse_map_bytes(data: bytes, source: str) -> dict[str, Any]:
    """Bytes of a JSON or Parquet map (detected by Parquet's magic bytes) to an envelope."""
    if data[:4] == _PARQUET_MAGIC:
        return _parse_parquet(data, source)
    try:
        envelope = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise MapError(f"{source}: not a calibcli map: invalid JSON{where}") from None
    return _check_envelope(envelope, source)


def _parse_parquet(data: bytes, source: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise MapError(f"{source}: not a readable Parquet map ({exc})") from None
    raw = (table.schema.metadata or {}).get(PARQUET_KEY)
    if raw is None:
        raise MapError(f"{source}: Parquet file without calibcli map metadata: not a calibcli map")
    try:
        envelope = json.loads(raw)
    except json.JSONDecodeError:
        raise MapError(f"{source}: corrupt calibcli map metadata") from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("state"), dict):
        raise MapError(f"{source}: corrupt calibcli map metadata")
    for key in envelope.pop("state_columns", []):
        if key not in table.column_names or table.num_rows != 1:
            raise MapError(f"{source}: map state column {key!r} is missing")
        envelope["state"][key] = table.column(key).to_pylist()[0]
    return _check_envelope(envelope, source)


def _check_envelope(envelope: Any, source: str) -> dict[str, Any]:
    if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
        raise MapError(f"{source}: not a calibcli map (no \"format\": \"{FORMAT}\" field)")
    version = envelope.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MapError(f"{source}: unknown map schema version {version!r}")
    if version > SCHEMA_VERSION:
        raise MapError(
            f"{source}: map schema version {version} is newer than this calibcli "
            f"{__version__} reads (up to {SCHEMA_VERSION})",
            hint="upgrade calibcli: `pip install -U calibcli`",
        )
    missing = [k for k in _REQUIRED if k not in envelope]
    if missing:
        raise MapError(f"{source}: map is missing the field {missing[0]!r}")
    if not isinstance(envelope["params"], dict) or not isinstance(envelope["state"], dict):
        raise MapError(f"{source}: map fields 'params' and 'state' must be objects")
    return envelope


def envelope_to_calibrator(envelope: Mapping[str, Any], source: str) -> Calibrator:
    """Rebuild the fitted calibrator an envelope describes."""
    method = envelope["method"]
    try:
        cls = registry.get(method)
    except CalibError:
        raise MapError(
            f"{source}: map is for method {method!r}, which this calibcli does not have",
            hint="available methods: " + ", ".join(registry.available()),
        ) from None
    try:
        return cls.from_state(envelope["params"], envelope["state"])
    except CalibError as exc:
        raise MapError(f"{source}: {exc.message}", hint=exc.hint) from None
    except KeyError as exc:
        raise MapError(f"{source}: {method} map is missing state field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise MapError(f"{source}: {method} map has invalid state ({exc})") from None


def load_map(path: str) -> tuple[Calibrator, dict[str, Any]]:
    """Read a map file (or `-` for stdin) and return (calibrator, envelope)."""
    from calibcli import io

    data = io.read_bytes(path, what="map")
    source = io.display_name(path)
    envelope = parse_map_bytes(data, source)
    return envelope_to_calibrator(envelope, source), envelope
