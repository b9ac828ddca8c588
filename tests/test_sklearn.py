"""`calibcli.sklearn.Calibrator` as a scikit-learn classifier, against `calibcli.fit` as the oracle.

Binary: X is one score column, any two labels, `classes_[1]` the positive class, and
`predict_proba[:, 1]` is bit-for-bit what `calibcli.fit` gives on the same data. K classes:
X is the K score columns, `predict_proba` is bit-for-bit the K-class `calibcli.fit`.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import calibcli

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_predict  # noqa: E402

from calibcli.errors import CalibWarning  # noqa: E402
from calibcli.sklearn import Calibrator  # noqa: E402

def _binary(n=600, seed=0, labels=("no", "yes")):
    """Scores in [0, 1] and labels drawn with P(labels[1]) = score**2 (miscalibrated)."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    pos = rng.random(n) < s**2
    return s, np.where(pos, labels[1], labels[0]), pos.astype(np.float64)


def _kclass(n=900, k=3, seed=0):
    """Over-confident K-class probabilities (softmax of 3x the true logits) and string labels."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    p_true = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    codes = (rng.random(n)[:, None] > np.cumsum(p_true, axis=1)).sum(axis=1)
    e = np.exp(3 * z)
    names = np.array(["cat", "dog", "car", "bus", "elk"][:k])
    return e / e.sum(axis=1, keepdims=True), names[codes]


@pytest.mark.parametrize("method,params", [("isotonic", {}), ("logistic", {}), ("beta", {}),
                                           ("bayes-iso", {"seed": 1, "samples": 200}), ("binning", {})])
def test_binary_proba_is_the_library_fit_bit_for_bit(method, params):
    s, y, y01 = _binary()
    est = Calibrator(method, **params).fit(s[:, None], y)
    assert est.classes_.tolist() == ["no", "yes"] and est.n_features_in_ == 1
    want = calibcli.fit(s, y01, method=method, **params).predict(s)
    proba = est.predict_proba(s[:, None])
    assert proba.shape == (s.size, 2) and proba[:, 1].tobytes() == want.tobytes()
    assert np.array_equal(proba[:, 0], 1.0 - want)
    assert est.predict_proba(s).tobytes() == proba.tobytes()  # 1-D X is the same one column
    pred = est.predict(s[:, None])
    assert np.array_equal(pred, np.where(want > 0.5, "yes", "no"))
    assert est.score(s[:, None], y) == accuracy_score(y, pred)


@pytest.mark.parametrize("labels", [(-1, 1), (0, 2), (False, True), ("churn", "stay"), (0.0, 1.0)])
def test_any_two_labels_the_larger_is_positive_unless_classes_says(labels):
    s, y, y01 = _binary(seed=4, labels=labels)
    est = Calibrator("logistic").fit(s[:, None], y)
    assert est.classes_.tolist() == sorted(labels)
    first_is_pos = sorted(labels)[1] == labels[0]
    want = calibcli.fit(s, 1.0 - y01 if first_is_pos else y01, method="logistic").predict(s)
    assert est.predict_proba(s[:, None])[:, 1].tobytes() == want.tobytes()
    assert est.predict(s[:, None]).dtype == np.asarray(y).dtype
    flipped = Calibrator("logistic", classes=[labels[1], labels[0]]).fit(s[:, None], y)
    assert flipped.classes_.tolist() == [labels[1], labels[0]]
    want = calibcli.fit(s, y01 == 0, method="logistic").predict(s)
    assert flipped.predict_proba(s[:, None])[:, 1].tobytes() == want.tobytes()


def test_decision_function_is_the_finite_calibrated_log_odds():
    s, y, y01 = _binary(seed=5)
    est = Calibrator("isotonic", platt_correction=False).fit(s[:, None], y)
    p = est.predict_proba(s[:, None])[:, 1]
    assert p.min() == 0.0 and p.max() == 1.0  # the classical fit reaches 0 and 1
    d = est.decision_function(s[:, None])
    inner = (p > 0) & (p < 1)
    np.testing.assert_allclose(d[inner], np.log(p[inner] / (1 - p[inner])), rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(d)) and d[p == 0].max() < -700 and d[p == 1].min() > 700
    assert np.array_equal(d > 0, est.predict(s[:, None]) == "yes")
    assert np.all(np.diff(d[np.argsort(p, kind="stable")]) >= 0)  # ranks as P(yes)
    assert roc_auc_score(y, d) == roc_auc_score(y, p)


def test_cross_val_predict_proba_is_the_library_fit_per_fold():
    s, y, y01 = _binary(seed=2)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    got = cross_val_predict(Calibrator("isotonic"), s[:, None], y, cv=folds, method="predict_proba")
    want = np.empty_like(s)
    for train, test in folds.split(s[:, None], y):
        want[test] = calibcli.fit(s[train], y01[train]).predict(s[test])
    assert got.shape == (s.size, 2) and got[:, 1].tobytes() == want.tobytes()
    labels = cross_val_predict(Calibrator("isotonic"), s[:, None], y, cv=folds)
    assert np.array_equal(labels, np.where(want > 0.5, "yes", "no"))


def test_calibration_display_from_estimator_with_string_labels():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.calibration import CalibrationDisplay, calibration_curve

    s, y, y01 = _binary(seed=6)
    est = Calibrator("logistic").fit(s[:, None], y)
    shown = CalibrationDisplay.from_estimator(est, s[:, None], y, n_bins=8)
    want = calibcli.fit(s, y01, method="logistic").predict(s)
    prob_true, prob_pred = calibration_curve(y01, want, n_bins=8)
    assert shown.pos_label == "yes"
    assert np.array_equal(shown.prob_true, prob_true) and np.array_equal(shown.prob_pred, prob_pred)
    plt.close("all")


def test_pipeline_ending_in_the_calibrator():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    rng = np.random.default_rng(7)
    features = rng.normal(size=(800, 3))
    y = np.where(features @ [1.0, -2.0, 0.5] + rng.normal(size=800) > 0, "a", "b")
    model = LogisticRegression().fit(features[:400], y[:400])
    pipe = make_pipeline(FunctionTransformer(lambda x: model.decision_function(x)[:, None]), Calibrator("logistic"))
    pipe.fit(features[400:], y[400:])
    score = model.decision_function(features)
    want = calibcli.fit(score[400:], (y[400:] == "b").astype(float), method="logistic").predict(score)
    assert pipe.classes_.tolist() == ["a", "b"]
    assert pipe.predict_proba(features)[:, 1].tobytes() == want.tobytes()
    assert np.array_equal(pipe.predict(features), np.where(want > 0.5, "b", "a"))


def test_grid_search_over_method_scores_each_as_the_library_does():
    s, y, y01 = _binary(seed=8)
    methods = ["isotonic", "logistic", "beta"]
    folds = StratifiedKFold(3, shuffle=True, random_state=1)
    grid = GridSearchCV(Calibrator(), {"method": methods}, scoring="neg_log_loss", cv=folds)
    grid.fit(s[:, None], y)
    want = []
    for method in methods:
        losses = [log_loss(y01[test], calibcli.fit(s[train], y01[train], method=method).predict(s[test]))
                  for train, test in folds.split(s[:, None], y)]
        want.append(-np.mean(losses))
    np.testing.assert_allclose(grid.cv_results_["mean_test_score"], want, rtol=1e-12)
    assert grid.best_params_ == {"method": methods[int(np.argmax(want))]}
    assert grid.best_estimator_.classes_.tolist() == ["no", "yes"]
    by_auc = GridSearchCV(Calibrator(), {"method": methods}, scoring="roc_auc", cv=folds).fit(s[:, None], y)
    assert np.all(np.isfinite(by_auc.cv_results_["mean_test_score"]))


def test_params_clone_and_sample_weights():
    s, y, y01 = _binary(seed=9)
    est = Calibrator(method="bayes-iso", seed=3, samples=300)
    assert est.get_params() == {"method": "bayes-iso", "seed": 3, "samples": 300}
    twin = clone(est).set_params(samples=200, method="logistic")
    assert twin.get_params() == {"method": "logistic", "seed": 3, "samples": 200}
    assert est.get_params()["samples"] == 300
    w = np.random.default_rng(0).integers(0, 4, s.size).astype(float)
    got = Calibrator("isotonic").fit(s[:, None], y, sample_weight=w).predict_proba(s[:, None])[:, 1]
    assert got.tobytes() == calibcli.fit(s, y01, sample_weight=w).predict(s).tobytes()
    rows = np.repeat(np.arange(s.size), w.astype(int))  # what scikit-learn means by a weight
    repeated = Calibrator("isotonic").fit(s[rows, None], y[rows]).predict_proba(s[:, None])[:, 1]
    np.testing.assert_allclose(got, repeated, rtol=0, atol=1e-12)
    assert json.dumps(Calibrator("isotonic").fit(s[:, None], y).get_params()) == '{"method": "isotonic"}'


def test_what_the_inapplicable_checks_test_holds_for_one_score_column():
    """Pickling, dtypes, NaN at predict and sample order: what the checks that feed several raw
    features (listed at the end) test, on one score column."""
    import pickle

    s, y, _ = _binary(seed=10)
    est = Calibrator("bayes-iso", seed=2, samples=100).fit(s[:, None], y)
    proba = est.predict_proba(s[:, None])
    again = pickle.loads(pickle.dumps(est))
    assert again.predict_proba(s[:, None]).tobytes() == proba.tobytes()
    refit = clone(est).fit(s[:, None], y)  # same seed, same map
    assert refit.predict_proba(s[:, None]).tobytes() == proba.tobytes()
    q = np.round(s * 8) / 8  # exact in float32 and as fractions of 8
    by_dtype = [Calibrator("isotonic").fit(q.astype(t)[:, None], y).predict_proba(q.astype(t)[:, None])
                for t in (np.float64, np.float32)]
    assert by_dtype[0].tobytes() == by_dtype[1].tobytes()
    order = np.random.default_rng(0).permutation(s.size)
    assert np.array_equal(est.predict_proba(s[order, None]), proba[order])
    with pytest.raises(ValueError, match="NaN"):
        est.predict_proba(np.r_[s[:-1], np.nan][:, None])
    with pytest.raises(ValueError, match="expecting 1 features"):
        est.predict_proba(np.c_[s, s])


def test_bad_input_raises_value_errors_that_say_what():
    s, y, _ = _binary(seed=3)
    three = np.where(np.arange(s.size) % 3 == 0, "maybe", y)
    P = np.random.default_rng(0).dirichlet([1, 1, 1], s.size)
    abc = np.array(["a", "b", "c"])[np.arange(s.size) % 3]
    cases = [  # (X, labels, estimator parameters, what the error says)
        (np.c_[s, s, s], y, {}, "X has 3 columns for 2 classes: X must be a model's scores, not its features"),
        (s[:, None], three, {}, "one score column calibrates two classes, got 3"),
        (s[:, None], np.full(s.size, "no"), {}, "at least 2 classes"),
        (s[:, None], y, {"classes": ["no", "no"]}, "classes must be distinct"),
        (s[:, None], y, {"classes": ["no", "si"]}, "label 'yes' is not one of the classes"),
        (np.r_[s[:-1], np.nan][:, None], y, {}, "NaN"),
        (s[:, None], s, {}, "Unknown label type"),
        (s[:, None], y, {"nonsense": 1}, "no parameter 'nonsense'"),
        (s[:, None] + 1, y, {"method": "beta"}, "needs probability scores in"),
        (P[:, :2], abc, {}, "X has 2 columns for 3 classes"),
        (P - 0.1, abc, {"score_kind": "probability"}, "is negative"),
        (P * 2, abc, {"score_kind": "probability"}, "the probabilities sum to"),
        (P, abc, {"classes": ["a", "b", "d"]}, "label 'c' is not one of the classes"),
        (P, abc, {"method": "venn-abers-nonsense"}, "unknown method"),
    ]
    for X, labels, params, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            Calibrator(**params).fit(X, labels)
    with pytest.raises(ValueError, match="weight"):
        Calibrator().fit(s[:, None], y, sample_weight=np.zeros(s.size))


@pytest.mark.parametrize("method", ["temperature", "isotonic", "logistic"])
def test_kclass_proba_is_the_library_fit_bit_for_bit(method):
    P, y = _kclass()
    est = Calibrator(method).fit(P, y)
    assert est.classes_.tolist() == ["car", "cat", "dog"] and est.n_features_in_ == 3
    lib = calibcli.fit(P, y, method=method)
    assert lib.classes_.tolist() == est.classes_.tolist()
    proba = est.predict_proba(P)
    assert proba.shape == P.shape and proba.tobytes() == lib.predict(P).tobytes()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.array_equal(est.predict(P), est.classes_[np.argmax(proba, axis=1)])
    assert est.score(P, y) == accuracy_score(y, est.predict(P))
    assert not hasattr(est, "decision_function")  # K > 2: no single log-odds


def test_kclass_classes_option_orders_the_columns():
    P, y = _kclass(seed=1)
    order = ["dog", "car", "cat"]
    est = Calibrator("temperature", classes=order).fit(P, y)
    assert est.classes_.tolist() == order
    lib = calibcli.fit(P, y, method="temperature", classes=order)
    assert est.predict_proba(P).tobytes() == lib.predict(P).tobytes()
    logits = np.log(P) + 2.0  # the scores as logits, their kind given rather than detected
    est = Calibrator("temperature", classes=order, score_kind="logit").fit(logits, y)
    lib = calibcli.fit(logits, y, method="temperature", classes=order, score_kind="logit")
    assert lib.score_kind == "logit" and est.calibrator_.score_kind == "logit"
    assert est.predict_proba(logits).tobytes() == lib.predict(logits).tobytes()


def test_kclass_class_without_rows_needs_the_classes_option():
    P, y = _kclass(seed=4)
    seen = y != "dog"
    with pytest.raises(ValueError, match=re.escape("a class without rows here needs classes=[...]")):
        Calibrator("temperature").fit(P[seen], y[seen])
    with pytest.warns(CalibWarning, match="no rows"):
        est = Calibrator("isotonic", classes=["car", "cat", "dog"]).fit(P[seen], y[seen])
        lib = calibcli.fit(P[seen], y[seen], method="isotonic", classes=["car", "cat", "dog"])
    proba = est.predict_proba(P)
    assert proba.tobytes() == lib.predict(P).tobytes()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_kclass_cross_val_predict_and_grid_search():
    P, y = _kclass(n=600, seed=2)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    got = cross_val_predict(Calibrator("temperature"), P, y, cv=folds, method="predict_proba")
    want = np.empty_like(P)
    for train, test in folds.split(P, y):
        want[test] = calibcli.fit(P[train], y[train], method="temperature").predict(P[test])
    assert got.tobytes() == want.tobytes()
    grid = GridSearchCV(Calibrator(), {"method": ["temperature", "isotonic"]}, scoring="neg_log_loss", cv=folds)
    grid.fit(P, y)
    assert grid.best_params_["method"] in ("temperature", "isotonic")
    assert grid.best_estimator_.predict_proba(P).shape == P.shape


def test_two_score_columns_are_the_kclass_path_with_a_log_odds():
    P, y = _kclass(k=2, seed=3)
    est = Calibrator("temperature").fit(P, y)
    proba = est.predict_proba(P)
    assert proba.tobytes() == calibcli.fit(P, y, method="temperature").predict(P).tobytes()
    d = est.decision_function(P)
    np.testing.assert_allclose(d, np.log(proba[:, 1] / proba[:, 0]), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="Reshape your data"):
        est.predict(P[:, 0])


# check_estimator feeds its own data sets as X, most of them raw features: several columns that
# are neither one score column nor one column per class. Each check expected to fail, with why
# and what its failure must say (the estimator's own refusal, or the check's own assertion).
_FEEDS = {  # (raw feature columns, classes) -> the checks that fit on such data
    (2, 3): ("check_estimators_overwrite_params", "check_estimators_fit_returns_self",
             "check_readonly_memmap_input", "check_classifiers_classes"),
    (4, 3): ("check_n_features_in_after_fitting", "check_positive_only_tag_during_fit"),
    (3, 2): ("check_pipeline_consistency", "check_estimators_nan_inf", "check_estimators_pickle"),
    (5, 2): ("check_estimators_dtypes",), (10, 4): ("check_dtype_object",),
    (30, 3): ("check_sample_weight_equivalence_on_dense_data",),
}
EXPECTED_FAILURES = {
    **{name: (f"fits on {f} raw features for {k} classes: X must be 1 or {k} score columns",
              f"X has {f} columns for {k} classes") for (f, k), names in _FEEDS.items() for name in names},
    # Two blob coordinates taken as two classes' scores: calibrating a column per class cannot
    # reach the check's training accuracy bar (0.83), which is about learning from features.
    "check_classifiers_train": ("fits on 2 blob coordinates as 2 classes' scores: below its accuracy bar", "^$"),
}


def _messages(exc: BaseException | None) -> str:
    """The exception's message and its causes' (some checks wrap the estimator's error)."""
    out = []
    while exc is not None:
        out.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return " | ".join(out)


def test_check_estimator_passes_every_check_that_applies():
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(Calibrator(), on_fail=None, on_skip=None,
                                  expected_failed_checks={k: v[0] for k, v in EXPECTED_FAILURES.items()})
    unexpected = [(r["check_name"], r["status"], _messages(r["exception"])[:200]) for r in results
                  if (r["status"] == "xfail") != (r["check_name"] in EXPECTED_FAILURES)
                  and r["status"] != "skipped"]
    assert unexpected == [], unexpected
    wrong_reason = [(r["check_name"], _messages(r["exception"])[:200]) for r in results
                    if r["status"] == "xfail"
                    and not re.search(EXPECTED_FAILURES[r["check_name"]][1], _messages(r["exception"]))]
    assert wrong_reason == [], wrong_reason[:3]
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped  # needs SCIPY_ARRAY_API set
    assert sum(r["status"] == "passed" for r in results) >= 25
