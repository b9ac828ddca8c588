"""Making maps: the fit pipeline, score summaries, and `compare` (which method)."""

from calibcli import _forward

__getattr__ = _forward(__name__, "calibcli.fitting.pipeline")  # the names of the old calibcli.fitting module
