"""Hypothesis strategies for extreme finite floats: subnormal gaps, spans near the float64 range,
and weights from the smallest subnormal to 1e308 (shared by the calibrator, kernel, CLI and SQL tests).

Every strategy draws finite float64 values only; `score_sets` returns scores with both a low
positive and a high negative label so that no threshold separates the classes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

TINY = 5e-324  # the smallest positive subnormal
HUGE = float(np.finfo(np.float64).max)  # 1.7976931348623157e308

# Subnormal and just-normal magnitudes: gaps between knots that are tiny but exact.
SUBNORMALS = [0.0, TINY, 2 * TINY, 1e-322, 7.4e-322, 1e-320, 1e-310, 2.2250738585072014e-308, 1e-300]
# Magnitudes whose differences overflow or come close to it.
HUGES = [1e300, 1e306, 1e307, 1e308, HUGE]


def subnormal_scores() -> st.SearchStrategy[float]:
    """Scores in [0, 1] crowded at 0: subnormals, their neighbours, and ordinary probabilities."""
    return st.one_of(
        st.sampled_from(SUBNORMALS),
        st.integers(0, 200).map(lambda k: k * TINY),
        st.floats(0.0, 1e-300, allow_nan=False, allow_infinity=False, allow_subnormal=True),
        st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False),
        st.sampled_from([1.0, 1.0 - 2.0 ** -53, 0.5]),
    )


def huge_scores() -> st.SearchStrategy[float]:
    """Scores anywhere in [-HUGE, HUGE], with the ends of the range and a span of 1e300 often."""
    return st.one_of(
        st.sampled_from([-HUGE, HUGE, -1e308, 1e308, 0.0]),
        st.sampled_from(HUGES).flatmap(lambda m: st.sampled_from([m, -m])),
        st.floats(-HUGE, HUGE, allow_nan=False, allow_infinity=False),
        st.floats(1e299, 1e300, allow_nan=False, allow_infinity=False),
    )


def mixed_scores() -> st.SearchStrategy[float]:
    """Both at once: subnormal gaps near 0 and the ends of the float64 range."""
    return st.one_of(subnormal_scores(), huge_scores(), subnormal_scores().map(lambda v: -v))


KINDS = {"subnormal": subnormal_scores, "huge": huge_scores, "mixed": mixed_scores}


@st.composite
def score_sets(draw, kind: str, min_size: int = 2, max_size: int = 40):
    """(scores, labels): scores drawn from KINDS[kind], both classes, not separated by a threshold
    (a positive at the lowest score and a negative at the highest), at least two distinct scores."""
    values = KINDS[kind]()
    n = draw(st.integers(min_size, max_size))
    s = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    if np.unique(s).size < 2:
        s = np.append(s, draw(values.filter(lambda v: v != s[0])))
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=s.size, max_size=s.size)), dtype=np.float64)
    s = np.concatenate([s, [s.min(), s.max()]])
    y = np.concatenate([y, [1.0, 0.0]])
    return s, y


@st.composite
def separated_sets(draw, kind: str, max_size: int = 40):
    """(scores, labels) where every negative scores below every positive (a separating threshold)."""
    s, _ = draw(score_sets(kind, max_size=max_size))
    s = np.sort(s)
    cut = draw(st.integers(1, s.size - 1))
    if s[cut - 1] == s[cut]:
        cut = int(np.searchsorted(s, s[cut], side="left")) or int(np.searchsorted(s, s[cut], side="right"))
    if cut in (0, s.size):
        cut = 1
        s = np.unique(s)
    y = (np.arange(s.size) >= cut).astype(np.float64)
    return s, y


def weights(size: int) -> st.SearchStrategy[np.ndarray]:
    """Positive weights from the smallest subnormal to 1e308: one scale for all rows, or mixed."""
    magnitude = st.one_of(st.sampled_from([TINY, 1e-320, 1e-300, 1e-10, 1.0, 1e10, 1e300, 1e308, HUGE]),
                          st.floats(TINY, HUGE, allow_nan=False, allow_infinity=False, allow_subnormal=True))
    same = magnitude.map(lambda m: np.full(size, m))
    factors = st.lists(st.sampled_from([1.0, 0.5, 0.25, 2.0 ** -10]), min_size=size, max_size=size)
    scaled = st.tuples(magnitude, factors).map(lambda mf: np.maximum(mf[0] * np.array(mf[1]), TINY))
    mixed = st.lists(magnitude, min_size=size, max_size=size).map(np.array)
    return st.one_of(same, scaled, mixed)


def gaussian_nb_scores(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(scores, labels) shaped like Gaussian naive Bayes on well separated classes: many exact 0s,
    subnormals down to 5e-324, values crowded at 1, and a few ordinary probabilities."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.5).astype(np.float64)
    z = np.where(y == 1, rng.normal(6.0, 3.0, n), rng.normal(-6.0, 3.0, n))
    # the log-odds of two unit Gaussians 30 apart; exp underflows through the subnormals to 0
    logodds = 30.0 * z - 0.0
    with np.errstate(over="ignore", under="ignore"):
        s = 1.0 / (1.0 + np.exp(-logodds))
    tail = rng.integers(0, 6, n // 10)
    s[: tail.size] = np.array([0.0, TINY, 2 * TINY, 1e-322, 7.4e-322, 1e-310])[tail]
    y[: tail.size] = rng.random(tail.size) < 0.05
    y[tail.size] = 1.0
    s[tail.size] = TINY
    return s, y
