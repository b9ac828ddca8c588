"""`multicalibration` on hostile inputs (hypothesis): a field whose levels hold one class, levels
seen once, subnormal, huge and exact 0/1 scores, a text feature with 10 000 distinct values:
never NaN, every probability in [0, 1], no numpy RuntimeWarning, and the saved map (JSON and
Parquet) predicts bit for bit what the fitted one does, unseen levels included."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import json_round_trip, parquet_round_trip
from calibcli.calibrators import get

PROB_EXTREMES = [0.0, 5e-324, 1e-300, 1e-17, 0.5, 1 - 1e-16, 1.0]
LOGIT_EXTREMES = [-1.7e308, -1e300, -5e-324, 0.0, 5e-324, 1e300, 1.7e308, -745.0, 745.0]
SMALL = dict(rounds=3, folds=2, trees=3, leaves=4, min_weight=2.0, min_gain=0.0)


@st.composite
def hostile(draw):
    n = draw(st.integers(8, 160))
    kind = draw(st.sampled_from(["probability", "logit"]))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    extremes = np.array(PROB_EXTREMES if kind == "probability" else LOGIT_EXTREMES)
    mix = draw(st.floats(0.0, 1.0))
    base = rng.uniform(0, 1, n) if kind == "probability" else rng.normal(0, 3, n)
    s = np.where(rng.random(n) < mix, extremes[rng.integers(0, extremes.size, n)], base)
    levels = draw(st.integers(1, 12))
    field = np.array([f"L{k}" for k in rng.integers(0, levels, n)], dtype=object)
    field[rng.integers(0, n)] = "seen-once"
    y = (rng.random(n) < 0.5).astype(float)
    y[field == "L0"] = draw(st.sampled_from([0.0, 1.0]))  # a level with one class only
    y[0], y[1] = 0.0, 1.0  # both classes in the file
    country = np.array(["DE", "FR", "x" * 200, "", "ü"], dtype=object)[rng.integers(0, 5, n)]
    age = np.where(rng.random(n) < 0.1, draw(st.sampled_from([1e300, -1e300, 5e-324, 0.0])), rng.normal(0, 1, n))
    return kind, s, y, {"field": field, "country": country, "age": age}, seed


def checked(p: np.ndarray) -> np.ndarray:
    assert p.dtype == np.float64 and not np.any(np.isnan(p))
    assert np.all((p >= 0.0) & (p <= 1.0))
    return p


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile())
def test_hostile_inputs_give_probabilities_and_reload_bit_for_bit(case):
    kind, s, y, feats, seed = case
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cal = get("multicalibration")(score_kind=kind, seed=seed % 1000, **SMALL).fit(s, y, features=feats)
        p = checked(cal.predict(s, features=feats))
        unseen = {"field": np.full(s.size, "never"), "country": np.full(s.size, "??"), "age": feats["age"]}
        checked(cal.predict(s, features=unseen))
    for again in (json_round_trip(cal), parquet_round_trip(cal)):
        assert np.array_equal(again.predict(s, features=feats), p)
        assert np.array_equal(again.predict(s, features=unseen), cal.predict(s, features=unseen))


def test_a_text_feature_with_10000_distinct_values():
    """10 000 countries over 30 000 rows (3 each on average, many once): the fit splits on
    them or shrinks them, the probabilities stay in (0, 1), and a reload is exact."""
    rng = np.random.default_rng(0)
    n = 30_000
    code = rng.integers(0, 10_000, n)
    country = np.array([f"c{k:05d}" for k in range(10_000)], dtype=object)[code]
    s = rng.uniform(0.01, 0.99, n)
    z = np.log(s / (1 - s)) + 1.5 * (code % 7 == 0)
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(float)
    feats = {"country": country}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cal = get("multicalibration")(rounds=3).fit(s, y, features=feats)
        p = checked(cal.predict(s, features=feats))
    assert cal.summary()["columns"]["country"]["levels"] == np.unique(country).size
    assert np.all((p > 0) & (p < 1))
    assert np.array_equal(parquet_round_trip(cal).predict(s, features=feats), p)
    assert np.array_equal(json_round_trip(cal).predict(s, features=feats), p)
    # the one-class-in-seven effect is found for the levels that carry it
    hit = code % 7 == 0
    assert abs(np.mean(p[hit]) - np.mean(y[hit])) < abs(np.mean(s[hit]) - np.mean(y[hit]))


@pytest.mark.parametrize("label", [0.0, 1.0])
def test_every_level_of_a_field_one_class_but_the_file_both(label):
    rng = np.random.default_rng(2)
    n = 400
    field = np.where(np.arange(n) < 200, "a", "b").astype(object)
    y = np.where(field == "a", label, 1.0 - label)
    s = rng.uniform(0, 1, n)
    cal = get("multicalibration")(rounds=3).fit(s, y, features={"field": field})
    p = checked(cal.predict(s, features={"field": field}))
    assert np.all((p > 0) & (p < 1))
    # each level is pulled towards its own class
    assert (np.mean(p[field == "a"]) - 0.5) * (label - 0.5) > 0


def test_boolean_arrays_are_categorical_spelled_as_arrow_spells_them():
    """A boolean feature array is categorical with levels false, true (a Parquet boolean read by
    `calib fit`), so a map fitted from a file predicts the same from bool arrays in Python."""
    rng = np.random.default_rng(5)
    n = 2000
    flag = rng.random(n) < 0.5
    s = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < np.clip(s + 0.25 * flag - 0.1, 0, 1)).astype(float)
    from_bools = get("multicalibration")(rounds=2).fit(s, y, features={"flag": flag})
    from_words = get("multicalibration")(rounds=2).fit(s, y, features={"flag": np.where(flag, "true", "false")})
    assert from_bools.input_features() == (["flag"], [])
    assert [list(v) for v in from_bools.get_state()["vocab"]] == [["false", "true"]]
    p = from_bools.predict(s, features={"flag": flag})
    assert np.array_equal(p, from_words.predict(s, features={"flag": flag}))
    assert np.array_equal(p, from_words.predict(s, features={"flag": np.where(flag, "true", "false")}))
