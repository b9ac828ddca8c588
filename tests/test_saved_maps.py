"""Maps saved by an earlier calibcli still load and predict the same (tests/fixtures/maps/v1/).

The fixtures were written once by `tests/fixtures/maps/make_v1.py` and are never regenerated
for the same schema version: a failure here means a change broke users' saved maps.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import calibcli
from calibcli.calibrators import registry

V1 = Path(__file__).resolve().parent / "fixtures" / "maps" / "v1"


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
    assert got.tolist() == expected["predictions"]
