"""`calib compare` with `--field-col`/`--feature-col`: the default and all presets add
multicalibration, fitted fold by fold on the columns; without them it is compared only when named."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from typer.testing import CliRunner

from calibcli.calibrators import get
from calibcli.cli.app import app
from calibcli.evaluation.metrics import binary as metrics
from calibcli.fitting import compare
from calibcli.maps import envelope as maps

runner = CliRunner()


@pytest.fixture(scope="module")
def segmented(tmp_path_factory):
    """Scores off by +-1 in log-odds in two of six publishers and in one country."""
    rng = np.random.default_rng(11)
    n = 2400
    publisher = np.array([f"p{k}" for k in rng.integers(0, 6, n)], dtype=object)
    country = np.array(["DE", "FR", "US"], dtype=object)[rng.integers(0, 3, n)]
    s = rng.uniform(0.03, 0.97, n)
    z = np.log(s / (1 - s)) + 1.0 * (publisher == "p1") - 1.0 * (publisher == "p4") + 0.8 * (country == "DE")
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.int64)
    path = tmp_path_factory.mktemp("cmp") / "seg.csv"
    pacsv.write_csv(pa.table({"score": s, "label": y, "publisher": publisher, "country": country}), str(path))
    return path, s, y.astype(float), {"publisher": publisher, "country": country}


def compared(path, *args) -> dict:
    res = runner.invoke(app, ["-q", "compare", str(path), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def methods(doc: dict) -> list[str]:
    return [m["method"] for m in doc["methods"]]


def test_a_field_column_adds_multicalibration_to_the_default_preset(segmented):
    path = segmented[0]
    with_fields = compared(path, "--field-col", "publisher", "--feature-col", "country")
    assert "multicalibration" in methods(with_fields)
    without = compared(path)
    assert "multicalibration" not in methods(without)
    assert set(methods(with_fields)) - set(methods(without)) == {"multicalibration"}
    # the score-only methods see the same folds, so their numbers do not change with the columns
    rows = {m["method"]: m for m in with_fields["methods"]}
    for m in without["methods"]:
        assert rows[m["method"]]["folds"] == m["folds"], m["method"]
    # the segment effect is found: multicalibration beats every score-only method out of fold
    means = {m: float(np.mean(r["folds"]["log_loss"])) for m, r in rows.items()}
    assert means["multicalibration"] < min(v for k, v in means.items() if k != "multicalibration")
    assert with_fields["best"] == "multicalibration"


def test_fast_preset_stays_score_only_and_a_named_feature_method_is_compared(segmented):
    path = segmented[0]
    assert "multicalibration" not in methods(compared(path, "-m", "fast", "--field-col", "publisher"))
    named = compared(path, "-m", "logistic,multicalibration")
    assert methods(named) == ["none", "logistic", "multicalibration"]  # named without columns: on the scores alone


def test_fold_scores_of_multicalibration_equal_a_hand_loop(segmented):
    _, s, y, feats = segmented
    got = compare.compare(s, y, ["multicalibration"], folds=3, seed=4, features=feats)[0]
    ids = compare.fold_ids(s.size, 3, 4)
    want = []
    for k in range(3):
        test = ids == k
        cal = get("multicalibration")(seed=4).fit(s[~test], y[~test], features={c: v[~test] for c, v in feats.items()})
        want.append(metrics.log_loss(y[test], cal.predict(s[test], features={c: v[test] for c, v in feats.items()})))
    assert not got.error
    assert got.folds["log_loss"] == want


def test_saving_the_chosen_multicalibration_map_keeps_its_columns(segmented, tmp_path):
    path = segmented[0]
    out = tmp_path / "chosen.json"
    doc = compared(path, "-m", "logistic,multicalibration", "--field-col", "publisher", "--feature-col", "country",
                   "--pick", "best", "-o", str(out))
    assert doc["saved"]["method"] == "multicalibration"
    cal, envelope = maps.load_map(str(out))
    assert cal.input_features() == (["country", "publisher"], [])
    assert envelope["training"]["field_cols"] == ["publisher"]
    assert envelope["training"]["feature_cols"] == {"country": "categorical"}
    _, s, y, feats = segmented
    refit = get("multicalibration")(seed=0).fit(s, y, features=feats)
    assert np.array_equal(cal.predict(s, features=feats), refit.predict(s, features=feats))


def test_the_python_compare_takes_features_like_the_cli(segmented):
    import calibcli

    path, s, y, feats = segmented
    got = calibcli.compare(s, y.astype(int), features=feats)
    cli = compared(path, "--field-col", "publisher", "--feature-col", "country")
    assert got.to_json()["methods"] == cli["methods"]
    assert "multicalibration" not in [m.method for m in calibcli.compare(s, y.astype(int), methods="fast").scores]


def test_k_class_presets_never_add_a_feature_method_and_the_api_refuses_k_class_features():
    import calibcli
    from calibcli.errors import UsageError

    for name in ("default", "all"):
        assert compare.preset(name, "kclass", features=True) == compare.preset(name, "kclass")
    rng = np.random.default_rng(0)
    P = rng.dirichlet([1, 1, 1], 60)
    with pytest.raises(UsageError, match="binary scores"):
        calibcli.compare(P, rng.integers(0, 3, 60), features={"c": np.array(["a"] * 60)})
