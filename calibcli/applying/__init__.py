"""Using a saved map on score files: `calib apply`, streaming."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.applying.stream")  # the names of the old calibcli.applying module
