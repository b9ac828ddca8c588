"""A K-class map (temperature, vector, dirichlet) as a SQL select list: one line per class,
`<expression> AS "calibrated_<class>"`, the lines joined by commas, so that
`SELECT <list> FROM t` runs as it is.

Each expression is the softmax of the map's affine logits over the quoted score columns:

    z_j = CASE WHEN p_j > 0 THEN LN(p_j) WHEN p_j = 0 THEN ln 2^-1075 END
                                           (probability maps: the log the map takes, kscores;
                                            NULL for a negative p_j, which `calib apply` refuses)
    z_j = s_j                              (logit maps)
    a_k = z_k / T                          (temperature)
    a_k = z_k * w_k + b_k                  (vector)
    a_k = z_1 * W_k1 + ... + z_K * W_kK + b_k   (dirichlet)
    p_k = EXP(a_k - m) / (EXP(a_1 - m) + ... + EXP(a_K - m)),  m = GREATEST(a_1, ..., a_K)

Subtracting the row's largest logit keeps every EXP in [0, 1]: no overflow. Constants are
written at repr precision (`export.literal`), so the SQL agrees with `calib apply` to about
K ulps. A NULL score gives NULL in every column. SQL has no row-wise variables: each line
repeats the K logits (K + 1) times, so a dirichlet select list grows as K^3 (K = 10: about
0.5 MB); `calib export` warns past 1 MB as for binary maps.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from calibcli.calibrators.kscores import ZERO_LOG
from calibcli.errors import MapError
from calibcli.export.sql import SQLExport, literal, quote_identifier

SQL_METHODS = ("temperature", "vector", "dirichlet")


def affine(cmap: Any) -> tuple[np.ndarray, np.ndarray] | float:
    """The map's logits as numbers: T for temperature, else (W (K,) or (K, K), b (K,))."""
    state = cmap.get_state()
    if cmap.name == "temperature":
        return float(state["temperature"])
    if cmap.name in ("vector", "dirichlet"):  # state: w (K values, or K*K row by row) and b
        w = np.asarray(state["w"], dtype=np.float64)
        k = int(state["n_classes"])
        return (w.reshape(k, k) if cmap.name == "dirichlet" else w), np.asarray(state["b"], dtype=np.float64)
    raise MapError(f"a {cmap.name} K-class map cannot be exported as SQL",
                   hint="SQL export of K-class maps supports " + ", ".join(SQL_METHODS))


def logits_sql(cmap: Any, columns: Sequence[str], dialect: str = "ansi") -> list[str]:
    """The K affine logits a_k as SQL over the quoted score columns."""
    quoted = [quote_identifier(c, dialect) for c in columns]
    z = [f"CASE WHEN {q} > 0 THEN LN({q}) WHEN {q} = 0 THEN {literal(ZERO_LOG)} END"
         if cmap.score_kind == "probability" else q for q in quoted]
    numbers = affine(cmap)
    if isinstance(numbers, float):
        return [f"({zk} / {literal(numbers)})" for zk in z]
    w, b = numbers
    if w.ndim == 1:
        return [f"({zk} * {literal(wk)} + {literal(bk)})" for zk, wk, bk in zip(z, w, b)]
    return ["(" + " + ".join(f"{zj} * {literal(wkj)}" for zj, wkj in zip(z, row)) + f" + {literal(bk)})"
            for row, bk in zip(w, b)]


def select_list(cmap: Any, columns: Sequence[str], dialect: str = "ansi", prefix: str = "calibrated") -> str:
    """One line per class, `<softmax expression> AS "<prefix>_<class>"`, joined by commas."""
    if len(columns) != cmap.n_classes:
        raise UsageError(f"{len(columns)} score columns for a map of {cmap.n_classes} classes")
    a = logits_sql(cmap, columns, dialect)
    top = "GREATEST(" + ", ".join(a) + ")"
    total = " + ".join(f"EXP({ak} - {top})" for ak in a)
    lines = [f"EXP({ak} - {top}) / ({total}) AS {quote_identifier(f'{prefix}_{c}', dialect)}"
             for ak, c in zip(a, cmap.classes_.tolist())]
    return ",\n".join(lines)
