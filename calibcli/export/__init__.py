"""Using a saved map outside calibcli: `calib export --sql`."""

from calibcli import _forward

__getattr__ = _forward(__name__, "calibcli.export.sql")  # the names of the old calibcli.export module
