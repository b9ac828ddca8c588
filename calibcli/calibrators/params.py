"""Typed method options (`Param`) and the options several methods share.

Below every other calibcli module (it imports only `errors`), so the option bounds the CLI
checks (`calibcli.requests.bounds`) and the calibrators' contract read the same declarations without
importing each other. numpy is imported where a value is checked, not at import: the CLI reads
this module before any data.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from calibcli.errors import ParamError

SEED_MAX = 2**63 - 1

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
        """Convert the text after `key=` on the command line to the Param's type; the method's
        constructor checks the value (`check`), as it checks a value given in Python. Text that
        is not of the type is left as it is, for `check` to refuse."""
        raw = text.strip()
        if self.optional and raw.lower() in {"none", "auto", ""}:
            return None
        try:
            if self.type is bool:
                low = raw.lower()
                return low in _TRUE if low in _TRUE | _FALSE else text
            if self.type is int:
                return self._parse_int(raw)
            return float(raw) if self.type is float else raw
        except (ValueError, OverflowError):
            return text

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
        import numpy as np

        if value is None:
            if self.optional:
                return None
            raise ParamError(f"parameter {self.name!r} needs a value ({self._kind()})")
        if self.type is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise self._not_of_type(value)
            return bool(value)
        if self.type in (int, float):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                raise self._not_of_type(value)
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

    def _not_of_type(self, value: Any) -> ParamError:
        """A value that is not of the Param's type, from the command line's text, a saved map or
        Python: worded for all three (a map has no --param)."""
        kind = "true or false" if self.type is bool and not self.optional else self._kind()
        return ParamError(f"parameter {self.name!r} must be {kind}, got {value!r:.40}")

    def _kind(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        kind = {bool: "true/false", int: "an integer", float: "a number"}.get(self.type, "text")
        if self.low is not None or self.high is not None:
            kind += f" in {self.range_text()}"
        return kind + (" or 'auto'" if self.optional else "")

    def range_text(self) -> str:
        """`[low, high]`, integers written out exactly (a seed's 2**63 - 1 is not 9.22e+18)."""
        return bounds_text(self.low, self.high)

    def describe(self) -> str:
        """`name=default (kind): help`, for `calib methods`."""
        default = "auto" if self.default is None else str(self.default).lower() if self.type is bool else self.default
        return f"{self.name}={default} ({self._kind()}): {self.help}"


def bounds_text(low: float | None, high: float | None) -> str:
    """`[low, high]`, `...` for a missing bound; integers written out exactly."""
    def show(v: float | None) -> str:
        return "..." if v is None else str(v) if isinstance(v, int) else f"{v:g}"

    return f"[{show(low)}, {show(high)}]"


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
# `calib evaluate`'s metric settings, shared by its options and the metrics they set.
CALBIN_WINDOW = 100
ECE_BINS = 10
ECE_STRATEGIES = ("uniform", "quantile")
SQL_DIALECTS = ("ansi", "spark")  # `calib export --dialect`: how identifiers and strings are quoted
# `calib evaluate --step`: the metrics no bound from the bucketed p covers, n/a (null) there and
# refused as gates (docs/algorithms.md, "Evaluation state": what --step does to each metric)
COMPARED = ("log_loss", "brier", "ece", "calbin")  # `calib compare`: each fold's metrics, --metric picks one
KCLASS_COMPARED = ("log_loss", "brier", "top_label_ece", "classwise_ece")  # the same with --score-cols
SEED = Param("seed", int, 0, "random seed; the same seed gives the same map", low=0, high=SEED_MAX)
PROB_CLIP = 1e-12  # probability clip before logs and logits, float64 whatever the input dtype
SCORE_KIND = Param(
    "score_kind",
    str,
    "probability",
    "probability: scores in [0, 1] (clipped to [1e-12, 1-1e-12]); logit: log-odds ln(s/(1-s))",
    choices=("probability", "logit"),
)
