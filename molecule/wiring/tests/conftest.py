"""The fault and bad-input battery's hooks (tests/unit/mnc_battery.py) for this scenario's cases."""


from mnc_battery import *  # noqa: F403
