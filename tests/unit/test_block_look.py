"""A role's look and mncluster.core.mnc_blocks_pending decide as ansible.builtin.blockinfile does.

A role loops its blockinfile task over the blocks mnc_blocks_pending names, so that a converged
node pays one skipped task, not a module run per block. If the filter said "the same" where the
builtin would change something, a converged node would keep a wrong block: so each case here
writes a real file, runs the real look with bash, and compares its verdict with the builtin's
own, run by real Ansible in check mode on the same file.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from ansible_collections.mncluster.core.plugins.filter.mnc import FilterModule
from ansible_env import run_module

FILTERS = FilterModule().filters()
LOOK, PENDING = FILTERS["mnc_blocks_look"], FILTERS["mnc_blocks_pending"]

MARKER = "# {mark} mncluster test"
BLOCK = "export PATH=/opt/x/bin:$PATH\nkey = välue\n"
SAME = f"# site line\n# BEGIN mncluster test\n{BLOCK}# END mncluster test\nlast line\n"

# name: (the file's text, or None for no file; the block's state; whether blockinfile changes it;
# whether the look says it differs). The look may say "differs" where the builtin changes nothing
# (the block twice: the builtin rewrites the last one in place), never the other way round.
CASES = {
    "same": (SAME, "present", False),
    "same-at-the-top": (f"# BEGIN mncluster test\n{BLOCK}# END mncluster test\n", "present", False),
    "content": (SAME.replace("/opt/x", "/opt/y"), "present", True),
    "missing-file": (None, "present", True),
    "no-block": ("# site line\n", "present", True),
    "no-end": ("# BEGIN mncluster test\n" + BLOCK, "present", True),
    "end-first": (f"# END mncluster test\n{BLOCK}# BEGIN mncluster test\n", "present", True),
    "twice": (SAME + SAME, "present", False, True),
    "an-older-copy-after": (SAME + SAME.replace("/opt/x", "/opt/y"), "present", True),
    "crlf-marker": (SAME.replace("# END mncluster test\n", "# END mncluster test\r\n"), "present", True),
    "end-without-newline": (f"# BEGIN mncluster test\n{BLOCK}# END mncluster test", "present", True),
    "extra-line-in-block": (SAME.replace(BLOCK, BLOCK + "more\n"), "present", True),
    "absent-gone": ("# site line\n", "absent", False),
    "absent-file-missing": (None, "absent", False),
    "absent-there": (SAME, "absent", True),
    "absent-no-final-newline": ("# site line", "absent", True),
}


def _item(path, state, mode="0644"):
    item = {"path": str(path), "marker": MARKER, "block": BLOCK, "state": state}
    if mode:
        item["mode"] = mode
    return item


def _look(items):
    out = subprocess.run(["bash", "-c", LOOK(items)], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def _builtin_changes(item):
    args = {k: v for k, v in item.items()}
    args["create"] = True
    result = run_module("ansible.builtin.blockinfile", args, "--check")
    assert "changed" in result and not result.get("failed"), result
    return result["changed"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_look_finds_what_blockinfile_would_change(tmp_path, case):
    text, state, changes, *differs = CASES[case]
    path = tmp_path / "etc" / "x.conf"
    path.parent.mkdir()
    if text is not None:
        path.write_bytes(text.encode("utf-8"))
        path.chmod(0o644)
    item = _item(path, state, mode="0644" if state == "present" else None)
    pending = PENDING([item], _look([item]))
    assert _builtin_changes(item) == changes
    assert (pending == [item]) == (differs[0] if differs else changes)


def test_mode_and_owner_count(tmp_path):
    path = tmp_path / "x.conf"
    path.write_text(SAME, encoding="utf-8")
    path.chmod(0o600)
    item = _item(path, "present")
    assert PENDING([item], _look([item])) == [item]
    assert _builtin_changes(item)
    path.chmod(0o644)
    assert PENDING([item], _look([item])) == []
    me = str(os.geteuid())
    assert PENDING([dict(item, owner=me)], _look([item])) == []
    assert PENDING([dict(item, owner="12345")], _look([item])) != []
    assert PENDING([dict(item, group="no-such-group-here")], _look([item])) != []


def test_a_link_or_no_look_counts_as_changed(tmp_path):
    target = tmp_path / "target"
    target.write_text(SAME, encoding="utf-8")
    target.chmod(0o644)
    link = tmp_path / "x.conf"
    link.symlink_to(target)
    item = _item(link, "present")
    assert _look([item]) == []
    assert PENDING([item], _look([item])) == [item]
    assert PENDING([item], []) == [item]
    # only the blocks that differ are named, in their order
    same = _item(target, "present")
    assert PENDING([item, same], _look([item, same])) == [item]


def test_the_look_quotes_its_paths_and_markers(tmp_path):
    odd = tmp_path / "a b$(touch pwned)'c"
    item = {"path": str(odd), "marker": "# {mark} $(touch pwned2) 'q'", "block": "x\n"}
    odd.write_text("# BEGIN $(touch pwned2) 'q'\nx\n# END $(touch pwned2) 'q'\n")
    assert PENDING([item], _look([item])) == []
    assert not any(p.name.startswith("pwned") for p in tmp_path.iterdir())
    assert not os.path.exists("pwned") and not os.path.exists("pwned2")
