"""The verdict (evaluation/verdict.py, rule in docs/verdict.md) on data whose answer is known:
probabilities drawn calibrated get "calibrated" in at least 95% of seeds at 5 000 rows, and a
known distortion gets its direction, binary and K classes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibcli import api
from calibcli.evaluation import verdict
from calibcli.evaluation.metrics import binary
from calibcli.evaluation.state.kclass import KClassState

ROWS = 5000
CLASSES = ["a", "b", "c"]


def _logit(p):
    return np.log(p) - np.log1p(-p)


def _sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))


def _binary(seed: int, rows: int = ROWS):
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, rows)
    return p, (rng.random(rows) < p).astype(float)


def _kclass(seed: int, rows: int = ROWS):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(rows, 3)) * 1.5
    P = np.exp(z - z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = (rng.random((rows, 1)) > P.cumsum(axis=1)).sum(axis=1).clip(0, 2)
    return z, P, y


def _kverdict(P, y):
    rows = KClassState.from_arrays(y, P, None, CLASSES)
    return verdict.kclass_verdict(rows.top.pooled(), [s.pooled() for s in rows.per_class], CLASSES)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_calibrated_binary_probabilities_are_called_calibrated_in_95_percent_of_400_seeds():
    """Labels drawn from p itself: the rule's family-wise level is 1%, and at least 95% of data
    sets must be called calibrated (measured here: 398 of 400)."""
    calls = [verdict.binary_verdict(*binary.distribution(*reversed(_binary(seed)))).calibrated for seed in range(400)]
    assert None not in calls
    assert sum(calls) >= 0.95 * len(calls)


def test_calibrated_kclass_probabilities_are_called_calibrated_in_95_percent_of_300_seeds():
    calls = [_kverdict(P, y).calibrated for _, P, y in map(_kclass, range(300))]
    assert None not in calls
    assert sum(calls) >= 0.95 * len(calls)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("distort,direction", [
    (lambda l: 2.0 * l, "over-confident"),
    (lambda l: 0.5 * l, "under-confident"),
    (lambda l: l + 0.4, "too high on average"),
    (lambda l: l - 0.4, "too low on average"),
])
def test_a_known_binary_distortion_gets_its_direction(seed, distort, direction):
    p, y = _binary(seed)
    q = _sigmoid(distort(_logit(p)))
    judged = verdict.binary_verdict(*binary.distribution(y, q))
    assert judged.calibrated is False
    assert direction in judged.direction
    opposite = {"over-confident": "under-confident", "under-confident": "over-confident",
                "too high on average": "too low on average", "too low on average": "too high on average"}
    assert opposite[direction] not in judged.direction
    assert judged.text.startswith("miscalibrated: ")


@pytest.mark.parametrize("seed", range(5))
def test_where_is_a_significant_bin_whose_gap_has_the_distortions_sign(seed):
    p, y = _binary(seed)
    judged = verdict.binary_verdict(*binary.distribution(y, _sigmoid(_logit(p) + 0.4)))
    where = judged.where
    assert where is not None and where["adjusted_p"] <= verdict.LEVEL
    assert where["predicted"] > where["observed_high"] >= where["observed"]  # p too high, outside the band
    assert 0 <= where["p_min"] <= where["p_max"] <= 1
    assert "the largest significant gap is at p " in judged.text


@pytest.mark.parametrize("seed", range(5))
def test_known_kclass_distortions_get_their_direction(seed):
    z, P, y = _kclass(seed)
    sharp = _kverdict(_softmax(2.0 * z), y)
    assert sharp.calibrated is False and "over-confident" in sharp.direction
    flat = _kverdict(_softmax(0.4 * z), y)
    assert flat.calibrated is False and "under-confident" in flat.direction
    biased = z.copy()
    biased[:, 0] += 0.7  # class a's probability pushed up
    judged = _kverdict(_softmax(biased), y)
    assert judged.calibrated is False
    assert "class a predicted too often" in judged.direction
    assert "class a predicted too rarely" not in judged.direction
    assert "class a predicted too often" in judged.text or "classes a" in judged.text


def test_too_few_rows_to_tell_and_no_claim_either_way():
    p, y = _binary(0, rows=30)
    judged = verdict.binary_verdict(*binary.distribution(y, p))
    assert judged.calibrated is None and judged.label == "too few rows"
    assert judged.text.startswith("too few rows to tell")
    assert judged.direction == [] and judged.where is None
    _, P, yk = _kclass(0, rows=12)
    assert _kverdict(P, yk).calibrated is None


def test_a_contradicted_certainty_is_miscalibrated_even_on_few_rows():
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    p = np.array([0.0, 0.5, 0.5, 0.5, 0.0])  # a positive at p = 0
    assert verdict.binary_verdict(*binary.distribution(y, p)).calibrated is False


def test_json_shape_and_the_python_api_carry_the_same_verdict():
    p, y = _binary(1)
    q = _sigmoid(2.0 * _logit(p))
    result = api.evaluate(y, q)
    assert result.verdict.calibrated is False and "over-confident" in result.verdict.direction
    out = json.loads(json.dumps(result.verdict.to_json()))
    assert set(out) >= {"calibrated", "direction", "where", "evidence"}
    assert [e["test"] for e in out["evidence"]] == ["mean", "spread", "kuiper", "bins"]
    assert all({"p_value", "adjusted_p", "significant"} <= set(e) for e in out["evidence"])
    assert out == verdict.binary_verdict(*binary.distribution(y, q)).to_json() | {"text": out["text"]}
    _, P, yk = _kclass(2)
    kres = api.evaluate(np.array(CLASSES)[yk], P, classes=CLASSES)
    assert kres.verdict.calibrated in (True, False)
    assert len(kres.verdict.evidence) == 4 + 2 * len(CLASSES)


def test_holm_over_the_family_weights_each_test_like_the_rule_says():
    """The decision is Holm at 5% over exactly the tests listed in the evidence."""
    p, y = _binary(3)
    judged = verdict.binary_verdict(*binary.distribution(y, _sigmoid(1.3 * _logit(p))))
    raw = [e["p_value"] for e in judged.evidence]
    from calibcli.evaluation.metrics.significance import holm

    np.testing.assert_allclose([e["adjusted_p"] for e in judged.evidence], holm(raw))
    assert judged.calibrated is (not any(a <= 0.05 for a in holm(raw)))


def test_python_evaluate_ranks_fields_by_evidence_like_the_cli():
    """`calibcli.evaluate(..., fields=...)`.by_field: --by-field's tests (exact binomial, BH over
    the values with at least `min_rows` rows), weighted; kept through pickling."""
    import pickle

    from scipy import stats

    p, y = _binary(4, rows=3000)
    field = np.random.default_rng(9).choice(["a", "b", "c", "rare"], 3000, p=[0.33, 0.33, 0.335, 0.005])
    shifted = np.where(field == "a", np.clip(p + 0.1, 0, 1), p)
    out = api.evaluate(y, shifted, fields=field)
    bf = out.by_field
    assert 5 <= np.count_nonzero(field == "rare") < 30
    assert bf["fields"] == 4 and bf["tested"] == 3 and bf["min_rows"] == 30  # 'rare' has fewer than 30 rows
    assert bf["values"][0]["field"] == "a" and bf["values"][0]["significant"]
    rows = field == "a"
    k, n, m = int(y[rows].sum()), int(rows.sum()), float(shifted[rows].mean())
    exact = min(1.0, 2 * min(stats.binom.cdf(k, n, m), stats.binom.sf(k - 1, n, m)))
    assert bf["values"][0]["p_value"] == pytest.approx(exact, rel=1e-7, abs=1e-300)
    assert api.evaluate(y, shifted, fields=field, min_rows=5).by_field["tested"] == 4
    w = np.where(field == "a", 2.0, 1.0)
    weighted = api.evaluate(y, shifted, fields=field, sample_weight=w).by_field["values"][0]
    assert weighted["rows"] == pytest.approx(2 * n) and weighted["positives"] == pytest.approx(2 * k)
    assert pickle.loads(pickle.dumps(out)).by_field == bf
    assert api.evaluate(y, shifted).by_field is None
