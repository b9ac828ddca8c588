"""Valid input is read by every command, and refusals name the true cause, file, column and row.

Long cells and JSON lines past the read block, bad rows deep in big files (true 1-based rows
across blocks), existing paths with glob characters, dictionary-encoded and uint64 labels,
integers beyond 2**53, duplicate column names, SOURCE_DATE_EPOCH, and the cause of a fit
that sees one class only.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from calibcli.kinds import labels as label_rule
from calibcli import io
from calibcli.maps import envelope as maps
from calibcli.calibrators import create
from calibcli.cli.app import app
from calibcli.errors import FitError, InputError, UsageError

runner = CliRunner()
SLOW = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _rows(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(n), 4)
    return s, (rng.random(n) < s).astype(int)


def _csv(s, y, extra: dict[int, str] | None = None, sep: str = ",") -> str:
    """score,label,note rows; `extra` puts a note in some rows (a long cell)."""
    lines = [f"score{sep}label{sep}note"]
    extra = extra or {}
    lines += [f"{a}{sep}{b}{sep}{extra.get(i, 'n')}" for i, (a, b) in enumerate(zip(s, y))]
    return "\n".join(lines) + "\n"


def _jsonl(s, y, extra: dict[int, str] | None = None) -> str:
    extra = extra or {}
    return "".join(json.dumps({"score": float(a), "label": int(b), "note": extra.get(i, "n")}) + "\n"
                   for i, (a, b) in enumerate(zip(s, y)))


def _fit_map(tmp_path) -> str:
    s, y = _rows(200)
    (tmp_path / "cal.csv").write_text(_csv(s, y))
    res = runner.invoke(app, ["-q", "fit", str(tmp_path / "cal.csv"), "-o", str(tmp_path / "map.json")])
    assert res.exit_code == 0, res.stderr
    return str(tmp_path / "map.json")


# ------------------------------------------------------------------ long rows past the block size


@pytest.fixture
def small_blocks(monkeypatch):
    """Read blocks of 64 KiB (default 1-4 MiB), so small files cross many blocks."""
    from calibcli.io import batches, reading

    monkeypatch.setattr(reading, "_BLOCK", {k: 1 << 16 for k in reading._BLOCK})
    monkeypatch.setattr(batches, "_STREAM_BLOCK", {k: 1 << 16 for k in batches._STREAM_BLOCK})


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl"])
def test_a_cell_of_megabytes_is_read_by_every_command(tmp_path, kind):
    """At the default block sizes: a 5 MB cell deep in the file."""
    _long_row_everywhere(tmp_path, kind, 150_000, 5 << 20, 300_000)


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl"])
@SLOW
@given(at=st.sampled_from([0, 5, 3_000, 7_999]), size=st.sampled_from([70_000, 1 << 20]))
def test_a_row_longer_than_the_block_is_read_anywhere(tmp_path, small_blocks, kind, at, size):
    """Near the start (inside the first block) or deep in the file (after batches were
    streamed), and longer than 16 blocks (read again twice)."""
    _long_row_everywhere(tmp_path, kind, at, size, 8_000)


def _long_row_everywhere(tmp_path, kind, at, size, n):
    """A row longer than pyarrow's read block: every command reads it, apply keeps every row."""
    s, y = _rows(n, seed=at)
    extra = {at: "x" * size}
    path = tmp_path / f"big.{kind}"
    path.write_text(_jsonl(s, y, extra) if kind == "jsonl" else _csv(s, y, extra, "\t" if kind == "tsv" else ","))
    map_path = _fit_map(tmp_path)
    fit = runner.invoke(app, ["fit", str(path)])
    assert fit.exit_code == 0, fit.stderr
    assert json.loads(fit.stdout)["training"]["rows"] == s.size
    for args in (["compare", str(path), "-m", "isotonic", "--folds", "2"],
                 ["summarize", str(path), "-o", str(tmp_path / "s.json")],
                 ["evaluate", str(path), "--prob-col", "score", "--json"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, (args[0], res.stderr)
    assert json.loads((tmp_path / "s.json").read_text())["rows"] == s.size
    out = tmp_path / f"out.{kind}"
    res = runner.invoke(app, ["apply", map_path, str(path), "-o", str(out), "--force"])
    assert res.exit_code == 0, res.stderr
    back = io.read_table(str(out))
    assert back.num_rows == s.size
    assert back.column("score").to_numpy().tolist() == s.tolist()
    assert len(back.column("note")[at].as_py()) == size


def test_a_long_row_on_stdin_is_read_by_fit(tmp_path):
    s, y = _rows(1000)
    data = _jsonl(s, y, {500: "x" * (3 << 20)})
    res = runner.invoke(app, ["fit", "-"], input=data)
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["training"]["rows"] == 1000


# ------------------------------------------------------------------ true row numbers across blocks


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
@SLOW
@given(bad=st.sampled_from([1, 2, 1_000, 2_001, 15_000, 19_999]), stdin=st.booleans())
def test_a_bad_row_deep_in_a_big_file_is_named_by_its_true_row(tmp_path, small_blocks, kind, bad, stdin):
    """Every command names data row `bad` (1-based, header not counted), across blocks. A
    CSV streamed from a pipe (summarize, apply) cannot be read again: it names the rows
    before the failing block instead."""
    s, y = _rows(20_000)
    if kind == "jsonl":
        lines = _jsonl(s, y).splitlines(keepends=True)
        lines[bad - 1] = lines[bad - 1].replace("}", "", 1)  # a syntax error on data row `bad`
        expect = f"row {bad}: JSON parse error"
    else:
        lines = _csv(s, y).splitlines(keepends=True)
        lines[bad] = lines[bad].rstrip("\n") + ",extra\n"  # data row `bad` (line 1 is the header)
        expect = f"row {bad} has 4 fields but the header has 3"
    path = tmp_path / f"bad.{kind}"
    path.write_text("".join(lines))
    map_path = _fit_map(tmp_path)
    name = "<stdin>" if stdin else str(path)
    for args in (["fit"], ["summarize"], ["apply", map_path]):
        out = tmp_path / f"out.{kind}"
        res = runner.invoke(app, [*args, "-" if stdin else str(path), *(["-o", str(out)] if args[0] == "apply" else [])],
                            input="".join(lines) if stdin else None)
        assert res.exit_code == 2, (args, res.stderr)
        first = res.stderr.splitlines()[0]
        assert first.startswith(f"error: {name}: "), (args, first)
        if stdin and kind == "csv" and args[0] != "fit":
            before = re.search(r"(?:a row|a row after row (\d+)) has 4 fields but the header has 3", first)
            assert before and int(before.group(1) or 0) < bad, (args, first)
        else:
            assert expect in first, (args, first)
        assert not out.exists()


@SLOW
@given(bad=st.sampled_from([3, 4_000, 4_001, 19_999]))
def test_a_late_non_number_is_named_by_its_row_when_streamed(tmp_path, small_blocks, bad):
    s, y = _rows(20_000)
    lines = _csv(s, y).splitlines(keepends=True)
    lines[bad] = "oops" + lines[bad][lines[bad].index(","):]
    path = tmp_path / "late.csv"
    path.write_text("".join(lines))
    map_path = _fit_map(tmp_path)
    for args in (["fit", str(path)], ["summarize", str(path)], ["apply", map_path, str(path)]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2
        assert f"column 'score', row {bad}: 'oops' is not a number" in res.stderr.splitlines()[0], res.stderr


# ------------------------------------------------------------------ paths, encodings and types


def test_an_existing_path_with_glob_characters_is_taken_literally(tmp_path):
    s, y = _rows(500)
    (tmp_path / "[b]x.csv").write_text(_csv(s, y))
    (tmp_path / "bx.csv").write_text(_csv(1 - s, y))  # what the glob [b]x.csv would match
    os.mkdir(tmp_path / "[d]")
    pq.write_table(pa.table({"score": s, "label": y}), tmp_path / "[d]" / "part-0.parquet")
    literal = runner.invoke(app, ["fit", str(tmp_path / "[b]x.csv")])
    assert literal.exit_code == 0, literal.stderr
    assert json.loads(literal.stdout)["training"]["score_range"] == [float(s.min()), float(s.max())]
    parts = runner.invoke(app, ["fit", str(tmp_path / "[d]")])
    assert parts.exit_code == 0, parts.stderr
    assert json.loads(parts.stdout)["state"] == json.loads(literal.stdout)["state"]
    assert io.is_parts(str(tmp_path / "[d]")) and not io.is_parts(str(tmp_path / "[b]x.csv"))
    assert io.is_parts(str(tmp_path / "[q]x.csv"))  # not a path that exists: a glob


@given(labels=st.lists(st.booleans(), min_size=2, max_size=50).filter(lambda v: len(set(v)) == 2))
@settings(max_examples=20, deadline=None)
def test_dictionary_encoded_true_false_labels_read_as_plain_text(labels):
    text = pa.array(["true" if v else "false" for v in labels])
    plain = pa.table({"label": text})
    encoded = pa.table({"label": text.dictionary_encode()})
    expected = np.asarray(labels, dtype=np.float64)
    assert label_rule.from_file(plain, "label", "f").tolist() == expected.tolist()
    assert label_rule.from_file(encoded, "label", "f").tolist() == expected.tolist()


def test_dictionary_labels_in_parquet_fit_like_plain_text(tmp_path):
    s, y = _rows(400)
    words = pa.array(np.where(y == 1, "true", "false"))
    pq.write_table(pa.table({"score": s, "label": words.dictionary_encode()}), tmp_path / "d.parquet")
    pq.write_table(pa.table({"score": s, "label": words}), tmp_path / "p.parquet")
    a = runner.invoke(app, ["fit", str(tmp_path / "d.parquet")])
    b = runner.invoke(app, ["fit", str(tmp_path / "p.parquet")])
    assert a.exit_code == 0 and b.exit_code == 0, a.stderr
    assert json.loads(a.stdout)["state"] == json.loads(b.stdout)["state"]


@given(values=st.lists(st.integers(0, 2 ** 64 - 1), min_size=1, max_size=30))
@settings(max_examples=50, deadline=None)
def test_uint64_labels_are_read_or_refused_by_row(values):
    table = pa.table({"label": pa.array(values, pa.uint64())})
    bad = [i for i, v in enumerate(values) if v not in (0, 1)]
    if not bad:
        assert label_rule.from_file(table, "label", "f.parquet").tolist() == [float(v) for v in values]
    else:
        with pytest.raises(InputError, match=rf"^f\.parquet: column 'label', row {bad[0] + 1}: "
                                             rf"label {values[bad[0]]} is not 0 or 1$"):
            label_rule.from_file(table, "label", "f.parquet")


@given(values=st.lists(st.integers(-(2 ** 63), 2 ** 63 - 1), min_size=1, max_size=30))
@settings(max_examples=50, deadline=None)
def test_integer_scores_beyond_2_53_round_to_the_nearest_float64(values):
    """Documented rule: numbers are read as float64; an integer that float64 cannot hold
    exactly is rounded to the nearest one, as a long decimal in a CSV is."""
    for typ in (pa.int64(), pa.uint64()):
        if typ == pa.uint64() and min(values) < 0:
            continue
        got = io.scores_from(pa.table({"score": pa.array(values, typ)}), "score", "f")
        assert got.tolist() == [float(v) for v in values]


def test_integer_scores_beyond_2_53_fit_from_parquet(tmp_path):
    s = np.arange(200, dtype=np.int64) + 2 ** 60 + 1
    y = np.arange(200) % 2
    pq.write_table(pa.table({"score": s, "label": pa.array(y, pa.uint64())}), tmp_path / "big.parquet")
    res = runner.invoke(app, ["fit", str(tmp_path / "big.parquet")])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["training"]["score_range"] == [float(s.min()), float(s.max())]


# ------------------------------------------------------------------ duplicate column names


@given(names=st.lists(st.sampled_from(["score", "label", "id", "x", "note", "é"]), min_size=3, max_size=6)
       .filter(lambda v: len(set(v)) < len(v) and {"score", "label"} <= set(v)))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_duplicate_column_names_are_refused_at_read_naming_column_and_file(tmp_path, names):
    dup = next(n for i, n in enumerate(names) if n in names[:i])
    row = ",".join("1" if n == "label" else "0.5" for n in names)
    csv = tmp_path / "dup.csv"
    csv.write_text(",".join(names) + "\n" + row + "\n" + row.replace("1", "0", 1) + "\n")
    parquet = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([0.5, 0.25]) for _ in names], names=names), parquet)
    map_path = tmp_path / "map.json"
    if not map_path.exists():
        _fit_map(tmp_path)
    for path in (csv, parquet):
        for args in (["fit", str(path)], ["summarize", str(path)], ["evaluate", str(path), "--prob-col", "score"],
                     ["apply", str(map_path), str(path), "--output-format", "jsonl"]):
            res = runner.invoke(app, args)
            assert res.exit_code == 2, (args, res.stdout)
            assert res.stdout == ""
            first = res.stderr.splitlines()[0]
            assert first.startswith(f"error: {path}: column ") and f"appears {names.count(dup)} times" in first
            assert f"'{dup}'" in first


# ------------------------------------------------------------------ SOURCE_DATE_EPOCH


@given(value=st.one_of(
    st.integers(-(10 ** 20), 10 ** 20).map(str),
    st.sampled_from(["", " ", "1e20", "1.5", "-0", "0x10", "²", "１２", "nan", "inf", " 1700000000 ", "253402300800"]),
    st.text(max_size=8).filter(lambda v: "\x00" not in v),
))
@settings(max_examples=40, deadline=None)
def test_source_date_epoch_is_used_or_refused_never_a_crash(value):
    text = value.strip()
    valid = text.isascii() and text.isdigit() and int(text) <= maps.MAX_EPOCH
    os.environ["SOURCE_DATE_EPOCH"] = value
    try:
        if not text:
            assert maps.source_date_epoch() is None
        elif valid:
            assert maps.source_date_epoch() == int(text)
            assert maps._created().startswith(__import__("datetime").datetime.fromtimestamp(
                int(text), __import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
        else:
            with pytest.raises(UsageError, match="^SOURCE_DATE_EPOCH must be a whole number of seconds"):
                maps.source_date_epoch()
    finally:
        del os.environ["SOURCE_DATE_EPOCH"]


@pytest.mark.parametrize("value", ["-5", "1e20", "1.5", "99999999999999999999999"])
def test_a_malformed_source_date_epoch_stops_fit_before_any_work(tmp_path, value):
    s, y = _rows(100)
    (tmp_path / "cal.csv").write_text(_csv(s, y))
    res = runner.invoke(app, ["fit", str(tmp_path / "cal.csv"), "-o", str(tmp_path / "m.json")],
                        env={"SOURCE_DATE_EPOCH": value})
    assert res.exit_code == 2 and res.stderr.startswith("error: SOURCE_DATE_EPOCH must be"), res.stderr
    assert not (tmp_path / "m.json").exists()
    ok = runner.invoke(app, ["fit", str(tmp_path / "cal.csv")], env={"SOURCE_DATE_EPOCH": "0"})
    assert json.loads(ok.stdout)["created"] == "1970-01-01T00:00:00+00:00"


# ------------------------------------------------------------------ one class: the true cause


@given(y=st.lists(st.integers(0, 1), min_size=1, max_size=20),
       w=st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.5]), min_size=20, max_size=20),
       weighted=st.booleans())
@settings(max_examples=100, deadline=None)
def test_a_fit_without_both_classes_says_why(y, w, weighted):
    y = np.asarray(y, dtype=float)
    w = np.asarray(w[: y.size]) if weighted else None
    weights = np.ones_like(y) if w is None else w
    pos, neg = weights[y == 1].sum(), weights[y == 0].sum()
    cal = create("isotonic")
    if pos > 0 and neg > 0:
        cal.fit(np.linspace(0, 1, y.size), y, w)
        return
    with pytest.raises(FitError) as caught:
        cal.fit(np.linspace(0, 1, y.size), y, w)
    message = caught.value.message
    if weights.sum() == 0:
        assert message.startswith("all weights are zero")
    elif np.all(y == 1) or np.all(y == 0):
        assert message.startswith(f"every label is {int(y[0])} (")
    else:
        zero = 1 if pos <= 0 else 0
        assert message.startswith(f"every row with label {zero} has weight zero")
        assert weights[y == zero].sum() == 0
