"""Encodings and safe messages: user text in errors is escaped for the terminal and quoted for
the shell; unusual but valid encodings (CRLF, BOM, gzip, float32, integers, 0/1) just work.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .harness import calib

ROW = b"0.123456,a,0.5\n"
# Control characters that must never reach a terminal raw: C0 except newline, DEL, C1.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]")

SHELL_VALUES = {
    "command-substitution": "x'$(id>f)",
    "backticks": "`echo>f`",
    "semicolon": "0.5;echo>f",
    "double-quotes": 'a"$(echo>f)"',
    "pipe-and-ampersand": "0.5|echo>f&",
}


def _paste(text: str, cwd) -> None:
    """Run `text` as a shell line with no programs on PATH (builtins and redirections only)."""
    subprocess.run(["/bin/bash", "-c", text], cwd=cwd, env={"PATH": "/nonexistent"},
                   capture_output=True, timeout=10)


def _check_terminal_safe(run) -> None:
    assert "\x1b" not in run.err, f"raw escape sequence on stderr: {run!r}"
    bad = RAW_CONTROL.findall(run.err)
    assert not bad, f"raw control characters {bad!r} on stderr: {run!r}"


@pytest.fixture
def late(work):
    """in.csv = 2 MB of good rows (past the first read block) then `value` as a score."""
    work.put("isotonic.json", "m.json")

    def write(value: bytes) -> None:
        (work.path / "in.csv").write_bytes(b"score,field,x\n" + ROW * 130_000 + value + b",a,0.5\n" + ROW)
    return write


@pytest.mark.parametrize("value", SHELL_VALUES.values(), ids=SHELL_VALUES)
@pytest.mark.parametrize("where", ["late", "early"])
def test_score_value_with_shell_syntax_is_quoted_in_the_hint(work, late, tmp_path, value, where):
    if where == "late":
        late(value.encode())
    else:
        (work.path / "in.csv").write_bytes(b"score,field,x\n0.5,a,0.5\n" + value.encode() + b",a,0.5\n")
    run = calib(["apply", "m.json", "in.csv"], work.path, reads=["m.json", "in.csv"])
    run.refused("in.csv")
    _check_terminal_safe(run)
    hint = run.lines[1] if len(run.lines) == 2 else ""
    if value in hint:
        assert shlex.quote(value) in hint, f"the value is in the hint but not shell-quoted: {hint}"
    for n, line in enumerate(run.lines):
        scratch = tmp_path / f"paste{n}"
        scratch.mkdir()
        _paste(line.split(": ", 1)[1], scratch)
        if "`" not in value:  # backquoted commands in the prose are what a user pastes
            for segment in re.findall(r"`([^`]*)`", line):
                _paste(segment, scratch)
        assert not (scratch / "f").exists(), f"pasting the {line.split(':')[0]} line runs a command: {line}"
    assert not (work.path / "f").exists()


CONTROL_CASES = {
    "ansi-in-header": b"sc\x1b[31more,label\n0.2,0\n0.8,1\n",
    "ansi-clear-screen-in-header": b"score\x1b[2J\x1b[H,label\n0.2,0\n0.8,1\n",
    "bell-and-backspace-in-header": b"sco\x07\x08re,label\n0.2,0\n0.8,1\n",
    "c1-csi-in-header": "sco\u009b31mre,label\n0.2,0\n0.8,1\n".encode(),
    "ansi-in-value": b"score,label\n0.2,0\n\x1b[31m0.8,1\n",
    "carriage-return-in-value": b'score,label\n0.2,0\n"0.8\rEVIL",1\n',
    "osc-title-in-value": b"score,label\n0.2,0\n\x1b]0;pwned\x07,1\n",
    "nul-in-value": b"score,label\n0.2,0\n0.\x008,1\n",
}


@pytest.mark.parametrize("case", CONTROL_CASES)
@pytest.mark.parametrize("command", ["fit", "evaluate"])
def test_control_characters_never_reach_stderr_raw(work, case, command):
    (work.path / "in.csv").write_bytes(CONTROL_CASES[case])
    run = calib([command, "in.csv"], work.path, reads=["in.csv"])
    run.refused("in.csv")
    _check_terminal_safe(run)


def test_ansi_late_value_is_escaped(work, late):
    late(b"\x1b[2J0.5")
    run = calib(["apply", "m.json", "in.csv"], work.path, reads=["m.json", "in.csv"])
    run.refused("in.csv")
    _check_terminal_safe(run)


def test_ansi_in_a_map_path_is_escaped(work):
    work.put("small.csv", "in.csv")
    run = calib(["apply", "no\x1b[31msuch.json", "in.csv"], work.path, reads=["in.csv"])
    run.refused("such.json")
    _check_terminal_safe(run)


# ---------------------------------------------------------------------------- valid encodings

def _valid(kind: str, root) -> str:
    rows = [(0.1, 0), (0.35, 0), (0.4, 1), (0.6, 0), (0.8, 1), (0.9, 1), (0.35, 1), (0.7, 1)]
    text = "score,label\n" + "".join(f"{s},{y}\n" for s, y in rows)
    if kind == "crlf":
        (root / "in.csv").write_bytes(text.replace("\n", "\r\n").encode())
    elif kind == "bom":
        (root / "in.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    elif kind == "bom-crlf":
        (root / "in.csv").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    elif kind == "gzip":
        (root / "in.csv.gz").write_bytes(gzip.compress(text.encode()))
        return "in.csv.gz"
    elif kind == "gzip-without-extension":
        (root / "in.csv").write_bytes(gzip.compress(text.encode()))
    elif kind == "float32-parquet":
        pq.write_table(pa.table({"score": pa.array(np.array([s for s, _ in rows], np.float32)),
                                 "label": pa.array([y for _, y in rows], pa.int8())}), root / "in.parquet")
        return "in.parquet"
    elif kind == "integer-scores":
        (root / "in.csv").write_text("score,label\n" + "".join(f"{i},{y}\n" for i, (_, y) in enumerate(rows)))
    elif kind == "zero-one-scores":
        (root / "in.csv").write_text("score,label\n" + "".join(f"{int(s > 0.5)},{y}\n" for s, y in rows))
    elif kind == "true-false-labels":
        (root / "in.csv").write_text("score,label\n" + "".join(f"{s},{'true' if y else 'false'}\n" for s, y in rows))
    elif kind == "tsv-utf8-header":
        (root / "in.tsv").write_text("score\tlabel\tstädte\n" + "".join(f"{s}\t{y}\tZürich\n" for s, y in rows))
        return "in.tsv"
    return "in.csv"


VALID = ["crlf", "bom", "bom-crlf", "gzip", "gzip-without-extension", "float32-parquet",
         "integer-scores", "zero-one-scores", "true-false-labels", "tsv-utf8-header"]


@pytest.mark.parametrize("kind", VALID)
def test_unusual_but_valid_input_just_works(work, kind):
    name = _valid(kind, work.path)
    run = calib(["fit", name, "-m", "isotonic", "-o", "m.json"], work.path, reads=[name], output="m.json").ok()
    envelope = json.loads((work.path / "m.json").read_text())
    assert envelope["training"]["rows"] == 8 and envelope["training"]["positives"] == 5, run
    assert os.path.getsize(work.path / "m.json") > 0
