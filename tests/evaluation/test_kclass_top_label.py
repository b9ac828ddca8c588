"""The binary metrics of `selection.NEW` on the top label of K-class predictions
(`top_label_<name>`): equal to the binary metrics of (confidence max_k p_k, whether the top
class is right) computed directly, exact from merged and Arrow-shipped `KClassState`s, and
selectable, gateable and in the JSON of `calib evaluate --prob-cols`."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.cli.app import app
from calibcli.errors import UsageError
from calibcli.evaluation.metrics import selection
from calibcli.evaluation.state.kclass import KClassState
from calibcli.requests import EvaluateOptions

runner = CliRunner()
CLASSES = ["a", "b", "c", "d"]


def _data(n: int, seed: int, decimals: int | None = None):
    """K = 4 rows of softmax probabilities (rounded: many tied confidences), labels drawn from
    sharpened ones (so the confidence is miscalibrated), integer weights."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 4)) * 1.5
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    if decimals is not None:
        P = np.round(P, decimals)
        P[:, -1] = 1.0 - P[:, :-1].sum(axis=1)
        P = np.clip(P, 0.0, 1.0)
        P /= P.sum(axis=1, keepdims=True)
    sharp = P ** 1.5 / (P ** 1.5).sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(sharp, axis=1)).sum(axis=1).clip(0, 3)
    return y, P, rng.integers(1, 4, n).astype(np.float64)


def _top(y, P):
    top = np.argmax(P, axis=1)
    return P[np.arange(y.size), top], (top == y).astype(np.float64)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("decimals", [2, None])
def test_top_label_metrics_equal_the_binary_metrics_of_confidence_and_correctness(weighted, decimals):
    y, P, w = _data(1500, 11, decimals)
    w = w if weighted else None
    got = calibcli.evaluate(y, P, sample_weight=w, metrics="all", bands=30, seed=4, hl_groups=8)
    conf, right = _top(y, P)
    want = calibcli.evaluate(right, conf, sample_weight=w, metrics="all", bands=30, seed=4, hl_groups=8)
    assert [k for k in got if k.startswith("top_label_") and k not in ("top_label_ece", "top_label_mce")] == \
        list(selection.TOP_LABEL_KEYS)
    for key in selection.NEW:
        assert got["top_label_" + key] == pytest.approx(want[key], rel=1e-12, abs=1e-12), key
    # the first K-class table is unchanged by the choice
    base = calibcli.evaluate(y, P, sample_weight=w)
    assert {k: got[k] for k in base} == base
    # the decomposition's identity: S(conf) = MCB - DSC + UNC with S the Brier score of the top label
    brier = float(np.average((conf - right) ** 2, weights=w))
    assert got["top_label_brier_mcb"] - got["top_label_brier_dsc"] + got["top_label_brier_unc"] == \
        pytest.approx(brier, abs=1e-12)


def test_top_label_decomposition_and_smece_equal_the_peer_packages():
    md = pytest.importorskip("model_diagnostics.scoring")
    relplot = pytest.importorskip("relplot")
    y, P, w = _data(2000, 5)  # untied confidences (tests/evaluation/test_corp.py checks tied p against the peer)
    got = calibcli.evaluate(y, P, sample_weight=w, metrics="all")
    conf, right = _top(y, P)
    for name, fn in (("brier", md.SquaredError()), ("log_loss", md.LogLoss())):
        ref = md.decompose(right, conf, weights=w, scoring_function=fn)
        assert got[f"top_label_{name}_mcb"] == pytest.approx(ref["miscalibration"][0], abs=1e-12)
        assert got[f"top_label_{name}_dsc"] == pytest.approx(ref["discrimination"][0], abs=1e-12)
        assert got[f"top_label_{name}_unc"] == pytest.approx(ref["uncertainty"][0], abs=1e-12)
    plain = calibcli.evaluate(y, P, metrics="top_label_smece")
    assert list(plain) == ["top_label_smece"]
    assert plain["top_label_smece"] == pytest.approx(relplot.smECE(conf, right), abs=1e-6)


def test_merged_and_arrow_shipped_states_give_the_same_top_label_metrics():
    y, P, w = _data(900, 2, 2)
    choice = EvaluateOptions.build(metrics="all", bands=25, seed=1, kclass_cols=("p",)).choice
    whole = KClassState.from_arrays(y, P, w, CLASSES).metrics(7, "quantile", choice)
    cuts = [0, 100, 450, 451, 900]
    parts = [KClassState.from_arrays(y[a:b], P[a:b], w[a:b], CLASSES) for a, b in zip(cuts, cuts[1:])]
    merged = parts[2].merge(parts[0], parts[3], parts[1]).metrics(7, "quantile", choice)
    shipped = KClassState.from_arrow(pa.concat_tables([s.to_arrow() for s in parts])).metrics(7, "quantile", choice)
    assert list(merged) == list(whole) == list(shipped) and "top_label_corp_p" in whole
    for key, value in whole.items():
        assert merged[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        assert shipped[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    assert all(0.0 <= whole[f"top_label_{k}"] <= 1.0 for k in ("corp_p", "hl_p", "ks_p", "kuiper_p"))


def test_choice_keeps_each_kind_to_its_own_names():
    choice = selection.MetricChoice.parse("default,top-label-smece,ks")
    assert choice.kclass_keys == (*selection.KCLASS_DEFAULT, "top_label_smece")
    assert "ks" in choice.keys and "top_label_smece" not in choice.keys
    assert choice.binary_only == ("ks",) and choice.kclass_only == ("top_label_smece",)
    assert selection.MetricChoice.parse("all").kclass_keys == tuple(k for k in selection.KCLASS_ALL
                                                                    if k != "top_label_corp_p")
    with pytest.raises(UsageError, match="top-label-corp-p is a resampling test"):
        selection.MetricChoice.parse("top-label-corp-p", bands=0)
    assert selection.MetricChoice.parse("top-label-corp-p").bands == selection.CORP_ROUNDS
    with pytest.raises(UsageError, match="--metrics smece: a metric of binary probabilities"):
        calibcli.evaluate([0, 1, 2], np.eye(3), metrics="smece")
    with pytest.raises(UsageError, match="--metrics top-label-smece: it is a K-class metric"):
        calibcli.evaluate([0, 1], [0.2, 0.7], metrics="top_label_smece")


@pytest.fixture(scope="module")
def kfile(tmp_path_factory):
    y, P, w = _data(1200, 9, 3)
    path = tmp_path_factory.mktemp("top") / "k.parquet"
    pq.write_table(pa.table({"label": np.array(CLASSES)[y], **{f"p_{c}": P[:, j] for j, c in enumerate(CLASSES)},
                             "w": w}), path, row_group_size=100)
    return path, y, P, w


def _run(*args):
    return runner.invoke(app, ["evaluate", *map(str, args)])


def test_cli_selects_gates_and_reports_top_label_metrics(kfile):
    path, y, P, w = kfile
    result = _run(path, "--prob-cols", "p_*", "--weight-col", "w", "--metrics", "top-label-smece,top-label-ks-p,brier",
                  "--fail-above", "top-label-brier-mcb=0.5", "--json")
    assert result.exit_code == 0, result.stderr
    metrics = json.loads(result.stdout)["results"][0]["metrics"]
    assert list(metrics) == ["brier", "top_label_brier_mcb", "top_label_smece", "top_label_ks_p"]
    want = calibcli.evaluate(y, P, sample_weight=w, metrics="all")
    for key, value in metrics.items():
        assert value == pytest.approx(want[key], rel=1e-12, abs=1e-12), key
    failed = _run(path, "--prob-cols", "p_*", "--fail-above", f"top-label-smece={want['top_label_smece'] / 2}")
    assert failed.exit_code == 1 and "top-label smECE" in failed.stderr


def test_cli_bootstrap_brackets_each_top_label_estimate(kfile):
    """Top-label metrics get the binary ones' intervals: each holds its estimate; those the
    binary table withholds (`bootstrap.WITHHELD`: MCB, smECE, the tests' p-values) are null."""
    from calibcli.evaluation.bootstrap import WITHHELD

    path = kfile[0]
    report = json.loads(_run(path, "--prob-cols", "p_*", "--metrics", "default,top-label-brier-dsc,top-label-brier-unc,"
                             "top-label-brier-mcb,top-label-smece,top-label-hl-p", "--bootstrap", "30",
                             "--json").stdout)["results"][0]
    for key in ("top_label_brier_dsc", "top_label_brier_unc", "top_label_ece", "log_loss"):
        low, high = report["intervals"][key]
        assert low <= report["metrics"][key] <= high, key
    for key in ("top_label_brier_mcb", "top_label_smece", "top_label_hl_p"):
        assert key in WITHHELD and report["intervals"].get(key) in (None, [None, None]), key


@pytest.mark.parametrize("args, message", [
    (["--prob-cols", "p_*", "--metrics", "smece"], "--metrics smece: a metric of binary probabilities"),
    (["--prob-col", "p_a", "--metrics", "top-label-smece"], "--metrics top-label-smece: it is a K-class metric"),
    (["--prob-cols", "p_*", "--metrics", "top-label-corp-p", "--bands", "0"], "it needs --bands N with N > 0"),
    (["--prob-cols", "p_*", "--metrics", "top-label-nope"], "unknown metric 'top-label-nope'"),
])
def test_cli_refusals_are_one_line_exit_2(kfile, args, message):
    result = _run(kfile[0], *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
