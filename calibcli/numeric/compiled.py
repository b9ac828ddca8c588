"""The compiled kernels of `calibcli/numeric/_kernels.c` (built at install when a C compiler is
there), loaded with ctypes, which releases the GIL during a call. Every caller keeps a numpy
path that gives the same bits, used when the kernels are missing."""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from typing import Any, Sequence


@functools.cache
def _library() -> Any:
    if os.environ.get("CALIBCLI_NO_KERNEL", "") not in ("", "0"):
        return None
    spec = importlib.util.find_spec("calibcli.numeric._kernels")
    if spec is None or not spec.origin:
        return None
    try:
        return ctypes.CDLL(spec.origin)
    except OSError:
        return None


def functions(signatures: dict[str, Sequence[Any]]) -> dict[str, Any] | None:
    """`calib_<name>` for each name, its argument types set and no result, or None: the library
    was not built (no C compiler at install), does not load, lacks a function, or
    CALIBCLI_NO_KERNEL=1 is set."""
    library = _library()
    if library is None:
        return None
    try:
        found = {name: getattr(library, "calib_" + name) for name in signatures}
    except AttributeError:
        return None
    for name, args in signatures.items():
        found[name].argtypes = list(args)
        found[name].restype = None
    return found


__all__ = ["functions"]
