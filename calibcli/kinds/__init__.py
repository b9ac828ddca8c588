"""Binary or K classes: decided here, once, for every command and entry point.

A prediction is *binary* (one score or probability column, labels 0/1) or *K-class* (K score
columns, one per class, labels class names or indices). `kind_of` reads the kind off whatever
is at hand, and nothing else in calibcli tests it: the other modules dispatch on the answer
(a table keyed by `BINARY`/`KCLASS`) and read the rules that differ from this package:

- `labels`: labels to 0/1 or to class codes, one rule for every command and entry point;
- `probabilities`: rows of K probabilities (one tolerance), the score kind (`auto`), class names;
- `columns`: the K score columns of a file (`--score-cols`, `--prob-cols`, a map's recorded
  columns) and the output columns a map adds.

A binary prediction is the K = 1 case wherever that is honest (one column in, one column out);
where the two differ for a reason (0/1 labels against class names, a probability in [0, 1]
against a row summing to 1), the rule for each kind is written here once.
"""

from __future__ import annotations

from typing import Any, Mapping

BINARY = "binary"
KCLASS = "kclass"
KINDS = (BINARY, KCLASS)


def kind_of(thing: Any) -> str:
    """`BINARY` or `KCLASS` of a saved map's envelope (K-class envelopes carry "classes"), of
    anything that declares its `kind` (calibrators and their classes, fitted maps, requests), of
    a request's columns (`score_cols`: the K score columns, or None for one score column), or of
    scores (an array of shape (n,) is binary, (n, K) K-class; (n, 1) is one score column).
    """
    if isinstance(thing, Mapping):
        return KCLASS if "classes" in thing else BINARY
    declared = getattr(thing, "kind", None)
    if declared in KINDS:
        return declared
    if hasattr(thing, "score_cols") and not hasattr(thing, "shape"):  # a request's columns
        return BINARY if thing.score_cols is None else KCLASS
    import numpy as np

    shape = np.shape(thing)
    if len(shape) == 2 and shape[1] != 1:
        return KCLASS
    if len(shape) in (1, 2):
        return BINARY
    from calibcli.errors import UsageError

    raise UsageError(f"scores must be one column (shape (n,)) or one column per class (shape (n, K)), "
                     f"got an array of shape {shape}",
                     hint="for a model's output pass model.predict_proba(X)[:, 1] (two classes) or "
                          "model.predict_proba(X) (K classes)")


def require(thing: Any, kind: str, what: str, hint: str | None = None) -> None:
    """Refuse `thing` (a map, scores) of the other kind where a caller takes only `kind`:
    `what` names it ("the map x.json"), the message says which kind it is."""
    found = kind_of(thing)
    if found != kind:
        from calibcli.errors import UsageError

        words = {BINARY: "binary (one score column)", KCLASS: "K-class (one score column per class)"}
        raise UsageError(f"{what} is {words[found]}, but {words[kind]} is needed here", hint=hint)


__all__ = ["BINARY", "KCLASS", "KINDS", "kind_of", "require"]
