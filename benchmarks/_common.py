"""Pieces several benchmark scripts share: a best-of-N timer, the Bayes-Iso section 5.1 data.

The scripts run as `python benchmarks/x.py`, so the script's folder is on sys.path and
`from _common import ...` works. Metrics come from calibcli.evaluation.metrics.binary, the same code
`calib evaluate` runs, so a benchmark's losses are the ones users see.

Section 5.1 of Allikivi & Kull (2019): balanced classes; negatives' scores ~ Beta(1, 3),
positives' a 50/50 mixture of Beta(1.5, 3) and Beta(30, 3).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from calibcli.evaluation.metrics import binary as metrics

# Table 1 of Allikivi & Kull (2019): method -> (Brier N=100, log-loss N=100, Brier N=3000, log-loss N=3000).
TABLE1 = {
    "ideal": (0.1621, 0.4741, 0.1621, 0.4741),
    "bayes-iso": (0.1655, 0.4878, 0.1625, 0.4753),
    "enir-platt": (0.1683, 0.5029, 0.1627, 0.4778),
    "iso-platt": (0.1685, 0.5036, 0.1627, 0.4779),
    "beta(-platt)": (0.1672, 0.4895, 0.1660, 0.4862),
    "log-platt": (0.1720, 0.5112, 0.1721, 0.5097),
}


def sizes_parser(doc: str, sizes: list[float], repeat_flag: str = "--repeat") -> argparse.ArgumentParser:
    """Argument parser with the usual --sizes (row counts, 1e6 notation allowed) and a repeat count."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=sizes)
    ap.add_argument(repeat_flag, type=int, default=3, help="runs per tool; the minimum time is shown")
    return ap


def best(fn, repeat: int = 1) -> tuple[float, object]:
    """(fastest wall time of `repeat` calls of fn(), the last call's result)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def section51(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(scores, 0/1 float labels): n rows of section 5.1, every component drawn for all n rows."""
    y = rng.random(n) < 0.5
    pos = np.where(rng.random(n) < 0.5, rng.beta(1.5, 3, n), rng.beta(30, 3, n))
    return np.where(y, pos, rng.beta(1, 3, n)), y.astype(np.float64)


def section51_by_class(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Section 5.1 rows drawing the positives' mixture only for the positive rows.

    Same distribution as `section51`, other random draws: kept so bench_enir's numbers stay
    comparable with earlier runs.
    """
    y = (rng.random(n) < 0.5).astype(np.float64)
    s = rng.beta(1.0, 3.0, n)
    pos = y == 1
    k = int(pos.sum())
    s[pos] = np.where(rng.random(k) < 0.5, rng.beta(1.5, 3.0, k), rng.beta(30.0, 3.0, k))
    return s, y


def true_map(s: np.ndarray) -> np.ndarray:
    """P(y = 1 | s) under section 5.1's model: f1 / (f0 + f1) with equal priors."""
    from scipy.stats import beta

    f1 = 0.5 * beta.pdf(s, 1.5, 3) + 0.5 * beta.pdf(s, 30, 3)
    return f1 / (f1 + beta.pdf(s, 1, 3))


def brier_logloss(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """(Brier score, log-loss) as calibcli.evaluation.metrics.binary computes them."""
    return metrics.brier(y, p), metrics.log_loss(y, p)


# A process's peak RSS (ru_maxrss) starts at the RSS of the process it was forked from: Linux
# folds the old image's high-water mark into the new one at exec. A command spawned from a
# benchmark that holds a gigabyte of test data would report that gigabyte as its own. So each
# command is started by a small launcher, which forks it, waits, and reports the command's
# wall time and peak RSS: the command then starts from the launcher's few megabytes.
_LAUNCHER = """
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.execvpe(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
print(json.dumps({"seconds": wall, "rss_mb": usage.ru_maxrss / 1024, "code": os.waitstatus_to_exitcode(status),
                  "user": usage.ru_utime, "sys": usage.ru_stime}))
"""


def measured(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """One run of `cmd` as a fresh process (`_LAUNCHER`): {seconds (wall), rss_mb (peak), code,
    user, sys (CPU seconds), stderr}."""
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, env=env)
    return {**json.loads(proc.stdout.decode().strip().splitlines()[-1]), "stderr": proc.stderr.decode()}


def measured_process(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS in MiB, exit code, stderr) of one run of `cmd` as a fresh
    process, its stdout discarded, measured by `_LAUNCHER` (so the figure is the command's own)."""
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, env=env)
    report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return report["seconds"], report["rss_mb"], report["code"], proc.stderr.decode()

