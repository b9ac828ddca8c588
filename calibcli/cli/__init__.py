"""The `calib` command: `app` (the Typer application and `main`, its entry point), one module of
commands per topic (`fit`, `apply`, `evaluate`), and what they share (`shared`). The commands
import the library inside each command, so that start-up stays cheap."""

from calibcli._moved import forward

__getattr__ = forward(__name__, "calibcli.cli.app")  # `calibcli.cli.main`, the entry point until 0.2
