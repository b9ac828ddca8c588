"""calibcli: calibrate a classifier's scores (binary or K classes) from the command line or from Python.

The Python API (`calibcli.fit`, `load_map`, `save_map`, `evaluate`, `methods`) is loaded on
first use, so `import calibcli` stays cheap for the CLI; the scikit-learn estimator is
`calibcli.sklearn.Calibrator`.

Modules that moved into packages keep their old names for one release, with a FutureWarning
(`calibcli/_moved.py`); `docs/layout.md` describes the packages.
"""

from typing import Any

from calibcli import _moved  # noqa: F401  (old module names import, with a FutureWarning)
from calibcli._version import __version__

__all__ = ["compare", "evaluate", "fit", "load_map", "methods", "save_map"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from calibcli import api

        return getattr(api, name)
    raise AttributeError(f"module 'calibcli' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (`__all__`, loaded on first use) and `__version__`, for dir() and tab completion."""
    return sorted({*__all__, "__version__", *(k for k in globals() if k.startswith("__") and k.endswith("__"))})
