"""calibcli: calibrate a binary classifier's scores from the command line or from Python."""

__version__ = "0.1.0"
