"""The K-class contract every method that takes K columns follows (native and one-vs-rest):
rows of probabilities summing to 1, JSON and Parquet maps that reload bit-for-bit, a fixed
seed giving the same map, the input checks, and the registry and Python API around them."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import calibcli
import kdata
from calibcli.maps import envelope as maps
from calibcli.calibrators import kscores, registry
from calibcli.calibrators.kclass import ClassCalibrator
from calibcli.maps.classmap import ClassMap
from calibcli.errors import CalibError, CalibWarning, FitError, InputError, NotFittedError, ParamError, UsageError, Where
from calibcli.kinds import probabilities

KMETHODS = [m for m in registry.names() if registry.classes(m) != "binary-only"]
FAST = {"bayes-iso": {"samples": 300}, "boot-isotonic": {"r": 5}, "boot-binning": {"r": 5},
        "spline": {"folds": 2}, "ilps": {"K": 20}}


def _fit(method, scores, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibWarning)
        return calibcli.fit(scores, y, method=method, **{**FAST.get(method, {}), **kw})


@pytest.fixture(scope="module")
def data():
    return kdata.probabilities(400, 4, seed=3)


def test_classes_of_every_method():
    assert set(registry.kclass_native()) >= {"temperature"}
    assert registry.classes("field-aware") == "binary-only"
    for name in ("isotonic", "logistic", "beta", "beta-am", "beta-ab", "bayes-iso", "enir", "near-isotonic",
                 "binning", "boot-isotonic", "boot-binning", "ilps", "bbq", "spline", "venn-abers"):
        assert registry.classes(name) == "one-vs-rest"
    doc = {m["name"]: m["classes"] for m in registry.catalogue_json()}
    assert doc == {m: registry.classes(m) for m in registry.names()}
    with pytest.raises(UsageError, match="one score column"):
        registry.kclass("field-aware")
    assert isinstance(registry.kclass("isotonic"), ClassCalibrator)
    assert isinstance(registry.get("temperature")(), ClassCalibrator)


@pytest.mark.parametrize("method", KMETHODS)
def test_contract(tmp_path, data, method):
    P, y = data
    cm = _fit(method, P, y)
    assert isinstance(cm, ClassMap) and cm.score_kind == "probability" and cm.classes_.tolist() == [0, 1, 2, 3]
    query = np.vstack([P, kdata.probabilities(50, 4, seed=9)[0], np.eye(4), np.full((1, 4), 0.25)])
    p = cm.predict(query)
    assert p.shape == query.shape and p.dtype == np.float64
    assert np.all((p >= 0) & (p <= 1)) and np.abs(p.sum(axis=1) - 1).max() <= 1e-12
    assert np.array_equal(cm.predict_labels(query), cm.classes_[p.argmax(axis=1)])
    for suffix in (".json", ".parquet"):
        path = str(tmp_path / f"m{suffix}")
        calibcli.save_map(cm, path)
        again = calibcli.load_map(path)
        assert isinstance(again, ClassMap) and again.method == method
        assert np.array_equal(again.predict(query), p), suffix
        assert again.classes_.tolist() == cm.classes_.tolist() and again.score_kind == cm.score_kind
    twice = _fit(method, P, y)
    assert json.dumps(maps.to_plain(twice.get_state())) == json.dumps(maps.to_plain(cm.get_state()))


@pytest.mark.parametrize("method", ["temperature", "isotonic", "logistic", "beta"])
def test_logit_scores(data, method):
    z, y = kdata.logits(400, 4, seed=4)
    cm = _fit(method, z, y)
    assert cm.score_kind == "logit"
    p = cm.predict(np.vstack([z, z * 1e300, -z * 1e300]))
    assert np.all(np.isfinite(p)) and np.abs(p.sum(axis=1) - 1).max() <= 1e-12


def test_bbq_refuses_logits_one_vs_rest():
    z, y = kdata.logits(100, 3)
    with pytest.raises(ParamError, match="needs probabilities"):
        calibcli.fit(z, y, method="bbq")


def test_string_labels_and_given_classes():
    P, y = kdata.probabilities(300, 3, seed=1)
    names = np.array(["cat", "dog", "car"])[y]
    cm = calibcli.fit(P, names, method="temperature")
    assert cm.classes_.tolist() == ["car", "cat", "dog"]  # sorted
    ordered = calibcli.fit(P, names, method="temperature", classes=["cat", "dog", "car"])
    assert ordered.classes_.tolist() == ["cat", "dog", "car"]
    codes = calibcli.fit(P, y, method="temperature")
    assert np.array_equal(ordered.predict(P), codes.predict(P))
    assert ordered.predict_labels(P).tolist() == np.array(["cat", "dog", "car"])[codes.predict(P).argmax(1)].tolist()
    with pytest.raises(InputError, match=rf"labels\[{np.argmax(names == 'cat')}\]: label 'cat' is not a class"):
        calibcli.fit(P, names, method="temperature", classes=["x", "dog", "car"])
    with pytest.raises(UsageError, match="^--classes 'cat,cat,car': class name 'cat' appears twice$"):
        calibcli.fit(P, names, method="temperature", classes=["cat", "cat", "car"])  # as calib fit --classes
    with pytest.raises(InputError, match="2 distinct values but the scores have 3"):
        calibcli.fit(P, np.where(y == 2, "cat", names), method="temperature")
    with pytest.warns(CalibWarning, match="no rows"):  # integer labels are class indices: class 2 is absent
        assert calibcli.fit(P, np.where(y == 2, 0, y), method="temperature").classes_.tolist() == [0, 1, 2]


def test_absent_class_warns_and_keeps_a_probability():
    P, y = kdata.probabilities(300, 3, seed=2)
    y = np.where(y == 1, 0, y)
    for method in ("temperature", "isotonic"):
        with pytest.warns(CalibWarning, match="no rows"):
            cm = calibcli.fit(P, y, method=method, classes=[0, 1, 2])
        p = cm.predict(P)
        assert np.all(p[:, 1] > 0) and np.abs(p.sum(axis=1) - 1).max() <= 1e-12
    assert cm.calibrator.maps_[1] == 1 / (300 + 2)


@pytest.mark.parametrize("scores, labels, message", [
    (np.array([[0.5, 0.5], [np.nan, 1.0]]), [0, 1], "row 1, class column 0 is nan"),
    (np.array([[0.5, 0.5, 0.1], [0.2, 0.8, 0.0]]), [0, 1], r"scores\[0\]: the probabilities sum to 1.1"),
    (np.array([[1.5, -0.5], [0.2, 0.8]]), [0, 1], r"scores\[0\], class 1: probability -0.5 is negative"),
    (np.ones((2, 1)), [0, 1], "K >= 2"),
    (np.full((3, 2), 0.5), [0, 0, 0], "at least two classes"),
])
def test_bad_scores(scores, labels, message):
    with pytest.raises(CalibError, match=message):
        registry.kclass("temperature", {"score_kind": "probability"}).fit(scores, np.asarray(labels))


@pytest.mark.parametrize("labels, message", [
    ([0, 1, 3], "row 2 is 3"), ([0, 1, 0.5], "row 2 is 0.5"), ([0, -1, 1], "row 1 is -1"), (["a", "b", "a"], "codes"),
])
def test_bad_labels(labels, message):
    with pytest.raises(FitError, match=message):
        registry.kclass("temperature", {"score_kind": "logit"}).fit(np.zeros((3, 3)), np.asarray(labels))


def test_bad_weights_and_kinds():
    z, y = kdata.logits(50, 3)
    cal = registry.kclass("temperature", {"score_kind": "logit"})
    with pytest.raises(FitError, match="row 2 is -1.0"):
        cal.fit(z, y, sample_weight=np.r_[1, 1, -1, np.ones(47)])
    with pytest.raises(FitError, match="all weights are zero"):
        cal.fit(z, y, sample_weight=np.zeros(50))
    with pytest.raises(UsageError, match="--weight-kind must be one of frequency, importance"):  # at the door
        calibcli.fit(z, y, "temperature", score_kind="logit", weight_kind="counts")
    with pytest.raises(NotFittedError):
        cal.predict(z)
    cal.fit(z, y)
    with pytest.raises(FitError, match="4 class columns, the map was fitted on 3"):
        cal.predict(np.zeros((2, 4)))
    with pytest.raises(ParamError, match="no parameter"):
        registry.kclass("temperature", {"bins": 3})


def test_weights_frequency_and_importance():
    z, y = kdata.logits(300, 3, seed=6)
    w = np.random.default_rng(0).integers(0, 4, 300).astype(float)
    for method in ("temperature", "isotonic"):
        weighted = calibcli.fit(z, y, method=method, sample_weight=w, platt_correction=False) if method == "isotonic" \
            else calibcli.fit(z, y, method=method, sample_weight=w)
        extra = {"platt_correction": False} if method == "isotonic" else {}
        rows = np.repeat(np.arange(300), w.astype(int))
        expanded = calibcli.fit(z[rows], y[rows], method=method, **extra)
        np.testing.assert_allclose(weighted.predict(z), expanded.predict(z), rtol=1e-9, atol=1e-12)
        a = calibcli.fit(z, y, method=method, sample_weight=w, weight_kind="importance", **extra)
        b = calibcli.fit(z, y, method=method, sample_weight=w * 1e-7, weight_kind="importance", **extra)
        np.testing.assert_allclose(a.predict(z), b.predict(z), rtol=1e-9, atol=1e-12)


def test_resolve_score_kind():
    P, _ = kdata.probabilities(20, 3)
    where = Where(column="scores")
    assert probabilities.resolve_kind(P, "auto", where) == ("probability", None)
    assert probabilities.resolve_kind(P + 1e-7, "auto", where) == ("probability", None)
    kind, warning = probabilities.resolve_kind(P * 1.001, "auto", where)  # auto's spec: every row within 1e-6
    assert kind == "logit" and "20 of 20 rows are probabilities to within 0.001" in warning
    with pytest.warns(CalibWarning, match="20 of 20 rows are probabilities to within 0.001"):
        calibcli.fit(P * 1.001, np.arange(20) % 3, "temperature")
    assert probabilities.resolve_kind(np.log(P), "auto", where)[0] == "logit"
    assert probabilities.resolve_kind(P, "logit", where)[0] == "logit"
    with pytest.raises(UsageError, match="--score-kind 'odds': expected one of auto, probability, logit"):
        calibcli.fit(P, np.arange(20) % 3, "temperature", score_kind="odds")


def test_log_transform_keeps_small_probabilities():
    p = np.array([[0.0, 5e-324, 1e-300, 1e-15, 1 - 1e-15 - 1e-300]])
    z = kscores.log_probabilities(p)
    assert np.all(np.isfinite(z)) and np.all(np.diff(z[0]) > 0)
    assert z[0, 2] == np.log(1e-300) and z[0, 3] == np.log(1e-15)
    assert z[0, 0] < z[0, 1] == np.log(5e-324)


def test_kclass_param_strings_are_parsed_by_the_fit_path():
    from calibcli.requests import Columns, FitRequest

    def kclass(params, score_kind="logit"):
        return FitRequest.build(params[0] if isinstance(params, tuple) else "isotonic",
                                params[1] if isinstance(params, tuple) else params, texts=True,
                                columns=Columns(score_cols="p_*", score_kind=score_kind)).calibrator

    cal = kclass(["platt_correction=false"])
    assert cal.params == {"platt_correction": False, "score_kind": "logit"}
    with pytest.raises(CalibError, match="not --param score_kind"):
        kclass(("temperature", {"score_kind": "logit"}))
    with pytest.raises(CalibError, match="no parameter 'bins'"):
        kclass(("temperature", {"bins": "3"}))
    with pytest.raises(CalibError, match="must be true or false"):
        kclass({"platt_correction": "maybe"})
    seeded = FitRequest.build("boot-isotonic", ["r=3"], texts=True, seed=7,
                              columns=Columns(score_cols="p_*")).calibrator
    P = np.random.default_rng(0).dirichlet(np.ones(3), 30)
    seeded.fit(P, np.arange(30) % 3)
    assert seeded.params["seed"] == 7 and all(m.params["seed"] == 7 for m in seeded.maps_)


@pytest.mark.parametrize("method", KMETHODS)
@pytest.mark.parametrize("kind", ["probability", "logit"])
def test_fit_and_predict_do_not_depend_on_memory_layout(method, kind):
    """C- and Fortran-ordered (and strided) scores give the same bits, fitted and predicted: row
    sums over a Fortran array would add in another order."""
    z, y = kdata.logits(300, 10, seed=5)
    s = kdata.softmax(z) if kind == "probability" else z
    if kind == "logit" and registry.get(method).needs_probabilities:
        pytest.skip(f"{method} takes probabilities only")
    seeded = {"seed": 0} if "seed" in {p.name for p in registry.kclass(method).declared_params()} else {}
    c = _fit(method, s, y, score_kind=kind, **seeded)
    f = _fit(method, np.asfortranarray(s), y, score_kind=kind, **seeded)
    want = c.predict(s)
    assert np.array_equal(want, f.predict(s))
    assert np.array_equal(want, c.predict(np.asfortranarray(s)))
    wide = np.zeros((s.shape[0], 2 * s.shape[1]), order="F")
    wide[:, ::2] = s
    assert np.array_equal(want, c.predict(wide[:, ::2]))
