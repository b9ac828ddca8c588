"""Making maps: the fit pipeline, score summaries, and `compare` (which method)."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.fitting.pipeline")  # the names of the old calibcli.fitting module
