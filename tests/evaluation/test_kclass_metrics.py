"""K-class metrics against independent references: scikit-learn's log_loss, accuracy_score and
roc_auc_score(multi_class="ovr"), a brute-force Brier and ECE loop, hand-computed cases;
and the mergeable KClassState against the direct functions, in any split and merge order."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

from calibcli.errors import UsageError
from calibcli.evaluation.metrics import kclass as km
from calibcli.evaluation.state.kclass import KClassState, merge_kclass_states


def sample(n=400, k=4, seed=0, ties=False):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    if ties:
        logits = np.round(logits)
    P = np.exp(logits)
    P /= P.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in P])
    return y, P, rng.uniform(0.1, 3.0, n)


@pytest.mark.parametrize("weighted", [False, True])
def test_log_loss_accuracy_auc_match_sklearn(weighted):
    y, P, w = sample()
    sw = w if weighted else None
    got = km.compute_all(y, P, sample_weight=sw)
    assert got["log_loss"] == pytest.approx(log_loss(y, P, sample_weight=sw, labels=range(4)), rel=1e-12)
    assert got["accuracy"] == pytest.approx(accuracy_score(y, P.argmax(1), sample_weight=sw), rel=1e-12)
    ref = roc_auc_score(y, P, multi_class="ovr", average="macro", sample_weight=sw)
    assert got["auc"] == pytest.approx(ref, rel=1e-12)


def test_auc_with_ties_matches_sklearn():
    y, P, w = sample(300, 3, seed=5, ties=True)
    assert np.unique(P[:, 0]).size < 150  # many tied p
    assert km.auc(y, P, sample_weight=w) == pytest.approx(
        roc_auc_score(y, P, multi_class="ovr", sample_weight=w), rel=1e-12)


def test_log_loss_is_clipped_like_the_binary_one():
    P = np.array([[1.0, 0.0], [0.5, 0.5]])
    y = np.array([1, 0])
    assert km.log_loss(y, P) == pytest.approx((-math.log(1e-15) + math.log(2)) / 2, rel=1e-12)


def test_brier_brute_force():
    y, P, w = sample(60, 5, seed=3)
    rows = [sum((P[i, k] - (1.0 if y[i] == k else 0.0)) ** 2 for k in range(5)) for i in range(60)]
    assert km.brier(y, P) == pytest.approx(sum(rows) / 60, rel=1e-12)
    assert km.brier(y, P, sample_weight=w) == pytest.approx(sum(a * b for a, b in zip(rows, w)) / w.sum(), rel=1e-12)


def test_top_label_ece_mce_hand_computed():
    # confidences 0.5, 0.6 (bin 5 and 6 of 10), 0.9 twice (bin 9); top classes right: yes, no, yes, no
    P = np.array([[0.5, 0.3, 0.2], [0.6, 0.4, 0.0], [0.05, 0.9, 0.05], [0.0, 0.1, 0.9]])
    y = np.array([0, 1, 1, 0])
    # bin 5: |0.5 - 1| = 0.5 (1 row); bin 6: |0.6 - 0| = 0.6 (1 row); bin 9: |0.9 - 0.5| = 0.4 (2 rows)
    assert km.top_label_ece(y, P) == pytest.approx((0.5 + 0.6 + 2 * 0.4) / 4, abs=1e-15)
    assert km.top_label_mce(y, P) == pytest.approx(0.6, abs=1e-15)
    # two bins: [0, .5) empty, [.5, 1]: mean conf 0.725, accuracy 0.5
    assert km.top_label_ece(y, P, bins=2) == pytest.approx(0.225, abs=1e-15)
    # weights: row 2 counts 3 times -> bin 9 has 3 right of 4, mean 0.9
    w = np.array([1.0, 1.0, 3.0, 1.0])
    assert km.top_label_ece(y, P, sample_weight=w) == pytest.approx((0.5 + 0.6 + 4 * 0.15) / 6, abs=1e-15)
    assert km.accuracy(y, P) == 0.5


def test_classwise_ece_hand_computed():
    P = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    y = np.array([0, 1, 1])
    # class 0: p 0.8 (y1), 0.3 (y0), 0.6 (y0): bins 8, 3, 6 gaps 0.2, 0.3, 0.6 -> 1.1/3
    # class 1: p 0.2 (y0), 0.7 (y1), 0.4 (y1): gaps 0.2, 0.3, 0.6 -> 1.1/3
    assert km.classwise_ece(y, P) == pytest.approx(1.1 / 3, abs=1e-15)
    # two bins: class 0 has [.3] gap .3 and [.8, .6] mean .7 rate .5 gap .2 -> (0.3 + 0.4) / 3
    # class 1 has [.2, .4] mean .3 rate .5 gap .2 and [.7] gap .3 -> (0.4 + 0.3) / 3
    assert km.classwise_ece(y, P, bins=2) == pytest.approx(0.7 / 3, abs=1e-15)


def brute_force_ece(y01, p, bins, w):
    total = 0.0
    for b in range(bins):
        in_bin = [i for i in range(p.size) if min(int(p[i] * bins), bins - 1) == b]
        if in_bin:
            ws = sum(w[i] for i in in_bin)
            total += abs(sum(w[i] * (p[i] - y01[i]) for i in in_bin)) / ws * ws
    return total / w.sum()


@pytest.mark.parametrize("bins", [5, 15])
def test_eces_brute_force(bins):
    y, P, w = sample(200, 4, seed=7)
    conf, right = P.max(axis=1), (P.argmax(axis=1) == y).astype(float)
    assert km.top_label_ece(y, P, bins, sample_weight=w) == pytest.approx(brute_force_ece(right, conf, bins, w), rel=1e-11)
    ref = np.mean([brute_force_ece((y == k).astype(float), P[:, k], bins, w) for k in range(4)])
    assert km.classwise_ece(y, P, bins, sample_weight=w) == pytest.approx(ref, rel=1e-11)


def test_quantile_strategy_uses_the_binary_binning():
    from calibcli.evaluation.metrics import binary as metrics

    y, P, w = sample(300, 3, seed=11)
    conf, right = P.max(axis=1), (P.argmax(axis=1) == y).astype(float)
    xs, n0, n1 = metrics.distribution(right, conf, w)
    assert km.top_label_ece(y, P, 7, "quantile", w) == metrics.ece_from_distribution(xs, n0, n1, 7, "quantile")
    assert km.top_label_mce(y, P, 7, "quantile", w) == metrics.mce_from_distribution(xs, n0, n1, 7, "quantile")


def test_auc_leaves_out_classes_without_positives():
    y, P, _ = sample(200, 4, seed=2)
    y = np.where(y == 3, 0, y)
    per = [roc_auc_score((y == k).astype(int), P[:, k]) for k in range(3)]
    assert km.auc(y, P) == pytest.approx(np.mean(per), rel=1e-12)
    assert math.isnan(km.auc(np.zeros(5, dtype=int), np.full((5, 2), 0.5)))


def test_perfect_predictions():
    y = np.array([0, 1, 2, 1])
    P = np.eye(3)[y]
    got = km.compute_all(y, P)
    assert got["brier"] == 0 and got["accuracy"] == 1 and got["auc"] == 1
    assert got["top_label_ece"] == 0 and got["classwise_ece"] == 0
    assert got["log_loss"] == pytest.approx(-math.log(1 - 1e-15), abs=1e-16)


@pytest.mark.parametrize("y, P, match", [
    ([0, 3], [[0.5, 0.5], [0.5, 0.5]], "row 1: a label code outside"),
    ([0, 1], [[0.5, 0.6], [0.5, 0.5]], "row 0: a row of probabilities that does not sum to 1"),
    ([0, 1], [[0.5, 0.5], [np.nan, 1.0]], "row 1: a probability that is negative"),
    ([0, 1], [[-0.1, 1.1], [0.5, 0.5]], "row 0: a probability"),
    ([0, 1], [0.5, 0.5], r"shape \(n, K\)"),
    ([0, 1, 1], [[0.5, 0.5], [0.5, 0.5]], "labels must have shape"),
    ([0.5, 1], [[0.5, 0.5], [0.5, 0.5]], "integer class codes"),
])
def test_bad_input_names_the_row(y, P, match):
    with pytest.raises(UsageError, match=match):
        km.compute_all(np.asarray(y), np.asarray(P))


def test_zero_weight_gives_nan():
    got = km.compute_all(np.array([0, 1]), np.full((2, 2), 0.5), sample_weight=[0.0, 0.0])
    assert all(math.isnan(v) for v in got.values()) and list(got) == list(km.KCLASS_METRICS)
    state = KClassState.from_arrays(np.array([0, 1]), np.full((2, 2), 0.5), sample_weight=[0.0, 0.0])
    assert all(math.isnan(v) for v in state.metrics().values())


# ---------------------------------------------------------------------------- the state


def assert_same(a, b, rel=1e-12):
    assert list(a) == list(b)
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=rel, abs=1e-15, nan_ok=True), k


@pytest.mark.parametrize("bins, strategy", [(10, "uniform"), (7, "quantile"), (15, "uniform")])
def test_state_equals_direct(bins, strategy):
    y, P, w = sample(500, 5, seed=4, ties=True)
    for sw in (None, w):
        state = KClassState.from_arrays(y, P, sample_weight=sw)
        assert_same(state.metrics(bins, strategy), km.compute_all(y, P, sw, bins, strategy))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 120), max_size=4),
       order=st.randoms(use_true_random=False), weighted=st.booleans())
def test_state_merge_order_invariant(seed, cuts, order, weighted):
    y, P, w = sample(120, 3, seed=seed, ties=seed % 2 == 0)
    sw = w if weighted else None
    edges = [0, *sorted(cuts), 120]
    parts = [KClassState.from_arrays(y[a:b], P[a:b], sample_weight=None if sw is None else sw[a:b])
             for a, b in zip(edges[:-1], edges[1:])]
    order.shuffle(parts)
    merged = merge_kclass_states(parts[:1]).merge(*parts[1:]) if len(parts) > 1 else parts[0]
    whole = km.compute_all(y, P, sw, 10, "quantile")
    assert_same(merged.metrics(10, "quantile"), whole)
    assert merged.rows == 120
    shipped = KClassState.from_arrow(__import__("pyarrow").concat_tables([p.to_arrow() for p in parts]))
    assert_same(shipped.metrics(10, "quantile"), whole)


def test_arrow_round_trip_and_refusals():
    import pyarrow as pa

    y, P, w = sample(100, 3, seed=9)
    state = KClassState.from_arrays(y, P, sample_weight=w, classes=["a", "b", "c"])
    table = state.to_arrow()
    assert table.num_rows == 4
    back = KClassState.from_arrow(table)
    assert back.classes == ["a", "b", "c"] and back.metrics() == state.metrics()
    other = KClassState.from_arrays(y, P, classes=["a", "b", "d"])
    with pytest.raises(UsageError, match="different classes"):
        state.merge(other)
    with pytest.raises(UsageError, match="different classes"):
        KClassState.from_arrow(pa.concat_tables([table, other.to_arrow()]))
    with pytest.raises(UsageError, match="not a K-class evaluation state"):
        KClassState.from_arrow(pa.table({"x": [1]}))
    with pytest.raises(UsageError, match="2 class names for 3"):
        KClassState.from_arrays(y, P, classes=["a", "b"])


# ---------------------------------------------------------------------------- calibcli.evaluate


def test_api_evaluate_dispatches_on_ndim():
    import calibcli

    y, P, w = sample(300, 3, seed=12)
    names = np.array(["cat", "dog", "car"])[y]
    got = calibcli.evaluate(names, P, classes=["cat", "dog", "car"], sample_weight=w, ece_bins=5)
    assert list(got) == ["log_loss", "brier", "accuracy", "top_label_ece", "top_label_mce", "classwise_ece", "auc"]
    assert_same(got, km.compute_all(y, P, w, 5))
    assert got["log_loss"] == pytest.approx(log_loss(y, P, sample_weight=w), rel=1e-12)
    # default classes: the sorted distinct labels ("car" < "cat" < "dog": columns reordered)
    assert_same(calibcli.evaluate(names, P[:, [2, 0, 1]]), km.compute_all(y, P))
    two = calibcli.evaluate((y == 1).astype(int), P[:, :2] / P[:, :2].sum(1, keepdims=True))
    assert "accuracy" in two and "calbin" not in two  # (n, 2) is the K-class path
    binary = calibcli.evaluate((y == 1).astype(float), P[:, 1])
    assert "calbin" in binary and "accuracy" not in binary


def test_api_labels_and_classes():
    y = np.array([0, 2, 2])
    P = np.full((3, 3), 1 / 3)
    import calibcli
    from calibcli.errors import CalibError

    assert calibcli.evaluate(y, P)["log_loss"] == pytest.approx(np.log(3))  # integer labels as indices, class 1 absent
    named = calibcli.evaluate(np.array([1.0, 2.0, 3.0]), P, classes=["1", "2", "3"])
    assert named["log_loss"] == pytest.approx(np.log(3))
    with pytest.raises(CalibError, match=r"labels\[1\]: label 'x' is not a class"):
        calibcli.evaluate(["a", "x", "b"], P, classes=["a", "b", "c"])
    with pytest.raises(CalibError, match="2 distinct values but the scores have 3 class columns"):
        calibcli.evaluate(["a", "b", "b"], P)
    with pytest.raises(CalibError, match="class name 'b' appears twice"):
        calibcli.evaluate(["a", "b", "b"], P, classes=["a", "b", "b"])
    with pytest.raises(UsageError, match="--ece-bins 0 is out of range"):
        calibcli.evaluate(y, P, ece_bins=0)
    with pytest.raises(UsageError, match="--ece-strategy .wide.: expected uniform or quantile"):  # the CLI's words
        calibcli.evaluate(y, P, ece_strategy="wide")


def test_arrow_state_is_one_record_batch():
    y, P, _ = sample(50, 3, seed=1)
    assert len(KClassState.from_arrays(y, P).to_arrow().to_batches()) == 1  # engines ship batches


def test_api_options_apply_to_their_kind():
    """weights and the ECE bins reach the binary path too; options of one kind refuse the other."""
    import calibcli
    from calibcli.evaluation.state.binary import compute_all

    y, P, w = sample(300, 2, seed=6)
    p, y01 = P[:, 1], (y == 1).astype(float)
    got = calibcli.evaluate(y01, p, sample_weight=w, ece_bins=7, ece_strategy="quantile")
    want = compute_all(y01, p, sample_weight=w, ece_bins=7, ece_strategy="quantile")
    assert got["ece"] == pytest.approx(want["ece"], rel=1e-12)
    assert got["log_loss"] == pytest.approx(log_loss(y01, p, sample_weight=w), rel=1e-12)
    assert got["ece"] != calibcli.evaluate(y01, p)["ece"]
    with pytest.raises(UsageError, match="weights must be 300 finite"):
        calibcli.evaluate(y01, p, sample_weight=-w)
    with pytest.raises(UsageError, match="--classes applies to K-class predictions"):
        calibcli.evaluate(y01, p, classes=[0, 1])
    for kwargs in ({"fields": y}, {"interval": (p, p)}):
        with pytest.raises(UsageError, match="applies to binary probabilities"):
            calibcli.evaluate(y, P, **kwargs)
    with pytest.raises(UsageError, match="--metrics smece: a metric of binary probabilities"):
        calibcli.evaluate(y, P, metrics="smece")  # K-class predictions take top_label_smece


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6), weighted=st.booleans())
def test_metrics_invariant_to_class_and_row_order(seed, k, weighted):
    """Renaming the classes (permuting P's columns and the codes alike) or shuffling the rows
    changes no metric; every metric stays in its range."""
    y, P, w = sample(150, k, seed=seed, ties=seed % 3 == 0)
    sw = w if weighted else None
    rng = np.random.default_rng(seed)
    perm, rows = rng.permutation(k), rng.permutation(150)
    base = KClassState.from_arrays(y, P, sample_weight=sw).metrics()
    inverse = np.argsort(perm)  # new column j holds old class perm[j]
    renamed = KClassState.from_arrays(inverse[y], P[:, perm], sample_weight=sw).metrics()
    shuffled = km.compute_all(y[rows], P[rows], None if sw is None else sw[rows])
    top_ties = bool(np.any(np.sum(P == P.max(axis=1, keepdims=True), axis=1) > 1))
    for other, exempt in ((shuffled, False), (renamed, top_ties)):
        for key in base:
            if exempt and (key == "accuracy" or key.startswith("top_label")):
                continue  # which of tied top classes is first depends on the column order
            assert other[key] == pytest.approx(base[key], rel=1e-11, abs=1e-14), key
    assert 0 <= base["brier"] <= 2 and 0 <= base["accuracy"] <= 1 and 0 <= base["auc"] <= 1
    assert 0 <= base["top_label_ece"] <= base["top_label_mce"] <= 1 and 0 <= base["classwise_ece"] <= 1
