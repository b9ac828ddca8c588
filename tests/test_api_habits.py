"""Python that behaves like Python: `dir(calibcli)`, the moved modules' old names beside the new
`calibcli.compare`, `save_map`/`evaluate(map=)` taking a fitted scikit-learn wrapper, and the
wrapper saying what X must be when given a model or raw features."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import calibcli
from calibcli.errors import NotFittedError, UsageError

sklearn = pytest.importorskip("sklearn")
from calibcli.sklearn import Calibrator  # noqa: E402


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    return s, (rng.random(n) < s ** 2).astype(float)


def test_dir_lists_the_public_api():
    names = dir(calibcli)
    assert set(calibcli.__all__) <= set(names) and "__version__" in names
    assert "compare" in calibcli.__all__
    assert not {"Any", "Callable", "importlib", "sys", "warnings"} & set(names)
    for name in calibcli.__all__:
        assert callable(getattr(calibcli, name))
    star: dict = {}
    exec("from calibcli import *", star)
    assert set(calibcli.__all__) <= set(star)


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "always::FutureWarning", "-c", code], capture_output=True, text=True)


def test_old_module_names_still_import_and_compare_stays_callable():
    """`import calibcli.compare` (the old name of fitting.compare) warns and gives the module's
    names; the package's `compare` stays the function after it (a fresh interpreter)."""
    run = _python(
        "import numpy as np, calibcli\n"
        "import calibcli.compare as old\n"
        "from calibcli.compare import fold_ids\n"
        "import calibcli.pava, calibcli.fitting.compare as new\n"
        "assert fold_ids is new.fold_ids and old.FAST == new.FAST\n"
        "rng = np.random.default_rng(0); p = rng.random(400); y = (rng.random(400) < p).astype(int)\n"
        "print(calibcli.compare(p, y, 'logistic').recommended, old(p, y, 'logistic').recommended)\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["none", "none"]
    assert "calibcli.compare moved to calibcli.fitting.compare" in run.stderr
    assert "calibcli.pava moved to calibcli.numeric.pava" in run.stderr


def test_save_map_and_evaluate_take_a_fitted_sklearn_calibrator(tmp_path):
    s, y01 = _data()
    y = np.where(y01 == 1, "yes", "no")
    est = Calibrator("isotonic").fit(s, y)
    path = tmp_path / "m.json"
    calibcli.save_map(est, str(path))
    loaded = calibcli.load_map(str(path))
    assert loaded.predict(s).tobytes() == est.predict_proba(s)[:, 1].tobytes()
    import json

    assert json.loads(path.read_text())["training"] == {"classes": ["no", "yes"], "positive_class": "yes"}
    want = calibcli.evaluate(y01, est.predict_proba(s)[:, 1])
    for map_ in (est, loaded, str(path), path):
        got = calibcli.evaluate(y if map_ is est else y01, s, map=map_)
        assert got == pytest.approx(want, nan_ok=True)
    with pytest.raises(UsageError, match="label 'maybe' is not one of the map's classes"):
        calibcli.evaluate(np.concatenate([y[:-1], ["maybe"]]), s, map=est)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        calibcli.save_map(Calibrator(), str(tmp_path / "x.json"))
    with pytest.raises(UsageError, match="map must be a fitted calibrator"):
        calibcli.evaluate(y01, s, map=object())


def test_k_class_sklearn_calibrator_saves_and_evaluates(tmp_path):
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(3), 500)
    y = np.array(["a", "b", "c"])[np.minimum((P.cumsum(axis=1) < rng.random(500)[:, None]).sum(axis=1), 2)]
    est = Calibrator("temperature").fit(P, y)
    calibcli.save_map(est, str(tmp_path / "k.json"))
    cm = calibcli.load_map(str(tmp_path / "k.json"))
    assert cm.predict(P).tobytes() == est.predict_proba(P).tobytes() and cm.classes_.tolist() == ["a", "b", "c"]
    want = calibcli.evaluate(y, est.predict_proba(P), classes=["a", "b", "c"])
    assert calibcli.evaluate(y, P, map=est) == pytest.approx(want, nan_ok=True)
    assert calibcli.evaluate(y, P, map=cm) == pytest.approx(want, nan_ok=True)


def test_the_wrapper_says_what_x_must_be():
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(300, 20, random_state=0)
    model = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match=r"X is a LogisticRegression, a model: .*model\.predict_proba\(X\)\[:, 1\]"):
        Calibrator().fit(model, y)
    with pytest.raises(ValueError, match=r"X has 20 columns for 2 classes: X must be a model's scores, not its "
                                         r"features: .*model\.predict_proba\(X\)\[:, 1\]"):
        Calibrator().fit(X, y)
    est = Calibrator().fit(model.predict_proba(X)[:, 1], y)
    with pytest.raises(ValueError, match=r"X has 20 features, but Calibrator is expecting 1 features as input: X is "
                                         r"the model's scores"):
        est.predict_proba(X)
    with pytest.raises(ValueError, match="a model"):
        est.predict_proba(model)
