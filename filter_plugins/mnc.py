"""Jinja filters over mncluster's module_utils: one implementation of each idea.

Playbooks and roles reach the pure helpers in module_utils/ through these
filters (ansible.cfg: filter_plugins = filter_plugins), so a rule such as
"an artifact override replaces the record's source" or "what a hostfile
lists" lives in Python once, with its unit tests, and nowhere in Jinja.
"""

import ipaddress
import sys
from pathlib import Path

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_artifacts
import mnc_hostfile


def mnc_artifact_source(artifact, overrides=None):
    """The artifact record after mnc_artifact_overrides: ``record | mnc_artifact_source(overrides)``."""
    return mnc_artifacts.apply_override(artifact, overrides)


def mnc_hostfile_hosts(text):
    """``[{host, slots}]`` of an MPI hostfile's text, in file order."""
    return [{"host": host, "slots": slots} for host, slots in mnc_hostfile.parse_hostfile(text)]


def mnc_network(address, prefix):
    """The network an address is on, as CIDR: ``'10.0.0.11' | mnc_network(24)`` is ``10.0.0.0/24``."""
    return str(ipaddress.ip_interface(f"{address}/{int(prefix)}").network)


class FilterModule:
    def filters(self):
        return {
            "mnc_artifact_source": mnc_artifact_source,
            "mnc_hostfile_hosts": mnc_hostfile_hosts,
            "mnc_network": mnc_network,
        }
