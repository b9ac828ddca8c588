"""Using a saved map on score files: `calib apply`, streaming."""

from calibcli import _forward

__getattr__ = _forward(__name__, "calibcli.applying.stream")  # the names of the old calibcli.applying module
