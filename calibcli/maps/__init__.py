"""Saved maps: the versioned envelope (JSON or Parquet), K-class maps, strict JSON."""

from calibcli import _forward

__getattr__ = _forward(__name__, "calibcli.maps.envelope")  # the names of the old calibcli.maps module
