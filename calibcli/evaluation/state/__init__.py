"""Mergeable evaluation states (binary and K-class) and the builder that streams batches into one."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.evaluation.state.binary")  # the names of the old calibcli.evaluation.state module
