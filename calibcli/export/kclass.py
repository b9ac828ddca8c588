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

Subtracting the row's largest logit keeps every EXP in [0, 1]: no overflow. A row whose
largest |score| passes the map's overflow bound (where an affine logit could overflow:
`kscores.overflow_bound`) takes, as in `calib apply`, the logits of its direction, the scores
divided by that largest |score| under the map's linear part, times 1e300 / (its largest row
sum): the softmax's limit along the row, so scores of +-1.8e308 give what `apply` gives, not
NaN (a CASE on GREATEST(ABS(z_j)); left out when the map's scores cannot reach the bound). Constants are
written at repr precision (`export.literal`), so the SQL agrees with `calib apply` to about
K ulps. A NULL score gives NULL in every column. SQL has no row-wise variables: each line
repeats the K logits (K + 1) times, so a dirichlet select list grows as K^3 (K = 10: about
0.5 MB); `calib export` warns past 1 MB as for binary maps (an error with --strict) and
refuses, before building it, a list past 64 MiB (`MAX_SELECT_BYTES`), naming its size.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from calibcli.calibrators.kscores import DIRECTION_SCALE, ZERO_LOG, overflow_bound
from calibcli.errors import MapError, UsageError
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


class Logits(NamedTuple):
    """A map's K logits as SQL: `naive` (the affine map of the scores) and, when the scores can
    reach the map's overflow bound, `far` (their direction's logits, `kscores.direction`),
    taken where `largest` (the row's largest |score|) passes `bound`."""

    naive: list[str]
    far: list[str] | None = None
    largest: str = ""
    bound: float = float("inf")


def logits_sql(cmap: Any, columns: Sequence[str], dialect: str = "ansi") -> Logits:
    """The K affine logits a_k as SQL over the quoted score columns; a row whose largest
    |score| passes the map's overflow bound takes the logits of its direction, as `calib
    apply` does (`kscores.affine_logits`): never inf - inf = NaN, never an overflow."""
    quoted = [quote_identifier(c, dialect) for c in columns]
    z = [f"CASE WHEN {q} > 0 THEN LN({q}) WHEN {q} = 0 THEN {literal(ZERO_LOG)} END"
         if cmap.score_kind == "probability" else q for q in quoted]
    numbers = affine(cmap)
    if isinstance(numbers, float):
        naive = [f"({zk} / {literal(numbers)})" for zk in z]
        coefficients, row_sums, intercept = None, 1.0 / numbers, 0.0
    else:
        w, b = numbers
        if w.ndim == 1:
            naive = [f"({zk} * {literal(wk)} + {literal(bk)})" for zk, wk, bk in zip(z, w, b)]
        else:
            naive = ["(" + " + ".join(f"{zj} * {literal(wkj)}" for zj, wkj in zip(z, row)) + f" + {literal(bk)})"
                     for row, bk in zip(w, b)]
        coefficients, intercept = w, float(np.max(np.abs(b)))
        row_sums = float(np.max(np.abs(w) if w.ndim == 1 else np.abs(w).sum(axis=1)))
    bound = overflow_bound(row_sums, intercept)
    if bound >= (-ZERO_LOG if cmap.score_kind == "probability" else float("inf")):
        return Logits(naive)  # no score the map reads can reach the bound
    largest = "GREATEST(" + ", ".join(f"ABS({zk})" for zk in z) + ")"
    zb = [f"({zk} / {largest})" for zk in z]
    if coefficients is None:
        far = [f"({b_k} * {literal(DIRECTION_SCALE)})" for b_k in zb]
    elif coefficients.ndim == 1:
        far = [f"({b_k} * {literal(wk)} * {literal(DIRECTION_SCALE / row_sums)})" for b_k, wk in zip(zb, coefficients)]
    else:
        far = ["((" + " + ".join(f"{b_j} * {literal(wkj)}" for b_j, wkj in zip(zb, row)) + f") * "
               f"{literal(DIRECTION_SCALE / row_sums)})" for row in coefficients]
    return Logits(naive, far, largest, bound)


MAX_SELECT_BYTES = 64 << 20  # a select list longer than this is refused before it is built


def _softmax_bytes(a: Sequence[str]) -> list[int]:
    """The length in bytes of each class's softmax `EXP(a_k - top) / (total)` over the logits
    `a`, computed without building them (each repeats every logit K + 1 times)."""
    size = [len(ak.encode()) for ak in a]
    top = len("GREATEST()") + sum(size) + 2 * (len(a) - 1)
    total = sum(len("EXP( - )") + sk + top for sk in size) + 3 * (len(a) - 1)
    return [len("EXP( - ) / ()") + sk + top + total for sk in size]


def planned_bytes(logits: Logits, names: Sequence[str]) -> int:
    """The length in bytes of the select list of `logits` with the output `names`, without
    building it."""
    size = sum(_softmax_bytes(logits.naive)) + sum(len(n.encode()) + len(" AS ") for n in names)
    if logits.far is not None:
        case = len(f"CASE WHEN {logits.largest} > {literal(logits.bound)} THEN  ELSE  END".encode())
        size += sum(_softmax_bytes(logits.far)) + case * len(names)
    return size + len(",\n") * (len(names) - 1)


def _softmax(a: Sequence[str]) -> list[str]:
    top = "GREATEST(" + ", ".join(a) + ")"
    total = " + ".join(f"EXP({ak} - {top})" for ak in a)
    return [f"EXP({ak} - {top}) / ({total})" for ak in a]


def select_list(cmap: Any, columns: Sequence[str], dialect: str = "ansi", prefix: str = "calibrated") -> str:
    """One line per class, `<softmax expression> AS "<prefix>_<class>"`, joined by commas (a
    CASE on the row's largest |score| between the softmax of the logits and of their
    direction, when the scores can reach the overflow bound); a list longer than
    `MAX_SELECT_BYTES` is refused with its size before it is built (it grows as K^3, K^4 for
    dirichlet: K = 500 would take gigabytes)."""
    if len(columns) != cmap.n_classes:
        raise UsageError(f"{len(columns)} score columns for a map of {cmap.n_classes} classes")
    logits = logits_sql(cmap, columns, dialect)
    names = [quote_identifier(f"{prefix}_{c}", dialect) for c in cmap.classes_.tolist()]
    size = planned_bytes(logits, names)
    if size > MAX_SELECT_BYTES:
        growth = "K^4" if cmap.name == "dirichlet" else "K^3"
        raise MapError(f"the SQL of this {cmap.name} map of {cmap.n_classes} classes would be {size / 1e6:,.0f} MB "
                       f"(it grows as {growth}: SQL has no row variables, so each class repeats every logit): "
                       f"export writes at most {MAX_SELECT_BYTES >> 20} MiB",
                       hint="calibrate with `calib apply` (or calibcli.engines in Spark or Dask) instead")
    near = _softmax(logits.naive)
    if logits.far is not None:
        test = f"{logits.largest} > {literal(logits.bound)}"
        near = [f"CASE WHEN {test} THEN {f} ELSE {n} END" for f, n in zip(_softmax(logits.far), near)]
    return ",\n".join(f"{expr} AS {name}" for expr, name in zip(near, names))
