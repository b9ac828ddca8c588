"""The `calib` commands by topic; `calibcli.cli` registers them on the app, in the order of
`calib --help`. They import the library inside each command, so that start-up stays cheap."""
