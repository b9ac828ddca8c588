"""Maps saved by an earlier calibcli still load and predict the same (tests/fixtures/maps/v1/).

The fixtures were written once by `tests/fixtures/maps/make_v1.py` and are never regenerated
for the same schema version: a failure here means a change broke users' saved maps.

Maps whose prediction is arithmetic on the stored numbers (knots, bins) must give the same
bytes on any machine. Those that go through exp/log (a sigmoid, a log-odds) may differ in the
last bit between CPUs: numpy picks its exp/log kernels by the SIMD the processor has (AVX2,
AVX-512), and those kernels are not all correctly rounded. For them the check is one ulp.
On one machine a reloaded map predicts bit for bit what the fitted one did (test_maps.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import calibcli
from calibcli.calibrators import registry
from repo import FIXTURES

V1 = FIXTURES / "maps" / "v1"
TRANSCENDENTAL = {"logistic", "beta", "beta-am", "beta-ab", "ilps", "field-aware", "multicalibration", "spline"}


def test_every_method_has_a_v1_fixture():
    assert sorted(p.stem for p in V1.glob("*.json") if not p.name.endswith(".expected.json")) == \
        registry.available()


@pytest.mark.parametrize("method", registry.available())
@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_v1_map_predicts_what_it_did(method, suffix):
    expected = json.loads((V1 / f"{method}.expected.json").read_text())
    cal = calibcli.load_map(str(V1 / f"{method}{suffix}"))
    feats = expected.get("features")
    if feats is not None:
        feats = {"field": np.asarray(feats["field"], dtype=object), "x": np.asarray(feats["x"])}
    got = cal.predict(np.asarray(expected["scores"]), features=feats)
    if method in TRANSCENDENTAL:
        np.testing.assert_array_max_ulp(got, np.asarray(expected["predictions"]), maxulp=1)
    else:
        assert got.tolist() == expected["predictions"]


KCLASS = V1 / "kclass"
# K-class maps that go through exp/log (a softmax, or a one-vs-rest sigmoid): a few ulps between CPUs
# (the softmax's division by a row sum adds rounding to the binary methods' one ulp).
KCLASS_EXACT = {"isotonic", "binning", "boot-binning", "boot-isotonic", "bbq", "enir", "near-isotonic", "bayes-iso",
                "venn-abers"}


def test_every_kclass_method_has_a_v1_fixture():
    assert sorted(p.stem for p in KCLASS.glob("*.json") if not p.name.endswith(".expected.json")) == \
        [m for m in registry.names() if registry.classes(m) != "binary-only"]


@pytest.mark.parametrize("method", [m for m in registry.names() if registry.classes(m) != "binary-only"])
@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_v1_kclass_map_predicts_what_it_did(method, suffix):
    expected = json.loads((KCLASS / f"{method}.expected.json").read_text())
    cm = calibcli.load_map(str(KCLASS / f"{method}{suffix}"))
    assert cm.classes_.tolist() == ["cat", "dog", "car"] and cm.score_kind == "probability"
    got = cm.predict(np.asarray(expected["scores"]))
    if method in KCLASS_EXACT:
        assert got.tolist() == expected["predictions"]
    else:
        np.testing.assert_array_max_ulp(got, np.asarray(expected["predictions"]), maxulp=4)
