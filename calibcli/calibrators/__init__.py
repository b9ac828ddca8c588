"""Calibrator families. Each module registers its classes; adding a method = one module + one line here."""

from calibcli.calibrators import (  # noqa: F401  (registration)
    bayes_iso, bbq, beta, binning, boot, enir, field_aware, ilps, isotonic, logistic, spline, venn_abers,
)
from calibcli.calibrators.base import Calibrator, Param
from calibcli.calibrators.registry import available, create, get, register

__all__ = ["Calibrator", "Param", "available", "create", "get", "register"]
