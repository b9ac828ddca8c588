"""The Calibrator contract every method follows, and the typed options (`Param`) it declares.

A calibrator is a class with:

- `name`, `description`: the registry key and the one line `calib methods` prints;
- `params`: a tuple of `Param` (name, type, default, help, bounds/choices); `__init__` only
  checks and stores them in `self.params`;
- `_fit(s, y, w, features)`: learn from scores `s`, targets `y` in [0, 1] (0/1 labels, or the
  Platt-corrected targets when the method has the `platt_correction` option and it is on)
  and weights `w` (always an array, ones when none were given);
- `_predict(s, features)`: probabilities for new scores (the base class clips to [0, 1]);
- `get_state()` / `_set_state(state)`: the minimal fitted state as a flat dict of numbers,
  strings and (nested) lists or float arrays. `_predict` must read only what `_set_state`
  restores, so a map reloaded from JSON or Parquet predicts bit-for-bit what the fitted
  object did (float64 -> JSON repr -> float64 is exact).

Optional hooks: `summary()` (key fitted values for the fit report), `input_features()`
(feature columns `apply` must read), and `warnings.warn(..., CalibWarning)` during `_fit`
for diagnostics the CLI shows on stderr.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from calibcli.bounds import SEED_MAX
from calibcli.errors import CalibWarning, FitError, MapError, NotFittedError, ParamError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One option of a method: `calib fit --param name=value`, stored in the saved map."""

    name: str
    type: type
    default: Any
    help: str
    low: float | None = None  # inclusive bounds; every int/float option has both (ints as int)
    high: float | None = None
    choices: tuple[str, ...] | None = None
    optional: bool = False  # None is allowed (means "choose from the data")

    def parse(self, text: str) -> Any:
        """Convert the text after `key=` on the command line, then check it."""
        raw = text.strip()
        if self.optional and raw.lower() in {"none", "auto", ""}:
            return self.check(None)
        try:
            if self.type is bool:
                low = raw.lower()
                if low not in _TRUE | _FALSE:
                    raise ValueError
                value: Any = low in _TRUE
            elif self.type is int:
                value = self._parse_int(raw)
            elif self.type is float:
                value = float(raw)
            else:
                value = raw
        except (ValueError, OverflowError):
            raise ParamError(
                f"--param {self.name}={text!r}: expected {self._kind()}"
            ) from None
        return self.check(value)

    def _parse_int(self, raw: str) -> int:
        """Exact integers: `9007199254740993` stays itself; `1e3` is accepted as 1000 (exact)."""
        with contextlib.suppress(ValueError):
            return int(raw)
        try:
            exact = Decimal(raw)
            if not exact.is_finite():
                raise ValueError(raw)
            if exact.adjusted() > 30:  # beyond every bound: refuse without building a huge integer
                raise ParamError(f"parameter {self.name!r} must be in {self.range_text()}, got {raw:.40}")
            if exact != exact.to_integral_value():
                raise ValueError(raw)
        except ArithmeticError:  # decimal's InvalidOperation, Overflow, ...
            raise ValueError(raw) from None
        return int(exact)

    def check(self, value: Any) -> Any:
        """Validate a Python value (from the CLI, a saved map or the library API)."""
        if value is None:
            if self.optional:
                return None
            raise ParamError(f"parameter {self.name!r} needs a value ({self._kind()})")
        if self.type is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise ParamError(f"parameter {self.name!r} must be true or false, got {value!r:.40}")
            return bool(value)
        if self.type in (int, float):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                raise ParamError(f"parameter {self.name!r} must be {self._kind()}, got {value!r:.40}")
            if self.type is int:
                if isinstance(value, (float, np.floating)) and not float(value).is_integer():
                    raise ParamError(f"parameter {self.name!r} must be a whole number, got {value!r:.40}")
                value = int(value)
            else:
                value = float(value)
                if not math.isfinite(value):
                    raise ParamError(f"parameter {self.name!r} must be finite, got {value!r:.40}")
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise ParamError(f"parameter {self.name!r} must be in {self.range_text()}, got {value!r:.40}")
            return value
        value = str(value)
        if self.choices is not None and value not in self.choices:
            raise ParamError(
                f"parameter {self.name!r} must be one of {', '.join(self.choices)}, got {value!r:.40}"
            )
        return value

    def _kind(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        kind = {bool: "true/false", int: "an integer", float: "a number"}.get(self.type, "text")
        if self.low is not None or self.high is not None:
            kind += f" in {self.range_text()}"
        return kind + (" or 'auto'" if self.optional else "")

    def range_text(self) -> str:
        """`[low, high]`, integers written out exactly (a seed's 2**63 - 1 is not 9.22e+18)."""
        return _bounds_text(self.low, self.high)

    def describe(self) -> str:
        """`name=default (kind): help`, for `calib methods`."""
        default = "auto" if self.default is None else str(self.default).lower() if self.type is bool else self.default
        return f"{self.name}={default} ({self._kind()}): {self.help}"


PLATT_CORRECTION = Param(
    "platt_correction",
    bool,
    False,
    "fit on Platt's smoothed targets (N+ +1)/(N+ +2) and 1/(N- +2) instead of 1/0",
)
# The default of the methods whose classical fit returns exactly 0 or 1 wherever the
# calibration set had one class (isotonic, binning, ENIR, near-isotonic, boot-*, logistic on
# separated classes): on by default, the classical fit one parameter away.
SAFE_PLATT_CORRECTION = Param(
    "platt_correction",
    bool,
    True,
    "fit on Platt's smoothed targets (N+ +1)/(N+ +2) and 1/(N- +2) instead of 1/0, so no "
    "output is exactly 0 or 1; false: the classical fit (0 or 1 where the data had one class)",
)
WEIGHT_KINDS = ("frequency", "importance")
# Resampling methods expand whole-number frequency weights into duplicated rows up to this
# many rows; above it they resample rows in proportion to their weights (with a warning).
EXPAND_LIMIT = 2_000_000
SEED = Param("seed", int, 0, "random seed; the same seed gives the same map", low=0, high=SEED_MAX)
PROB_CLIP = 1e-12  # probability clip before logs and logits, float64 whatever the input dtype
SCORE_KIND = Param(
    "score_kind",
    str,
    "probability",
    "probability: scores in [0, 1] (clipped to [1e-12, 1-1e-12]); logit: log-odds ln(s/(1-s))",
    choices=("probability", "logit"),
)


def class_weights(labels: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """(summed weight of the positives, of the negatives) of 0/1 labels; a broadcast unit
    weight (no --weight-col) is a count, with no n-long temporary."""
    if weights.ndim == 1 and weights.size and weights.strides[0] == 0 and weights[0] == 1:
        pos = int(np.count_nonzero(labels == 1))
        return float(pos), float(np.count_nonzero(labels == 0))
    return _safe_sum(weights[labels == 1]), _safe_sum(weights[labels == 0])


def _safe_sum(w: np.ndarray) -> float:
    """Sum of non-negative weights; one that overflows is summed scaled by a power of two
    (inf only where the true sum is beyond the float64 range)."""
    with np.errstate(over="ignore"):
        total = float(np.sum(w))
    if math.isfinite(total) or w.size == 0:
        return total
    e = math.frexp(float(np.max(w)))[1]
    with np.errstate(over="ignore"):
        return float(np.ldexp(np.sum(np.ldexp(w, -e)), e))


def platt_targets(labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Platt's label correction (Allikivi & Kull 2019, section 3).

    Positives become 1 - 1/(N+ + 2) = (N+ + 1)/(N+ + 2), negatives 1/(N- + 2). With weights,
    N+ and N- are the summed weights of the positives and negatives.
    """
    return platt_values(labels, *class_weights(labels, weights))


def platt_values(labels: np.ndarray, n_pos: float, n_neg: float) -> np.ndarray:
    """`platt_targets` from the summed weights of the two classes (inf: a target of 1 or 0)."""
    high = (n_pos + 1.0) / (n_pos + 2.0) if math.isfinite(n_pos) else 1.0
    return np.where(labels == 1, high, 1.0 / (n_neg + 2.0))


# Weights are kept inside [2**-WEIGHT_EXP, 2**WEIGHT_EXP]·(a few) for the fit, so that their
# sums, squares and products with targets neither overflow nor underflow (see `scaled_weights`).
WEIGHT_EXP = 400


def scaled_weights(w: np.ndarray, kind: str) -> np.ndarray:
    """The weights a fit sees.

    importance: only ratios matter; they are divided by a power of two near the largest
    (exact) and rescaled to sum to the number of rows with positive weight, so w and c*w give
    the same map. frequency: a row of weight k counts as k rows; weights whose largest is
    beyond 2**+-WEIGHT_EXP are multiplied by the power of two that brings it to that bound
    (still a huge or a tiny count: ratios exact, no overflowing sums, no targets times a
    subnormal weight rounding to 0).
    """
    top = float(np.max(w))
    e = math.frexp(top)[1]
    negligible = (w > 0) & (w < math.ldexp(top, -NEGLIGIBLE_EXP))
    if negligible.any():
        w = np.where(negligible, 0.0, w)
    if kind == "importance":
        positive = w > 0
        if np.all(w[positive] == w[positive][0]):
            return positive.astype(np.float64)  # equal weights: exactly the unweighted rows
        if abs(e) > WEIGHT_EXP:
            w = np.ldexp(w, -e)
        return w * (np.count_nonzero(w) / float(np.sum(w)))
    if e > WEIGHT_EXP:
        return np.ldexp(w, WEIGHT_EXP - e)
    if e < -WEIGHT_EXP:
        return np.ldexp(w, -WEIGHT_EXP - e)
    return w


# A weight below 2**-NEGLIGIBLE_EXP times the largest counts as 0: its share is far below
# float64 resolution, and kept it would be a subnormal weight whose reciprocal overflows.
NEGLIGIBLE_EXP = 600


def as_float_array(values: Any, what: str) -> np.ndarray:
    """A 1-D float64 array from state or user input; raises FitError on other shapes."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise FitError(f"{what} must be one-dimensional, got shape {arr.shape}")
    return arr


MAX_KNOTS = 1 << 27  # longest state array a map may hold: 1 GiB of float64


@dataclass(frozen=True)
class Field:
    """One entry of a saved state and what a loaded value must satisfy (see `StateSpec`).

    kind: "floats" (1-D float array), "number" (finite float), "int", "strings" (list of
    str), "arrays" (list of `ndim`-D float arrays), "string_lists" (list of lists of str).
    Sizes may depend on the method's params (`size`/`max_size` take the params dict).
    order: "increasing" (strictly), "nondecreasing", or "monotone" (non-decreasing when
    the class promises monotone predictions).
    """

    name: str
    kind: str = "floats"
    low: float | None = None
    high: float | None = None
    unit: bool = False  # values are probabilities in [0, 1]
    order: str | None = None
    size: Callable[[Mapping[str, Any]], int] | None = None
    max_size: int | Callable[[Mapping[str, Any]], int] = MAX_KNOTS
    min_size: int = 0
    same_size: str | None = None
    ndim: int = 1
    sorted_unique: bool = False  # strings strictly increasing (a searchsorted vocabulary)


class StateSpec:
    """The declared shape of a calibrator's saved state; `validate` checks a loaded one.

    Every field must be present and no other; values are converted (lists to float64
    arrays) and checked: types (no strings, booleans or null where numbers belong), finite,
    bounds, order, sizes; `check(params, values, fail)` adds relations between fields.
    A problem is a one-line MapError naming the method, the field and the index.
    """

    def __init__(self, *fields: Field, check: Callable[..., None] | None = None):
        self.fields = fields
        self.check = check

    def validate(self, cls: type["Calibrator"], params: Mapping[str, Any], state: Mapping[str, Any]) -> dict[str, Any]:
        """Checked and converted state values, or a MapError."""
        def fail(field: str, index: Any = None, value: Any = _NO_VALUE, problem: str = "is invalid") -> None:
            where = f"{cls.name} map state {_short(field)}" + ("" if index is None else f"[{index}]")
            shown = "" if value is _NO_VALUE else f" = {_short(value)}"
            raise MapError(f"{where}{shown} {problem}", hint="the map file is damaged or edited: fit it again")

        names = [f.name for f in self.fields]
        for key in state:
            if key not in names:
                fail(key, problem="is not a field of this method's state (" + ", ".join(names) + ")")
        out: dict[str, Any] = {}
        for f in self.fields:
            if f.name not in state:
                raise MapError(f"{cls.name} map is missing state field {f.name!r}")
            out[f.name] = _load_field(f, state[f.name], params, cls.monotone, fail)
        for f in self.fields:
            if f.same_size is not None and len(out[f.name]) != len(out[f.same_size]):
                fail(f.name, problem=f"has {len(out[f.name])} values but {f.same_size!r} has "
                                     f"{len(out[f.same_size])}: they must have the same length")
        if self.check is not None:
            self.check(params, out, fail)
        return out


_NO_VALUE = object()


def _short(value: Any) -> str:
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _load_field(f: Field, value: Any, params: Mapping[str, Any], monotone: bool, fail: Callable) -> Any:
    """One state value checked against its Field (see `StateSpec`)."""
    if f.kind == "number":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            fail(f.name, None, value, "is not a number")
        x = _as_float(value)
        if x is None:
            fail(f.name, None, value, "is not a finite number")
        _check_bounds(f.name, f, np.array([x]), fail, scalar=True)
        return x
    if f.kind == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            fail(f.name, None, value, "is not an integer")
        if (f.low is not None and value < f.low) or (f.high is not None and value > f.high):
            fail(f.name, None, value, f"is outside {_bounds_text(f.low, f.high)}")
        return int(value)
    if not isinstance(value, (list, tuple, np.ndarray)):
        fail(f.name, None, value, "is not a list")
    _check_size(f, len(value), params, fail)
    if f.kind == "floats":
        arr = _float_array(value, f.name, fail)
        _check_bounds(f.name, f, arr, fail)
        _check_order(f, arr, monotone, fail)
        return arr
    if f.kind == "strings":
        return _strings(f, value, fail)
    if f.kind == "string_lists":
        return [_strings(f, v, fail, index=i) for i, v in enumerate(value)]
    arrays = []  # "arrays": each element an f.ndim-dimensional float array
    for i, item in enumerate(value):
        where = f"{f.name}[{i}]"
        if isinstance(item, np.ndarray) and item.ndim == f.ndim:
            flat, shape = _float_array(item.ravel(), where, fail), item.shape
        elif f.ndim == 1 and isinstance(item, (list, tuple)):
            flat = _float_array(item, where, fail)
            shape = flat.shape
        elif f.ndim == 2 and isinstance(item, (list, tuple)) and set(map(type, item)) <= {list, tuple}:
            widths = set(map(len, item))
            if len(widths) > 1:
                fail(where, problem="has rows of different lengths")
            shape = (len(item), widths.pop() if widths else 0)
            if shape[0] * shape[1] > MAX_KNOTS:
                fail(where, problem=f"has more than {MAX_KNOTS} values")
            flat = _float_array(list(chain.from_iterable(item)), where, fail)
        else:
            fail(where, None, item, f"is not a {f.ndim}-D array of numbers")
        _check_bounds(where, f, flat, fail)
        arrays.append(flat.reshape(shape))
    return arrays


_NUMBER_TYPES = {int, float, np.float64, np.float32, np.int64, np.int32}


def _as_float(value: Any) -> float | None:
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _float_array(value: Any, name: str, fail: Callable) -> np.ndarray:
    """A finite 1-D float64 array from a list of int/float or a numeric array; else `fail`."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind not in "fiu":
            fail(name, problem=f"is not a list of numbers (array of {value.dtype}, shape {value.shape})")
        arr = value.astype(np.float64)
    else:
        if not set(map(type, value)) <= _NUMBER_TYPES:
            i = next(i for i, v in enumerate(value) if type(v) not in _NUMBER_TYPES)
            fail(name, i, value[i], "is not a number")
        try:
            arr = np.array(value, dtype=np.float64)
        except OverflowError:
            i = next(i for i, v in enumerate(value) if _as_float(v) is None)
            fail(name, i, value[i], "is not a finite number")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        fail(name, int(bad[0]), arr[bad[0]], "is not a finite number")
    return arr


def _strings(f: Field, value: Any, fail: Callable, index: int | None = None) -> list[str]:
    where = f.name if index is None else f"{f.name}[{index}]"
    if not isinstance(value, (list, tuple, np.ndarray)):
        fail(where, None, value, "is not a list of strings")
    if len(value) > (f.max_size if isinstance(f.max_size, int) else MAX_KNOTS):
        fail(where, problem=f"has {len(value)} entries, more than this map may hold")
    if not set(map(type, value)) <= {str, np.str_}:
        i = next(i for i, v in enumerate(value) if not isinstance(v, str))
        fail(where, i, value[i], "is not a string")
    items = [str(v) for v in value]
    if f.sorted_unique and len(items) > 1:
        arr = np.array(items, dtype=str)
        bad = np.flatnonzero(~(arr[1:] > arr[:-1]))
        if bad.size:
            i = int(bad[0]) + 1
            fail(where, i, items[i], f"does not come after {_short(items[i - 1])} (entries must be "
                                     "sorted and distinct)")
    elif len(set(items)) != len(items):
        fail(where, problem="has duplicate entries")
    return items


def _check_size(f: Field, n: int, params: Mapping[str, Any], fail: Callable) -> None:
    if f.size is not None and n != f.size(params):
        fail(f.name, problem=f"has {n} values, expected {f.size(params)} for these parameters")
    cap = f.max_size(params) if callable(f.max_size) else f.max_size
    if n > min(cap, MAX_KNOTS):
        fail(f.name, problem=f"has {n} values, at most {min(cap, MAX_KNOTS)} allowed for these parameters")
    if n < f.min_size:
        fail(f.name, problem=f"has {n} values, at least {f.min_size} needed")


def _check_bounds(name: str, f: Field, arr: np.ndarray, fail: Callable, scalar: bool = False) -> None:
    low, high = (0.0, 1.0) if f.unit else (f.low, f.high)
    bad = np.zeros(arr.size, dtype=bool)
    if low is not None:
        bad |= arr < low
    if high is not None:
        bad |= arr > high
    if bad.any():
        i = int(np.argmax(bad))
        what = "is not a probability in [0, 1]" if f.unit else f"is outside {_bounds_text(low, high)}"
        fail(name, None if scalar else i, arr[i], what)


def _bounds_text(low: float | None, high: float | None) -> str:
    def show(v: float | None) -> str:
        return "..." if v is None else str(v) if isinstance(v, int) else f"{v:g}"

    return f"[{show(low)}, {show(high)}]"


def _check_order(f: Field, arr: np.ndarray, monotone: bool, fail: Callable) -> None:
    order = "nondecreasing" if f.order == "monotone" and monotone else f.order
    if order not in ("increasing", "nondecreasing") or arr.size < 2:
        return
    bad = np.flatnonzero(arr[1:] <= arr[:-1] if order == "increasing" else arr[1:] < arr[:-1])
    if bad.size:
        i = int(bad[0]) + 1
        rule = "strictly increasing" if order == "increasing" else "non-decreasing (the method is monotone)"
        fail(f.name, i, arr[i], f"is not above {f.name!r}[{i - 1}] = {_short(arr[i - 1])}: values must be {rule}")


# Scores every loaded map is probed on: predictions must be finite, in [0, 1] and, for
# monotone methods, non-decreasing (the invariants a fitted map satisfies).
PROBE_SCORES = np.array([-1.7976931348623157e308, -1e300, -1e10, -1e3, -30.0, -5.0, -1.0, -1e-300, 0.0,
                         5e-324, 1e-322, 1e-310, 1e-300, 1e-12, 1e-6, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99,
                         1 - 1e-12, 1.0, 1.0 + 1e-9, 2.0, 5.0, 30.0, 1e3, 1e10, 1e300, 1.7976931348623157e308])


def _one_class(y: np.ndarray, pos: float, neg: float, weighted: bool) -> FitError:
    """Why a fit sees one class only, by its true cause: all weights zero, every label the
    same, or every row of one class weighted zero."""
    if weighted and pos <= 0 and neg <= 0:
        return FitError("all weights are zero: calibration needs weight on both classes",
                        hint="check --weight-col")
    missing = 1 if pos <= 0 else 0
    if not np.any(y == missing):
        only = "0 (negative)" if missing == 1 else "1 (positive)"
        return FitError(f"every label is {only}: calibration needs both classes",
                        hint="check --label-col, or fit on more data")
    return FitError(f"every row with label {missing} has weight zero: calibration needs weight on both classes",
                    hint="check --weight-col")


class Calibrator:
    """Base class: parameter handling, input checks, Platt correction, clipping, state."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    monotone: ClassVar[bool] = True  # predictions non-decreasing in the score
    state_spec: ClassVar[StateSpec | None] = None  # what a loaded state must satisfy
    needs_probabilities: ClassVar[bool] = False  # scores must lie in [0, 1]
    uses_features: ClassVar[bool] = False  # reads --field-col/--feature-col columns
    resamples_rows: ClassVar[bool] = False  # the fit draws rows: frequency weights are expanded
    extremes: ClassVar[str] = ""  # default behaviour at 0 and 1, for `calib methods` and the README

    def __init__(self, **params: Any):
        known = self._known_params(sorted(params))
        self.params: dict[str, Any] = {
            name: p.check(params.get(name, p.default)) for name, p in known.items()
        }
        self._fitted = False

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    @classmethod
    def default_extremes(cls) -> str:
        """What the method's defaults do at the extremes: `extremes`, or the Platt-default text."""
        if cls.extremes or SAFE_PLATT_CORRECTION not in cls.params:
            return cls.extremes
        return ("never exactly 0 or 1 by default (Platt's targets); platt_correction=false "
                "gives 0 or 1 where the calibration data had one class")

    @classmethod
    def from_cli(cls, pairs: Mapping[str, str], **typed: Any) -> "Calibrator":
        """Build from `--param key=value` strings, parsed by each Param's type, plus options
        that arrive already typed (`--seed` stays an int end to end)."""
        known = cls._known_params([*pairs, *typed])
        return cls(**{key: known[key].parse(text) for key, text in pairs.items()}, **typed)

    @classmethod
    def _known_params(cls, names: Any) -> dict[str, Param]:
        """The method's Params by name; a ParamError naming the first of `names` it lacks."""
        known = {p.name: p for p in cls.params}
        for key in names:
            if key not in known:
                raise ParamError(
                    f"method {cls.name!r} has no parameter {key!r}",
                    hint=f"its parameters: {', '.join(known) or 'none'} (see `calib methods`)",
                )
        return known

    def fit(
        self,
        scores: Any,
        labels: Any,
        weights: Any = None,
        features: Mapping[str, np.ndarray] | None = None,
        weight_kind: str = "frequency",
    ) -> "Calibrator":
        """Fit on scores and 0/1 labels (optionally weighted); returns self.

        `weight_kind="frequency"` (the default): a row of weight k counts as k rows (a whole
        number k is exactly k duplicated rows). `"importance"`: only the weights' ratios
        matter; they are rescaled to sum to the number of rows with positive weight, so
        scaling every weight by c > 0 gives the same map.
        """
        s = as_float_array(scores, "scores")
        y = as_float_array(labels, "labels")
        if s.shape != y.shape:
            raise FitError(f"scores and labels differ in length ({s.size} vs {y.size})")
        if s.size == 0:
            raise FitError("no rows to fit on")
        if not np.all(np.isfinite(s)):
            raise FitError("scores must be finite (no NaN or inf)")
        if not np.all((y == 0) | (y == 1)):
            raise FitError("labels must be 0 or 1")
        if weight_kind not in WEIGHT_KINDS:
            raise ParamError(f"weight kind must be one of {', '.join(WEIGHT_KINDS)}, got {weight_kind!r}")
        if weights is None:
            w = np.broadcast_to(np.float64(1.0), s.shape)  # read-only unit weights, no n-long array
        else:
            w = as_float_array(weights, "weights")
            if w.shape != s.shape:
                raise FitError(f"weights and scores differ in length ({w.size} vs {s.size})")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise FitError("weights must be finite and non-negative")
        pos, neg = class_weights(y, w)
        if pos <= 0 or neg <= 0:
            raise _one_class(y, pos, neg, weights is not None)
        if self.needs_probabilities and (s.min() < 0 or s.max() > 1):
            raise FitError(
                f"method {self.name!r} needs scores in [0, 1], got range [{s.min():g}, {s.max():g}]"
            )
        totals = (pos, neg)  # frequency: Platt's targets count the actual weights
        if weights is not None:
            w = scaled_weights(w, weight_kind)
            pos, neg = class_weights(y, w)
            if pos <= 0 or neg <= 0:
                raise FitError(
                    f"the {'positive' if pos <= 0 else 'negative'} rows' weights are all below 2^-600 "
                    "times the largest weight: too small to fit beside it",
                    hint="check --weight-col",
                )
            if weight_kind == "importance":
                totals = (pos, neg)
            elif self.resamples_rows:
                s, y, w, features = self._expand_counts(s, y, w, features)
        targets = platt_values(y, *totals) if self.params.get("platt_correction") else y
        self._fit(s, targets, w, features)
        self._fitted = True
        return self

    def _expand_counts(self, s, y, w, features):
        """Whole-number frequency weights as duplicated rows, so a resampling fit sees k rows."""
        if not np.all(w == np.floor(w)) or np.all(w == 1):
            return s, y, w, features
        total = float(np.sum(w))
        if total > max(EXPAND_LIMIT, s.size):
            warnings.warn(
                f"{self.name}: the weights sum to {total:g} rows, more than {EXPAND_LIMIT} to expand; "
                "rows are resampled in proportion to their weights instead",
                CalibWarning,
                stacklevel=3,
            )
            return s, y, w, features
        k = w.astype(np.int64)
        if features is not None:
            features = {name: np.repeat(np.asarray(col), k) for name, col in features.items()}
        return np.repeat(s, k), np.repeat(y, k), np.ones(int(k.sum())), features

    def predict(self, scores: Any, features: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Calibrated probabilities in [0, 1] for new scores.

        Overflow is silenced: a huge score times a slope is inf and its sigmoid exactly 0 or 1,
        which is right, and numpy's warning would only put two lines of noise on stderr.
        """
        self._check_fitted()
        s = as_float_array(scores, "scores")
        with np.errstate(over="ignore", under="ignore"):
            out = np.asarray(self._predict(s, features), dtype=np.float64)
        if out.flags.writeable and out.flags.owndata and not np.may_share_memory(out, s):
            return np.clip(out, 0.0, 1.0, out=out)  # the method's own fresh array: no second n-long one
        return np.clip(out, 0.0, 1.0)

    def get_state(self) -> dict[str, Any]:
        """The minimal fitted state (JSON-able after numpy arrays become lists)."""
        self._check_fitted()
        return self._get_state()

    @classmethod
    def from_state(cls, params: Mapping[str, Any], state: Mapping[str, Any]) -> "Calibrator":
        """Rebuild a fitted calibrator from saved params and state, refusing a state that breaks
        the class's `state_spec` or gives predictions a fitted map cannot (MapError)."""
        obj = cls(**dict(params))
        if cls.state_spec is None:
            raise MapError(f"{cls.name} declares no state_spec: its maps cannot be loaded")
        obj._set_state(cls.state_spec.validate(cls, obj.params, state))
        obj._fitted = True
        obj._check_probe()
        return obj

    def _check_probe(self) -> None:
        """Predictions on PROBE_SCORES must be finite, in [0, 1], monotone where promised."""
        cat, num = self.input_features()
        n = PROBE_SCORES.size
        features = {**{c: np.full(n, "", dtype=object) for c in cat}, **{c: np.zeros(n) for c in num}}
        with np.errstate(all="ignore"):
            p = self.predict(PROBE_SCORES, features or None)
        bad = np.flatnonzero(~((p >= 0) & (p <= 1)))
        if bad.size:
            raise MapError(f"{self.name} map predicts {p[bad[0]]!r} at score {PROBE_SCORES[bad[0]]:g}, "
                           "not a probability", hint="the map file is damaged or edited: fit it again")
        drop = np.flatnonzero(np.diff(p) < -1e-12)
        if self.monotone and drop.size:
            i = int(drop[0])
            raise MapError(f"{self.name} map is not monotone: it predicts {p[i]:.6g} at score "
                           f"{PROBE_SCORES[i]:g} but {p[i + 1]:.6g} at {PROBE_SCORES[i + 1]:g}",
                           hint="the map file is damaged or edited: fit it again")

    def summary(self) -> dict[str, Any]:
        """Key fitted values for the fit report and the map's training block."""
        return {}

    def input_features(self) -> tuple[list[str], list[str]]:
        """(categorical, numeric) feature columns `predict` needs; none for score-only maps."""
        return [], []

    def _check_fitted(self) -> None:
        if not self._fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit first")

    # Subclasses implement these four.
    def _fit(self, s: np.ndarray, y: np.ndarray, w: np.ndarray, features: Mapping[str, np.ndarray] | None) -> None:
        raise NotImplementedError

    def _predict(self, s: np.ndarray, features: Mapping[str, np.ndarray] | None) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

