"""Action plugin in front of the openmpi_facts module (library/openmpi_facts.py).

With a prefix, ompi_info runs through the node's shell (as the task's user) and its output is
parsed here, by the same parser the module uses (module_utils/mnc_ompi_info.py): the same
facts without a Python start on the node. Without a prefix, with an environment, or where
ompi_info fails or its output does not parse, the module runs and says what went wrong.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_ompi_info
import mnc_shell


class ActionModule(mnc_shell.ShellFront):
    MODULE = "openmpi_facts"

    def look(self, args):
        prefix = args.get("prefix")
        if not isinstance(prefix, str) or not prefix.startswith("/") or set(args) - {"prefix", "environment"}:
            return None
        if args.get("environment"):
            return None
        argv = [f"{prefix.rstrip('/')}/bin/ompi_info", "--parsable", "--all"]
        look = self.shell(shlex.join(argv))
        if look["rc"] != 0:
            return None
        try:
            facts = mnc_ompi_info.parse_ompi_info(look["stdout"])
        except mnc_ompi_info.OmpiInfoParseError:
            return None
        return {"cmd": argv, "ansible_facts": {"openmpi": facts}}
