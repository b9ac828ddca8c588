"""Mergeable evaluation states (binary and K-class) and the builder that streams batches into one."""

from calibcli import _forward

__getattr__ = _forward(__name__, "calibcli.evaluation.state.binary")  # the names of the old calibcli.evaluation.state module
