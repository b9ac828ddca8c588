"""Every shell command in the README runs, as written, against the bundled example data.

The README's `sh` blocks after the quick start are run in order, in one scratch copy of
`examples/data/` (so a file made by an earlier command, e.g. `map.json`, is there for a later
one). A command is one line (backslash continuations joined); `# exits N` at its end says the
exit code it must give, otherwise 0. Commands are run by bash with `pipefail`, so a pipe
fails when any part does. Python blocks that start with `import calibcli` are run too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# Once the README is the short front door (docs/README.draft.md), its examples live in docs/ and
# run in tests/test_docs.py: this file can then be deleted.
pytestmark = pytest.mark.skipif("## Usage" not in README, reason="the README is the front door: tests/test_docs.py")
FENCE = re.compile(r"^[ \t]*```(\w*)[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)
# Set-up commands a reader runs once from the repository root, not from the example data.
SETUP = ("python3 -m venv", ".venv/bin/", "pip install", "git clone", "cd ")
# Commands that need a cluster engine or another tool the README names but CI covers
# elsewhere (the Spark/Dask example jobs run in tests/engines/test_spark.py and tests/engines/test_dask.py).
ELSEWHERE = ("python examples/spark_job.py", "python examples/dask_job.py", "spark-submit")


def _blocks() -> list[tuple[str, str]]:
    if "## Usage" not in README:
        return []
    start = README.index("## Usage")
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(README, start)]


def _commands() -> list[tuple[str, int]]:
    out = []
    for lang, body in _blocks():
        if lang != "sh":
            continue
        text = re.sub(r"\\\n\s*", "", body)
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or line.startswith(SETUP) or line.startswith(ELSEWHERE):
                continue
            expect = re.search(r"#\s*exits\s+(\d+)\s*$", line)
            out.append((line, int(expect.group(1)) if expect else 0))
    return out


COMMANDS = _commands()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("readme")
    for f in (ROOT / "examples" / "data").iterdir():
        if f.is_file():
            shutil.copy(f, work / f.name)
    return work


def test_readme_has_runnable_examples():
    assert len(COMMANDS) >= 25, COMMANDS
    assert any(c.startswith("calib compare") for c, _ in COMMANDS)


def test_readme_commands_run_in_order(scratch):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "COLUMNS": "120"}
    for command, code in COMMANDS:
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=scratch, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == code, f"{command}\nexit {proc.returncode}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (command, proc.stderr)


def test_readme_python_examples_run(scratch):
    blocks = [body for lang, body in _blocks() if lang == "python" and body.lstrip().startswith("import calibcli")]
    assert blocks
    for body in blocks:
        proc = subprocess.run([sys.executable, "-c", body], cwd=scratch, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"{body}\n{proc.stderr[-2000:]}"


def test_the_layout_names_every_module():
    """The README's "Layout" block names each module of calibcli/ and of its packages (the
    method families of calibrators/ and the two engines are named as groups)."""
    start = README.index("## Layout")
    block = README[start:README.index("```", README.index("```", start) + 3)]
    grouped = {"calibrators", "engines"}
    missing = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "calibcli").rglob("*.py"))
               if path.name not in ("__init__.py", "__main__.py", "_version.py")
               and path.parent.name not in grouped
               and not re.search(rf"\b{re.escape(path.stem)}(\.py)?\b", block)]
    assert missing == []
