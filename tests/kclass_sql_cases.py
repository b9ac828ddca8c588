"""K-class maps whose SQL select list is checked in DuckDB and Spark SQL against `calib apply`.

Each case is fitted with `calib fit --score-cols` (in-process CLI) on probabilities or logits
and applied with `calib apply` to fresh rows plus extreme ones (one-hot rows, probabilities
of 1e-300 and exact zeros, logits of +-700). Score column names hold quotes, so the quoting
of identifiers is exercised as well.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from calibcli.calibrators import registry
from calibcli.cli.app import app

# (case name, method, params, scores are logits)
KCASES = [
    ("temperature", "temperature", [], False),
    ("temperature-logit", "temperature", [], True),
    ("vector", "vector", [], False),
    ("vector-logit", "vector", [], True),
    ("dirichlet", "dirichlet", ["reg_lambda=0.001", "reg_mu=0.001"], False),
    ("dirichlet-logit", "dirichlet", ["reg_lambda=0", "reg_mu=0"], True),
]
KCASES = [case for case in KCASES if case[1] in registry.names()]  # the K-class methods this calibcli has
assert "temperature" in {case[1] for case in KCASES}
CLASSES = ["a", "b'q", 'c"d', "e`f"]
COLUMNS = [f"p {c}" for c in CLASSES]
runner = CliRunner()


def scores(n: int, k: int, logit: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 3, (n, k)) + np.linspace(0, 1, k)
    y = (z + rng.gumbel(size=(n, k)) * 2).argmax(axis=1)
    if logit:
        return np.round(z, 6), y
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), y


def extremes(k: int, logit: bool) -> np.ndarray:
    if logit:
        rows = [np.full(k, 700.0), np.full(k, -700.0), np.r_[700.0, np.full(k - 1, -700.0)], np.zeros(k)]
        return np.array(rows)
    eye = np.eye(k)
    tiny = np.full(k, 1e-300)
    tiny[0] = 1 - (k - 1) * 1e-300
    return np.vstack([eye, tiny, np.full(k, 1.0 / k)])


def table(P: np.ndarray, y: np.ndarray | None = None) -> pa.Table:
    cols = {name: pa.array(P[:, j]) for j, name in enumerate(COLUMNS)}
    cols["i"] = pa.array(np.arange(len(P)))
    if y is not None:
        cols["label"] = pa.array([CLASSES[c] for c in y])
    return pa.table(cols)


def build(tmp_path: Path, case) -> tuple[str, pa.Table, np.ndarray]:
    """(map path, the query table, `calib apply`'s (n, K) probabilities for it)."""
    name, method, params, logit = case
    k = len(CLASSES)
    P, y = scores(3000, k, logit, seed=7)
    cal = tmp_path / f"{name}.parquet"
    pq.write_table(table(P, y), cal)
    map_path = str(tmp_path / f"{name}.json")
    spec = ",".join(COLUMNS)
    args = ["fit", str(cal), "--score-cols", spec, "--classes", ",".join(CLASSES), "-m", method, "-o", map_path]
    for p in params:
        args += ["--param", p]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    Q, _ = scores(2000, k, logit, seed=8)
    queries = table(np.vstack([Q, extremes(k, logit)]))
    src, out = tmp_path / f"{name}_q.parquet", tmp_path / f"{name}_out.parquet"
    pq.write_table(queries, src)
    result = runner.invoke(app, ["apply", map_path, str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    applied = pq.read_table(out)
    expected = np.column_stack([applied.column(f"calibrated_{c}").to_numpy() for c in CLASSES])
    return map_path, queries, expected
