"""Pass-through fidelity: every extra column of a Parquet input survives `calib apply` into
every output format (read back and compared: Parquet exactly, text formats by value), or the
run is refused up front with one line naming the column and the format, and no output.

Each format is run once with all columns; a column the run refuses is recorded and dropped,
and the run repeated, so every (type, format) pair gets a verdict from a few processes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from .harness import calib

UTC = dt.timezone.utc


def _columns() -> dict[str, pa.Array]:
    return {
        "i8": pa.array([-128, 0, 1, 127], pa.int8()),
        "i16": pa.array([-32768, 0, None, 32767], pa.int16()),
        "i32": pa.array([-2**31, 0, 7, 2**31 - 1], pa.int32()),
        "i64": pa.array([-2**63, 2**53 + 1, None, 2**63 - 1], pa.int64()),
        "u8": pa.array([0, 1, None, 255], pa.uint8()),
        "u16": pa.array([0, 1, 2, 65535], pa.uint16()),
        "u32": pa.array([0, 1, 2, 2**32 - 1], pa.uint32()),
        "u64": pa.array([0, 1, 2**63, 2**64 - 1], pa.uint64()),
        "f16": pa.array(np.array([0.5, np.nan, np.inf, -np.inf], np.float16)),
        "f32": pa.array(np.array([0.1, np.nan, np.inf, -3.4e38], np.float32)),
        "f64": pa.array([0.1, math.nan, -math.inf, 5e-324]),
        "dec": pa.array([decimal.Decimal("1.10"), decimal.Decimal("-99999999999999999.99"), None,
                         decimal.Decimal("0.00")], pa.decimal128(19, 2)),
        "flag": pa.array([True, False, None, True]),
        "day": pa.array([dt.date(2024, 1, 2), dt.date(1970, 1, 1), None, dt.date(9999, 12, 31)], pa.date32()),
        "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
                        dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), None,
                        dt.datetime(2262, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="Europe/Paris")),
        "ts_naive": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5), None, dt.datetime(2000, 2, 29),
                              dt.datetime(1900, 1, 1)], pa.timestamp("ms")),
        "clock": pa.array([dt.time(1, 2, 3), dt.time(23, 59, 59, 999999), None, dt.time(0, 0)], pa.time64("us")),
        "dur": pa.array([1, -5, None, 10**12], pa.duration("ms")),
        "text": pa.array(['Zürich "quoted"', "a,b;c", "line1\nline2\r\n", "tab\tend \\ back"]),
        "large_text": pa.array(["x", "ÿ€𝄞", "", None], pa.large_string()),
        "raw_ascii": pa.array([b"Paris", b"", None, b"a,b"], pa.binary()),
        "raw_latin1": pa.array([b"Paris", b"caf\xe9", b"M\xfcnchen", None], pa.binary()),
        "cat": pa.array(["a", "b", "a", None]).dictionary_encode(),
        "lst": pa.array([[1, 2], [], None, [3]], pa.list_(pa.int64())),
        "rec": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, None, {"a": None, "b": "z"}]),
        "nil": pa.array([None] * 4, pa.null()),
    }


COLUMNS = _columns()
FORMATS = ["csv", "tsv", "jsonl", "parquet", "csv.gz"]


def _read_output(path: Path, fmt: str, names: list[str]) -> dict:
    """The output as {column: list of values} (text formats: raw strings or JSON values)."""
    data = path.read_bytes()
    if fmt == "csv.gz":
        assert data[:2] == b"\x1f\x8b", "csv.gz output is not gzip"
        data, fmt = gzip.decompress(data), "csv"
    if fmt == "parquet":
        table = pq.read_table(io.BytesIO(data))
        return {n: table.column(n) for n in table.column_names}
    if fmt == "jsonl":
        text = data.decode("utf-8")
        assert "b'" not in text and 'b\\"' not in text, "a Python bytes repr in JSON lines"
        rows = [json.loads(line, parse_float=decimal.Decimal) for line in text.splitlines()]
        return {n: [r.get(n, "<missing>") for r in rows] for n in names}
    table = pacsv.read_csv(io.BytesIO(data), parse_options=pacsv.ParseOptions(
        delimiter="\t" if fmt == "tsv" else ",", newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(column_types={n: pa.binary() for n in names},
                                             strings_can_be_null=False, quoted_strings_can_be_null=False))
    return {n: table.column(n).to_pylist() for n in names}


def _same_float(a, b) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and (
        (math.isnan(a) and math.isnan(b)) or a == b))


def _text_matches(typ: pa.DataType, value, cell: bytes | None) -> bool:
    """A CSV cell holds `value` when it parses back to it (empty cell = null)."""
    if value is None:
        return cell in (None, b"")
    text = cell.decode("utf-8", "surrogateescape") if cell is not None else None
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return cell == value
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_dictionary(typ):
        return text == value
    if pa.types.is_boolean(typ):
        return text.lower() == str(value).lower()
    if pa.types.is_integer(typ):
        return int(text) == value
    if pa.types.is_floating(typ):
        return _same_float(*_in_precision(typ, float(text), value))
    if pa.types.is_decimal(typ):
        return decimal.Decimal(text) == value
    if pa.types.is_date(typ):
        return dt.date.fromisoformat(text) == value
    if pa.types.is_timestamp(typ):
        got = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return got == value if (got.tzinfo is None) == (value.tzinfo is None) else False
    if pa.types.is_time(typ):
        return dt.time.fromisoformat(text) == value
    if pa.types.is_duration(typ):
        return _duration_text(text) == value
    return False


def _in_precision(typ: pa.DataType, a: float, b: float) -> tuple[float, float]:
    """Both numbers rounded to the column's float width (float32 0.1 is written as `0.1`)."""
    width = np.dtype(typ.to_pandas_dtype()).type
    return float(width(a)), float(width(b))


def _duration_text(text: str) -> dt.timedelta | None:
    """A duration as written by Arrow (a count of the column's unit) or ISO-ish seconds."""
    try:
        return dt.timedelta(milliseconds=int(text))
    except ValueError:
        return None


def _json_matches(typ: pa.DataType, value, got) -> bool:
    """A JSON value holds `value`: numbers as numbers, text as text, nested as nested."""
    if value is None:
        return got is None
    if isinstance(got, str) and got.startswith("b'"):
        return False
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return got == value.decode("utf-8")
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_dictionary(typ):
        return got == value
    if pa.types.is_boolean(typ):
        return got is value
    if pa.types.is_integer(typ):
        return type(got) is int and got == value
    if pa.types.is_floating(typ):
        if not math.isfinite(value):
            return got is None  # JSON has no NaN/Infinity: null (never a bare NaN token)
        return isinstance(got, (int, decimal.Decimal)) and _same_float(*_in_precision(typ, float(got), value))
    if pa.types.is_decimal(typ):
        return isinstance(got, (int, decimal.Decimal)) and decimal.Decimal(got) == value
    if pa.types.is_date(typ):
        return got == value.isoformat()
    if pa.types.is_timestamp(typ):
        if not isinstance(got, str):
            return False
        parsed = dt.datetime.fromisoformat(got.replace("Z", "+00:00"))
        return parsed == value and (parsed.tzinfo is None) == (value.tzinfo is None)
    if pa.types.is_time(typ):
        return isinstance(got, str) and dt.time.fromisoformat(got) == value
    if pa.types.is_duration(typ):
        return (type(got) is int and got == value // dt.timedelta(milliseconds=1)) or (
            isinstance(got, str) and _duration_text(got) == value)
    if pa.types.is_list(typ):
        return got == value
    if pa.types.is_struct(typ):
        return got == value
    if pa.types.is_null(typ):
        return got is None
    return False


def _parquet_exact(expected: pa.Array, got: pa.ChunkedArray) -> bool:
    got = got.combine_chunks()
    if got.type != expected.type:
        return False
    a, b = expected.to_pylist(), got.to_pylist()
    floats = pa.types.is_floating(expected.type)
    return len(a) == len(b) and all(_same_float(x, y) if floats else x == y for x, y in zip(a, b))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory, assets):
    """{format: (refused {column: error line}, survived {column: output values}, runs)}."""
    out = {}
    for fmt in FORMATS:
        root = tmp_path_factory.mktemp(f"pass-{fmt.replace('.', '-')}")
        (root / "m.json").write_bytes((assets / "isotonic.json").read_bytes())
        refused: dict[str, str] = {}
        runs = []
        while True:
            cols = {"score": pa.array([0.1, 0.4, 0.6, 0.9])}
            cols.update({k: v for k, v in COLUMNS.items() if k not in refused})
            pq.write_table(pa.table(cols), root / "in.parquet")
            target = f"out.{fmt}"
            run = calib(["apply", "m.json", "in.parquet", "-o", target], root,
                        reads=["m.json", "in.parquet"], output=target)
            runs.append(run)
            if run.code == 0:
                survived = _read_output(root / target, fmt, list(cols))
                (root / target).unlink()
                break
            run.refused()
            named = [c for c in COLUMNS if c not in refused and f"'{c}'" in run.lines[0]]
            assert len(named) == 1, f"refusal names no single column: {run!r}"
            refused[named[0]] = run.lines[0]
            assert len(runs) <= len(COLUMNS) + 1
        out[fmt] = (refused, survived, runs)
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("column", COLUMNS)
def test_column_survives_or_is_refused_by_name(verdicts, column, fmt):
    refused, survived, runs = verdicts[fmt]
    if column in refused:
        line = refused[column].lower()
        assert fmt.split(".")[0].rstrip("l") in line, f"the refusal does not name the format: {line}"
        return
    expected = COLUMNS[column]
    got = survived[column]
    if fmt == "parquet":
        assert _parquet_exact(expected, got), f"{column}: {expected.to_pylist()} -> {got.to_pylist()}"
        return
    match = _json_matches if fmt == "jsonl" else _text_matches
    typ = expected.type
    values = expected.to_pylist()
    bad = [(v, g) for v, g in zip(values, got) if not match(typ, v, g)]
    assert not bad, f"{column} ({typ}) to {fmt}: (input, output) pairs that differ: {bad}"


def test_score_and_probability_survive_every_format(verdicts):
    for fmt, (_, survived, _) in verdicts.items():
        assert "calibrated" in survived or fmt != "parquet", fmt
        if fmt == "parquet":
            p = survived["calibrated"].to_pylist()
            assert all(0 <= v <= 1 for v in p), p


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_latin1_text_in_a_csv_input_passes_through(work, fmt):
    """A latin-1 (not UTF-8) text column of a CSV input: kept byte for byte, or one line."""
    work.put("isotonic.json", "m.json")
    (work.path / "in.csv").write_bytes(b"score,city\n0.2,M\xfcnchen\n0.7,Paris\n0.9,caf\xe9\n")
    run = calib(["apply", "m.json", "in.csv", "-o", f"out.{fmt}"], work.path,
                reads=["m.json", "in.csv"], output=f"out.{fmt}")
    if run.code != 0:
        run.refused("city")
        return
    data = (work.path / f"out.{fmt}").read_bytes()
    if fmt == "csv":
        assert b"M\xfcnchen" in data and b"caf\xe9" in data, data
    else:
        assert b"b'" not in data, data
        rows = [json.loads(line) for line in data.decode("utf-8").splitlines()]
        assert [r["city"] for r in rows][1] == "Paris"
        assert rows[0]["city"] in ("München", "M\\xfcnchen") or "nchen" in rows[0]["city"], rows
