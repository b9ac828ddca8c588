"""The bad-input corpus (tests/bad_inputs/cases.toml) through the real CLI, and the unusual
inputs that must simply work (CRLF, BOM, gzip, TSV, JSON lines, float32/int, true/false).

Each bad case: exit 2, one `error:` line naming file/column/row/value (+ at most one `hint:`),
no traceback, nothing on stdout, and no file (not even a temporary one) left in `out/`.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from calibcli.calibrators import available
from calibcli.cli.app import app

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
runner = CliRunner()


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """A private copy of the corpus as the working directory, with an empty `out/`."""
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work)
    (work / "out").mkdir()
    monkeypatch.chdir(work)
    return work


def _stdin(case) -> bytes | None:
    if "stdin" not in case:
        return None
    return b"" if case["stdin"] == "" else (CORPUS / case["stdin"]).read_bytes()


def check_failure(case, code: int, stdout: str, stderr: str, out_dir: Path) -> None:
    lines = stderr.strip().splitlines()
    assert code == case.get("exit", 2), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert stdout == "", f"stdout must stay empty on error, got {stdout[:200]!r}"
    assert 1 <= len(lines) <= 2, stderr
    assert lines[0].startswith("error: "), stderr
    for part in case["error"]:
        assert part in lines[0], f"{part!r} not in {lines[0]!r}"
    if len(lines) == 2:
        assert lines[1].startswith("hint: "), stderr
    if "hint" in case:
        assert len(lines) == 2 and case["hint"] in lines[1], stderr
    assert list(out_dir.iterdir()) == [], "a failed run left files behind"


def test_corpus_is_large_and_well_formed():
    files = [p for p in CORPUS.iterdir() if p.name != "cases.toml"]
    assert len(files) >= 30 and len(CASES) >= 30
    assert len({c["id"] for c in CASES}) == len(CASES), "duplicate case ids"
    for case in CASES:
        assert set(case) <= {"id", "args", "error", "hint", "stdin", "setup", "requires", "exit"}, case


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input(case, corpus):
    if "requires" in case and case["requires"] not in available():
        pytest.skip(f"method {case['requires']!r} is not registered yet")
    if "setup" in case:
        done = runner.invoke(app, case["setup"])
        assert done.exit_code == 0, done.stderr
    result = runner.invoke(app, case["args"], input=_stdin(case))
    check_failure(case, result.exit_code, result.stdout, result.stderr, corpus / "out")


@pytest.mark.parametrize("case_id", ["nan-score", "map-newer-schema", "empty-stdin", "apply-bad-row-late"])
def test_bad_input_in_a_real_process(case_id, corpus):
    """The same checks through the installed `calib` executable (real stdin/stdout, no runner)."""
    case = next(c for c in CASES if c["id"] == case_id)
    exe = Path(sys.executable).parent / "calib"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "calibcli"]
    proc = subprocess.run(cmd + case["args"], input=_stdin(case) or b"", capture_output=True,
                          cwd=corpus, timeout=60)
    check_failure(case, proc.returncode, proc.stdout.decode(), proc.stderr.decode(), corpus / "out")


def test_strict_turns_warnings_into_errors_but_default_only_warns(corpus):
    ok = runner.invoke(app, ["fit", "all_equal_scores.csv"])
    assert ok.exit_code == 0, ok.stderr
    assert "warning: all 5 scores equal 0.5" in ok.stderr
    assert json.loads(ok.stdout)["method"] == "isotonic"  # the warning stays out of the data
    assert "warning" not in ok.stdout
    clean = runner.invoke(app, ["--strict", "fit", "good.csv", "-o", "out/map.json"])
    assert clean.exit_code == 0, clean.stderr
    assert (corpus / "out" / "map.json").exists()


def test_bad_row_after_several_written_batches_leaves_no_file(corpus):
    """The first batches are already written when the last one fails: the temp file goes too."""
    n = 600_000  # several CSV read blocks
    scores = np.round(np.random.default_rng(0).random(n), 6)
    body = "\n".join(np.char.mod("%.6f", scores)) + "\noops\n"
    (corpus / "big.csv").write_text("score\n" + body)
    result = runner.invoke(app, ["apply", "map_ok.json", "big.csv", "-o", "out/big_out.csv"])
    case = {"error": [f"big.csv: column 'score', row {n + 1}: 'oops' is not a number"]}
    check_failure(case, result.exit_code, result.stdout, result.stderr, corpus / "out")


def test_huge_logits_through_a_logistic_map_give_0_and_1_without_noise(corpus):
    """a * 1e300 overflows to inf inside the sigmoid: the answer is exact, stderr stays clean."""
    fitted = runner.invoke(app, ["-q", "fit", "good.csv", "--method", "logistic", "-o", "lg.json"])
    assert fitted.exit_code == 0, fitted.stderr
    result = runner.invoke(app, ["apply", "lg.json", "logits_huge.csv", "--output-format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    p = [json.loads(line)["calibrated"] for line in result.stdout.splitlines()]
    assert p[0] == 0.0 and p[3] == 1.0 and all(0 < v < 1 for v in p[1:3] + p[4:])


@pytest.mark.parametrize("platt", [False, True])
@pytest.mark.parametrize("method", ["isotonic", "logistic", "binning"])
def test_all_equal_scores_give_the_positive_rate(method, platt, corpus):
    result = runner.invoke(app, ["fit", "all_equal_scores.csv", "--method", method, "-o", "eq.json",
                                 "--param", f"platt_correction={str(platt).lower()}"])
    assert result.exit_code == 0, result.stderr
    applied = runner.invoke(app, ["apply", "eq.json", "good.csv", "--output-format", "jsonl"])
    assert applied.exit_code == 0, applied.stderr
    p = [json.loads(line)["calibrated"] for line in applied.stdout.splitlines()]
    # 3 positives of 5; with Platt's targets (the default) (3 * 4/5 + 2 * 1/4) / 5
    np.testing.assert_allclose(p, 0.58 if platt else 0.6, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ unusual but valid

SCORES = [0.1, 0.35, 0.4, 0.6, 0.8, 0.9, 0.35, 0.7]
LABELS = [0, 0, 1, 0, 1, 1, 1, 1]


def _csv(sep: str = ",", eol: str = "\n", labels=LABELS) -> str:
    rows = [f"score{sep}label"] + [f"{s}{sep}{y}" for s, y in zip(SCORES, labels)]
    return eol.join(rows) + eol


def _write_valid(kind: str, d: Path) -> Path:
    if kind == "crlf":
        (p := d / "crlf.csv").write_bytes(_csv(eol="\r\n").encode())
    elif kind == "bom":
        (p := d / "bom.csv").write_bytes(b"\xef\xbb\xbf" + _csv().encode())
    elif kind == "bom-crlf-gzip":
        (p := d / "both.csv.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + _csv(eol="\r\n").encode()))
    elif kind == "gzip":
        (p := d / "scores.csv.gz").write_bytes(gzip.compress(_csv().encode()))
    elif kind == "gzip-no-extension":
        (p := d / "scores.data").write_bytes(gzip.compress(_csv().encode()))
    elif kind == "tsv":
        (p := d / "scores.tsv").write_text(_csv(sep="\t"))
    elif kind == "jsonl":
        (p := d / "scores.jsonl").write_text(
            "".join(json.dumps({"score": s, "label": y}) + "\n" for s, y in zip(SCORES, LABELS)))
    elif kind == "true-false":
        (p := d / "words.csv").write_text(_csv(labels=["true" if y else "false" for y in LABELS]))
    elif kind == "true-false-mixed-case":
        (p := d / "Words.csv").write_text(_csv(labels=["True" if y else "FALSE" for y in LABELS]))
    elif kind == "parquet-float32-int8":
        p = d / "typed.parquet"
        pq.write_table(pa.table({"score": pa.array(SCORES, pa.float32()).cast(pa.float64()).cast(pa.float32()),
                                 "label": pa.array(LABELS, pa.int8())}), p)
    elif kind == "parquet-bool-labels":
        p = d / "bools.parquet"
        pq.write_table(pa.table({"score": SCORES, "label": [bool(y) for y in LABELS]}), p)
    else:
        raise AssertionError(kind)
    return p


def _knots(stdout: str) -> dict:
    return json.loads(stdout)["state"]


@pytest.mark.parametrize("kind", ["crlf", "bom", "bom-crlf-gzip", "gzip", "gzip-no-extension", "tsv",
                                  "jsonl", "true-false", "true-false-mixed-case", "parquet-bool-labels"])
def test_unusual_but_valid_inputs_fit_the_same_map(kind, tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text(_csv())
    reference = runner.invoke(app, ["fit", str(plain)])
    assert reference.exit_code == 0, reference.stderr
    result = runner.invoke(app, ["fit", str(_write_valid(kind, tmp_path))])
    assert result.exit_code == 0, result.stderr
    assert _knots(result.stdout) == _knots(reference.stdout)


def test_float32_and_integer_columns_work(tmp_path):
    path = _write_valid("parquet-float32-int8", tmp_path)
    result = runner.invoke(app, ["fit", str(path), "--method", "logistic", "-o", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.stderr
    out = tmp_path / "out.parquet"
    applied = runner.invoke(app, ["apply", str(tmp_path / "m.json"), str(path), "-o", str(out)])
    assert applied.exit_code == 0, applied.stderr
    table = pq.read_table(out)
    assert table.schema.field("score").type == pa.float32()  # passed through unchanged
    assert table.schema.field("label").type == pa.int8()
    p = table.column("calibrated").to_numpy()
    assert np.all(np.isfinite(p)) and np.all(np.diff(p[np.argsort(SCORES, kind="stable")]) >= 0)


def test_integer_scores_in_csv_and_crlf_stdin_work(tmp_path):
    data = "score,label\r\n" + "".join(f"{s},{y}\r\n" for s, y in [(0, 0), (0, 1), (0, 0), (1, 1), (1, 1), (1, 0)])
    result = runner.invoke(app, ["fit", "-", "-o", str(tmp_path / "m.json"), "--param", "platt_correction=false"],
                           input=data)
    assert result.exit_code == 0, result.stderr
    applied = runner.invoke(app, ["apply", str(tmp_path / "m.json"), "-"], input=data)
    assert applied.exit_code == 0, applied.stderr
    rows = applied.stdout.splitlines()
    assert rows[0] == '"score","label","calibrated"'
    # 0/1 scores: the map is the positive rate at each of the two scores (1/3 and 2/3).
    p = [float(r.split(",")[2]) for r in rows[1:]]
    np.testing.assert_allclose(p, [1 / 3] * 3 + [2 / 3] * 3, rtol=0, atol=1e-12)
