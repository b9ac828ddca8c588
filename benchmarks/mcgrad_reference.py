"""MCGrad's multicalibration error on the data sets of tests/mcgrad_cases.py, written as the
JSON fixtures tests/evaluation/test_multicalibration.py compares calib with (tests/fixtures/mcgrad/).

MCGrad pulls torch, LightGBM and ax-platform, so run it in a throw-away venv (CPU torch first,
so that mcgrad does not pull a CUDA build):

    python3 -m venv /tmp/mcgvenv
    /tmp/mcgvenv/bin/pip install torch==2.13.0       # a CPU wheel
    /tmp/mcgvenv/bin/pip install mcgrad==0.1.5
    /tmp/mcgvenv/bin/python benchmarks/mcgrad_reference.py     # from the repository root

It calls `mcgrad.metrics.MulticalibrationError` with its defaults (max_depth=3,
max_values_per_segment_feature=3, min_samples_per_segment=10, max_n_segments=1000) except
`precision_dtype="float64"` (its default float32 rounds p and weights, so only ~1e-6 could
be asked of any other implementation); the float32 values are kept too, as `float32`. Float
columns go to `numerical_segment_columns`, the others to `categorical_segment_columns`, in
the case's column order. Per segment, in MCGrad's order, it records the row count, ECCE,
sigma, ECCE/sigma and p-value, and the (column, value) pairs that define it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mcgrad_cases import CASES, split_columns  # noqa: E402


def frame(case: dict) -> pd.DataFrame:
    data = {"y": case["y"], "p": case["p"]}
    if case["w"] is not None:
        data["w"] = case["w"]
    data.update(case["columns"])
    return pd.DataFrame(data)


def mcgrad_values(case: dict, precision: str) -> dict:
    from mcgrad.metrics import MulticalibrationError

    cat, num = split_columns(case["columns"])
    m = MulticalibrationError(frame(case), label_column="y", score_column="p",
                              weight_column="w" if case["w"] is not None else None,
                              categorical_segment_columns=cat or None, numerical_segment_columns=num or None,
                              precision_dtype=precision)
    out = {"mce": float(m.mce), "mce_sigma": float(m.mce_sigma), "mce_pvalue": float(m.mce_pvalue),
           "global_ecce": float(m.global_ecce), "global_sigma": float(m._global_ecce_std)}
    if precision == "float64":
        masks, values = m._segments
        rows = masks.reshape(-1, masks.shape[-1]).sum(axis=1)[:m.total_number_segments]
        defs: list[list] = [[] for _ in range(m.total_number_segments)]
        for col, value, idx in values.itertuples(index=False):
            defs[int(idx)].append([str(col), None if isinstance(value, float) and np.isnan(value) else
                                   value.item() if hasattr(value, "item") else value])
        out["segments"] = {
            "rows": [int(r) for r in rows],
            "ecce": [float(v) for v in m.segments_ecce],
            "sigma": [float(v) for v in m._segments_ecce_std],
            "ecce_sigma": [float(v) for v in m.segments_ecce_sigma],
            "p": [float(v) for v in m.segments_ecce_pvalue],
            "definition": defs,
        }
    return out


def main() -> None:
    import mcgrad

    out_dir = ROOT / "tests" / "fixtures" / "mcgrad"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, make in CASES.items():
        case = make()
        result = {"case": name, "mcgrad": getattr(mcgrad, "__version__", "0.1.5"),
                  "pandas": pd.__version__, "numpy": np.__version__, "rows": int(case["p"].size),
                  "float64": mcgrad_values(case, "float64"), "float32": mcgrad_values(case, "float32")}
        path = out_dir / f"{name}.json"
        path.write_text(json.dumps(result, allow_nan=True) + "\n")
        print(f"{name}: {result['float64']['mce_sigma']:.6g} sigma, "
              f"{len(result['float64']['segments']['rows'])} segments -> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
