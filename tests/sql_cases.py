"""Maps of every SQL-exportable method and the scores their SQL is checked on (DuckDB and Spark).

Each case is fitted with `calib fit` and applied with `calib apply` (in-process CLI) to 1e5
random scores plus the map's own knots, edges and splits, both ends of the probability
range and, for maps that accept any score, values far outside the training range.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from calibcli.maps import envelope as maps
from calibcli.cli.app import app

# (case name, method, params, scores are logits)
CASES = [
    ("isotonic", "isotonic", [], False),
    ("isotonic-platt", "isotonic", ["platt_correction=true"], False),
    ("enir", "enir", ["models=10"], False),
    ("near-isotonic", "near-isotonic", ["lam=0.5"], False),
    ("bayes-iso", "bayes-iso", ["samples=500", "target_ess=0", "seed=1", "grid=400"], False),
    ("binning-quantile", "binning", ["n_bins=20"], False),
    ("binning-width", "binning", ["n_bins=15", "strategy=width"], False),
    ("logistic", "logistic", [], False),
    ("logistic-logit", "logistic", [], True),
    ("beta", "beta", [], False),
    ("beta-am", "beta-am", [], False),
    ("beta-ab", "beta-ab", [], False),
    ("beta-logit", "beta", ["score_kind=logit"], True),
    ("ilps", "ilps", ["K=20"], False),
    ("ilps-logit", "ilps", ["K=30", "score_kind=logit"], True),
    ("venn-abers", "venn-abers", [], False),
    ("venn-abers-brier", "venn-abers", ["loss=brier"], False),
    ("bbq", "bbq", [], False),
    ("bbq-netcal", "bbq", ["variant=netcal"], False),
    ("spline", "spline", [], False),
    ("spline-logit", "spline", ["score_kind=logit"], True),
]
PROBABILITY_ONLY = {"beta", "beta-am", "beta-ab", "ilps", "bbq", "spline"}  # maps that refuse scores outside [0, 1]
N_QUERIES = 100_000
# scores with no value or at the ends of float64: NULL (None), NaN, infinities, subnormals, +-1e308
EXTREME_SCORES = [None, float("nan"), float("inf"), float("-inf"), 5e-324, -5e-324, 2.2250738585072014e-308,
                  1e-308, 1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308, 0.0, -0.0, 1.0, 0.5]
# score column names that try to break out of the SQL (quoted as identifiers, they are just names)
HOSTILE_COLUMNS = [
    "score) IS NULL THEN 1 END FROM t; DROP TABLE victim; SELECT (1",
    "a`b; DROP TABLE victim; --",
    "x` IS NULL THEN 1 END FROM q; DROP TABLE victim; SELECT (`",
    's"c /* o\nre',
    "it's -- here",
]
# score expressions --score-expr must refuse, in every dialect
HOSTILE_EXPRESSIONS = [
    "score) IS NULL THEN 1 END FROM t; DROP TABLE victim; SELECT (1",
    "score; DROP TABLE victim",
    "score -- rest",
    "score /* rest",
    "'\\' ; DROP TABLE victim; '",
    "\"a\"\"\" ; DROP TABLE victim",
    "`a` ; DROP TABLE victim; `b`",
    "$$'$$; DROP TABLE victim; --'",
    "(score",
    "score)",
    "'open",
]

runner = CliRunner()


def training_table(logit: bool, n: int = 4000, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < p ** 1.7).astype(np.int64)
    s = np.round(np.log(p) - np.log1p(-p), 3) if logit else np.round(p, 4)  # ties, as real scores have
    return pa.table({"score": s, "label": y})


def query_scores(cal, logit: bool, probability_only: bool, seed: int = 11) -> np.ndarray:
    """1e5 scores: random ones, the map's own break points, range ends and far-away values."""
    rng = np.random.default_rng(seed)
    special: list[np.ndarray] = [np.array([0.0, 1.0, 1e-15, 1 - 1e-15, 1e-12, 1 - 1e-12, 0.5])]
    for attr in ("x_", "edges_", "knots_"):
        if hasattr(cal, attr):
            special.append(getattr(cal, attr))
    if hasattr(cal, "p0_"):  # venn-abers thresholds, and the floats either side of them
        special += [cal.c_[0], np.nextafter(cal.c_[0], -np.inf), np.nextafter(cal.c_[0], np.inf)]
    if hasattr(cal, "a_") and isinstance(cal.a_, np.ndarray):  # ilps splits (logits)
        special.append(cal.a_ if logit else 1.0 / (1.0 + np.exp(-cal.a_)))
    if probability_only:
        random = rng.uniform(0.0, 1.0, N_QUERIES)
    else:
        lo, hi = (-8.0, 8.0) if logit else (-0.5, 1.5)
        random = rng.uniform(lo, hi, N_QUERIES)
        special.append(np.array([-1e6, -40.0, 40.0, 1e6, -1e300, 1e300]))
    s = np.concatenate(special)
    if probability_only:
        s = s[(s >= 0) & (s <= 1)]
    return np.concatenate([s, random[: N_QUERIES - s.size]])


def build(tmp: Path, case: tuple) -> tuple[str, object, np.ndarray, np.ndarray]:
    """Fit the case with `calib fit`, apply it with `calib apply`: (map path, calibrator, scores, p)."""
    name, method, params, logit = case
    train = tmp / f"{name}-train.parquet"
    pq.write_table(training_table(logit), train)
    map_path = tmp / f"{name}.json"
    args = ["-q", "fit", str(train), "--method", method, "-o", str(map_path)]
    for p in params:
        args += ["--param", p]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    cal, _ = maps.load_map(str(map_path))
    scores = query_scores(cal, logit, method in PROBABILITY_ONLY and not logit)
    queries = tmp / f"{name}-queries.parquet"
    pq.write_table(pa.table({"score": scores}), queries)
    applied = tmp / f"{name}-applied.parquet"
    result = runner.invoke(app, ["apply", str(map_path), str(queries), "-o", str(applied)])
    assert result.exit_code == 0, result.output
    p = pq.read_table(applied).column("calibrated").to_numpy()
    return str(map_path), cal, scores, p
