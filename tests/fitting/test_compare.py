"""`calib compare`: k-fold cross-validation of methods, checked against a hand-written loop."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.fitting import compare
from calibcli.cli.app import app

runner = CliRunner()


@pytest.fixture
def scores(tmp_path):
    rng = np.random.default_rng(5)
    s = rng.random(900)
    y = (rng.random(900) < s**1.5).astype(int)
    path = tmp_path / "cal.csv"
    path.write_text("score,label\n" + "".join(f"{float(a)!r},{b}\n" for a, b in zip(s, y)))
    return path, s, y.astype(float)


@pytest.mark.parametrize("n,k,seed", [(10, 3, 0), (901, 5, 7), (64, 64, 1)])
def test_folds_partition_the_rows_evenly_and_repeat_with_the_seed(n, k, seed):
    ids = compare.fold_ids(n, k, seed)
    sizes = np.bincount(ids, minlength=k)
    assert sizes.sum() == n and sizes.max() - sizes.min() <= 1
    assert np.array_equal(ids, compare.fold_ids(n, k, seed))


def test_cross_validated_metrics_match_a_hand_loop(scores):
    from sklearn.metrics import brier_score_loss, log_loss

    _, s, y = scores
    got = {r.method: r for r in compare.compare(s, y, ["isotonic", "logistic"], folds=4, seed=2)}
    ids = compare.fold_ids(s.size, 4, 2)
    for method in ("isotonic", "logistic"):
        ll, br = [], []
        for k in range(4):
            test = ids == k
            p = calibcli.fit(s[~test], y[~test], method=method).predict(s[test])
            ll.append(log_loss(y[test], np.clip(p, 1e-15, 1 - 1e-15)))
            br.append(brier_score_loss(y[test], p))
        assert got[method].folds["log_loss"] == pytest.approx(ll, rel=1e-9)
        assert got[method].folds["brier"] == pytest.approx(br, rel=1e-12)
        assert got[method].sd("brier") == pytest.approx(np.std(br, ddof=1), rel=1e-9)


def test_cli_marks_the_best_and_saves_its_map_refitted_on_all_rows(scores, tmp_path):
    path, s, y = scores
    out = tmp_path / "best.json"
    res = runner.invoke(app, ["compare", str(path), "-m", "isotonic", "-m", "logistic", "-m", "beta",
                              "--folds", "3", "--json", "-o", str(out), "--pick", "best"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    means = {m["method"]: m["mean"]["log_loss"] for m in doc["methods"]}
    assert doc["best"] == min(means, key=means.get) and doc["saved"] == {"method": doc["best"], "path": str(out)}
    saved = calibcli.load_map(str(out))
    want = calibcli.fit(s, y, method=doc["best"])
    grid = np.linspace(0, 1, 301)
    assert saved.name == doc["best"] and saved.predict(grid).tobytes() == want.predict(grid).tobytes()
    table = runner.invoke(app, ["compare", str(path), "-m", "isotonic", "-m", "logistic", "--folds", "3"])
    assert table.exit_code == 0 and "isotonic" in table.stdout and "±" in table.stdout
    assert table.stdout.count(" *") == 1


def test_a_method_that_cannot_fit_is_reported_not_fatal(tmp_path):
    rng = np.random.default_rng(0)
    s = rng.normal(size=300) * 3  # log-odds: beta needs probabilities in [0, 1]
    y = (rng.random(300) < 1 / (1 + np.exp(-s))).astype(float)
    results = {r.method: r for r in compare.compare(s, y, ["logistic", "beta"], folds=3, seed=0)}
    assert results["beta"].error and "[0, 1]" in results["beta"].error
    assert not results["logistic"].error


@pytest.mark.parametrize("args,message", [
    (["--folds", "1"], "--folds 1 is out of range"),
    (["--metric", "auc"], "--metric 'auc'"),
])
def test_bad_options_are_usage_errors(scores, args, message):
    path, _, _ = scores
    res = runner.invoke(app, ["compare", str(path), *args])
    assert res.exit_code == 2 and message in res.stderr, res.stderr


@pytest.mark.parametrize("seed", range(6))
def test_paired_difference_is_the_paired_t_test(seed):
    """Tied exactly when scipy's paired t test does not find the method worse at 5 % (two-sided)."""
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 11))
    best = rng.normal(0.5, 0.01, k)
    other = best + rng.normal(0.002 * seed, 0.003, k)
    d = compare.paired_difference(other, best)
    assert d.mean == pytest.approx(np.mean(other - best), abs=1e-15)
    assert d.se == pytest.approx(np.std(other - best, ddof=1) / np.sqrt(k), rel=1e-12)
    test = ttest_rel(other, best)
    assert d.tied == (not (test.statistic > 0 and test.pvalue < 0.05))
    flipped = compare.paired_difference(-other, -best, lower_is_better=False)
    assert (flipped.mean, flipped.tied) == pytest.approx((d.mean, d.tied))


def test_equal_folds_are_tied_and_a_constant_gap_is_worse():
    best = [0.4, 0.5, 0.45]
    assert compare.paired_difference(best, best).tied
    worse = compare.paired_difference([v + 0.01 for v in best], best)
    assert not worse.tied and worse.mean == pytest.approx(0.01) and worse.se == pytest.approx(0, abs=1e-15)


def test_compare_reports_each_methods_difference_to_the_best_and_the_ties(scores):
    path, _, _ = scores
    args = ["compare", str(path), "-m", "isotonic", "-m", "logistic", "-m", "venn-abers", "-m", "near-isotonic",
            "--folds", "5"]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    folds = {m["method"]: np.array(m["folds"]["log_loss"]) for m in doc["methods"]}
    best = folds[doc["best"]]
    assert doc["best"] in doc["tied"]
    for m in doc["methods"]:
        diff = folds[m["method"]] - best
        got = m["difference_to_best"]
        assert got["mean"] == pytest.approx(diff.mean(), abs=1e-15)
        assert got["se"] == pytest.approx(diff.std(ddof=1) / np.sqrt(5), abs=1e-15)
        assert got["tied"] == (m["method"] in doc["tied"])
    assert set(doc["tied"]) != set(folds)  # near-isotonic is clearly worse on these scores
    table = runner.invoke(app, args, env={"COLUMNS": "250"}).stdout
    for m in doc["methods"]:
        d = m["difference_to_best"]
        line = next(ln for ln in table.splitlines() if f" {m['method']} " in ln)
        assert f"{d['mean']:+.4f} ± {d['se']:.4f} {'tied' if d['tied'] else 'worse'}" in line
