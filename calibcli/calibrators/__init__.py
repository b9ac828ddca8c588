"""Calibrator families. Each module registers its classes; adding a method = one module + one line here."""

from calibcli.calibrators import (  # noqa: F401  (registration)
    bayes_iso, bbq, beta, binning, boot, enir, field_aware, ilps, isotonic, logistic, spline, venn_abers,
)
from calibcli.calibrators.base import Calibrator, FeatureCalibrator, ScoreCalibrator
from calibcli.calibrators.registry import available, create, get, register
from calibcli.options import Param

__all__ = ["Calibrator", "FeatureCalibrator", "Param", "ScoreCalibrator", "available", "create", "get", "register"]
