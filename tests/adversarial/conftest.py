"""Shared inputs of the adversarial suite: small score files and one fitted map per method.

The maps are fitted once per session in-process (setup, not a case under test); every case
copies what it needs into its own empty directory so the harness can see any stray file.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from calibcli.fitting import pipeline as fitting, summary
from calibcli.maps import envelope as maps
from calibcli.evaluation import baseline, driver as evaluate
from calibcli.calibrators import registry

METHODS = registry.available()
# Small settings so the session fixture stays fast; the states keep their full structure.
FIT_PARAMS = {"bayes-iso": {"samples": "200"}, "field-aware": {"epochs": "2", "hidden": "8"}}


def write_scores(path: Path, n: int, seed: int = 0, labels: bool = True) -> None:
    """A CSV of score (in (0, 1)), label, a categorical `field` and a numeric `x` column."""
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    y = (rng.random(n) < s).astype(int)
    f = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n)
    head = "score,label,field,x\n" if labels else "score,field,x\n"
    rows = (f"{a:.6f},{b},{c},{d:.4f}\n" if labels else f"{a:.6f},{c},{d:.4f}\n"
            for a, b, c, d in zip(s, y, f, x))
    path.write_text(head + "".join(rows))


@pytest.fixture(scope="session")
def assets(tmp_path_factory) -> Path:
    """train.csv, score-only grid.csv (sorted scores, constant features), {method}.json/.parquet."""
    d = tmp_path_factory.mktemp("assets")
    write_scores(d / "train.csv", 300)
    write_scores(d / "small.csv", 40, seed=1)
    grid = np.linspace(0.0, 1.0, 201)
    (d / "grid.csv").write_text("score,field,x\n" + "".join(f"{float(g)!r},a,0.5\n" for g in grid))
    for method in METHODS:
        uses = registry.get(method).uses_features
        cols = fitting.Columns("score", "label", None, ("field",) if uses else (), ("x",) if uses else ())
        request = fitting.FitRequest.build(method, FIT_PARAMS.get(method, {}), texts=True, columns=cols)
        result = fitting.fit_file(str(d / "train.csv"), request, out=str(d / f"{method}.json"))
        (d / f"{method}.parquet").write_bytes(maps.envelope_to_parquet_bytes(result.envelope))
    evaluation = evaluate.evaluate_file(str(d / "small.csv"), evaluate.EvaluateOptions.build(field_col="field"))
    baseline.save_evaluation(evaluation, str(d / "baseline.json"))
    json.loads((d / "baseline.json").read_text())
    summarized = summary.summarize_file(str(d / "train.csv"))
    summary.save(summarized, str(d / "summary.json"))
    return d


@pytest.fixture
def work(tmp_path, assets):
    """An empty case directory plus `put(name, as_=None)` copying an asset into it."""
    root = tmp_path / "case"
    root.mkdir()

    class Work:
        path = root

        def put(self, name: str, as_: str | None = None) -> Path:
            target = root / (as_ or name)
            shutil.copyfile(assets / name, target)
            return target

    return Work()


_DEVICES = ("/dev/null", "/dev/full", "/dev/stdout", "/dev/stderr")


@pytest.fixture
def protect_dev():
    """Put /dev/null, /dev/full, /dev/stdout and /dev/stderr back if a run replaced them.

    A broken output policy renames a regular file over them (as root); other processes on
    the machine use them, so they are restored however the case ends.
    """
    before = {p: os.lstat(p) for p in _DEVICES if os.path.lexists(p)}
    links = {p: os.readlink(p) for p, st in before.items() if stat.S_ISLNK(st.st_mode)}
    yield
    for path, st in before.items():
        now = os.lstat(path) if os.path.lexists(path) else None
        if now is not None and stat.S_IFMT(now.st_mode) == stat.S_IFMT(st.st_mode):
            continue
        if now is not None:
            os.unlink(path)
        if path in links:
            os.symlink(links[path], path)
        else:
            os.mknod(path, st.st_mode, st.st_rdev)
            os.chmod(path, stat.S_IMODE(st.st_mode))
