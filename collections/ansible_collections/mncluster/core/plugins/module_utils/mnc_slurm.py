"""What roles/slurm's look found on a node, from its lines.

Pure functions, no Ansible imports. Used by Jinja as the ``mnc_slurm_seen`` filter
(plugins/filter/mnc.py) in roles/slurm/vars/main.yml, where the role's decisions (limits,
munge key, daemons, state directories, files set aside) read it: one short expression each,
instead of a Jinja loop over the look's lines that every worker compiled again for each name.
Unit-tested in tests/unit/test_mnc_slurm.py.
"""

from __future__ import annotations


def seen(lines) -> dict:
    """``{hw, limits, munge_key, munge_sum, units, dirs, exists}`` of the look's lines
    (``kind: rest``): ``hw`` (``slurmd -C``'s first line), ``limits`` (the hard nofile, memlock
    and stack limits), ``munge_key`` (``owner:group:mode sha256``), ``munge_sum`` (that sha256,
    empty without a key), ``units`` (unit -> ``active enabled``), ``dirs`` (path ->
    ``owner:group:mode:type``) and ``exists`` (the paths that exist). Other lines (the files'
    look) are left out."""
    out = {"hw": "", "limits": "", "munge_key": "", "munge_sum": "", "units": {}, "dirs": {}, "exists": []}
    for line in lines or []:
        kind, _, rest = str(line).partition(": ")
        name, _, value = rest.partition(" ")
        if kind in ("hw", "limits"):
            out[kind] = rest
        elif kind == "munge-key":
            out["munge_key"] = rest
            out["munge_sum"] = value
        elif kind == "unit":
            out["units"][name] = value.strip()
        elif kind == "dir":
            out["dirs"][name] = value
        elif kind == "exists":
            out["exists"].append(rest)
    return out
