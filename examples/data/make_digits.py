"""Generate the bundled K-class example: scikit-learn's digits (8x8 images of 0-9, shipped
with scikit-learn) scored by a simple model (deterministic: same data, same split, same fit).

A multinomial logistic regression with weak regularisation (C = 10) fitted on 500 images
is overconfident on the others, as large models often are: its probabilities are the
scores to calibrate. The remaining images are split into a calibration set and a test set.

Writes digits_scores.csv (650 rows, to fit on) and digits_test.csv (647 rows, to apply and
evaluate), columns id, p_0 .. p_9 (the model's class probabilities), label (the digit).

    python examples/data/make_digits.py
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

SEED = 0
TRAIN, CALIBRATION = 500, 650


def scored(P: np.ndarray, y: np.ndarray, ids: np.ndarray) -> pa.Table:
    columns = {"id": pa.array(ids, pa.int64())}
    columns.update({f"p_{k}": pa.array(P[:, k]) for k in range(P.shape[1])})
    columns["label"] = pa.array(y, pa.int64())
    return pa.table(columns)


def main() -> None:
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(SEED).permutation(y.size)
    train, cal, test = np.split(order, [TRAIN, TRAIN + CALIBRATION])
    model = LogisticRegression(C=10.0, max_iter=5000).fit(X[train], y[train])
    out = Path(__file__).resolve().parent
    for name, rows in (("digits_scores.csv", cal), ("digits_test.csv", test)):
        pacsv.write_csv(scored(model.predict_proba(X[rows]), y[rows], rows), out / name)


if __name__ == "__main__":
    main()
