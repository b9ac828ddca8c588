"""Saved calibration maps: the versioned envelope, written and read as JSON or Parquet.

Envelope (schema version 1)::

    {"format": "calibcli.map", "schema_version": 1, "calibcli_version": "0.1.0",
     "method": "isotonic", "params": {...}, "state": {...}, "training": {...},
     "created": "2026-11-23T10:00:00+00:00"}

`state` is whatever the calibrator's `get_state()` returns, with numpy arrays as lists. A
K-class map (`classmap.ClassMap`) adds "classes", "score_kind", optionally "score_cols" and
"one_vs_rest" (see `classmap.py`); a map without "classes" is a binary map, read as before.
JSON is written with `sort_keys` and floats at repr precision, so float64 values reload
bit-for-bit. A Parquet map is a one-row table: each list of numbers in the state is a column
(float64 stays float64) and the rest of the envelope (strings included) is JSON in the schema
metadata under `calibcli.map`. Both formats go through the same `envelope_to_calibrator`.

Reading is strict (a map may come from anywhere): JSON through `strictjson` (no NaN or
Infinity, no duplicate keys, bounded depth, number length and size); a Parquet map must hold
exactly one row and its metadata must promise a decoded size that is plausible for its file
size before any column is read (a few KB that decode to GBs are refused); the state is
checked by the method's `state_spec` and the rebuilt map is probed (`Calibrator.from_state`).

This module is the one place that knows the schema version; a future version 2 adds an
upgrade function here and keeps reading version 1 files.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import stat
from typing import Any, Mapping

import numpy as np

from calibcli.maps import strictjson
from calibcli._version import __version__
from calibcli.calibrators import Calibrator, registry
from calibcli.calibrators.statespec import MAX_KNOTS
from calibcli.maps.classmap import ClassMap, from_envelope
from calibcli.errors import UPGRADE_HINT, CalibError, MapError, UsageError, shown
from calibcli.kinds import BINARY, KCLASS, kind_of

FORMAT = "calibcli.map"
SCHEMA_VERSION = 1
PARQUET_KEY = b"calibcli.map"
_PARQUET_MAGIC = b"PAR1"
_REQUIRED = ("format", "schema_version", "method", "params", "state")
MAX_MAP_BYTES = 512 << 20  # largest map file read (a 1e6-knot JSON map is ~52 MB)
JSON_LIMITS = strictjson.Limits(max_bytes=MAX_MAP_BYTES)
# Parquet: decoded bytes are bounded from the footer by 16 per value (data, offsets, levels)
# plus the pages' uncompressed size; a map may decode to at most DECODE_RATIO times its file
# size (float knots barely compress) once past DECODE_FLOOR, and never past DECODE_CAP.
DECODE_FLOOR = 64 << 20
DECODE_RATIO = 64
DECODE_CAP = 32 * MAX_KNOTS


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


def make_envelope(calibrator: Calibrator | ClassMap, training: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The complete, JSON-safe description of a fitted calibrator or K-class map."""
    extra = calibrator.envelope_fields()
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "calibcli_version": __version__,
        "method": calibrator.name,
        "params": to_plain(calibrator.params),
        "state": to_plain(calibrator.get_state()),
        "training": to_plain(dict(training or {})),
        "created": _created(),
        **to_plain(extra),
    }


MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z, the last instant an ISO 8601 year of 4 digits holds


def source_date_epoch() -> int | None:
    """`SOURCE_DATE_EPOCH` as whole seconds since 1970, or None when unset or empty.

    As the reproducible-builds specification asks, a malformed value is an error (exit 2),
    not a silent fall-back to the clock: ASCII digits only, at most `MAX_EPOCH`.
    """
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 12 and int(text) <= MAX_EPOCH):
        raise UsageError(f"SOURCE_DATE_EPOCH must be a whole number of seconds from 0 to {MAX_EPOCH}, "
                         f"got {shown(raw[:40])}", hint="unset it, or set it to e.g. $(date +%s)")
    return int(text)


def _created() -> str:
    """Now, or `SOURCE_DATE_EPOCH` when set (reproducible builds): refitting the same data then
    gives the same bytes."""
    epoch = source_date_epoch()
    moment = (_dt.datetime.fromtimestamp(epoch, _dt.timezone.utc) if epoch is not None
              else _dt.datetime.now(_dt.timezone.utc))
    return moment.isoformat(timespec="seconds")


def _non_finite(value: Any, where: str) -> str | None:
    """The path (`state.y[3]`) of the first non-finite float in a plain envelope, or None."""
    if isinstance(value, float):
        return None if np.isfinite(value) else where
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _non_finite(item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        if value and all(type(v) is float for v in value):
            bad = ~np.isfinite(np.asarray(value, dtype=np.float64))
            return f"{where}[{int(np.argmax(bad))}]" if bad.any() else None
        for i, item in enumerate(value):
            found = _non_finite(item, f"{where}[{i}]")
            if found:
                return found
    return None


def envelope_to_json(envelope: Mapping[str, Any]) -> str:
    """Serialise an envelope; non-finite numbers are refused (JSON has none)."""
    where = _non_finite(envelope, "")
    if where is not None:
        value = _value_at(envelope, where)
        raise MapError(f"cannot save the map: {where} is {value!r}, and a map holds only finite numbers "
                       "(JSON has no NaN or infinity)",
                       hint="the fit diverged or was given extreme inputs: check the scores and weights")
    return json.dumps(envelope, sort_keys=True, indent=2, allow_nan=False) + "\n"


def _value_at(envelope: Mapping[str, Any], where: str) -> Any:
    """The value at a path `_non_finite` returned."""
    value: Any = envelope
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", where):
        value = value[int(index)] if index else value[key]
    return value


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
                column = pa.array([state[key]])
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                continue  # ragged or mixed lists stay in the JSON metadata
            if _numeric_leaves(column.type):  # strings stay in the JSON metadata
                columns[key] = column
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
    from calibcli.io.targets import output_format

    return output_format(path, explicit, "json", MAP_EXTENSIONS, ("json", "parquet"))[0]


def save_map(
    calibrator: Calibrator | ClassMap, path: str, training: Mapping[str, Any] | None = None,
    fmt: str | None = None,
) -> dict[str, Any]:
    """Write a fitted calibrator to `path` (JSON or Parquet by `fmt` or extension; `-` = stdout)."""
    from calibcli.io import targets

    envelope = make_envelope(calibrator, training)
    if map_format(path, fmt) == "parquet":
        targets.refuse_binary_tty(path, "parquet")
        data = envelope_to_parquet_bytes(envelope)
    else:
        data = envelope_to_json(envelope).encode()
    check_saved_bytes(data)
    targets.write_bytes_atomic(path, data)
    return envelope


def check_saved_bytes(data: bytes) -> Calibrator | ClassMap:
    """Read a map's bytes back as `load_map` would before they are written: a map that would be
    refused on load is refused on save, with the loader's message."""
    try:
        return envelope_to_calibrator(parse_map_bytes(data, "the map"), "the map")
    except MapError as exc:
        message = exc.message[len("the map: "):] if exc.message.startswith("the map: ") else exc.message
        raise MapError(f"cannot save the map: {message}", hint=exc.hint) from None


def parse_map_bytes(data: bytes, source: str) -> dict[str, Any]:
    """Bytes of a JSON or Parquet map (detected by Parquet's magic bytes) to an envelope."""
    if data[:4] == _PARQUET_MAGIC:
        return _parse_parquet(data, source)
    return _check_envelope(_strict_json(data, source, "not a calibcli map: "), source)


def _strict_json(data: bytes, source: str, what: str) -> Any:
    try:
        return strictjson.loads(data, JSON_LIMITS)
    except strictjson.StrictJSONError as exc:
        raise MapError(f"{source}: {what}{exc}") from None


def _numeric_leaves(kind: Any) -> bool:
    """A (nested) list type whose values are integers or floats."""
    import pyarrow as pa

    while pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind = kind.value_type
    return pa.types.is_floating(kind) or pa.types.is_integer(kind)


def _decoded_bound(meta: Any) -> int:
    """Upper bound on the bytes reading every column allocates, from the footer alone."""
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            pages = chunk.total_uncompressed_size
            if pages < 0 or chunk.num_values < 0 or group.total_byte_size < 0:
                raise ValueError("negative sizes in the footer")
            if chunk.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") and chunk.has_dictionary_page:
                pages *= max(1, chunk.num_values)  # each value may repeat the longest dictionary entry
            total += 16 * chunk.num_values + pages
    return total


def _parse_parquet(data: bytes, source: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        meta = pf.metadata
        rows = meta.num_rows
        bound = _decoded_bound(meta)
        raw = (pf.schema_arrow.metadata or {}).get(PARQUET_KEY)
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        raise MapError(f"{source}: not a readable Parquet map ({_first_line(exc)})") from None
    if raw is None:
        raise MapError(f"{source}: Parquet file without calibcli map metadata: not a calibcli map")
    if rows != 1:
        raise MapError(f"{source}: a Parquet map holds exactly one row, this file has {rows}",
                       hint="write maps with `calib fit -o map.parquet`")
    limit = min(DECODE_CAP, max(DECODE_FLOOR, DECODE_RATIO * len(data)))
    if bound > limit:
        raise MapError(f"{source}: Parquet map of {len(data)} bytes would decode to up to {bound} bytes "
                       f"(limit {limit}): refused as corrupt or a decompression bomb")
    envelope = _strict_json(raw, source, "corrupt calibcli map metadata: ")
    if not isinstance(envelope, dict) or not isinstance(envelope.get("state"), dict):
        raise MapError(f"{source}: corrupt calibcli map metadata (no state object)")
    keys = envelope.pop("state_columns", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
        raise MapError(f"{source}: corrupt calibcli map metadata ('state_columns' is not a list of names)")
    missing = [k for k in keys if k not in pf.schema_arrow.names]
    if missing:
        raise MapError(f"{source}: map state column {missing[0]!r} is missing")
    try:
        table = pf.read(columns=keys, use_threads=False)
    except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
        raise MapError(f"{source}: not a readable Parquet map ({_first_line(exc)})") from None
    for key in keys:
        if key in envelope["state"]:
            raise MapError(f"{source}: map state field {key!r} is both a column and in the metadata")
        envelope["state"][key] = _column_value(table.column(key))
    return _check_envelope(envelope, source)


def _first_line(exc: BaseException) -> str:
    """An Arrow error's first line, at most 200 characters (messages stay one line)."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    return lines[0][:200]


def _column_value(column: Any) -> Any:
    """The one row of a state column: a float/int list as a numpy array, anything else as Python."""
    import pyarrow as pa

    column = column.combine_chunks()
    if column.null_count == 0 and pa.types.is_list(column.type) and (
            pa.types.is_floating(column.type.value_type) or pa.types.is_integer(column.type.value_type)):
        return column.flatten().to_numpy(zero_copy_only=False)
    return column.to_pylist()[0]


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
            hint=UPGRADE_HINT,
        )
    missing = [k for k in _REQUIRED if k not in envelope]
    if missing:
        raise MapError(f"{source}: map is missing the field {missing[0]!r}")
    if not isinstance(envelope["method"], str):
        raise MapError(f"{source}: map field 'method' must be a method name, got {envelope['method']!r:.40}")
    if not isinstance(envelope["params"], dict) or not isinstance(envelope["state"], dict):
        raise MapError(f"{source}: map fields 'params' and 'state' must be objects")
    return envelope


def envelope_to_calibrator(envelope: Mapping[str, Any], source: str) -> Calibrator | ClassMap:
    """Rebuild the fitted calibrator an envelope describes, of its kind (`kinds.kind_of`): a
    binary `Calibrator`, or a `ClassMap` when the envelope names classes."""
    return _BUILDERS[kind_of(envelope)](envelope, source)


def _binary_from_envelope(envelope: Mapping[str, Any], source: str) -> Calibrator:
    method = envelope["method"]
    try:
        cls = registry.get(method)
    except CalibError:
        raise MapError(
            f"{source}: map is for method {method!r:.60}, which this calibcli does not have",
            hint="available methods: " + ", ".join(registry.names()),
        ) from None
    try:
        registry.binary(method)
    except CalibError:
        raise MapError(f"{source}: map field 'classes' is missing, but {method} maps calibrate K classes",
                       hint="the map file is damaged or edited: fit it again") from None
    try:
        return cls.from_state(envelope["params"], envelope["state"])
    except CalibError as exc:
        raise MapError(f"{source}: {exc.message}", hint=exc.hint) from None
    except KeyError as exc:
        raise MapError(f"{source}: {method} map is missing state field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise MapError(f"{source}: {method} map has invalid state ({exc})") from None


_BUILDERS = {BINARY: _binary_from_envelope, KCLASS: from_envelope}


def read_envelope(path: str) -> dict[str, Any]:
    """A map file's envelope (or `-` for stdin), read and checked as every map calib reads."""
    from calibcli import io

    source = io.display_name(path)
    if path != "-":
        try:
            info = os.stat(path)
        except OSError:
            info = None  # io.read_bytes reports it
        if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > MAX_MAP_BYTES:
            raise MapError(f"{source}: map file of {info.st_size} bytes is larger than the "
                           f"{MAX_MAP_BYTES} bytes a map may have")
    data = io.read_bytes(path, "map file", MapError, limit=MAX_MAP_BYTES)
    return parse_map_bytes(data, source)


def load_map(path: str) -> tuple[Calibrator | ClassMap, dict[str, Any]]:
    """Read a map file (or `-` for stdin) and return (calibrator, envelope): a `ClassMap` for
    a K-class map (its envelope has "classes")."""
    from calibcli import io

    envelope = read_envelope(path)
    return envelope_to_calibrator(envelope, io.display_name(path)), envelope
