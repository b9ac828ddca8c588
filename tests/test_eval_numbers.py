"""Numbers of `calib evaluate` that must not mislead: the rows behind MCE, bootstrap intervals
that hold their estimate and cover the truth, `calib compare`'s ties with the best."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from calibcli.cli import app
from calibcli.evaluation.state import EvalState

runner = CliRunner()


def _brute_mce(y, p, bins, strategy):
    """(MCE, rows of its bin) by binning every row, as scikit-learn's calibration_curve bins."""
    if strategy == "uniform":
        b = np.minimum((p * bins).astype(np.int64), bins - 1)
    else:
        b = np.searchsorted(np.percentile(p, np.linspace(0, 100, bins + 1))[1:-1], p)
    count = np.bincount(b, minlength=bins)
    keep = count > 0
    gap = np.abs(np.bincount(b, weights=p, minlength=bins)[keep] - np.bincount(b, weights=y, minlength=bins)[keep])
    gap /= count[keep]
    top = np.flatnonzero(gap == gap.max())
    return gap.max(), count[keep][top].max()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("strategy,bins", [("uniform", 10), ("uniform", 7), ("quantile", 10), ("quantile", 4)])
def test_mce_count_is_the_rows_of_the_bin_mce_comes_from(seed, strategy, bins):
    rng = np.random.default_rng(seed)
    n = 300
    p = np.round(rng.beta(0.6, 2.5, n), 2)  # ties, and sparse bins near 1
    y = (rng.random(n) < np.clip(p + 0.1, 0, 1)).astype(float)
    state = EvalState.from_arrays(y, p)
    mce, count = _brute_mce(y, p, bins, strategy)
    got = state.metrics(ece_bins=bins, ece_strategy=strategy)["mce"]
    assert got == pytest.approx(mce, abs=1e-12)
    assert state.mce_count(bins, strategy) == count
    if strategy == "uniform":  # the bucketed state keeps each bin's exact sums
        bucketed = EvalState.from_arrays(y, p, step=0.05, ece_bins=bins)
        assert bucketed.mce_count(bins, strategy) == count


def test_mce_from_a_two_row_bin_shows_its_count(tmp_path):
    """The case that misled: the largest gap comes from a bin of 2 rows, and says so."""
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(0.05, 0.45, 400), [0.95, 0.96]])
    y = np.concatenate([(rng.random(400) < p[:400]).astype(int), [0, 0]])
    path = tmp_path / "s.csv"
    path.write_text("p,label\n" + "".join(f"{a!r},{b}\n" for a, b in zip(p.tolist(), y.tolist())))
    doc = json.loads(runner.invoke(app, ["evaluate", str(path), "--prob-col", "p", "--json"]).stdout)
    r = doc["results"][0]
    assert r["metrics"]["mce"] == pytest.approx(0.955)
    assert r["mce_count"] == 2
    table = runner.invoke(app, ["evaluate", str(path), "--prob-col", "p"], env={"COLUMNS": "250"})
    assert table.exit_code == 0
    header = next(line for line in table.stdout.splitlines() if "MCE rows" in line)
    row = next(line for line in table.stdout.splitlines() if line.lstrip("│┃| ").startswith("p "))
    cols = [c.strip() for c in row.split("│")]
    heads = [c.strip() for c in header.replace("┃", "│").split("│")]
    assert cols[heads.index("MCE rows")] == "2"
    assert cols[heads.index("MCE rows") - 1] == "0.9550"
