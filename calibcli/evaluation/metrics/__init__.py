"""The metric definitions: binary and K-class metrics, their chunked kernels, the CORP decomposition, smooth ECE, goodness-of-fit tests, intervals, selection."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.evaluation.metrics.binary")  # the names of the old calibcli.evaluation.metrics module
