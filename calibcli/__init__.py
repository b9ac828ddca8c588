"""calibcli: calibrate a binary classifier's scores from the command line or from Python.

The Python API (`calibcli.fit`, `load_map`, `save_map`, `evaluate`, `methods`) is loaded on
first use, so `import calibcli` stays cheap for the CLI; the scikit-learn estimator is
`calibcli.sklearn.Calibrator`.
"""

from typing import Any

from calibcli._version import __version__

__all__ = ["evaluate", "fit", "load_map", "methods", "save_map"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from calibcli import api

        return getattr(api, name)
    raise AttributeError(f"module 'calibcli' has no attribute {name!r}")
