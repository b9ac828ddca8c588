"""Generate the bundled example files (deterministic: same seed, same bytes).

Scores follow the synthetic setup of Allikivi & Kull (2019), section 5.1: balanced classes,
negatives' scores ~ Beta(1, 3), positives' scores a 50/50 mixture of Beta(1.5, 3) and
Beta(30, 3). The true probability of a positive given the score is therefore
p*(s) = f1(s) / (f0(s) + f1(s)). A categorical `field` (8 levels, Zipf-like frequencies)
adds a per-level bias in logit space: y ~ Bernoulli(sigmoid(logit p*(s) + bias[field])),
so the scores are miscalibrated overall and differently per field.

Writes cal.csv / cal.parquet (2 000 rows, for fitting) and test.csv / test.parquet
(10 000 rows, for apply and evaluate), columns id, field, score, label.

    python examples/data/make_examples.py
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from scipy import stats

SEED = 2019
FIELDS = [f"f{k}" for k in range(8)]
FIELD_FREQ = 1.0 / np.arange(1, 9)
BIAS = np.array([-0.8, 0.5, -0.3, 1.0, 0.0, -1.2, 0.7, 0.3])


def true_probability(s: np.ndarray) -> np.ndarray:
    f0 = stats.beta.pdf(s, 1, 3)
    f1 = 0.5 * stats.beta.pdf(s, 1.5, 3) + 0.5 * stats.beta.pdf(s, 30, 3)
    return f1 / (f0 + f1)


def sample(n: int, rng: np.random.Generator, start_id: int) -> pa.Table:
    cls = rng.random(n) < 0.5
    mixture = rng.random(n) < 0.5
    s = np.where(~cls, rng.beta(1, 3, n), np.where(mixture, rng.beta(1.5, 3, n), rng.beta(30, 3, n)))
    s = np.clip(np.round(s, 6), 1e-6, 1 - 1e-6)
    field = rng.choice(len(FIELDS), size=n, p=FIELD_FREQ / FIELD_FREQ.sum())
    p = true_probability(s)
    logit = np.log(p) - np.log1p(-p) + BIAS[field]
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return pa.table({
        "id": np.arange(start_id, start_id + n),
        "field": pa.array([FIELDS[k] for k in field]),
        "score": s,
        "label": y,
    })


def main() -> None:
    out = Path(__file__).parent
    rng = np.random.default_rng(SEED)
    for name, n, start in (("cal", 2000, 0), ("test", 10000, 100000)):
        table = sample(n, rng, start)
        pacsv.write_csv(table, out / f"{name}.csv")
        pq.write_table(table, out / f"{name}.parquet")
        print(f"wrote {name}.csv and {name}.parquet ({n} rows)")


if __name__ == "__main__":
    main()
