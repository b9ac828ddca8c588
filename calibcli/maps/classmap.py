"""`ClassMap`: a fitted K-class calibrator with its class names, score kind and score columns,
and its part of the saved map envelope.

The envelope of a K-class map is the binary one (`maps.py`) plus the keys

    "classes": ["cat", "dog", ...]   (strings or integers, distinct, K of them)
    "score_kind": "probability" | "logit"
    "score_cols": ["p_cat", ...]     (optional: the columns it was fitted on)
    "one_vs_rest": true              (only for a binary method fitted one-vs-rest; "method"
                                      is then that binary method's name)

and the state has `n_classes`, which must equal the number of classes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from calibcli.calibrators import registry
from calibcli.kinds.names import SCORE_KINDS
from calibcli.calibrators.kclass import MAX_CLASSES, ClassCalibrator
from calibcli.calibrators.onevsrest import OneVsRest
from calibcli.errors import CalibError, MapError
from calibcli.kinds.names import check_classes


class ClassMap:
    """A fitted K-class map: `predict(P) -> (n, K)`, `predict_labels(P)`, `classes_`; the score
    columns it was fitted on (`score_cols`, or one list column, `list_column`)."""

    kind = "kclass"

    def __init__(self, calibrator: ClassCalibrator, classes: Sequence[Any],
                 score_cols: Sequence[str] | None = None, list_column: str | None = None):
        self.calibrator = calibrator
        self.classes_ = np.asarray(list(classes))
        self.score_cols = None if score_cols is None else [str(c) for c in score_cols]
        self.list_column = list_column

    def __repr__(self) -> str:
        return f"ClassMap({self.calibrator!r}, classes={self.classes_.tolist()!r:.80})"

    @property
    def name(self) -> str:
        """The method name the map records (a binary method's name for one-vs-rest)."""
        return self.calibrator.name

    method = name

    @property
    def score_kind(self) -> str:
        return self.calibrator.score_kind

    @property
    def n_classes(self) -> int:
        return int(self.classes_.size)

    @property
    def params(self) -> dict[str, Any]:
        return self.calibrator.params

    def predict(self, scores: Any) -> np.ndarray:
        """Calibrated (n, K) probabilities, columns in the order of `classes_`."""
        return self.calibrator.predict(scores)

    def predict_class_major(self, scores: Any) -> np.ndarray:
        """The (K, n) transpose of `predict`, one contiguous row per class (`calib apply`)."""
        return self.calibrator.predict_class_major(scores)

    def predict_labels(self, scores: Any) -> np.ndarray:
        """The most probable class of each row (the first on ties)."""
        return self.classes_[np.argmax(self.predict(scores), axis=1)]

    def get_state(self) -> dict[str, Any]:
        return self.calibrator.get_state()

    def summary(self) -> dict[str, Any]:
        return self.calibrator.summary()

    def envelope_fields(self) -> dict[str, Any]:
        """The K-class keys of the saved envelope (see the module docstring)."""
        fields: dict[str, Any] = {"classes": [_plain_class(c) for c in self.classes_.tolist()],
                                  "score_kind": self.score_kind}
        if self.score_cols is not None:
            fields["score_cols"] = list(self.score_cols)
        if getattr(self.calibrator, "one_vs_rest", False):
            fields["one_vs_rest"] = True
        return fields


def _plain_class(value: Any) -> Any:
    """A class name as a map stores it: a string or an integer."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, int, float, np.integer, np.floating)):
        raise MapError(f"class name {value!r:.40} cannot be saved: a map's class names are strings or integers")
    if isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise MapError(f"class name {value!r} cannot be saved: a map's class names are strings or integers")
        return int(value)
    return value if isinstance(value, str) else int(value)


def from_envelope(envelope: Mapping[str, Any], source: str) -> ClassMap:
    """The ClassMap a K-class envelope describes, every K-class key checked (MapError)."""
    method = envelope["method"]
    classes = _checked_classes(envelope.get("classes"), source)
    kind = envelope.get("score_kind")
    if kind not in SCORE_KINDS:
        raise MapError(f"{source}: map field 'score_kind' must be probability or logit, got {kind!r:.40}")
    params = dict(envelope["params"])
    if params.setdefault("score_kind", kind) != kind:
        raise MapError(f"{source}: map params score_kind {params['score_kind']!r:.40} differs from its "
                       f"score_kind {kind!r}")
    cols = envelope.get("score_cols")
    if cols is not None and (not isinstance(cols, list) or len(cols) != len(classes)
                             or not all(isinstance(c, str) for c in cols) or len(set(cols)) != len(cols)):
        raise MapError(f"{source}: map field 'score_cols' must be {len(classes)} distinct column names, "
                       f"one per class", hint="the map file is damaged or edited: fit it again")
    one_vs_rest = envelope.get("one_vs_rest", False)
    if one_vs_rest not in (True, False):
        raise MapError(f"{source}: map field 'one_vs_rest' must be true or false")
    state = envelope["state"]
    k = state.get("n_classes") if isinstance(state, Mapping) else None
    if k != len(classes):
        raise MapError(f"{source}: map names {len(classes)} classes but its state has n_classes = {k!r:.40}",
                       hint="the map file is damaged or edited: fit it again")
    try:
        if one_vs_rest:
            cal: ClassCalibrator = OneVsRest.from_state(params, state, method=method)
        else:
            cls = registry.get(method)
            if registry.classes(method) != "native":
                raise MapError(f"method {method!r} is binary: its K-class map must say \"one_vs_rest\": true")
            cal = cls.from_state(params, state)
    except CalibError as exc:
        raise MapError(f"{source}: {exc.message}", hint=exc.hint) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise MapError(f"{source}: {method} map has invalid state ({exc!r:.80})") from None
    listed = (envelope.get("training") or {}).get("score_list_col") if isinstance(envelope.get("training"), Mapping) \
        else None
    return ClassMap(cal, classes, cols, listed if isinstance(listed, str) and listed else None)


def _checked_classes(classes: Any, source: str) -> list[Any]:
    if not isinstance(classes, list) or not 2 <= len(classes) <= MAX_CLASSES:
        raise MapError(f"{source}: map field 'classes' must be a list of 2 to {MAX_CLASSES} class names")
    for i, c in enumerate(classes):
        if isinstance(c, bool) or not isinstance(c, (str, int)):
            raise MapError(f"{source}: map field classes[{i}] = {c!r:.40} is not a string or an integer")
    check_classes(classes, f"{source}: map field 'classes'", MapError, "the map file is damaged or edited: fit it again")
    if not all(isinstance(c, str) for c in classes) and not all(isinstance(c, int) for c in classes):
        raise MapError(f"{source}: map field 'classes' mixes strings and integers")
    return classes
