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

from calibcli.calibrators import kscores, registry
from calibcli.calibrators.kclass import MAX_CLASSES, ClassCalibrator
from calibcli.calibrators.onevsrest import OneVsRest
from calibcli.errors import CalibError, FitError, MapError, shown


class ClassMap:
    """A fitted K-class map: `predict(P) -> (n, K)`, `predict_labels(P)`, `classes_`."""

    def __init__(self, calibrator: ClassCalibrator, classes: Sequence[Any],
                 score_cols: Sequence[str] | None = None):
        self.calibrator = calibrator
        self.classes_ = np.asarray(list(classes))
        self.score_cols = None if score_cols is None else [str(c) for c in score_cols]

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
        if isinstance(self.calibrator, OneVsRest):
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


def fit(scores: Any, labels: Any, method: str = "temperature", *, classes: Sequence[Any] | None = None,
        score_kind: str = "auto", sample_weight: Any = None, weight_kind: str = "frequency",
        score_cols: Sequence[str] | None = None, seed: int | None = None, **params: Any) -> ClassMap:
    """Fit `method` on (n, K) scores and labels of any hashable values (see `calibcli.fit`);
    `seed` checked as `calib fit --seed` checks it."""
    from calibcli.requests import kclass_calibrator

    cal = kclass_calibrator(method, params, seed=seed, score_kind=score_kind)
    s = kscores.as_score_matrix(scores)
    cal.set_params(score_kind=kscores.resolve_score_kind(s, score_kind))
    names, codes = class_codes(labels, s.shape[1], classes)
    cal.fit(s, codes, sample_weight=sample_weight, weight_kind=weight_kind)
    return ClassMap(cal, names, score_cols)


def class_codes(labels: Any, k: int, classes: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(class names, int64 codes of `labels`): names sorted unless `classes` is given; a FitError
    for a label that is not a class, labels mixing text and numbers, duplicate classes, or K
    names that do not match K columns."""
    refuse_mixed_labels(labels)
    y = np.asarray(labels)
    if y.ndim != 1:
        raise FitError(f"labels must be one-dimensional, got shape {y.shape}")
    try:
        uniq, inverse = np.unique(y, return_inverse=True)
    except TypeError:  # mixed types numpy cannot order: order by text
        index: dict[Any, int] = {}
        codes_list = [index.setdefault(v, len(index)) for v in y.tolist()]
        order = sorted(index, key=repr)
        uniq = np.empty(len(order), dtype=object)
        uniq[:] = order
        rank = np.array([order.index(v) for v in index], dtype=np.int64)
        inverse = rank[np.asarray(codes_list, dtype=np.int64)]
    if classes is None:
        if uniq.size != k:
            raise FitError(f"the labels hold {uniq.size} distinct values but the scores have {k} class columns",
                           hint="pass classes=[...] naming the class of each column, in order")
        return uniq, inverse.reshape(-1).astype(np.int64)
    names = np.asarray(list(classes))
    if names.size != k:
        raise FitError(f"classes names {names.size} classes but the scores have {k} columns")
    position = {}
    for i, name in enumerate(names.tolist()):
        if position.setdefault(name, i) != i:
            raise FitError(f"classes has the duplicate class {name!r:.40}")
    lookup = np.array([position.get(u, -1) for u in uniq.tolist()], dtype=np.int64)
    codes = lookup[inverse.reshape(-1)]
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        value = y[bad[0]]
        value = value.item() if isinstance(value, np.generic) else value
        raise FitError(f"label {shown(value)[:40]} in row {bad[0]} is not one of the classes",
                       hint="the classes: " + ", ".join(shown(c)[:40] for c in names.tolist()[:10]))
    return names, codes


def refuse_mixed_labels(labels: Any) -> None:
    """A FitError for labels mixing text and numbers ("1" and 1): numpy would turn them all
    into text and merge the two into one class."""
    if isinstance(labels, np.ndarray) and labels.dtype != object:
        return  # one dtype: all text or all numbers
    values = set(np.asarray(labels, dtype=object).ravel().tolist())  # the distinct values, not the rows
    text = next((v for v in values if isinstance(v, str)), None)
    number = next((v for v in values if isinstance(v, (int, float, np.number))), None)
    if text is not None and number is not None:
        raise FitError(f"labels mix text and numbers ({text!r:.40} and {number!r:.40}): they would be merged "
                       "or split unpredictably", hint="give every label as text or every label as a number")


def from_envelope(envelope: Mapping[str, Any], source: str) -> ClassMap:
    """The ClassMap a K-class envelope describes, every K-class key checked (MapError)."""
    method = envelope["method"]
    classes = _checked_classes(envelope.get("classes"), source)
    kind = envelope.get("score_kind")
    if kind not in kscores.SCORE_KINDS:
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
            if not issubclass(cls, ClassCalibrator):
                raise MapError(f"method {method!r} is binary: its K-class map must say \"one_vs_rest\": true")
            cal = cls.from_state(params, state)
    except CalibError as exc:
        raise MapError(f"{source}: {exc.message}", hint=exc.hint) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise MapError(f"{source}: {method} map has invalid state ({exc!r:.80})") from None
    return ClassMap(cal, classes, cols)


def _checked_classes(classes: Any, source: str) -> list[Any]:
    if not isinstance(classes, list) or not 2 <= len(classes) <= MAX_CLASSES:
        raise MapError(f"{source}: map field 'classes' must be a list of 2 to {MAX_CLASSES} class names")
    for i, c in enumerate(classes):
        if isinstance(c, bool) or not isinstance(c, (str, int)):
            raise MapError(f"{source}: map field classes[{i}] = {c!r:.40} is not a string or an integer")
    text = [str(c) for c in classes]
    if len(set(text)) != len(text):
        dup = next(t for i, t in enumerate(text) if t in text[:i])
        raise MapError(f"{source}: map field 'classes' has the duplicate class {dup!r:.40}",
                       hint="the map file is damaged or edited: fit it again")
    if not all(isinstance(c, str) for c in classes) and not all(isinstance(c, int) for c in classes):
        raise MapError(f"{source}: map field 'classes' mixes strings and integers")
    return classes
