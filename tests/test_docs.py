"""The documentation site cannot rot (mkdocs.yml, docs/):

- every `sh` and `python` block of README.md and of every page in docs/ runs, in order per page, in a scratch
  copy of `examples/data/` (a command is one line, backslash continuations joined; `# exits N`
  at its end is the exit code it must give, else 0; set-up lines such as `pip install` are
  skipped; a block right after `<!-- norun: why -->` is not run);
- the reference pages generated from the code (docs/gen_reference.py) name every command,
  option, method, method option and metric, and every metric has its definition;
- `mkdocs build --strict` passes (a broken link or anchor, or a page missing from the nav,
  fails it), and the built site opens in headless Chromium with no console error and no
  horizontal overflow on the home page and a tutorial, at 1280 and 390 pixels wide;
- README.md stays a front door: at most 150 lines, its links to files that exist, its quick
  start exactly the two set-up commands.

The mkdocs tests need the `docs` extra (`.ci/run` installs it) and are skipped without it;
`CALIBCLI_DOCS_SITE` names an already built site to open instead of building one.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^[ \t]*```(\w*)[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
NORUN = re.compile(r"<!--\s*norun\b")
# Set-up commands a reader runs once from the repository root, not from the example data.
SETUP = ("python3 -m venv", ".venv/bin/", "pip install", "git clone", "cd ", "mkdocs ")
# Commands that need a cluster engine (the example jobs run in tests/engines/).
ELSEWHERE = ("python examples/spark_job.py", "python examples/dask_job.py", "spark-submit")
MKDOCS_ENV = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block that runs, in order."""
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip().splitlines()
        if before and NORUN.search(before[-1]):
            continue
        out.append((m.group(1), m.group(2)))
    return out


def _steps(path: Path) -> list[tuple[str, str, int]]:
    """("sh", command, exit code) and ("python", body, 0) of a page, in order."""
    steps = []
    for lang, body in _blocks(path.read_text()):
        if lang == "python":
            steps.append(("python", body, 0))
        elif lang == "sh":
            for line in re.sub(r"\\\n\s*", "", body).splitlines():
                line = line.strip()
                if not line or line.startswith("#") or line.startswith(SETUP) or line.startswith(ELSEWHERE):
                    continue
                expect = re.search(r"#\s*exits\s+(\d+)\s*$", line)
                steps.append(("sh", line, int(expect.group(1)) if expect else 0))
    return steps


RUNNABLE = {str(p.relative_to(DOCS)): _steps(p) for p in _pages()}
RUNNABLE["README.md"] = _steps(ROOT / "README.md")  # its heart runs like a page; set-up lines are skipped
RUNNABLE = {page: steps for page, steps in RUNNABLE.items() if steps}


def test_the_pages_have_runnable_examples():
    assert sum(len(s) for s in RUNNABLE.values()) >= 60, RUNNABLE
    for page in ("README.md", "tutorials/python.md", "tutorials/batch-ci.md", "tutorials/fields.md", "tutorials/reviewer.md"):
        assert page in RUNNABLE, page


@pytest.mark.parametrize("page", sorted(RUNNABLE))
def test_page_examples_run_in_order(page, tmp_path):
    for f in (ROOT / "examples" / "data").iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "COLUMNS": "120", "MPLBACKEND": "Agg"}
    for kind, step, code in RUNNABLE[page]:
        argv = ["bash", "-o", "pipefail", "-c", step] if kind == "sh" else [sys.executable, "-c", step]
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == code, f"{page}: {step}\nexit {proc.returncode}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (page, step, proc.stderr)


# ------------------------------------------------------------------ generated reference

@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    sys.path.insert(0, str(DOCS))
    try:
        import gen_reference
    finally:
        sys.path.remove(str(DOCS))
    return gen_reference.pages()


def test_reference_names_every_command_and_option(reference):
    import typer

    from calibcli.cli.app import app

    page = reference["reference/cli.md"]
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert f"## calib {name}" in page
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in page, (name, opt)
    from calibcli.requests.bounds import OPTIONS

    for option, bound in OPTIONS.items():
        assert bound.describe() in page, option


def test_reference_names_every_method_and_option(reference):
    from calibcli.calibrators import registry

    page = reference["reference/methods.md"]
    for method in registry.catalogue_json():
        section = page.split(f"\n## {method['name']}\n", 1)[1].split("\n## ", 1)[0]
        for param in method["params"]:
            assert f"| `{param['name']}` |" in section, (method["name"], param["name"])


def test_every_metric_has_a_definition_and_a_reference_entry(reference):
    from calibcli.requests import metrics as defs
    from calibcli.requests import metrics

    assert set(defs.DEFINITIONS) == set(metrics.METRICS)
    assert set(defs.KCLASS_DEFINITIONS) == set(metrics.KCLASS_BASE)
    page = reference["reference/metrics.md"]
    for key in metrics.ALL_METRICS:
        assert f"JSON key: `{key}`" in page, key


def test_reference_schemas_show_real_documents(reference):
    from calibcli.evaluation.results import EVALUATION_FORMAT
    from calibcli.maps.envelope import FORMAT

    page = reference["reference/schemas.md"]
    assert f'"format": "{FORMAT}"' in page and f'"format": "{EVALUATION_FORMAT}"' in page
    errors = reference["reference/errors.md"]
    assert "| 1 | `GATE_FAILED` |" in errors and "`InputError`" in errors


def test_the_layout_names_every_module():
    """docs/layout.md's "Every module" block names each module of calibcli/ and of its packages
    (the method families of calibrators/ and the two engines are named as groups)."""
    text = (DOCS / "layout.md").read_text()
    start = text.index("## Every module")
    block = text[start:text.index("```", text.index("```", start) + 3)]
    grouped = {"calibrators", "engines"}
    missing = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "calibcli").rglob("*.py"))
               if path.name not in ("__init__.py", "__main__.py", "_version.py")
               and path.parent.name not in grouped
               and not re.search(rf"\b{re.escape(path.stem)}(\.py)?\b", block)]
    assert missing == []


# ------------------------------------------------------------------ the README

QUICK_START = (
    'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]" && PATH="$PWD/.venv/bin:$PATH" sh examples/quickstart.sh',
    ".venv/bin/python -m pytest -q -n auto --dist loadfile",
)


def test_readme_is_a_front_door():
    """README.md: at most 150 lines, every relative link to a file that exists, and a quick start of
    exactly two set-up commands (install and run the main job; run the tests)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    quick = readme[readme.index("## Quick start"):]
    quick = quick[:quick.index("\n## ", 1)]
    setup = [m.group(2).strip() for m in FENCE.finditer(quick) if m.group(2).strip().startswith(SETUP)]
    assert tuple(setup) == QUICK_START, setup
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


# ------------------------------------------------------------------ the built site

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("CALIBCLI_DOCS_SITE")
    if given:
        return Path(given)
    for module in ("mkdocs", "material", "mkdocs_gen_files", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]'; .ci/run installs it)")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                          env={**os.environ, **MKDOCS_ENV}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_site_builds_strictly_with_every_page(site):
    for page in ("index.html", "tutorials/batch-ci/index.html", "reference/cli/index.html",
                 "reference/methods/index.html", "reference/metrics/index.html", "reference/api/index.html",
                 "reference/schemas/index.html", "explanation/venn-abers/index.html", "layout/index.html"):
        assert (site / page).exists(), page
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "predict_interval" in api or "calibcli.api.fit" in api


PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{src}" style="width:{width}px;height:900px;border:0"></iframe><pre id="out">pending</pre>
<script>
const f = document.getElementById("f");
f.addEventListener("load", () => setTimeout(() => {{
  const d = f.contentDocument;
  document.getElementById("out").textContent = "RESULT" + JSON.stringify({{
    scrollWidth: d.documentElement.scrollWidth, innerWidth: f.contentWindow.innerWidth,
    title: d.title}}) + "END";
}}, 300));
</script></body></html>"""


@pytest.fixture(scope="module")
def served(site, tmp_path_factory):
    """The site on a loopback HTTP server (as a reader gets it: search and scripts load)."""
    root = tmp_path_factory.mktemp("served")
    shutil.copytree(site, root / "site")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root / "site"))

    class Quiet(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass

    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = Quiet(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root / "site", f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("page", ["", "tutorials/batch-ci/"])
def test_site_renders_without_errors_or_overflow(served, page, width, tmp_path):
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    folder, base = served
    probe = folder / f"probe_{width}_{page.strip('/').replace('/', '_') or 'home'}.html"
    probe.write_text(PROBE.format(src=f"/{page}", width=width))
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width + 40},1200",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=8000", "--dump-dom",
         f"{base}/{probe.name}"],
        capture_output=True, text=True, timeout=120)
    found = re.search(r"RESULT(.*?)END", proc.stdout)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"'))
    assert result["innerWidth"] == width, result
    assert result["scrollWidth"] == width, f"{page or 'home'} at {width}px overflows: {result}"
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
