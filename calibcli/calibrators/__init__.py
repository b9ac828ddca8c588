"""Calibrator families. Each module registers its classes; adding a method = one module + one line here."""

from calibcli.calibrators import bayes_iso, beta, binning, boot, enir, field_aware, ilps, isotonic, logistic, venn_abers  # noqa: F401  (registration)
from calibcli.calibrators.base import Calibrator, Param
from calibcli.calibrators.registry import available, create, get, register

__all__ = ["Calibrator", "Param", "available", "create", "get", "register"]
