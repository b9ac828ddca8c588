"""The pictures of the documentation, made from the bundled data: `python docs/make_images.py`.

docs/images/reliability.png: the CORP reliability diagram of the bundled test scores before
and after an isotonic map fitted on the bundled calibration set (`calib evaluate --plot`).
Needs matplotlib (`pip install -e ".[plot]"`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"


def calib(*args: str, cwd: Path) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1767225600"}
    subprocess.run([sys.executable, "-m", "calibcli", "-q", *args], cwd=cwd, env=env, check=True)


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in ("cal.csv", "test.csv"):
            shutil.copy(ROOT / "examples" / "data" / name, work / name)
        calib("fit", "--method", "isotonic", "cal.csv", "-o", "map.json", cwd=work)
        calib("apply", "map.json", "test.csv", "-o", "test_calibrated.csv", cwd=work)
        calib("evaluate", "test_calibrated.csv", "--prob-col", "score", "--prob-col", "calibrated",
              "--bands", "100", "--seed", "0", "--plot", "reliability.png", cwd=work)
        shutil.copy(work / "reliability.png", IMAGES / "reliability.png")
    print(IMAGES / "reliability.png")


if __name__ == "__main__":
    main()
