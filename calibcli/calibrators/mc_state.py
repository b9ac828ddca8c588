"""The saved state of a `multicalibration` map: flat arrays, checked on load (`STATE_SPEC`).

Additive terms: `intercept`, `slope`, `shifts` (per categorical column, levels + 1 values,
index 0 = an unseen level = 0; then per numeric column and for the logit, bands + 1 values,
the bands cut at `bands[j]`: band k + 1 holds bands[j][k-1] < value <= bands[j][k]), `linear`
(per numeric column, on the standardised value (x - mean) / std). Round r: its correction
`round_intercept[r]`, `round_shifts[r * S + f]` (S = F + Q + 1 tables),
`round_linear[r * Q : (r + 1) * Q]`, and `round_trees[r]` trees. Trees, in order:
`tree_nodes[t]` nodes each; node arrays over all trees: `node_feature` (-1 leaf; 0..F-1
categorical column, F..F+Q-1 numeric column, F+Q the logit), `node_threshold` (numeric: go
left when x <= it; categorical: an index into `category_sets`, whose level codes go left),
`node_left`, `node_right` (within the tree; children come after their parent, each node but
the root has one parent) and `node_value` (a leaf's value). Integer fields are stored as
numbers and checked to be whole.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from calibcli.calibrators.mc_additive import Terms
from calibcli.calibrators.mc_training import Model, Round
from calibcli.calibrators.mc_trees import Tree
from calibcli.calibrators.statespec import Field, StateSpec

MAX_COLUMNS = 10_000  # feature columns a saved map may name
LIMIT = 1e9  # |coefficient|, |leaf value|: with the size bounds every logit stays finite


def state_of_model(model: Model, cat: list[str], num: list[str], vocab: list[np.ndarray], bands: list[np.ndarray],
                   mean: np.ndarray, std: np.ndarray) -> dict[str, Any]:
    """The flat state of a fitted Model (see the module docstring)."""
    trees = [t for r in model.rounds for t in r.trees]
    sets: list[np.ndarray] = []
    thresholds = []
    for t in trees:
        thr = t.threshold.copy()
        cat_nodes = (t.feature >= 0) & (t.feature < len(cat))
        thr[cat_nodes] += len(sets)  # tree-local set indices become global ones
        sets.extend(t.sets)
        thresholds.append(thr)

    def cat_arrays(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0)

    return {
        "categorical": list(cat), "numeric": list(num), "vocab": [v.tolist() for v in vocab],
        "bands": [np.asarray(e, dtype=np.float64).tolist() for e in bands], "mean": mean, "std": std,
        "intercept": float(model.base.intercept), "slope": float(model.base.slope),
        "shifts": [s.tolist() for s in model.base.shifts], "linear": model.base.linear,
        "round_trees": np.array([len(r.trees) for r in model.rounds], dtype=np.int64),
        "round_intercept": np.array([r.correction.intercept for r in model.rounds]),
        "round_shifts": [s.tolist() for r in model.rounds for s in r.correction.shifts],
        "round_linear": cat_arrays([r.correction.linear for r in model.rounds]),
        "tree_nodes": np.array([t.feature.size for t in trees], dtype=np.int64),
        "node_feature": cat_arrays([t.feature for t in trees]).astype(np.int64),
        "node_threshold": cat_arrays(thresholds),
        "node_left": cat_arrays([t.left for t in trees]).astype(np.int64),
        "node_right": cat_arrays([t.right for t in trees]).astype(np.int64),
        "node_value": cat_arrays([t.value for t in trees]),
        "category_sets": [np.asarray(c, dtype=np.int64).tolist() for c in sets],
    }


def model_from_state(state: Mapping[str, Any]) -> tuple[Model, list[str], list[str], list[np.ndarray],
                                                         list[np.ndarray], np.ndarray, np.ndarray]:
    """(Model, categorical names, numeric names, vocabularies, band edges, mean, std) from a (checked) state."""

    def floats(value: Any) -> np.ndarray:
        return np.array(value, dtype=np.float64)

    def ints(value: Any) -> np.ndarray:
        return np.array(value, dtype=np.float64).astype(np.int64)

    cat, num = [str(c) for c in state["categorical"]], [str(c) for c in state["numeric"]]
    nf, nq = len(cat), len(num)
    ns = nf + nq + 1  # shift tables: categorical columns, numeric columns' bands, the logit's bands
    vocab = [np.array([str(x) for x in v], dtype=str) for v in state["vocab"]]
    bands = [floats(e) for e in state["bands"]]
    base = Terms(float(state["intercept"]), float(state["slope"]), [floats(s) for s in state["shifts"]],
                 floats(state["linear"]))
    feature, threshold = ints(state["node_feature"]), floats(state["node_threshold"])
    left, right, value = ints(state["node_left"]), ints(state["node_right"]), floats(state["node_value"])
    sets = [ints(c) for c in state["category_sets"]]
    bounds = np.concatenate([[0], np.cumsum(ints(state["tree_nodes"]))])
    trees = []
    for t in range(bounds.size - 1):
        sl = slice(int(bounds[t]), int(bounds[t + 1]))
        f, thr = feature[sl], threshold[sl].copy()
        cat_nodes = (f >= 0) & (f < nf)
        own = thr[cat_nodes].astype(np.int64)
        local = [sets[i] for i in own]
        thr[cat_nodes] = np.arange(own.size, dtype=np.float64)
        trees.append(Tree(f, thr, left[sl], right[sl], value[sl], local))
    rounds, first = [], 0
    intercepts, lin = floats(state["round_intercept"]), floats(state["round_linear"])
    for r, count in enumerate(ints(state["round_trees"])):
        corr = Terms(float(intercepts[r]), 0.0, [floats(s) for s in state["round_shifts"][r * ns:(r + 1) * ns]],
                     lin[r * nq:(r + 1) * nq])
        rounds.append(Round(trees[first:first + int(count)], corr))
        first += int(count)
    return Model(base, nf, rounds), cat, num, vocab, bands, floats(state["mean"]), floats(state["std"])


def _whole(name: str, arr: np.ndarray, low: float, high: float, fail: Callable) -> np.ndarray:
    bad = np.flatnonzero((arr != np.floor(arr)) | (arr < low) | (arr > high))
    if bad.size:
        fail(name, int(bad[0]), arr[bad[0]], f"is not a whole number in [{low:g}, {high:g}]")
    return arr.astype(np.int64)


def check_state(params: Mapping[str, Any], v: dict[str, Any], fail: Callable) -> None:
    """Relations between the fields: sizes per column and round, whole-number node fields, tree
    structure (children after parents, one parent each), category sets within their vocabularies."""
    nf, nq = len(v["categorical"]), len(v["numeric"])
    if set(v["categorical"]) & set(v["numeric"]):
        fail("numeric", problem="names a column that is also categorical")
    if not np.all(np.isfinite(v["mean"] / v["std"])):
        fail("mean", problem="divided by 'std' is not finite")
    if len(v["bands"]) != nq + 1:
        fail("bands", problem=f"has {len(v['bands'])} arrays, expected one per numeric column and one for the logit")
    for j, edges in enumerate(v["bands"]):
        if np.any(np.diff(edges) <= 0):
            fail("bands", j, problem="must be strictly increasing")
    sizes = [len(words) + 1 for words in v["vocab"]] + [e.size + 2 for e in v["bands"]]
    ns = len(sizes)
    if len(v["shifts"]) != ns:
        fail("shifts", problem=f"has {len(v['shifts'])} arrays, expected {ns} "
                               "(categorical columns, numeric bands, logit bands)")
    for f, shift in enumerate(v["shifts"]):
        if shift.shape != (sizes[f],) or shift[0] != 0.0:
            fail("shifts", f, problem=f"must have {sizes[f]} values (levels + unknown), the first 0")
    rounds = v["round_trees"].size
    if rounds > params["rounds"]:
        fail("round_trees", problem=f"has {rounds} rounds, more than rounds={params['rounds']}")
    counts = _whole("round_trees", v["round_trees"], 0, params["trees"], fail)
    if v["round_intercept"].size != rounds or v["round_linear"].size != rounds * nq:
        fail("round_intercept", problem=f"round_intercept and round_linear must have {rounds} and {rounds * nq} values")
    if len(v["round_shifts"]) != rounds * ns:
        fail("round_shifts", problem=f"has {len(v['round_shifts'])} arrays, expected rounds x tables = {rounds * ns}")
    for i, shift in enumerate(v["round_shifts"]):
        if shift.shape != (sizes[i % ns],) or shift[0] != 0.0:
            fail("round_shifts", i, problem=f"must have {sizes[i % ns]} values (levels + unknown), the first 0")
    nodes = _whole("tree_nodes", v["tree_nodes"], 1, 2 * params["leaves"] - 1, fail)
    if nodes.size != int(counts.sum()):
        fail("tree_nodes", problem=f"has {nodes.size} trees, but round_trees adds up to {int(counts.sum())}")
    total = int(nodes.sum())
    for name in ("node_feature", "node_threshold", "node_left", "node_right", "node_value"):
        if v[name].size != total:
            fail(name, problem=f"has {v[name].size} values, expected {total} (the sum of tree_nodes)")
    feature = _whole("node_feature", v["node_feature"], -1, nf + nq, fail)
    left = _whole("node_left", v["node_left"], -1, 2 * params["leaves"], fail)
    right = _whole("node_right", v["node_right"], -1, 2 * params["leaves"], fail)
    starts = np.concatenate([[0], np.cumsum(nodes)])
    local = np.arange(total) - np.repeat(starts[:-1], nodes)
    size_of = np.repeat(nodes, nodes)
    internal = feature >= 0
    ok = np.where(internal, (left > local) & (left < size_of) & (right > local) & (right < size_of) & (left != right),
                  (left == -1) & (right == -1))
    if not ok.all():
        i = int(np.argmin(ok))
        fail("node_left", i, problem="is not a node after its parent in the same tree (or -1 for a leaf)")
    offset = np.repeat(starts[:-1], nodes)
    parents = np.bincount(np.concatenate([(left + offset)[internal], (right + offset)[internal]]), minlength=total)
    if total and (np.any(parents[local != 0] != 1) or np.any(parents[local == 0] != 0)):
        fail("node_left", problem="makes a node the child of no node or of two (not a tree)")
    cats = internal & (feature < nf)
    set_index = _whole("node_threshold", v["node_threshold"][cats], 0, max(len(v["category_sets"]) - 1, 0), fail) \
        if cats.any() else np.zeros(0, dtype=np.int64)
    if cats.any() and not v["category_sets"]:
        fail("category_sets", problem="is empty but a categorical split refers to it")
    for i, f in zip(set_index, feature[cats]):
        codes = v["category_sets"][i]
        if codes.size == 0 or np.any(codes != np.floor(codes)) or codes.min() < 1 or codes.max() >= sizes[f] \
                or np.any(np.diff(codes) <= 0):
            fail("category_sets", int(i), problem=f"must hold sorted distinct level codes in 1..{sizes[f] - 1}")


STATE_SPEC = StateSpec(
    Field("categorical", "strings", max_size=MAX_COLUMNS),
    Field("numeric", "strings", max_size=MAX_COLUMNS),
    Field("vocab", "string_lists", sorted_unique=True, same_size="categorical"),
    Field("bands", "arrays", ndim=1, max_size=MAX_COLUMNS + 1),
    Field("mean", low=-1e300, high=1e300, same_size="numeric"),
    Field("std", low=1e-300, high=1e300, same_size="numeric"),
    Field("intercept", "number", low=-LIMIT, high=LIMIT),
    Field("slope", "number", low=-LIMIT, high=LIMIT),
    Field("shifts", "arrays", ndim=1, low=-LIMIT, high=LIMIT),
    Field("linear", low=-LIMIT, high=LIMIT, same_size="numeric"),
    Field("round_trees"),
    Field("round_intercept", low=-LIMIT, high=LIMIT),
    Field("round_shifts", "arrays", ndim=1, low=-LIMIT, high=LIMIT),
    Field("round_linear", low=-LIMIT, high=LIMIT),
    Field("tree_nodes"),
    Field("node_feature"),
    Field("node_threshold"),
    Field("node_left"),
    Field("node_right"),
    Field("node_value", low=-LIMIT, high=LIMIT),
    Field("category_sets", "arrays", ndim=1),
    check=check_state,
)
