"""Every performance figure of calibcli beside its peer, in one run: `python benchmarks/run.py`.

Data: the Bayes-Iso paper's section 5.1 generator (`_common.section51`), 1e7 rows (1e5 with
--quick), written once to .npy and Parquet files in a temporary folder. Every operation runs
in a fresh subprocess (this script with --worker), peer and calibcli alike, and reports its
best wall time of --repeat runs and its peak memory (`resource.getrusage`, ru_maxrss) over the
resident size it had once its data were loaded. Command-line rows (`calib fit`, `apply`,
`evaluate`, start-up) are timed from outside as whole processes, interpreter start included,
best of 5, each started by a small launcher that reports the command's own peak RSS
(`_common.measured_process`: a process forked from this one would start at its size).

Writes benchmarks/results.json (machine, versions, every figure, ratio, target and whether
it is met) and prints the table as Markdown. Absolute targets (seconds, MB) are stated for
the full size and are only judged there; ratios are judged at every size.

    python benchmarks/run.py --quick            # smoke run, 1e5 rows, ~1 min
    python benchmarks/run.py                    # 1e7 rows, the issue's table
    python benchmarks/run.py --big              # also the 1e8-row streamed apply (peak RSS)
    python benchmarks/run.py --only apply --out /tmp/apply.json   # the apply rows alone
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FULL_ROWS = 10_000_000
FIELD_ROWS = 1_000_000
BIG_ROWS = 100_000_000


# ---------------------------------------------------------------- workers (run in a subprocess)

def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _log_loss(y, p) -> float:
    from calibcli.evaluation.metrics import binary as metrics

    return metrics.log_loss(y, p)


def _fit_sklearn_isotonic(s, y):
    from sklearn.isotonic import IsotonicRegression

    return IsotonicRegression(out_of_bounds="clip").fit(s, y)


def _fit_calib(method):
    from calibcli.calibrators import create

    return lambda s, y: create(method, {"platt_correction": False}).fit(s, y)  # the peers' objective


def _fit_sklearn_logistic(s, y):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1e12, tol=1e-8, max_iter=1000).fit(s[:, None], y)  # Platt: no penalty


def _fit_betacal(s, y):
    from betacal import BetaCalibration

    return BetaCalibration("abm").fit(s, y)


def _predict(model, s):
    if hasattr(model, "predict_proba") and not hasattr(model, "x_"):
        return model.predict_proba(s[:, None])[:, 1]
    return model.predict(s)


FITTERS = {
    "isotonic:sklearn": _fit_sklearn_isotonic,
    "isotonic:calibcli": _fit_calib("isotonic"),
    "logistic:sklearn": _fit_sklearn_logistic,
    "logistic:calibcli": _fit_calib("logistic"),
    "beta:betacal": _fit_betacal,
    "beta:calibcli": _fit_calib("beta"),
}


def worker(kind: str, data: Path, repeat: int) -> dict:
    """Time one operation on the saved data; JSON-able figures."""
    s, y = np.load(data / "s.npy"), np.load(data / "y.npy")
    if kind == "fit_floor":  # pyarrow read of the Parquet file + the in-process isotonic fit
        import pyarrow.parquet as pq

        from calibcli.calibrators import create

        def fit(s, y):  # the defaults, as `calib fit` uses them
            return create("isotonic").fit(s, y)

        fit(s[:1000], y[:1000])  # imports outside the timing

        def read_fit():
            table = pq.read_table(data / "fit.parquet", columns=["score", "label"])
            return fit(table.column("score").to_numpy(), table.column("label").to_numpy())

        return {"seconds": _timed(read_fit, repeat)[0]}
    if kind.startswith("predict:"):
        _, method, who = kind.split(":")
        q = np.load(data / "q.npy")
        model = FITTERS[f"{method}:{who}"](s, y)
        _predict(model, q[:1000])
        seconds, p = _timed(lambda: _predict(model, q), repeat)
        return {"seconds": seconds}
    fit = FITTERS[kind]
    fit(s[:1000], y[:1000])  # imports and first-call set-up outside the timing and the baseline
    base = _rss_mb()
    seconds, model = _timed(lambda: fit(s, y), repeat)
    out = {"seconds": seconds, "extra_mb": _rss_mb() - base}
    if not kind.startswith("isotonic"):
        out["log_loss"] = _log_loss(y, _predict(model, s))
    return out


# ---------------------------------------------------------------- driver

def sub(kind: str, data: Path, repeat: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--data", str(data),
           "--repeat", str(repeat)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_process(cmd: list[str], repeat: int) -> dict:
    """Best wall time of `repeat` runs of a command, and its largest child peak RSS."""
    from _common import measured_process

    best, rss = float("inf"), 0.0
    for _ in range(repeat):
        wall, peak, code, err = measured_process(cmd, PROCESS_ENV)
        if code != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{err}")
        best, rss = min(best, wall), max(rss, peak)
    return {"seconds": best, "rss_mb": rss}


CALIB = [sys.executable, "-m", "calibcli"]
# Whole-process rows (`calib` commands, their floors, start-up): best of 5. On the shared 2-core
# VM one command's wall time varies by a third from run to run; the minimum is the estimate of
# its own cost that the noise disturbs least.
PROCESS_REPEAT = 5
# Commands run as users run them: with Python's bytecode cache (a shell that sets
# PYTHONDONTWRITEBYTECODE would make every start compile calibcli's modules anew).
PROCESS_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def make_data(folder: Path, n: int, field_rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(HERE))
    from _common import section51

    rng = np.random.default_rng(0)
    s, y = section51(n, rng)
    np.save(folder / "s.npy", s)
    np.save(folder / "y.npy", y)
    np.save(folder / "q.npy", section51(n, rng)[0])
    pq.write_table(pa.table({"score": s, "label": y}), folder / "fit.parquet")
    levels = np.array([f"f{i:03d}" for i in range(1000)])
    pz = 1.0 / np.arange(1, 1001) ** 1.1
    field = levels[rng.choice(1000, size=n, p=pz / pz.sum())]
    pq.write_table(pa.table({"score": s, "label": y, "field": field}), folder / "eval.parquet")
    from bench_field_aware import make_data as field_data

    fs, fy, feats = field_data(field_rows, 0, 1000, 5)[:3]
    pq.write_table(pa.table({"score": fs, "label": fy, **feats}), folder / "field.parquet")
    make_kclass(folder / "kclass.parquet", n, rng)
    make_kclass(folder / "kclass_fit.parquet", min(n, 100_000), rng)


KCLASSES = 10


def make_kclass(path: Path, n: int, rng: np.random.Generator) -> None:
    """K-class probabilities (softmax of N(0, 3^2) logits) and labels drawn from softmax of
    the logits with Gumbel noise: p_0 .. p_9, label; written a million rows at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(f"p_{j}", pa.float64()) for j in range(KCLASSES)] + [("label", pa.int64())])
    with pq.ParquetWriter(path, schema) as writer:
        for lo in range(0, n, 1_000_000):
            z = rng.normal(0, 3, (min(1_000_000, n - lo), KCLASSES))
            p = np.exp(z - z.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            y = (z + rng.gumbel(size=z.shape)).argmax(axis=1)
            writer.write_table(pa.table({**{f"p_{j}": p[:, j] for j in range(KCLASSES)}, "label": y}, schema=schema))


# The floor of `calib apply`: a fresh process that reads the input with pyarrow and writes it back
# with the columns `apply` adds (their values loaded from .npy files saved from apply's output, so
# both write the same bytes). argv: input, output, then name=path.npy pairs.
APPLY_FLOOR = ("import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq\n"
               "t = pq.read_table(sys.argv[1])\n"
               "for pair in sys.argv[3:]:\n"
               "    name, path = pair.split('=', 1)\n"
               "    t = t.append_column(name, pa.array(np.load(path, mmap_mode='r')))\n"
               "pq.write_table(t, sys.argv[2])")


def apply_vs_floor(folder: Path, map_path: Path, src: Path) -> tuple[dict, dict]:
    """(calib apply, its floor) as whole processes: the floor writes the columns apply added."""
    import pyarrow.parquet as pq

    out = folder / "out.parquet"
    applied = run_process(CALIB + ["apply", str(map_path), str(src), "-o", str(out)], PROCESS_REPEAT)
    added = [c for c in pq.read_schema(out).names if c not in pq.read_schema(src).names]
    pairs = []
    for name in added:
        np.save(folder / f"{name}.npy", pq.read_table(out, columns=[name]).column(0).to_numpy())
        pairs.append(f"{name}={folder / (name + '.npy')}")
    floor = run_process([sys.executable, "-c", APPLY_FLOOR, str(src), str(out), *pairs], PROCESS_REPEAT)
    for name in added:
        (folder / f"{name}.npy").unlink()
    return applied, floor


def big_apply(folder: Path, map_path: Path) -> dict:
    """Peak RSS of `calib apply` streaming a 1e8-row Parquet file (written in 1e6-row groups)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(HERE))
    from _common import section51

    src = folder / "big.parquet"
    rng = np.random.default_rng(2)
    schema = pa.schema([("score", pa.float64()), ("label", pa.float64())])
    with pq.ParquetWriter(src, schema) as w:
        for _ in range(BIG_ROWS // 1_000_000):
            s, y = section51(1_000_000, rng)
            w.write_table(pa.table({"score": s, "label": y}, schema=schema))
    out = run_process(CALIB + ["apply", str(map_path), str(src), "-o", str(folder / "big_out.parquet")], 1)
    src.unlink()
    (folder / "big_out.parquet").unlink(missing_ok=True)
    return out


def row(op, peer, peer_value, ours, unit, ratio, ratio_kind, target, met, note=""):
    return {"operation": op, "peer": peer, "peer_value": peer_value, "calibcli": ours, "unit": unit,
            "ratio": ratio, "ratio_kind": ratio_kind, "target": target, "met": met, "note": note}


def apply_rows(folder: Path, full: bool) -> list[dict]:
    """`calib apply` against its floor: the binary isotonic map, and a temperature map of
    KCLASSES classes (whose target includes peak RSS < 1 GB at the full size)."""
    rows = []
    if not (folder / "map.json").exists():  # --only apply: the isotonic map measure() fits first
        run_process(CALIB + ["fit", str(folder / "fit.parquet"), "-o", str(folder / "map.json")], 1)
    applied, apply_floor = apply_vs_floor(folder, folder / "map.json", folder / "fit.parquet")
    r = apply_floor["seconds"] / applied["seconds"]
    rows.append(row("`calib apply` Parquet -> Parquet", "floor: pyarrow read + write with the new column",
                    apply_floor["seconds"], applied["seconds"], "s", r, "floor / calibcli", ">= 0.8 of the floor",
                    r >= 0.8, f"peak RSS {applied['rss_mb']:.0f} MB (floor {apply_floor['rss_mb']:.0f} MB); "
                    "both whole processes"))
    kmap = folder / "kclass.json"
    run_process(CALIB + ["fit", "--score-cols", "p_*", "--method", "temperature", str(folder / "kclass_fit.parquet"),
                         "-o", str(kmap)], 1)
    applied, apply_floor = apply_vs_floor(folder, kmap, folder / "kclass.parquet")
    r = apply_floor["seconds"] / applied["seconds"]
    ok = r >= 0.8 and (applied["rss_mb"] < 1024 or not full)
    rows.append(row(f"`calib apply` {KCLASSES} classes (temperature) Parquet -> Parquet",
                    f"floor: pyarrow read + write with the {KCLASSES} new columns", apply_floor["seconds"],
                    applied["seconds"], "s", r, "floor / calibcli", ">= 0.8 of the floor, peak RSS < 1 GB", ok,
                    f"peak RSS {applied['rss_mb']:.0f} MB (floor {apply_floor['rss_mb']:.0f} MB); "
                    "both whole processes"))
    return rows


def measure(folder: Path, n: int, repeat: int, full: bool, big: bool) -> list[dict]:
    rows = []

    def fit_pair(method, peer_kind, peer_name, target):
        peer = sub(f"{method}:{peer_kind}", folder, repeat)
        ours = sub(f"{method}:calibcli", folder, repeat)
        ratio = peer["seconds"] / ours["seconds"]
        note = ""
        if "log_loss" in ours:
            note = f"training log-loss {ours['log_loss']:.10f} vs peer {peer['log_loss']:.10f}"
        rows.append(row(f"{method} fit, in process", peer_name, peer["seconds"], ours["seconds"], "s",
                        ratio, "peer / calibcli", f">= {target}x faster", ratio >= target, note))
        return peer, ours

    sk_iso, iso = fit_pair("isotonic", "sklearn", "scikit-learn IsotonicRegression", 5)
    floor = sub("fit_floor", folder, repeat)
    cli_fit = run_process(CALIB + ["fit", str(folder / "fit.parquet"), "-o", str(folder / "map.json")], PROCESS_REPEAT)
    # The same read and fit in a fresh process (imports and first-touch memory included), for
    # how much of the gap to the warm floor is a new process's cost.
    cold = run_process([sys.executable, "-c", "import sys, pyarrow.parquet as pq; from calibcli.calibrators import "
                        "create; t = pq.read_table(sys.argv[1], columns=['score', 'label']); create('isotonic')"
                        ".fit(t.column('score').to_numpy(), t.column('label').to_numpy())",
                        str(folder / "fit.parquet")], PROCESS_REPEAT)
    r = cli_fit["seconds"] / floor["seconds"]
    rows.append(row("`calib fit` isotonic, Parquet -> map", "pyarrow read + in-process fit",
                    floor["seconds"], cli_fit["seconds"], "s", r, "calibcli / floor", "<= 1.3x", r <= 1.3,
                    f"in-process fit {iso['seconds']:.3f} s; the same read + fit as a fresh process "
                    f"{cold['seconds']:.3f} s (calib fit / that {cli_fit['seconds'] / cold['seconds']:.2f}); "
                    "CLI time includes interpreter start"))
    input_mb = 16 * n / 2**20
    r = iso["extra_mb"] / input_mb
    rows.append(row("isotonic fit, peak extra memory", "scikit-learn", sk_iso["extra_mb"], iso["extra_mb"], "MB",
                    r, "calibcli / input (score + label)", "<= 2x input", r <= 2,
                    f"input {input_mb:.0f} MB"))
    sk_p = sub("predict:isotonic:sklearn", folder, repeat)
    our_p = sub("predict:isotonic:calibcli", folder, repeat)
    r = sk_p["seconds"] / our_p["seconds"]
    rows.append(row("isotonic predict, in memory", "scikit-learn predict", sk_p["seconds"], our_p["seconds"],
                    "s", r, "peer / calibcli", ">= 6x faster", r >= 6))
    rows += apply_rows(folder, full)
    fit_pair("logistic", "sklearn", "scikit-learn LogisticRegression (Platt)", 2)
    fit_pair("beta", "betacal", "betacal BetaCalibration('abm')", 2)
    ev = run_process(CALIB + ["evaluate", str(folder / "eval.parquet"), "--field-col", "field"], PROCESS_REPEAT)
    ok = ev["seconds"] <= 3 and ev["rss_mb"] <= 600
    rows.append(row("`calib evaluate`, all metrics + 1000-level field", "none", None, ev["seconds"], "s",
                    None, "", "<= 3 s, <= 600 MB at 1e7", ok if full else None, f"peak RSS {ev['rss_mb']:.0f} MB"))
    feats = ["--field-col", "z"] + [a for j in range(5) for a in ("--feature-col", f"x{j}")]
    fa = run_process(CALIB + ["fit", str(folder / "field.parquet"), "--method", "field-aware", *feats,
                              "-o", str(folder / "fa.json")], 1)
    rows.append(row("field-aware fit, 1e6 rows, 1000 levels, 5 features", "none", None, fa["seconds"], "s",
                    None, "", "<= 15 s", fa["seconds"] <= 15 if full else None,
                    f"`calib fit` end to end; peak RSS {fa['rss_mb']:.0f} MB"))
    sk_import = run_process([sys.executable, "-c", "import sklearn"], PROCESS_REPEAT)
    for args in (["methods"], ["fit", "--help"]):
        st = run_process(CALIB + args, PROCESS_REPEAT)
        rows.append(row(f"`calib {' '.join(args)}` start-up", "python -c 'import sklearn'", sk_import["seconds"],
                        st["seconds"], "s", sk_import["seconds"] / st["seconds"], "peer / calibcli", "<= 0.3 s",
                        st["seconds"] <= 0.3))
    if big:
        b = big_apply(folder, folder / "map.json")
        rows.append(row("`calib apply` 1e8 rows streamed, peak RSS", "none", None, b["rss_mb"], "MB", None, "",
                        "< 400 MB", b["rss_mb"] < 400, f"{b['seconds']:.1f} s"))
    return rows


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("calibcli", "numpy", "scipy", "pyarrow", "scikit-learn", "betacal"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def fmt(value, unit) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} MB" if unit == "MB" else f"{value:.3f} s"


def markdown(rows: list[dict], n: int) -> str:
    lines = [f"| operation ({n:.0e} rows) | peer | peer | calibcli | ratio | target | met |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_kind']})"
        met = {True: "yes", False: "**no**", None: "n/a"}[r["met"]]
        lines.append(f"| {r['operation']} | {r['peer']} | {fmt(r['peer_value'], r['unit'])} | "
                     f"{fmt(r['calibcli'], r['unit'])} | {ratio} | {r['target']} | {met} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1e5 rows (field-aware 2e4): a smoke run")
    ap.add_argument("--big", action="store_true", help="also stream 1e8 rows through `calib apply` (~2 GB disk)")
    ap.add_argument("--only", choices=["apply"], help="only these rows (apply: `calib apply` against its floors)")
    ap.add_argument("--rows", type=float, default=None, help="rows (default 1e7, 1e5 with --quick)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per figure, best kept (default 2, 3 quick)")
    ap.add_argument("--out", default=str(HERE / "results.json"))
    ap.add_argument("--dir", default=None, help="where the data files go (default: a temporary folder)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--make-data", help=argparse.SUPPRESS)
    ap.add_argument("--field-rows", type=int, default=FIELD_ROWS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, Path(args.data), args.repeat)))
        return
    if args.make_data:
        make_data(Path(args.make_data), int(args.rows), args.field_rows)
        return
    n = int(args.rows or (100_000 if args.quick else FULL_ROWS))
    repeat = args.repeat or (3 if args.quick else 2)
    full = n >= FULL_ROWS
    started = time.time()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        # In a child process: a worker forked from a big driver would inherit its RSS high-water mark.
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--make-data", str(folder), "--rows", str(n),
                        "--field-rows", str(FIELD_ROWS if full else 20_000)], check=True)
        rows = apply_rows(folder, full) if args.only == "apply" else measure(folder, n, repeat, full, args.big)
    result = {
        "command": "python benchmarks/run.py" + (" --quick" if args.quick else "") + (" --big" if args.big else "")
        + (f" --only {args.only}" if args.only else ""),
        "rows": n, "repeat": repeat, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
                    "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")},
        "versions": versions(),
        "table": rows,
        "all_met": all(r["met"] is not False for r in rows),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(rows, n))
    print(f"\n{args.out}: load average {load_start[0]:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus, "
          f"{result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
