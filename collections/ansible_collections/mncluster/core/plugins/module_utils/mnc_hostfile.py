"""What an OpenMPI hostfile lists: the one parser every check and the benchmark use.

Pure function, no Ansible imports. Used by module_utils/mnc_bench.py (the
benchmark's slot checks, strict), module_utils/mnc_verify_mpi.py (the acceptance
checks, lenient) and by Jinja as the ``mnc_hostfile_hosts`` filter
(plugins/filter/mnc.py). Unit-tested in tests/unit/test_hostfile.py.
"""

from __future__ import annotations

import re

_FIELD = re.compile(r"^(slots|max_slots|max-slots)=(\d+)$")


def parse_hostfile(text: str | None, strict: bool = True) -> list[tuple[str, int]]:
    """``[(host, slots)]`` in file order; comments (``#``) and blank lines are skipped.

    A host without ``slots=`` has 1 slot; ``max_slots=``/``max-slots=`` are
    accepted and do not change the slot count. A field that is none of these
    raises ValueError (with its line number) when ``strict``, and is ignored
    otherwise.
    """
    hosts = []
    for lineno, raw in enumerate((text or "").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        slots = 1
        for field in fields[1:]:
            m = _FIELD.match(field)
            if m is None:
                if strict:
                    raise ValueError(f"hostfile line {lineno}: cannot read {field!r}")
                continue
            if m.group(1) == "slots":
                slots = int(m.group(2))
        hosts.append((fields[0], slots))
    return hosts
