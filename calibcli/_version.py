"""The package version, in a module of its own so that any module can read it without
importing the package's public API (which would be an import cycle)."""

__version__ = "0.1.0"
