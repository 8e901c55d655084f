"""Which of a role's distribution packages are not installed yet.

Every stage's fact gathering runs /etc/ansible/facts.d/mncluster-packages.fact
(the common role installs it): dpkg's installed packages, as
``ansible_local["mncluster-packages"].installed``: one string of names
separated by spaces (a list from an older fact is read too). One string, not a
list: Ansible copies every fact of a node for every task it runs there, and a
string of a thousand names is one object to copy, a list a thousand. A role's
apt task is skipped
when none of its packages is missing, so that a re-run does not pay for
apt's cache (a second or more per task and node) to learn what dpkg already
said. Anything this cannot judge counts as missing, and apt decides:

* no such fact (a node the common role has not set up yet, a node without
  dpkg): every name is missing;
* a name with a version or a release (``pkg=1.2*``, ``pkg/bookworm``) or a
  glob: missing (apt compares versions; this does not);
* ``pkg:amd64``: judged by its name (the fact lists names without architecture).

The fact is read when the play gathers facts: a package an earlier task of
the same run installed may still count as missing (apt then runs and says
ok); one removed during the run is not seen (no role removes a package
another installs).
"""

from __future__ import annotations

_NOT_A_PLAIN_NAME = set("=/*?[]<> ")


def missing_packages(names, local_facts=None):
    """``names`` (a string or a list) that the node's package fact does not list as installed."""
    if isinstance(names, str):
        names = [names]
    names = [str(name) for name in (names or [])]
    record = (local_facts or {}).get("mncluster-packages") if isinstance(local_facts, dict) else None
    installed = record.get("installed") if isinstance(record, dict) else None
    if isinstance(installed, str):
        installed = installed.split()
    if not isinstance(installed, list):
        return names
    have = {str(name) for name in installed}
    missing = []
    for name in names:
        if _NOT_A_PLAIN_NAME & set(name) or name.split(":", 1)[0] not in have:
            missing.append(name)
    return missing
