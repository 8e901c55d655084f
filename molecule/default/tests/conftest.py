"""The fault and bad-input battery's hooks (tests/unit/mnc_battery.py) for this scenario's cases."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "unit"))
from mnc_battery import *  # noqa: F403
