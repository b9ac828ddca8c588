"""String-keyed registry of calibrator classes: the only place a method name is dispatched."""

from __future__ import annotations

from typing import Any, Mapping

from calibcli.calibrators.base import Calibrator, FeatureCalibrator, ScoreCalibrator
from calibcli.errors import UsageError

_REGISTRY: dict[str, type[Calibrator]] = {}


def register(cls: type[Calibrator]) -> type[Calibrator]:
    """Class decorator: make `cls` available as `calib fit --method <cls.name>`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if not issubclass(cls, (ScoreCalibrator, FeatureCalibrator)):
        raise ValueError(f"{cls.__name__} must derive from ScoreCalibrator or FeatureCalibrator")
    if cls.name in _REGISTRY:
        raise ValueError(f"method {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    """Registered method names, sorted."""
    return sorted(_REGISTRY)


def get(name: str) -> type[Calibrator]:
    """The class for a method name; unknown names get the closest match as a hint."""
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib  # only for this message

        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"unknown method {name!r}",
            hint=hint + "available methods: " + ", ".join(available()),
        ) from None


def create(name: str, params: Mapping[str, Any] | None = None) -> Calibrator:
    """An unfitted calibrator of method `name` with typed parameters."""
    return get(name)(**dict(params or {}))


def catalogue() -> list[tuple[str, str, list[str]]]:
    """(name, description and behaviour at 0/1, parameter lines) for every method, for `calib methods`."""
    out = []
    for name in available():
        cls = get(name)
        extremes = cls.default_extremes()
        description = f"{cls.description}; at 0/1: {extremes}" if extremes else cls.description
        out.append((name, description, [p.describe() for p in cls.params]))
    return out


def catalogue_json() -> list[dict[str, Any]]:
    """Every registered method as data, for `calib methods --json` and tools built on it."""
    return [{
        "name": name, "description": get(name).description, "extremes": get(name).default_extremes(),
        "monotone": get(name).monotone, "needs_probabilities": get(name).needs_probabilities,
        "uses_features": get(name).uses_features,
        "params": [{"name": p.name, "type": p.type.__name__, "default": p.default, "low": p.low,
                    "high": p.high, "choices": list(p.choices) if p.choices else None,
                    "optional": p.optional, "help": p.help} for p in get(name).params],
    } for name in available()]
