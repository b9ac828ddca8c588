"""Calibrator families. Each module registers its classes; adding a method = one module + one line here."""

from calibcli.calibrators import (  # noqa: F401  (registration)
    bayes_iso, bbq, beta, binning, boot, enir, field_aware, ilps, isotonic, logistic, matrix_scaling, multicalibration,
    onevsrest, spline, temperature, venn_abers,
)
from calibcli.calibrators.base import Calibrator, FeatureCalibrator, ScoreCalibrator
from calibcli.calibrators.kclass import ClassCalibrator
from calibcli.calibrators.onevsrest import OneVsRest
from calibcli.calibrators.registry import available, create, get, register
from calibcli.calibrators.params import Param

__all__ = ["Calibrator", "ClassCalibrator", "FeatureCalibrator", "OneVsRest", "Param", "ScoreCalibrator", "available", "create", "get", "register"]
