"""`python -m calibcli` runs the `calib` command."""

from calibcli.cli import main

main()
