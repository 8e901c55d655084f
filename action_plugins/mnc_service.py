"""Action plugin: ansible.builtin.service, asking systemd first whether a service that is to be
started and enabled already is (documented in library/mnc_service.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ansible.plugins.action import ActionBase

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell


def _flag(value) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        name, state, enabled = args.get("name"), args.get("state"), args.get("enabled")
        lookable = (
            set(args) <= {"name", "state", "enabled"}
            and isinstance(name, str)
            and state in (None, "started")
            and (enabled is None or _flag(enabled))
            and (state, enabled) != (None, None)
        )
        if lookable:
            unit = shlex.quote(name)
            script = f"systemctl is-enabled {unit} 2>/dev/null; systemctl is-active {unit}"
            look = mnc_shell.run_script(self, mnc_shell.build_script(script, "/"))
            is_enabled, _, is_active = look["stdout"].partition("\n")
            if (is_active == "active" or state is None) and (is_enabled == "enabled" or enabled is None):
                result.update(changed=False, name=name, state="started" if is_active == "active" else None)
                if enabled is not None:
                    result["enabled"] = True
                return result
        done = self._execute_module("ansible.legacy.service", module_args=dict(args), task_vars=task_vars)
        result.update(done)
        return result
