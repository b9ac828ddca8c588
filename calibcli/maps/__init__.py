"""Saved maps: the versioned envelope (JSON or Parquet), K-class maps, strict JSON."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.maps.envelope")  # the names of the old calibcli.maps module
