"""One-vs-rest: any score-only binary method as a K-class calibrator.

Column k of the scores, as given (a probability, or a logit under score kind "logit"), is
calibrated against 1[y = k] by its own binary map; each row of the K calibrated columns is
then divided by its sum (a row of zeros becomes uniform), as scikit-learn's
`CalibratedClassifierCV` does for more than two classes (Zadrozny & Elkan 2002).

A class with no rows in the calibration set has no binary map: its column is the constant
1 / (W + 2) (W the summed weight of the rows), the Laplace estimate of a class never seen in
W rows. The state holds each class's binary state under `k<j>.<field>`, or the number `k<j>`
for such a class, so a Parquet map stores every numeric list as its own column.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Mapping

import numpy as np

from calibcli.calibrators.base import ScoreCalibrator
from calibcli.calibrators.kclass import KCLASS_SCORE_KIND, MAX_CLASSES, ClassCalibrator
from calibcli.calibrators.registry import get, register_one_vs_rest
from calibcli.errors import CalibError, MapError, ParamError, UsageError
from calibcli.calibrators.params import Param

_KEY = re.compile(r"k(0|[1-9][0-9]{0,5})(?:\.(.+))?\Z")


@register_one_vs_rest
class OneVsRest(ClassCalibrator):
    """A score-only binary method fitted on each class column against the rest."""

    uses_logits = False  # each column is given to the binary method as it is
    classes = "one-vs-rest"
    one_vs_rest = True

    def __init__(self, method_name: str, params: Mapping[str, Any] | None = None):
        binary = get(method_name)
        if not issubclass(binary, ScoreCalibrator):
            raise UsageError(f"method {method_name!r} cannot calibrate K classes one-vs-rest "
                             "(it is not a score-only binary method)")
        self.binary = binary
        self.name = method_name  # type: ignore[misc]
        self.description = f"one-vs-rest {binary.description}"  # type: ignore[misc]
        self.maps_: list[Any] = []
        super().__init__(**dict(params or {}))

    def _configured(self) -> None:
        if self.score_kind == "logit" and "score_kind" not in self._binary_params and self.binary.needs_probabilities:
            raise ParamError(f"method {self.name!r} needs probabilities in [0, 1]: it cannot take "
                             "logits one-vs-rest", hint="pass probabilities, or use another method")

    @property
    def _binary_params(self) -> dict[str, Any]:
        """The binary method's parameters (its score_kind that of the K columns, where it has one)."""
        own = {p.name for p in self.binary.params}
        return {k: v for k, v in self.params.items() if k in own}

    def declared_params(self) -> tuple[Param, ...]:
        own = tuple(p for p in self.binary.params if p.name != "score_kind")
        return (*own, KCLASS_SCORE_KIND)

    def _fit(self, z, y, w):
        ones = np.ones(y.size) if w is None else w
        total = float(ones.sum())
        self.maps_ = []
        params = self._binary_params
        blank = self.binary(**{k: v for k, v in params.items() if k != "seed"})
        blank.params.update({k: v for k, v in params.items() if k == "seed"})  # checked once, at the door
        for k in range(int(self.n_classes or 0)):
            target = (y == k).astype(np.float64)
            if not np.any(target):
                self.maps_.append(1.0 / (total + 2.0))
                continue
            cal = copy.deepcopy(blank)
            self.maps_.append(cal.fit(np.ascontiguousarray(z[:, k]), target, sample_weight=w,
                                      weight_kind=self.weight_kind_))

    def _predict(self, z):
        out = np.empty(z.shape)
        for k, cal in enumerate(self.maps_):
            out[k] = cal if isinstance(cal, float) else cal.predict(z[k])
        return out

    def _get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for k, cal in enumerate(self.maps_):
            if isinstance(cal, float):
                state[f"k{k}"] = cal
            else:
                state.update({f"k{k}.{key}": value for key, value in cal.get_state().items()})
        return state

    @classmethod
    def from_state(cls, params: Mapping[str, Any], state: Mapping[str, Any],
                   method: str | None = None) -> "OneVsRest":
        """Rebuild from saved params and state; `method` is the binary method's name."""
        if method is None:
            raise MapError("a one-vs-rest map must name its binary method")
        obj = cls(method, params)
        k = state.get("n_classes")
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= MAX_CLASSES:
            raise MapError(f"{method} one-vs-rest map state n_classes = {k!r:.40} is not a class count in "
                           f"[2, {MAX_CLASSES}]", hint="the map file is damaged or edited: fit it again")
        groups: dict[int, Any] = {}
        for key, value in state.items():
            match = _KEY.match(key) if key != "n_classes" else None
            if key == "n_classes":
                continue
            if match is None or int(match.group(1)) >= k:
                raise MapError(f"{method} one-vs-rest map state {key!r:.40} is not a field k<class>.<name> "
                               f"of a class below {k}", hint="the map file is damaged or edited: fit it again")
            j, field = int(match.group(1)), match.group(2)
            if field is None:
                groups[j] = _constant(method, key, value, groups.get(j))
            elif isinstance(groups.setdefault(j, {}), dict):
                groups[j][field] = value
            else:
                raise MapError(f"{method} one-vs-rest map state has both k{j} and {key!r:.40}")
        missing = [j for j in range(k) if j not in groups]
        if missing:
            raise MapError(f"{method} one-vs-rest map has {k} classes but no state for class {missing[0]}",
                           hint="the map file is damaged or edited: fit it again")
        obj.n_classes = k
        obj.maps_ = [groups[j] if isinstance(groups[j], float) else obj._binary_from_state(j, groups[j])
                     for j in range(k)]
        obj.check_probe()
        return obj

    def _binary_from_state(self, j: int, state: dict[str, Any]) -> Any:
        try:
            return self.binary.from_state(self._binary_params, state)
        except CalibError as exc:
            raise MapError(f"class {j}: {exc.message}", hint=exc.hint) from None

    def summary(self) -> dict[str, Any]:
        return {"one_vs_rest": self.name, "classes_without_rows": sum(isinstance(c, float) for c in self.maps_)}


def _constant(method: str, key: str, value: Any, before: Any) -> float:
    """The constant probability of a class that had no rows, checked."""
    if before is not None:
        raise MapError(f"{method} one-vs-rest map state has both {key} and {key}.<field> entries")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise MapError(f"{method} one-vs-rest map state {key} = {value!r:.40} is not a probability",
                       hint="the map file is damaged or edited: fit it again")
    return float(value)
