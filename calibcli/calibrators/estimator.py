"""`Estimator`: what every calibrator shares, binary (`base.Calibrator`) or K-class
(`kclass.ClassCalibrator`): its name, its declared parameters, and the one path by which
parameter values and the seed reach it.

A parameter value is checked by its `Param` (`requests.params`) whether it comes from Python,
from `--param key=value` (the text converted by the Param first), from `--seed`, or from a saved
map: `__init__` takes the defaults, `configured` the user's values, `set_params` both.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from calibcli.errors import ParamError, UsageError
from calibcli.calibrators.params import Param


class Estimator:
    """A calibrator's parameters: declared (`params`, a tuple of `Param`), checked, stored in
    `self.params` (every declared name, defaults filled in)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    kind: ClassVar[str] = ""  # "binary" or "kclass" (calibcli.kinds)

    def __init__(self, **params: Any):
        self.params: dict[str, Any] = {}
        declared = self.declared_params()
        self.set_params(**{p.name: params.get(p.name, p.default) for p in declared},
                        **{k: v for k, v in params.items() if k not in {p.name for p in declared}})

    def declared_params(self) -> tuple[Param, ...]:
        """The Params this instance takes (one-vs-rest: those of its binary method too)."""
        return type(self).params

    def set_params(self, **params: Any) -> "Estimator":
        """Check (names and values, each by its Param) and set parameters; returns self."""
        declared = {p.name: p for p in self.declared_params()}
        unknown = [key for key in sorted(params) if key not in declared]
        if unknown:
            raise ParamError(f"method {self.name!r} has no parameter {unknown[0]!r}",
                             hint=f"its parameters: {', '.join(declared) or 'none'} (see `calib methods`)")
        self.params.update({key: declared[key].check(value) for key, value in params.items()})
        self._configured()
        return self

    def _configured(self) -> None:
        """What follows from the parameters once set (a subclass's hook)."""

    def configured(self, params: Mapping[str, Any] | None = None, *, texts: bool = False,
                   seed: int | None = None) -> "Estimator":
        """This calibrator with the user's parameters set: typed values, or with `texts` the
        `--param` texts (each converted by its Param; text that is not of the type is left for
        the check to refuse), and `seed` (`--seed`, already range-checked) where the method
        samples. The one path parameters reach a calibrator by, for every door."""
        declared = {p.name: p for p in self.declared_params()}
        values = {key: declared[key].parse(value) if texts and key in declared else value
                  for key, value in dict(params or {}).items()}
        if seed is not None:
            if "seed" not in declared:
                raise UsageError(f"method {self.name!r} is deterministic and takes no --seed")
            if "seed" in values:
                raise UsageError(f"--seed {seed} and --param seed={values['seed']} both set the seed",
                                 hint="give only one of them")
            values["seed"] = seed
        return self.set_params(**values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params.items())})"


__all__ = ["Estimator"]
