"""String-keyed registry of calibrator classes: the only place a method name is dispatched.

One namespace for both kinds (`calibcli.kinds`), each class declaring its `kind`: binary
methods (`Calibrator`: one score column) and native K-class methods (`ClassCalibrator`: K score
columns, e.g. `temperature`). `available()` lists the binary ones, `kclass_native()` the
K-class ones, `names()` both; `calibrator(name, kind, ...)` builds either kind's calibrator
with the user's parameters, the one path for every door (score-only binary methods take K
columns through one-vs-rest).

Every method class declares, besides `name`, `description` and `params`:

- `complexity` (int): its place in the simplicity order `calib compare` recommends by (the
  simplest of the methods tied with the best): the number of fitted parameters per class
  column for a map of fixed shape (logistic 2, beta 3), and for maps whose size grows with
  the data a rank above every fixed one (docs/algorithms.md, "Which method: the
  recommendation", has the whole table); 0 is the uncalibrated scores;
- `fitted` (str): what the fitted map holds, in words (`calib methods`);
- `aliases` (optional tuple of str): other names accepted wherever a method name is (`sigmoid`
  and `platt` for `logistic`); a map records the canonical `name`.
"""

from __future__ import annotations

from typing import Any, Mapping

from calibcli.calibrators.base import Calibrator, FeatureCalibrator, ScoreCalibrator
from calibcli.calibrators.kclass import ClassCalibrator
from calibcli.errors import UsageError

_REGISTRY: dict[str, Any] = {}  # every method, binary and K-class
_ONE_VS_REST: list[type[ClassCalibrator]] = []  # the one-vs-rest wrapper, once registered
_ALIASES: dict[str, str] = {}  # alias -> canonical method name


def register(cls: Any) -> Any:
    """Class decorator: make `cls` available as `calib fit --method <cls.name>`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if not issubclass(cls, (ScoreCalibrator, FeatureCalibrator, ClassCalibrator)):
        raise ValueError(f"{cls.__name__} must derive from ScoreCalibrator, FeatureCalibrator or ClassCalibrator")
    if cls.name in _REGISTRY or cls.name in _ALIASES:
        raise ValueError(f"method {cls.name!r} is registered twice")
    complexity = getattr(cls, "complexity", None)
    if not isinstance(complexity, int) or isinstance(complexity, bool) or complexity < 1:
        raise ValueError(f"{cls.__name__} declares no complexity (a positive int: its place in the simplicity order)")
    if not isinstance(getattr(cls, "fitted", None), str):
        raise ValueError(f"{cls.__name__} must declare `fitted`: what its map holds, in words")
    aliases = tuple(getattr(cls, "aliases", ()))
    if "none" in (cls.name, *aliases):
        raise ValueError("'none' is the uncalibrated scores' row of `calib compare`, not a method name")
    taken = [a for a in aliases if a in _REGISTRY or a in _ALIASES]
    if taken:
        raise ValueError(f"alias {taken[0]!r} of {cls.name!r} is already a method name or alias")
    _REGISTRY[cls.name] = cls
    _ALIASES.update(dict.fromkeys(aliases, cls.name))
    return cls


def register_one_vs_rest(cls: type[ClassCalibrator]) -> type[ClassCalibrator]:
    """Class decorator for the one-vs-rest wrapper `kclass` builds for score-only methods."""
    _ONE_VS_REST[:] = [cls]
    return cls


def available() -> list[str]:
    """Registered binary method names (one score column), sorted."""
    return sorted(name for name, cls in _REGISTRY.items() if cls.kind == "binary")


def kclass_native() -> list[str]:
    """Registered native K-class method names, sorted."""
    return sorted(name for name, cls in _REGISTRY.items() if cls.kind == "kclass")


def names() -> list[str]:
    """Every registered method name, binary and K-class, sorted."""
    return sorted(_REGISTRY)


def canonical(name: str) -> str:
    """The method name `name` stands for: itself, or the method it is an alias of."""
    return _ALIASES.get(name, name)


def aliases(name: str) -> list[str]:
    """The aliases of method `name` (canonical), sorted."""
    return sorted(a for a, to in _ALIASES.items() if to == name)


def get(name: str) -> Any:
    """The class for a method name or alias (a `Calibrator` or a `ClassCalibrator`); unknown
    names get the closest match as a hint."""
    name = canonical(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib  # only for this message

        close = difflib.get_close_matches(name, [*names(), *_ALIASES], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"unknown method {name!r}",
            hint=hint + "available methods: " + ", ".join(names()),
        ) from None


def binary(name: str) -> type[Calibrator]:
    """The binary (one score column) class of method `name`; a UsageError for a K-class method."""
    cls = get(name)
    if cls.kind != "binary":
        raise UsageError(f"method {name!r} calibrates K class scores, not one score column",
                         hint="give the K score columns with --score-cols")
    return cls


def classes(name: str) -> str:
    """How method `name` takes K score columns: "native", "one-vs-rest" or "binary-only"."""
    cls = get(name)
    if cls.kind == "kclass":
        return "native"
    return "one-vs-rest" if issubclass(cls, ScoreCalibrator) and _ONE_VS_REST else "binary-only"


def kclass(name: str, params: Mapping[str, Any] | None = None) -> ClassCalibrator:
    """An unfitted K-class calibrator for method `name`: the native method, or one-vs-rest of a
    score-only binary method; a UsageError for a method that cannot take K columns."""
    name = canonical(name)
    kind = classes(name)
    if kind == "native":
        return _REGISTRY[name](**dict(params or {}))
    if kind == "binary-only":
        raise UsageError(f"method {name!r} takes one score column and cannot calibrate K classes",
                         hint="K-class methods: " + ", ".join(n for n in names() if classes(n) != "binary-only"))
    return _ONE_VS_REST[0](name, params)


def create(name: str, params: Mapping[str, Any] | None = None) -> Calibrator:
    """An unfitted calibrator of method `name` with typed parameters (a binary method, or a
    native K-class one)."""
    return get(name)(**dict(params or {}))


def calibrator(name: str, kind: str, params: Mapping[str, Any] | None = None, *, texts: bool = False,
               seed: int | None = None, score_kind: str = "probability") -> Any:
    """An unfitted calibrator of method `name` for scores of `kind` ("binary": one column;
    "kclass": K columns, of `score_kind`), with the user's parameters and seed set through
    `Estimator.configured` (`texts`: `--param` texts): the one path for fit and compare, CLI and
    Python alike."""
    cal = binary(name)() if kind == "binary" else kclass(name, {"score_kind": score_kind})
    return cal.configured(params, texts=texts, seed=seed)


def catalogue() -> list[tuple[str, str, list[str]]]:
    """(name, description and behaviour at 0/1, parameter lines) for every method, for `calib methods`."""
    out = []
    for name in names():
        cls = get(name)
        extremes = _extremes(cls)
        description = f"{cls.description}; at 0/1: {extremes}" if extremes else cls.description
        if classes(name) != "binary-only":
            description += f"; K classes: {classes(name)}"
        description += f"; fitted: {cls.fitted} (complexity {cls.complexity})"
        if aliases(name):
            description += f"; aliases: {', '.join(aliases(name))}"
        out.append((name, description, [p.describe() for p in cls.params]))
    return out


def _extremes(cls: Any) -> str:
    return "" if cls.kind == "kclass" else cls.default_extremes()


def catalogue_json() -> list[dict[str, Any]]:
    """Every registered method as data, for `calib methods --json` and tools built on it."""
    return [{
        "name": name, "aliases": aliases(name), "description": get(name).description,
        "extremes": _extremes(get(name)), "classes": classes(name),
        "complexity": get(name).complexity, "fitted": get(name).fitted,
        "monotone": get(name).monotone, "needs_probabilities": get(name).needs_probabilities,
        "uses_features": get(name).uses_features,
        "params": [{"name": p.name, "type": p.type.__name__, "default": p.default, "low": p.low,
                    "high": p.high, "choices": list(p.choices) if p.choices else None,
                    "optional": p.optional, "help": p.help} for p in get(name).params],
    } for name in names()]
