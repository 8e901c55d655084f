"""mnc_blockinfile (action_plugins/mnc_blockinfile.py): blockinfile, with a shell look first.

Real `ansible` runs on localhost. The plugin's own reading of blockinfile's rules must agree
with the module: wherever the module would change nothing, no module runs (a module's result
carries its invocation); wherever it would change something, the module runs and does it.
"""

from __future__ import annotations

import pytest
from ansible_env import run_module

BLOCK = "export PATH=/opt/x/bin:$PATH\nexport Y=1"
CASES = {
    # (file before, extra arguments): the module's own verdict decides what the plugin must do.
    "block-in-place": ("a\n# BEGIN m\nexport PATH=/opt/x/bin:$PATH\nexport Y=1\n# END m\nb\n", {}),
    "block-differs": ("a\n# BEGIN m\nexport Y=0\n# END m\n", {}),
    "no-block-yet": ("a\nb\n", {"insertbefore": "BOF"}),
    "no-newline-at-end": ("# BEGIN m\nexport PATH=/opt/x/bin:$PATH\nexport Y=1\n# END m", {}),
    "absent-and-gone": ("a\n", {"state": "absent"}),
    "absent-but-there": ("# BEGIN m\nx\n# END m\n", {"state": "absent"}),
    "mode-differs": ("# BEGIN m\nexport PATH=/opt/x/bin:$PATH\nexport Y=1\n# END m\n", {"mode": "0600"}),
    "empty-file": ("", {"create": True}),
}


@pytest.mark.parametrize(("before", "extra"), list(CASES.values()), ids=list(CASES))
def test_the_plugin_agrees_with_the_module(tmp_path, before, extra):
    f = tmp_path / "rc"
    f.write_text(before)
    f.chmod(0o644)
    args = {"path": str(f), "block": BLOCK, "marker": "# {mark} m", **extra}
    res = run_module("mnc_blockinfile", args)
    twice = run_module("mnc_blockinfile", args)
    # The second run finds what the first left: no module, no change.
    assert twice["changed"] is False and "invocation" not in twice, twice
    g = tmp_path / "copy"
    g.write_text(before)
    g.chmod(0o644)
    truth = run_module("ansible.builtin.blockinfile", {**args, "path": str(g)})
    assert res["changed"] is truth["changed"], (res, truth)
    assert ("invocation" in res) is truth["changed"], res
    assert f.read_bytes() == g.read_bytes()


def test_a_link_is_not_read_the_module_decides(tmp_path):
    target = tmp_path / "target"
    target.write_text("# BEGIN m\nexport PATH=/opt/x/bin:$PATH\nexport Y=1\n# END m\n")
    link = tmp_path / "rc"
    link.symlink_to(target)
    res = run_module("mnc_blockinfile", {"path": str(link), "block": BLOCK, "marker": "# {mark} m"})
    assert "invocation" in res, res
