"""`calib compare`'s answer: the uncalibrated row (`none`), the recommended method and its reason,
`--pick`, `-o` when nothing should be saved, the `-m` presets and `calibcli.compare`.

Known answers: calibrated scores (p ~ U, y ~ Bernoulli(p)) must get `none`, distorted ones a
calibrating method (benchmarks/compare_recommendation.py runs many seeds); the choice among
the tied is checked by hand against each method's declared complexity.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit, logit
from typer.testing import CliRunner

import calibcli
from calibcli.errors import CalibError
from calibcli.kinds import KCLASS
from repo import DATA
from calibcli.calibrators import registry
from calibcli.cli.app import app
from calibcli.errors import UsageError
from calibcli.evaluation.metrics import binary as metrics
from calibcli.fitting import compare
from calibcli.fitting.compare import Comparison, MethodScore

runner = CliRunner()


def _calibrated(seed: int, n: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    return p, (rng.random(n) < p).astype(float)


def _write(path, s, y):
    path.write_text("score,label\n" + "".join(f"{float(a)!r},{int(b)}\n" for a, b in zip(s, y)))
    return path


@pytest.mark.parametrize("seed", range(4))
def test_calibrated_scores_get_none(seed):
    """Calibration cannot help scores that are the true probabilities: `none`, whatever the best mean."""
    p, y = _calibrated(seed)
    result = calibcli.compare(p, y, seed=seed)
    assert result.recommended == "none", repr(result)
    assert result.reason.startswith("calibration does not help here")
    assert "none" in result.tied


@pytest.mark.parametrize("distort", [lambda p: p ** 3, lambda p: expit(3 * logit(p)), lambda p: expit(logit(p) + 1)],
                         ids=["cube", "sharpened", "shifted"])
def test_distorted_scores_get_a_calibrating_method(distort):
    p, y = _calibrated(1)
    result = calibcli.compare(distort(p), y, methods="fast", seed=1)
    assert result.recommended not in (None, "none"), repr(result)
    plain = result.difference(result.score("none"))
    assert not plain.tied and plain.mean > 0.01
    assert "the uncalibrated scores are clearly worse" in result.reason


def test_kclass_calibrated_get_none_and_sharpened_get_a_method():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(3), 5000)
    y = np.minimum((P.cumsum(axis=1) < rng.random(5000)[:, None]).sum(axis=1), 2)
    assert calibcli.compare(P, y, methods="fast").recommended == "none"
    sharp = P ** 3 / (P ** 3).sum(axis=1, keepdims=True)
    result = calibcli.compare(sharp, y, methods="fast")
    assert result.recommended == "temperature", repr(result)  # exactly temperature 1/3: the one-number map
    logits = np.log(sharp)  # the same scores as logits: none is their softmax, the same predictions
    as_logits = calibcli.compare(logits + 5.0, y, methods="fast", score_kind="logit")
    assert as_logits.uncalibrated == "softmax of the logits as given"
    np.testing.assert_allclose(as_logits.score("none").folds["log_loss"], result.score("none").folds["log_loss"],
                               rtol=1e-12)


def _comparison(rows: dict[str, tuple[int, list[float]]]) -> Comparison:
    """A Comparison of hand-made per-fold log-losses; the methods' complexities are their classes'."""
    scores = [MethodScore(m, {"log_loss": v}) for m, (_, v) in rows.items()]
    for m, (c, _) in rows.items():
        assert compare.complexity(m) == c
    return Comparison("t", 100, 5, 0, "log_loss", scores)


BASE = [0.50, 0.52, 0.49, 0.51, 0.50]


def test_the_simplest_tied_method_is_recommended_by_complexity_then_sd():
    noisy = [v + d for v, d in zip(BASE, [0.004, -0.003, 0.002, -0.001, 0.003])]  # tied with BASE, mean +0.001
    steady = [v + 0.0011 + d for v, d in zip(BASE, [0.0001, -0.0001, 0, 0.0001, -0.0001])]  # clearly worse
    got = _comparison({"none": (0, [v + 0.05 for v in BASE]), "isotonic": (1000, BASE), "beta": (3, noisy),
                       "beta-am": (2, steady)})
    assert got.best.method == "isotonic" and set(got.tied) == {"isotonic", "beta"}
    assert got.recommended == "beta"  # complexity 3 < 1000; beta-am (2) is clearly worse
    assert got.reason.startswith("the simplest of the 2 methods tied with the best out-of-fold log-loss "
                                 "(isotonic, 0.5040; beta is +0.0010 ± ")
    # equal complexity: the smaller sd over the folds wins
    wobbly = [2 * v - 0.504 for v in BASE]  # the folds' spread doubled
    calm = [0.505, 0.506, 0.504, 0.505, 0.505]
    got = _comparison({"none": (0, [v + 0.05 for v in BASE]), "isotonic": (1000, BASE), "beta-ab": (2, wobbly),
                       "beta-am": (2, calm)})
    assert {"beta-ab", "beta-am"} <= set(got.tied)
    assert got.score("beta-am").sd("log_loss") < got.score("beta-ab").sd("log_loss")
    assert got.recommended == "beta-am"


def test_none_tied_with_the_best_is_recommended_and_the_best_alone_is_said_so():
    got = _comparison({"none": (0, [v + d for v, d in zip(BASE, [0.002, -0.001, 0.001, -0.002, 0.001])]),
                       "isotonic": (1000, BASE)})
    assert got.recommended == "none" and got.chosen == "none"
    assert got.reason.startswith("calibration does not help here, the uncalibrated scores are tied with the best")
    got.pick = "best"
    assert got.chosen == "isotonic"
    alone = _comparison({"none": (0, [v + 0.05 for v in BASE]), "isotonic": (1000, BASE)})
    assert alone.recommended == "isotonic"
    assert alone.reason.startswith("the best out-of-fold log-loss (0.5040), and no other method is tied with it; "
                                   "the uncalibrated scores are clearly worse (+0.0500 ± 0.0000)")
    best = _comparison({"none": (0, BASE), "isotonic": (1000, [v + 0.01 for v in BASE])})
    assert best.best.method == "none" and best.recommended == "none"
    assert best.sentence() == ("Recommended: none: calibration does not help here, no method has a better "
                               "out-of-fold log-loss than the uncalibrated scores (0.5040).")


def test_none_row_is_the_scores_or_their_sigmoid_on_the_same_folds():
    rng = np.random.default_rng(2)
    z = rng.normal(0, 2, 600)
    y = (rng.random(600) < expit(0.5 * z)).astype(float)
    ids = compare.fold_ids(600, 4, 9)
    for s, want in ((z, expit(z)), (expit(z), expit(z))):
        got = calibcli.compare(s, y, methods="logistic", folds=4, seed=9).score("none")
        assert got.complexity == 0
        expected = [metrics.log_loss(y[ids == k], want[ids == k]) for k in range(4)]
        np.testing.assert_allclose(got.folds["log_loss"], expected, rtol=1e-12)
    assert calibcli.compare(z, y, methods="logistic").uncalibrated.startswith("sigmoid(score)")


def test_recommended_is_the_least_complex_tied_in_a_real_run(tmp_path):
    """The CLI's JSON, checked by hand: `recommended` is tied, and no tied method is simpler."""
    p, y = _calibrated(5, 3000)
    path = _write(tmp_path / "cal.csv", p ** 2, y)
    res = runner.invoke(app, ["compare", str(path), "-m", "fast", "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [m["method"] for m in doc["methods"]] == ["none", *compare.FAST]
    by = {m["method"]: m for m in doc["methods"]}
    assert all(by[m]["complexity"] == registry.get(m).complexity for m in compare.FAST)
    rec = doc["recommended"]
    assert rec in doc["tied"] and rec != "none"
    key = lambda m: (by[m]["complexity"], by[m]["sd"]["log_loss"], m)  # noqa: E731
    assert key(rec) == min(key(m) for m in doc["tied"])
    assert doc["reason"] and doc["pick"] == "recommended" and doc["saved"] is None
    table = runner.invoke(app, ["compare", str(path), "-m", "fast"], env={"COLUMNS": "250"}).stdout
    assert table.rstrip().splitlines()[-1] == f"Recommended: {rec}: {doc['reason']}."
    assert f" {rec} ✓ " in table or f" {rec} * ✓ " in table


def test_o_saves_the_recommended_map_and_pick_best_the_best(tmp_path):
    p, y = _calibrated(6, 3000)
    path = _write(tmp_path / "cal.csv", expit(2 * logit(p)), y)
    for pick in ("recommended", "best"):
        out = tmp_path / f"{pick}.json"
        res = runner.invoke(app, ["compare", str(path), "-m", "fast", "--json", "-o", str(out), "--pick", pick])
        assert res.exit_code == 0, res.stderr
        doc = json.loads(res.stdout)
        chosen = doc["recommended"] if pick == "recommended" else doc["best"]
        assert doc["saved"] == {"method": chosen, "path": str(out)} and doc["pick"] == pick
        saved = json.loads(out.read_text())
        assert saved["method"] == chosen and saved["training"]["chosen_by"]["pick"] == pick
        grid = np.linspace(0, 1, 101)
        want = calibcli.fit(expit(2 * logit(p)), y, method=chosen).predict(grid)
        assert calibcli.load_map(str(out)).predict(grid).tobytes() == want.tobytes()
        assert f"saved the {chosen} map" in res.stderr


def test_o_writes_no_map_when_none_is_recommended(tmp_path):
    p, y = _calibrated(0)
    path = _write(tmp_path / "cal.csv", p, y)
    out = tmp_path / "chosen.json"
    res = runner.invoke(app, ["-q", "compare", str(path), "-m", "fast", "--json", "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["recommended"] == "none" and doc["saved"] is None and not out.exists()
    assert "calibration does not help here" in res.stderr and f"no map written to {out}" in res.stderr  # not quiet
    out.write_text("an earlier map")
    res = runner.invoke(app, ["compare", str(path), "-m", "fast", "-o", str(out)])
    assert res.exit_code == 0 and out.read_text() == "an earlier map"
    assert "already exists and was left as it was, not this run's map" in " ".join(res.stderr.split())
    best = runner.invoke(app, ["compare", str(path), "-m", "fast", "--json", "-o", str(out), "--pick", "best"])
    doc = json.loads(best.stdout)
    if doc["best"] != "none":
        assert doc["saved"]["method"] == doc["best"] and json.loads(out.read_text())["method"] == doc["best"]


def test_method_presets_lists_and_aliases(tmp_path):
    p, y = _calibrated(1, 400)
    path = _write(tmp_path / "cal.csv", p ** 2, y)

    def methods(*args):
        res = runner.invoke(app, ["compare", str(path), "--folds", "2", "--json", *args])
        assert res.exit_code == 0, res.stderr
        return [m["method"] for m in json.loads(res.stdout)["methods"]]

    assert methods("-m", "fast") == ["none", *compare.FAST]
    assert methods("--methods", "logistic,isotonic", "-m", "beta") == ["none", "logistic", "isotonic", "beta"]
    assert methods("-m", "sigmoid", "-m", "platt", "-m", "logistic", "-m", "none") == ["none", "logistic"]
    default = compare.preset("default")
    assert "bayes-iso" not in default and set(default) | {"bayes-iso"} == set(compare.preset("all"))
    assert all(not registry.get(m).uses_features for m in compare.preset("all"))
    assert set(compare.FAST) <= set(default)
    res = runner.invoke(app, ["compare", str(path), "-m", "none"])
    assert res.exit_code == 2 and "-m none alone compares nothing" in res.stderr
    res = runner.invoke(app, ["compare", str(path), "-m", "fastest"])
    assert res.exit_code == 2 and "unknown method 'fastest'" in res.stderr
    res = runner.invoke(app, ["compare", str(path), "--pick", "worst"])
    assert res.exit_code == 2 and "--pick 'worst'" in res.stderr


def test_kclass_presets_name_kclass_methods():
    for name in ("fast", "default", "all"):
        for m in compare.preset(name, KCLASS):
            assert registry.classes(m) != "binary-only"
    assert set(compare.KCLASS_FAST) <= set(compare.KCLASS_DEFAULT)


def test_python_compare_is_the_cli_comparison(tmp_path):
    """`calibcli.compare` on arrays gives the JSON of `calib compare` on the same rows."""
    p, y = _calibrated(4, 800)
    s = p ** 2
    path = _write(tmp_path / "cal.csv", s, y)
    cli = json.loads(runner.invoke(app, ["compare", str(path), "-m", "fast", "--json"]).stdout)
    py = calibcli.compare(s, y, methods="fast").to_json()
    assert {**py, "input": str(path)} == cli
    assert "Recommended:" in repr(calibcli.compare(s, y, methods=["logistic", "isotonic"]))
    with pytest.raises(UsageError, match="score-kind is for K-class scores"):
        calibcli.compare(s, y, score_kind="logit")
    with pytest.raises(CalibError, match="is not 0 or 1"):
        calibcli.compare(s, y * 2)


def test_python_compare_k_classes_is_the_cli_comparison():
    from pathlib import Path

    import pyarrow.csv as pacsv

    data = DATA / "digits_scores.csv"
    cli = json.loads(runner.invoke(app, ["compare", str(data), "--score-cols", "p_*", "-m", "fast", "--json"]).stdout)
    table = pacsv.read_csv(data)
    P = np.column_stack([table[f"p_{k}"].to_numpy() for k in range(10)])
    py = calibcli.compare(P, table["label"].to_numpy(), methods="fast").to_json()
    assert {**py, "input": str(data)} == cli
    assert cli["recommended"] == "temperature"  # what the README's K-class examples use


def test_progress_counts_every_fit(monkeypatch):
    """The bar's total is methods x folds (+ the refit); each fit advances it once, failed folds too."""
    from calibcli.io import progress

    seen = []

    class Recorder(progress.Steps):
        def start(self, label):
            seen.append(label)

        def advance(self, n=1):
            seen.append(n)

    p, y = _calibrated(2, 300)
    s = np.concatenate([p, [5.0]])  # beta needs probabilities: it fails on its first fold
    y = np.concatenate([y, [1.0]])
    got = compare.compare(s, y, ["logistic", "beta", "isotonic"], 3, 0, steps=Recorder())
    assert got[1].error and not got[0].error and not got[2].error
    assert sum(v for v in seen if isinstance(v, int)) == 9
    assert seen[:2] == ["logistic, fold 1 of 3", 1] and "beta, fold 1 of 3" in seen
