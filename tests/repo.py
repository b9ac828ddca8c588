"""Where the repository's files are, for test modules at any depth of tests/."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
DATA = REPO / "examples" / "data"
PACKAGE = REPO / "calibcli"
