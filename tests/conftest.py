"""Make tests/contract.py importable as `contract` from every test module; under
`CALIBCLI_TEST_PROFILE=ci` (set by .ci/run) hypothesis draws the same examples on every run, so
CI gives the verdict a developer saw locally with that profile (random draws otherwise)."""

import os
import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CALIBCLI_TEST_PROFILE"):
    settings.load_profile(os.environ["CALIBCLI_TEST_PROFILE"])
