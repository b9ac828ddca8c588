"""The declared shape of a saved calibrator state (`StateSpec`, `Field`) and its checks.

A loaded map's state is checked field by field before any prediction: types, finiteness,
bounds, order and sizes, each problem a one-line MapError naming the method, field and index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain
from typing import Any, Callable, Mapping

import numpy as np

from calibcli.errors import MapError
from calibcli.calibrators.params import bounds_text

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

    def validate(self, cls: type, params: Mapping[str, Any], state: Mapping[str, Any]) -> dict[str, Any]:
        """Checked and converted state values, or a MapError (`cls`: the calibrator class)."""
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
            fail(f.name, None, value, f"is outside {bounds_text(f.low, f.high)}")
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
        what = "is not a probability in [0, 1]" if f.unit else f"is outside {bounds_text(low, high)}"
        fail(name, None if scalar else i, arr[i], what)


def _check_order(f: Field, arr: np.ndarray, monotone: bool, fail: Callable) -> None:
    order = "nondecreasing" if f.order == "monotone" and monotone else f.order
    if order not in ("increasing", "nondecreasing") or arr.size < 2:
        return
    bad = np.flatnonzero(arr[1:] <= arr[:-1] if order == "increasing" else arr[1:] < arr[:-1])
    if bad.size:
        i = int(bad[0]) + 1
        rule = "strictly increasing" if order == "increasing" else "non-decreasing (the method is monotone)"
        fail(f.name, i, arr[i], f"is not above {f.name!r}[{i - 1}] = {_short(arr[i - 1])}: values must be {rule}")
