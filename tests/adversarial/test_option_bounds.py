"""Option bounds: every out-of-range `--param` of every method and every numeric CLI option is
refused with exit 2 before any work (within seconds); seeds round-trip exactly.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from calibcli.calibrators import registry

from .harness import calib, result_of, run_many

FAST = 20.0  # seconds: a refusal comes before any work (generous for a loaded machine)


def _numeric_params():
    for method in registry.available():
        for p in registry.get(method).params:
            if p.type in (int, float):
                yield method, p


def _outside(p, side: str) -> str:
    """The nearest value outside the Param's range on `side`, as the command line would spell it."""
    if side == "high":
        assert p.high is not None, f"{p.name} has no upper bound"
        value = p.high + 1 if p.type is int else np.nextafter(float(p.high), np.inf)
    else:
        assert p.low is not None, f"{p.name} has no lower bound"
        value = p.low - 1 if p.type is int else np.nextafter(float(p.low), -np.inf)
    return str(int(value)) if p.type is int else repr(float(value))


PARAM_CASES = [(m, p, side) for m, p in _numeric_params() for side in ("high", "low")]


def test_every_numeric_param_has_both_bounds():
    missing = [f"{m}:{p.name}" for m, p in _numeric_params() if p.low is None or p.high is None]
    assert not missing, f"params without bounds: {missing}"


@pytest.fixture(scope="module")
def param_runs(tmp_path_factory, assets):
    """Every out-of-range param case, run two at a time, each in its own directory."""
    jobs = {}
    for method, p, side in PARAM_CASES:
        if (p.high if side == "high" else p.low) is None:
            continue
        root = tmp_path_factory.mktemp(f"{method}-{p.name}-{side}")
        shutil.copyfile(assets / "small.csv", root / "in.csv")
        args = ["fit", "in.csv", "--method", method, "--param", f"{p.name}={_outside(p, side)}", "-o", "m.json"]
        jobs[(method, p.name, side)] = dict(args=args, root=root, reads=["in.csv"], output="m.json", timeout=60)
    return run_many(jobs)


@pytest.mark.parametrize("method, param, side", PARAM_CASES,
                         ids=[f"{m}-{p.name}-{s}" for m, p, s in PARAM_CASES])
def test_param_just_outside_its_range_is_refused(param_runs, method, param, side):
    assert (method, param.name, side) in param_runs, f"{param.name} has no {side} bound"
    run = result_of(param_runs, (method, param.name, side))
    run.refused(param.name)
    assert run.seconds < FAST, run


HUGE_OPTIONS = {
    "bayes-iso-samples-1e9": ["fit", "in.csv", "-m", "bayes-iso", "-p", "samples=1e9"],
    "field-aware-hidden-1e9": ["fit", "in.csv", "-m", "field-aware", "-p", "hidden=1e9",
                               "--field-col", "field", "--feature-col", "x"],
    "field-aware-epochs-1e12": ["fit", "in.csv", "-m", "field-aware", "-p", "epochs=1e12"],
    "boot-r-1e9": ["fit", "in.csv", "-m", "boot-isotonic", "-p", "r=1000000000"],
    "binning-n-bins-1e18": ["fit", "in.csv", "-m", "binning", "-p", "n_bins=1e18"],
    "enir-models-nan": ["fit", "in.csv", "-m", "enir", "-p", "models=nan"],
    "near-isotonic-lam-inf": ["fit", "in.csv", "-m", "near-isotonic", "-p", "lam=inf"],
    "ilps-K-1e400": ["fit", "in.csv", "-m", "ilps", "-p", "K=1e400"],
    "bootstrap-1e9": ["evaluate", "in.csv", "--bootstrap", "1000000000"],
    "bootstrap-negative": ["evaluate", "in.csv", "--bootstrap", "-5"],
    "calbin-window-0": ["evaluate", "in.csv", "--calbin-window", "0"],
    "calbin-window-huge": ["evaluate", "in.csv", "--calbin-window", "100000000000000000000"],
    "top-0": ["evaluate", "in.csv", "--field-col", "field", "--by-field", "--top", "0"],
    "top-1e9": ["evaluate", "in.csv", "--field-col", "field", "--by-field", "--top", "1000000000"],
    "step-0": ["summarize", "in.csv", "--step", "0"],
    "step-negative": ["summarize", "in.csv", "--step", "-0.1"],
    "step-nan": ["summarize", "in.csv", "--step", "nan"],
    "step-inf": ["summarize", "in.csv", "--step", "inf"],
    "fit-seed-minus-1": ["fit", "in.csv", "-m", "boot-isotonic", "--seed", "-1"],
    "fit-seed-2-63": ["fit", "in.csv", "-m", "boot-isotonic", "--seed", str(2**63)],
    "fit-param-seed-2-63": ["fit", "in.csv", "-m", "bayes-iso", "-p", f"seed={2**63}"],
    "fit-param-seed-float": ["fit", "in.csv", "-m", "bayes-iso", "-p", "seed=1.5"],
    "evaluate-seed-minus-1": ["evaluate", "in.csv", "--bootstrap", "10", "--seed", "-1"],
    "evaluate-seed-2-63": ["evaluate", "in.csv", "--bootstrap", "10", "--seed", str(2**63)],
}


@pytest.mark.parametrize("case", HUGE_OPTIONS)
def test_out_of_range_option_is_refused_at_once(work, case):
    work.put("small.csv", "in.csv")
    run = calib(HUGE_OPTIONS[case], work.path, reads=["in.csv"], timeout=60)
    run.refused()
    assert run.seconds < FAST, run


@pytest.mark.parametrize("seed", [9007199254740993, 2**63 - 1, 0])
def test_seed_round_trips_exactly(work, seed):
    work.put("small.csv", "in.csv")
    calib(["fit", "in.csv", "-m", "boot-isotonic", "-p", "r=2", "--seed", str(seed), "-o", "m.json"],
          work.path, reads=["in.csv"], output="m.json").ok()
    envelope = json.loads((work.path / "m.json").read_text())
    assert envelope["params"]["seed"] == seed and type(envelope["params"]["seed"]) is int
