"""Make tests/contract.py importable as `contract` from every test module."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
