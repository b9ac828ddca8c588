"""Data sets on which calib's multicalibration error is compared with MCGrad's
(`benchmarks/mcgrad_reference.py` computes MCGrad's values into tests/fixtures/mcgrad/,
`tests/evaluation/test_multicalibration.py` compares). Numpy only, so both the test venv and the
throw-away MCGrad venv import it; every set is drawn from a fixed seed.

Each case returns y (0/1 int), p (float64), w (float64 weights or None) and the segment
columns as a dict of numpy arrays: float columns are numeric, the others categorical
(object arrays holding None are categorical columns with missing values). Ties in p occur
only between rows of the same label (MCGrad's unstable sort makes other ties a matter of
chance, see calibcli/evaluation/metrics/segment_paths.py).
"""

from __future__ import annotations

import numpy as np


def _labels(rng: np.random.Generator, p: np.ndarray, shift: np.ndarray | float = 0.0) -> np.ndarray:
    """Labels drawn from p + shift (clipped): shift != 0 where the model is miscalibrated."""
    return (rng.random(p.size) < np.clip(p + shift, 0.0, 1.0)).astype(np.int64)


def categorical(seed: int = 11) -> dict:
    """Text, integer and boolean columns; a column whose four values have equal counts (so
    top-2 is decided by first appearance in p); no weights, no ties."""
    rng = np.random.default_rng(seed)
    n = 5000
    p = rng.beta(2.0, 5.0, n)
    country = rng.choice(np.array(["US", "DE", "FR", "IN", "BR", "JP"], dtype=object), n,
                         p=[0.4, 0.2, 0.15, 0.12, 0.08, 0.05])
    device = rng.integers(0, 6, n)
    member = rng.random(n) < 0.3
    even = rng.permutation(np.repeat(np.array(["w", "x", "y", "z"], dtype=object), n // 4))
    y = _labels(rng, p, np.where((country == "DE") & member, 0.12, 0.0))
    return {"y": y, "p": p, "w": None,
            "columns": {"country": country, "device": device, "member": member, "even": even}}


def numeric(seed: int = 12) -> dict:
    """Float columns only: continuous, uniform, three distinct values (levels are the values),
    60% zeros (duplicate quantile edges are dropped); sample weights."""
    rng = np.random.default_rng(seed)
    n = 4000
    p = rng.uniform(0.02, 0.98, n)
    age = np.round(rng.normal(45.0, 12.0, n), 1)
    income = rng.uniform(0.0, 1.0, n)
    grade = rng.choice(np.array([1.0, 2.0, 3.0]), n)
    spend = np.where(rng.random(n) < 0.6, 0.0, rng.exponential(50.0, n))
    w = rng.gamma(2.0, 1.0, n)
    y = _labels(rng, p, np.where(age > 55.0, -0.08, 0.0))
    return {"y": y, "p": p, "w": w, "columns": {"age": age, "income": income, "grade": grade, "spend": spend}}


def mixed(seed: int = 13) -> dict:
    """Categorical with missing values (missing competes for top-2 like a value), a category
    of exactly 10 rows and one of 9 (min_rows = 10), numeric with NaN, weights with zeros,
    ties in p (above 0.15, on a 0.001 grid, each label on its own grid so tied rows share a
    label)."""
    rng = np.random.default_rng(seed)
    n = 6000
    y_draw = rng.random(n)
    p_raw = rng.beta(2.0, 3.0, n)
    plan = rng.choice(np.array(["free", "pro", None], dtype=object), n, p=[0.5, 0.3, 0.2])
    region = rng.choice(np.array(["north", "south"], dtype=object), n)
    region[:10] = "east"
    region[10:19] = "west"
    tenure = rng.exponential(3.0, n)
    tenure[rng.random(n) < 0.1] = np.nan
    score = rng.normal(size=n)
    score[rng.random(n) < 0.05] = np.nan
    y = (y_draw < np.clip(p_raw + np.where(plan == None, 0.1, 0.0), 0, 1)).astype(np.int64)  # noqa: E711
    grid = np.round(p_raw, 3) + np.where(y == 1, 0.0, 2.0 ** -20)
    p = np.clip(np.where(p_raw < 0.15, p_raw, grid), 0.0, 1.0)  # the lowest p untied: first appearances are clear
    w = rng.choice(np.array([0.0, 0.5, 1.0, 2.0]), n, p=[0.05, 0.25, 0.5, 0.2])
    return {"y": y, "p": p, "w": w,
            "columns": {"plan": plan, "region": region, "tenure": tenure, "score": score}}


def many(seed: int = 14) -> dict:
    """Nine columns (five categorical, four numeric): more than 1000 segments, so the
    max_segments cut-off decides which are checked."""
    rng = np.random.default_rng(seed)
    n = 20000
    p = rng.beta(3.0, 3.0, n)
    cols: dict[str, np.ndarray] = {}
    for i in range(5):
        cols[f"c{i}"] = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n, p=[0.4, 0.3, 0.2, 0.1])
    for i in range(4):
        cols[f"x{i}"] = rng.normal(size=n)
    shift = np.where((cols["c1"] == "b") & (cols["x2"] > 0.5), 0.1, 0.0)
    return {"y": _labels(rng, p, shift), "p": p, "w": None, "columns": cols}


def degenerate(seed: int = 15) -> dict:
    """p exactly 0 or 1 on some rows: a segment where p = 0 but y is sometimes 1 has sigma 0
    and a positive ECCE (ratio inf), one where every p is 1 and every y is 1 has ECCE 0 and
    sigma 0 (ratio 0). Each level first appears at a distinct p (ties at p = 0 hold one level
    of each column), so the level order is MCGrad's whatever its sort does with the ties."""
    rng = np.random.default_rng(seed)
    n = 600
    group = rng.choice(np.array(["sure", "wrong", "usual"], dtype=object), n, p=[0.2, 0.1, 0.7])
    p = rng.uniform(0.1, 0.9, n)
    y = _labels(rng, p)
    other = rng.normal(size=n)
    sure, wrong = group == "sure", group == "wrong"
    p[sure], y[sure], other[sure] = 1.0, 1, 5.0
    p[wrong], other[wrong] = 0.0, -5.0
    y[wrong] = (rng.random(wrong.sum()) < 0.2).astype(np.int64)
    y[np.flatnonzero(wrong)[0]] = 1
    return {"y": y, "p": p, "w": None, "columns": {"group": group, "other": other}}


CASES = {"categorical": categorical, "numeric": numeric, "mixed": mixed, "many": many, "degenerate": degenerate}


def split_columns(columns: dict) -> tuple[list[str], list[str]]:
    """(categorical, numeric) names, the way calib reads their kinds: float columns numeric."""
    cat = [k for k, v in columns.items() if np.asarray(v).dtype.kind != "f"]
    num = [k for k, v in columns.items() if np.asarray(v).dtype.kind == "f"]
    return cat, num
