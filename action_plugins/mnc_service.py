"""Action plugin: ansible.builtin.service, asking systemd first whether a service that is to be
started and enabled already is (documented in library/mnc_service.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ansible.module_utils.parsing.convert_bool import boolean

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.service"

    def look(self, args):
        name, state, enabled = args.get("name"), args.get("state"), args.get("enabled")
        lookable = (
            set(args) <= {"name", "state", "enabled"}
            and isinstance(name, str)
            and state in (None, "started")
            and (enabled is None or boolean(enabled, strict=False))
            and (state, enabled) != (None, None)
        )
        if not lookable:
            return None
        unit = shlex.quote(name)
        look = self.shell(f"systemctl is-enabled {unit} 2>/dev/null; systemctl is-active {unit}")
        is_enabled, _, is_active = look["stdout"].partition("\n")
        if (state is not None and is_active != "active") or (enabled is not None and is_enabled != "enabled"):
            return None
        running = "started" if is_active == "active" else "stopped"
        return {"name": name, "state": running, "enabled": is_enabled == "enabled"}
