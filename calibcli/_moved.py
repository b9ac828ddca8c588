"""Old names of modules that moved into packages: they import for one release, with a
FutureWarning (`MOVED`); `docs/layout.md` describes the packages."""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any, Callable

MOVED = {  # old module name -> where it lives now
    "calibcli.bounds": "calibcli.requests.bounds",
    "calibcli.classmap": "calibcli.maps.classmap",
    "calibcli.commands": "calibcli.cli",
    "calibcli.compare": "calibcli.fitting.compare",
    "calibcli.console": "calibcli.io.console",
    "calibcli.export_kclass": "calibcli.export.kclass",
    "calibcli.newton": "calibcli.numeric.newton",
    "calibcli.options": "calibcli.calibrators.params",
    "calibcli.pava": "calibcli.numeric.pava",
    "calibcli.pooling": "calibcli.numeric.pooling",
    "calibcli.progress": "calibcli.io.progress",
    "calibcli.strictjson": "calibcli.maps.strictjson",
    "calibcli.summary": "calibcli.fitting.summary",
    "calibcli._lookup": "calibcli.numeric.lookup",
    "calibcli.evaluation.builder": "calibcli.evaluation.state.builder",
    "calibcli.evaluation.corp": "calibcli.evaluation.metrics.corp",
    "calibcli.evaluation.diagnostics": "calibcli.evaluation.metrics.diagnostics",
    "calibcli.evaluation.evaluate": "calibcli.evaluation.driver",
    "calibcli.evaluation.figures": "calibcli.evaluation.render.figures",
    "calibcli.evaluation.gof": "calibcli.evaluation.metrics.gof",
    "calibcli.evaluation.html_report": "calibcli.evaluation.render.html",
    "calibcli.evaluation.intervals": "calibcli.evaluation.metrics.intervals",
    "calibcli.evaluation.kclass_metrics": "calibcli.evaluation.metrics.kclass",
    "calibcli.evaluation.kclass_state": "calibcli.evaluation.state.kclass",
    "calibcli.evaluation.kernels": "calibcli.evaluation.metrics.kernels",
    "calibcli.evaluation.plot": "calibcli.evaluation.render.plot",
    "calibcli.evaluation.prefix": "calibcli.evaluation.metrics.prefix",
    "calibcli.evaluation.report": "calibcli.evaluation.render.report",
    "calibcli.evaluation.selection": "calibcli.evaluation.metrics.selection",
    "calibcli.evaluation.smooth": "calibcli.evaluation.metrics.smooth",
    "calibcli.evaluation.views": "calibcli.evaluation.render.views",
}


def _moved_warning(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old name will be removed in the next release",
                  FutureWarning, stacklevel=3)


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of a moved module's old name give the module at its new name, with a FutureWarning."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        _moved_warning(module.__name__, MOVED[module.__name__])
        moved = importlib.import_module(MOVED[module.__name__])
        name = module.__name__.rpartition(".")[2]
        if module.__name__.count(".") == 1 and name in sys.modules["calibcli"].__all__:  # `calibcli.compare`: now also a function
            moved = _CallableModule(moved, name)
        sys.modules[module.__name__] = moved  # what the import returns


class _CallableModule(type(sys)):  # type: ignore[misc]
    """An old module name that is now a function of the API too (`calibcli.compare`): the import
    binds it on the package, so it must stay callable there, and keep the module's names."""

    def __init__(self, module: Any, function: str):
        super().__init__(module.__name__, module.__doc__)
        self.__dict__["_moved_to"], self.__dict__["_function"] = module, function

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_moved_to"], name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the package's own lazy look-up: the import bound this module over the function's name
        function = vars(sys.modules["calibcli"])["__getattr__"](self.__dict__["_function"])
        return function(*args, **kwargs)


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def forward(package: str, module: str) -> Callable[[str], Any]:
    """A package's `__getattr__` giving the names of the module that used to stand at the package's
    name (`calibcli.evaluation.metrics.log_loss` is now in `.binary`), with a FutureWarning."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")  # a submodule: imported as itself
        value = getattr(importlib.import_module(module), name, None)
        if value is None or isinstance(value, type(sys)):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        _moved_warning(f"{package}.{name}", f"{module}.{name}")
        setattr(sys.modules[package], name, value)  # warned once
        return value

    return __getattr__
