"""The reading side of `calibcli.io`: formats and sniffing, paths, capped reads, checked columns."""

from __future__ import annotations

import gzip
import subprocess

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibcli.kinds import labels
from calibcli import io
from calibcli.errors import InputError, MapError, shown

ROWS = b"score,label\n0.25,0\n0.75,1\n"


@pytest.mark.parametrize("name,data,fmt", [
    ("a.csv", ROWS, "csv"),
    ("a.txt", ROWS, "csv"),
    ("a.tsv", ROWS.replace(b",", b"\t"), "tsv"),
    ("noext", ROWS.replace(b",", b"\t"), "tsv"),
    ("a.jsonl", b'{"score": 0.25, "label": 0}\n{"score": 0.75, "label": 1}\n', "jsonl"),
    ("a.csv.gz", gzip.compress(ROWS, mtime=0), "csv"),
    ("zipped", gzip.compress(b"\xef\xbb\xbf" + ROWS.replace(b"\n", b"\r\n"), mtime=0), "csv"),
])
def test_format_from_extension_or_sniffed_and_the_same_values(tmp_path, name, data, fmt):
    path = tmp_path / name
    path.write_bytes(data)
    table = io.read_table(str(path))
    assert io.open_source(str(path)).format == fmt
    assert io.scores_from(table, "score", name).tolist() == [0.25, 0.75]
    assert labels.from_file(table, "label", name).tolist() == [0.0, 1.0]


def test_read_bytes_is_capped_and_names_the_file(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 3000)
    assert io.read_bytes(str(big), limit=3000) == b"x" * 3000
    with pytest.raises(MapError, match="big.json: more than 0 MiB, the most a map file may hold"):
        io.read_bytes(str(big), "map file", MapError, limit=2999)
    with pytest.raises(InputError, match="no such baseline file"):
        io.read_bytes(str(tmp_path / "missing"), "baseline file")
    proc = subprocess.run(["head", "-c", "100", "/dev/zero"], capture_output=True)
    assert len(proc.stdout) == 100
    with pytest.raises(InputError, match="/dev/zero: more than"):
        io.read_bytes("/dev/zero", limit=1 << 20)  # a device that never ends


@pytest.mark.parametrize("path,parts", [("-", False), ("x.csv", False), ("d/*.parquet", True)])
def test_paths_name_stdin_files_and_globs(path, parts):
    assert io.is_parts(path) is parts
    assert io.display_name(path) == ("<stdin>" if path == "-" else path)


@pytest.mark.parametrize("relative,skipped", [
    ("part-0.parquet", False), ("date=1/part-0.parquet", False), ("_SUCCESS", True),
    ("_temporary/0/part-0.parquet", True), (".part-0.parquet.crc", True), ("x/.hidden.parquet", True),
])
def test_spark_bookkeeping_is_skipped(relative, skipped):
    assert io.skipped_part(relative) is skipped


def test_columns_name_the_row_and_value():
    batch = pa.record_batch({"score": pa.array(["0.5", "n/a"]), "label": pa.array([1, 2])})
    with pytest.raises(InputError, match=r"f.csv: column 'score', row 12: 'n/a' is not a number"):
        io.scores_from(batch, "score", "f.csv", offset=10)
    with pytest.raises(InputError, match=r"column 'label', row 2: label 2 is not 0 or 1"):
        labels.from_file(batch, "label", "f.csv")
    feats = io.map_features(pa.record_batch({"f": pa.array(["a", None]), "x": pa.array([1, 2])}),
                            ["f"], ["x"], "f.csv")
    assert feats["f"].tolist() == ["a", ""] and feats["x"].tolist() == [1.0, 2.0]


class _ProbMap:
    needs_probabilities = True
    name = "beta"
    params = {"score_kind": "probability"}


def test_scores_outside_0_1_are_refused_for_probability_maps():
    with pytest.raises(InputError, match=r"row 3: score 1.5 is outside \[0, 1\].*beta map m.json"):
        io.check_scores_for(_ProbMap(), np.array([0.1, 0.2, 1.5]), "score", "in.csv", "m.json")
    io.check_scores_for(_ProbMap(), np.array([0.0, 1.0]), "score", "in.csv", None)


@settings(max_examples=200, deadline=None)
@given(value=st.text(min_size=0, max_size=20))
def test_shown_values_are_inert_when_pasted_into_a_shell(value, tmp_path_factory):
    """Whatever the text, bash reads `shown(value)` back as exactly that text and runs nothing."""
    if "\x00" in value:
        return
    scratch = tmp_path_factory.mktemp("paste")
    out = subprocess.run(["bash", "-c", f"printf %s {shown(value)}"], cwd=scratch, capture_output=True,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.stdout.decode("utf-8", "surrogateescape") == value
    assert list(scratch.iterdir()) == []


def test_field_codes_of_a_stored_dictionary_equal_those_of_plain_text(tmp_path):
    """Evaluate reads a Parquet field column as its stored dictionary; the codes name the same
    fields (nulls as "") as hashing the text does, and the report is the same."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from calibcli.evaluation.driver import evaluate_file
    from calibcli.requests import EvaluateOptions

    rng = np.random.default_rng(4)
    n = 5000
    field = rng.choice(["a", "b", "", "é ü", None], size=n).tolist()
    p = rng.random(n)
    y = (rng.random(n) < p).astype(float)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"score": p, "label": y, "field": field}), path, row_group_size=1500)
    source, schema, batches = io.iter_batches(str(path), string_columns=("field",), dictionary_columns=("field",))
    plain = io.iter_batches(str(path), string_columns=("field",))[2]
    for batch, text in zip(batches, plain):
        assert pa.types.is_dictionary(batch.column(2).type)
        codes, names = io.field_codes(batch, "field", "d.parquet")
        codes2, names2 = io.field_codes(text, "field", "d.parquet")
        assert [names[c] for c in codes] == [names2[c] for c in codes2]
    csv = tmp_path / "d.csv"
    pacsv.write_csv(pa.table({"score": p, "label": y, "field": [f if f is not None else "" for f in field]}), csv)
    options = EvaluateOptions.build(field_col="field")
    a = evaluate_file(str(path), options).results[0].metrics
    b = evaluate_file(str(csv), options).results[0].metrics
    assert a["field_ece"] == pytest.approx(b["field_ece"], rel=1e-12)
    assert a["field_rce"] == pytest.approx(b["field_rce"], rel=1e-12)


def test_prefetching_serves_the_read_inside_and_drops_an_unused_one(tmp_path, monkeypatch):
    """`calib fit` reads its file ahead while its code imports; a read inside the block takes
    that table, and nothing is left behind for a later command (in another folder)."""
    from calibcli.io import reading

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "s.csv").write_text("score,label\n0.1,0\n0.9,1\n")
    (tmp_path / "b" / "s.csv").write_text("score,label\n0.2,0\n0.3,1\n0.4,1\n")
    monkeypatch.chdir(tmp_path / "a")
    with reading.prefetching("s.csv"):
        assert reading._prefetched
        assert reading.read_table("s.csv").num_rows == 2
    with reading.prefetching("s.csv"):
        pass  # the command failed before reading
    assert not reading._prefetched
    monkeypatch.chdir(tmp_path / "b")
    assert reading.read_table("s.csv").num_rows == 3
    with reading.prefetching("-"), reading.prefetching(str(tmp_path / "missing.csv")):
        assert not reading._prefetched
