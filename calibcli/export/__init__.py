"""Using a saved map outside calibcli: `calib export --sql`."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.export.sql")  # the names of the old calibcli.export module
