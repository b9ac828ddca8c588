"""`python -m calibcli` runs the `calib` command."""

from calibcli.cli.app import main

main()
