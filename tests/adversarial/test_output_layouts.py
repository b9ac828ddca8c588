"""The output policy as a property: over generated directory trees (inputs, parts, maps,
summaries, unrelated files, earlier outputs, symlinked folders), an output chosen equal to,
above, below or beside a path the command reads, with and without `--force`, run through the
real `calib`:

- no file the command reads and no unrelated file is ever deleted or changed;
- an output that is, contains or lies inside a read path is refused: exit 2, one `error:`
  line (and an optional `hint:`), and the whole tree is left exactly as it was;
- `--force` replaces only a directory holding calib's marker and the files it lists;
- an output beside the inputs, in a fresh place, works (so refusing everything cannot pass).

The oracle below computes the policy from resolved paths, independently of `io.targets`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from .harness import calib, execute, fingerprint

MARKER = ".calibcli-output"
NAMES = ("a", "b", "c")
COMMANDS = ("apply-dir", "apply-glob", "apply-file", "fit", "summarize", "evaluate", "evaluate-plot", "compare",
            "fit-summary", "fit-glob")
RELATIONS = ("equal", "ancestor", "descendant", "sibling", "fresh", "marked", "marked-dirty", "unrelated-dir")


def _scores(path: Path, seed: int, rows: int = 40) -> None:
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(rows), 3)
    y = (rng.random(rows) < s).astype(np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"score": s, "label": y}), path)


def _csv(path: Path, seed: int, rows: int = 40) -> None:
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(rows), 3)
    y = (rng.random(rows) < s).astype(np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("score,label\n" + "".join(f"{a},{b}\n" for a, b in zip(s, y)))


_MAP_CACHE: dict[str, bytes] = {}


def _fitted(kind: str) -> bytes:
    """A map (or summary) from the library, made once (setup, not the case under test)."""
    if kind not in _MAP_CACHE:
        from calibcli.fitting import pipeline as fitting, summary

        d = Path(tempfile.mkdtemp())
        _csv(d / "train.csv", 99, 200)
        if kind == "map":
            fitting.fit_file(str(d / "train.csv"), fitting.FitRequest.build("isotonic"), out=str(d / "m.json"))
            _MAP_CACHE[kind] = (d / "m.json").read_bytes()
        else:
            summary.save(summary.summarize_file(str(d / "train.csv")), str(d / "s.json"))
            _MAP_CACHE[kind] = (d / "s.json").read_bytes()
        shutil.rmtree(d)
    return _MAP_CACHE[kind]


def _marked(path: Path, dirty: bool) -> None:
    """An earlier output directory as calib writes it: parts plus a marker listing them."""
    _scores(path / "x" / "p.parquet", 7)
    files = {"x/p.parquet": (path / "x" / "p.parquet").stat().st_size}
    (path / MARKER).write_text(json.dumps({"format": "calibcli.output", "version": 1, "files": files}))
    if dirty:
        (path / "x" / "mine.txt").write_text("not calib's\n")


def _real(p: Path) -> str:
    return os.path.realpath(p)


def _within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


@st.composite
def layouts(draw):
    folders = draw(st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
                            min_size=2, max_size=4, unique=True))
    return {
        "folders": folders,
        "parts": draw(st.sampled_from(folders)),
        "nested_part": draw(st.booleans()),
        "map": draw(st.sampled_from(["", *folders])),
        "notes": draw(st.lists(st.sampled_from(["", *folders]), min_size=1, max_size=3)),
        "command": draw(st.sampled_from(COMMANDS)),
        "relation": draw(st.sampled_from(RELATIONS)),
        "pick": draw(st.integers(0, 10)),
        "depth": draw(st.integers(1, 3)),
        "alias": draw(st.booleans()),
        "force": draw(st.booleans()),
        "absolute": draw(st.booleans()),
        "input_alias": draw(st.booleans()),
    }


def _build(root: Path, lay: dict) -> dict:
    """Make the tree; returns the command's read paths (relative to root) and the unrelated files."""
    for f in lay["folders"]:
        (root / f).mkdir(parents=True, exist_ok=True)
    parts_dir = root / lay["parts"] / "in"
    _scores(parts_dir / "p0.parquet", 1)
    _scores(parts_dir / ("k=1/p1.parquet" if lay["nested_part"] else "p1.parquet"), 2)
    map_path = root / lay["map"] / "m.json"
    map_path.write_bytes(_fitted("map"))
    summary_path = root / lay["map"] / "s.json"
    summary_path.write_bytes(_fitted("summary"))
    csv_path = root / lay["parts"] / "train.csv"
    _csv(csv_path, 3)
    notes = []
    for i, f in enumerate(lay["notes"]):
        note = root / f / f"notes{i}.txt"
        note.write_text(f"note {i}\n")
        notes.append(note)
    rel = lambda p: os.path.relpath(p, root)  # noqa: E731
    part0 = parts_dir / "p0.parquet"
    matched = sorted(parts_dir.rglob("*.parquet"))  # a glob reads the files it matches, not their folder
    reads = {
        "apply-dir": [map_path, parts_dir], "apply-glob": [map_path, *matched],
        "apply-file": [map_path, part0], "fit": [csv_path], "summarize": [parts_dir],
        "evaluate": [part0, map_path], "evaluate-plot": [parts_dir, map_path], "compare": [part0],
        "fit-summary": [summary_path], "fit-glob": matched,
    }[lay["command"]]
    return {"reads": reads, "notes": notes, "parts_dir": parts_dir, "part0": part0, "map": map_path,
            "summary": summary_path, "csv": csv_path, "rel": rel}


def _output(root: Path, lay: dict, built: dict) -> Path:
    """The output path, chosen by its relation to one of the command's read paths."""
    reads = built["reads"]
    read = reads[lay["pick"] % len(reads)]
    directory_out = lay["command"] in ("apply-dir", "apply-glob")
    leaf = "out" if directory_out else {"apply-file": "out.csv", "evaluate-plot": "out.svg"}.get(lay["command"], "out.json")
    relation = lay["relation"]
    if relation == "equal":
        return read
    if relation == "ancestor":
        up = read
        for _ in range(lay["depth"]):
            if up == root:
                break
            up = up.parent
        return up
    if relation == "descendant":
        return read / ("x/" * (lay["depth"] - 1)) / leaf
    if relation == "sibling":
        return read.parent / leaf
    if relation == "fresh":
        (root / "fresh").mkdir(exist_ok=True)
        return root / "fresh" / leaf
    if relation in ("marked", "marked-dirty"):
        _marked(root / "prev", dirty=relation == "marked-dirty")
        return root / "prev"
    notes_dir = built["notes"][lay["pick"] % len(built["notes"])].parent
    return notes_dir


def _alias(root: Path, out: Path) -> Path:
    """Spell `out` through a symlink to its parent folder (or to itself when it is a folder)."""
    base = out if out.is_dir() else out.parent
    link = root / "lnk"
    if link.exists() or link.is_symlink():
        return out
    link.symlink_to(base, target_is_directory=True)
    return link if base == out else link / out.name


def _args(root: Path, lay: dict, built: dict, out: str) -> list[str]:
    r = built["rel"]
    if lay["input_alias"]:  # the inputs spelled through a symlink to the folder that holds them
        link = root / "inlink"
        link.symlink_to(built["parts_dir"].parent, target_is_directory=True)
        spelled = {built["parts_dir"]: link / "in", built["part0"]: link / "in" / "p0.parquet",
                   built["csv"]: link / "train.csv"}
        r = lambda p: os.path.relpath(spelled.get(p, p), root)  # noqa: E731
    cmd = lay["command"]
    force = ["--force"] if lay["force"] else []
    if cmd == "apply-dir":
        return ["apply", r(built["map"]), r(built["parts_dir"]), "-o", out, *force]
    if cmd == "apply-glob":
        return ["apply", r(built["map"]), r(built["parts_dir"]) + "/*.parquet", "-o", out, *force]
    if cmd == "apply-file":
        return ["apply", r(built["map"]), r(built["part0"]), "-o", out, "--output-format", "csv"]
    if cmd == "fit":
        return ["fit", r(built["csv"]), "-o", out]
    if cmd == "summarize":
        return ["summarize", r(built["parts_dir"]), "-o", out]
    if cmd == "evaluate":
        return ["evaluate", r(built["part0"]), "--map", r(built["map"]), "--save-baseline", out]
    if cmd == "evaluate-plot":
        return ["evaluate", r(built["parts_dir"]), "--map", r(built["map"]), "--plot", out]
    if cmd == "fit-glob":
        return ["fit", r(built["parts_dir"]) + "/*.parquet", "-o", out]
    if cmd == "compare":
        return ["compare", r(built["part0"]), "-m", "isotonic", "--folds", "2", "-o", out]
    return ["fit", "--from-summary", r(built["summary"]), "-o", out]


def _snapshot(root: Path) -> dict[str, tuple | None]:
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder) / name
            found[os.path.relpath(p, root)] = fingerprint(p)
    return found


def _conflicts(out: Path, reads: list[Path]) -> bool:
    """The oracle: the output is, contains or lies inside a read path (resolved)."""
    o = _real(out)
    for read in reads:
        r = _real(read)
        if o == r or _within(r, o) or (os.path.isdir(r) and _within(o, r)):
            return True
    return False


def _clean_marked(out: Path) -> bool:
    """A directory holding calib's marker and exactly the files it lists (oracle for --force)."""
    marker = out / MARKER
    if out.is_symlink() or not marker.is_file():
        return False
    files = json.loads(marker.read_text()).get("files", {})
    for folder, _, names in os.walk(out):
        for name in names:
            rel = os.path.relpath(Path(folder) / name, out)
            if rel != MARKER and files.get(rel) != (Path(folder) / name).stat().st_size:
                return False
    return True


@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lay=layouts())
@example(lay={"folders": ["a", "a/a"], "parts": "a", "nested_part": False, "map": "", "notes": [""],
              "command": "compare", "relation": "sibling", "pick": 0, "depth": 1, "alias": False,
              "force": False, "absolute": False, "input_alias": False})  # compare may recommend `none`: no map
def test_outputs_never_lose_what_the_command_reads(lay):
    root = Path(tempfile.mkdtemp(prefix="calib-layout-"))
    try:
        built = _build(root, lay)
        out = _output(root, lay, built)
        spelled = _alias(root, out) if lay["alias"] else out
        out_arg = str(spelled) if lay["absolute"] else os.path.relpath(spelled, root)
        args = _args(root, lay, built, out_arg)
        reads = built["reads"]
        conflict = _conflicts(out, reads)
        existed_dir = out.is_dir() and not out.is_symlink() and any(out.iterdir())
        replaceable = _clean_marked(out)
        read_files = [p for r in reads for p in ([r] if r.is_file() else sorted(r.rglob("*")))
                      if p.is_file()]
        protected = {p: fingerprint(p) for p in [*read_files, *built["notes"]]}
        before = _snapshot(root)

        run = execute(args, root)

        for p, fp in protected.items():
            assert fingerprint(p) == fp, f"{p} was read or unrelated, and it changed or vanished: {run!r}"
        assert not run.timed_out, run
        if run.code != 0:
            run.refused()
            assert _snapshot(root) == before, f"a refused run changed the tree: {run!r}"
        else:
            run.ok()
            assert not conflict, f"an output that is, holds or lies in a read path was written: {run!r}"
            if existed_dir:
                assert lay["force"] and replaceable, f"a directory calib did not write was replaced: {run!r}"
            written = Path(_real(out))
            if lay["command"] == "compare" and "calibration does not help here" in run.err:
                assert _snapshot(root) == before, run  # `none` recommended: no map written, nothing touched
            else:
                assert written.exists(), run
            if written.is_dir():
                assert (written / MARKER).is_file(), "an output directory without calib's marker"
            gone = [k for k, v in before.items() if v is not None
                    and not _within(str(root / k), str(root / os.path.relpath(out, root)))
                    and fingerprint(root / k) != v]
            assert not gone, f"paths outside the output changed: {gone} {run!r}"
        if conflict:
            assert run.code == 2, f"an output that is, holds or lies in a read path was not refused: {run!r}"
        if lay["relation"] == "fresh":
            assert run.code == 0, f"a fresh output beside the inputs was refused: {run!r}"
        if lay["relation"] == "marked-dirty":
            assert run.code == 2, run
    finally:
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(umask=st.sampled_from([0o022, 0o027, 0o077, 0o002]), nested=st.booleans())
def test_apply_output_directories_honour_the_umask(umask, nested):
    root = Path(tempfile.mkdtemp(prefix="calib-umask-"))
    try:
        _scores(root / "in" / ("k=1/p.parquet" if nested else "p.parquet"), 1)
        (root / "m.json").write_bytes(_fitted("map"))
        old = os.umask(umask)
        try:
            run = execute(["apply", "m.json", "in", "-o", "out"], root)
        finally:
            os.umask(old)
        run.ok()
        want = 0o777 & ~umask
        for folder, dirs, _ in os.walk(root / "out"):
            for d in [folder, *(os.path.join(folder, x) for x in dirs)]:
                assert stat.S_IMODE(os.stat(d).st_mode) == want, (d, oct(os.stat(d).st_mode), oct(want))
        for p in (root / "out").rglob("*.parquet"):
            assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _issue_tree(root: Path) -> None:
    """The tree of issue #24: work/{m.json, notes.txt, scores/*.parquet}, maps/m.json."""
    _scores(root / "work" / "scores" / "a.parquet", 1)
    _scores(root / "work" / "scores" / "b.parquet", 2)
    (root / "work" / "m.json").write_bytes(_fitted("map"))
    (root / "work" / "notes.txt").write_text("unrelated\n")
    (root / "maps").mkdir()
    (root / "maps" / "m.json").write_bytes(_fitted("map"))


@pytest.mark.parametrize("args", [
    ["apply", "work/m.json", "work/scores/", "-o", "work", "--force"],
    ["apply", "work/m.json", "work/scores/*.parquet", "-o", "work", "--force"],
    ["apply", "maps/m.json", "work/scores", "-o", "maps", "--force"],
    ["apply", "maps/m.json", "work/scores", "-o", ".", "--force"],
    ["apply", "maps/m.json", "work/scores", "-o", "work", "--force"],
], ids=["dir-into-its-parent", "glob-into-its-parent", "into-the-maps-folder", "into-cwd", "into-notes"])
def test_force_never_replaces_what_the_command_reads(tmp_path, args):
    _issue_tree(tmp_path)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    run = calib(args, tmp_path, reads=[os.path.relpath(p, tmp_path) for p in files])
    run.refused(args[args.index("-o") + 1])
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == files
