"""Hooks shared by every test under tests/unit."""

from mnc_battery import *  # noqa: F403  (the fault and bad-input battery of issue 16)
