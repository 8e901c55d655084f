"""mncluster.core.mnc_known_hosts run by real Ansible, the result read back by OpenSSH's own
`ssh-keygen -F`: every name pinned with its key, hashed, in one run; a second run changes
nothing; a wrong key is replaced; lines for other hosts are kept; check mode writes nothing."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from ansible_env import run_module

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen missing")


def keypair(tmp_path, name: str) -> str:
    """A real ed25519 public key as '<type> <base64>'."""
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return " ".join(key.with_suffix(".pub").read_text().split()[:2])


def lookup(path, name: str) -> list[str]:
    """The keys `ssh-keygen -F` finds for ``name``, as '<type> <base64>'."""
    out = subprocess.run(["ssh-keygen", "-F", name, "-f", str(path)], capture_output=True, text=True).stdout
    return [" ".join(line.split()[1:3]) for line in out.splitlines() if line and not line.startswith("#")]


@pytest.fixture
def mesh(tmp_path):
    keys = {n: keypair(tmp_path, n) for n in ("node1", "node2", "node3")}
    ips = {"node1": "10.0.0.11", "node2": "10.0.0.12", "node3": "10.0.0.13"}
    hosts = [{"name": x, "key": keys[n]} for n in keys for x in (ips[n], n)]
    return {"path": tmp_path / "known_hosts", "hosts": hosts, "keys": keys, "tmp": tmp_path}


def test_every_name_pinned_hashed_in_one_run_and_a_second_run_changes_nothing(mesh):
    path = mesh["path"]
    first = run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": mesh["hosts"]})
    assert first["changed"] is True and len(first["added"]) == 6, first
    text = path.read_text()
    assert all(line.startswith("|1|") for line in text.splitlines())
    assert "node1" not in text and "10.0.0.11" not in text
    for h in mesh["hosts"]:
        assert lookup(path, h["name"]) == [h["key"]], h["name"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    second = run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": mesh["hosts"]})
    assert second["changed"] is False and second["added"] == [] and second["replaced"] == []
    assert path.read_text() == text


def test_a_wrong_key_is_replaced_and_other_hosts_lines_are_kept(mesh):
    path, tmp = mesh["path"], mesh["tmp"]
    stranger = f"gitserver {keypair(tmp, 'stranger')}"
    wrong = keypair(tmp, "impostor")
    # A comment, another host's line, and a plain entry with a stale key for node2.
    path.write_text(f"# mine\n{stranger}\nnode2 {wrong}\n")
    res = run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": mesh["hosts"]})
    assert res["replaced"] == ["node2"], res
    assert lookup(path, "node2") == [mesh["keys"]["node2"]]
    assert wrong not in path.read_text()
    assert path.read_text().startswith(f"# mine\n{stranger}\n")


def test_an_already_pinned_plain_name_is_kept_as_it_is(mesh):
    path = mesh["path"]
    path.write_text(f"node3 {mesh['keys']['node3']}\n")
    res = run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": mesh["hosts"]})
    assert "node3" not in res["added"] + res["replaced"], res
    assert path.read_text().splitlines()[0] == f"node3 {mesh['keys']['node3']}"
    assert len(path.read_text().splitlines()) == 6


def test_check_mode_reports_and_writes_nothing(mesh):
    path = mesh["path"]
    path.write_text("")
    res = run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": mesh["hosts"]}, "--check")
    assert res["changed"] is True and len(res["added"]) == 6
    assert path.read_text() == ""


def test_a_pattern_as_a_name_is_refused(mesh):
    bad = [{"name": "node*", "key": "a b"}]
    res = run_module("mncluster.core.mnc_known_hosts", {"path": str(mesh["path"]), "hosts": bad})
    assert res.get("failed") and "bad entry" in res["msg"]
    assert not mesh["path"].exists()


# ssh_mesh's look (roles/ssh_mesh/tasks/keys.yml) prints the file's mode and its lines, marked, and
# the role runs the module only where mncluster.core.mnc_known_hosts_pending says it would change
# the file. These are the look's lines for known_hosts, as that task prints them.
_LOOK = """
k=$1
if [ -f "$k" ] && [ ! -L "$k" ] && ! LC_ALL=C grep -q '[^[:print:][:blank:]]' -- "$k"; then
  echo "mncluster-known-hosts-mode: $(stat -c %a -- "$k")"
  sed 's/^/mncluster-known-hosts: /' -- "$k"
fi
"""


def _pending(path, hosts) -> bool:
    from ansible_collections.mncluster.core.plugins.filter.mnc import FilterModule

    out = subprocess.run(["bash", "-c", _LOOK, "look", str(path)], capture_output=True, text=True, check=True)
    return FilterModule().filters()["mnc_known_hosts_pending"](out.stdout.splitlines(), hosts)


@pytest.mark.parametrize("case", ["pinned", "mode", "missing-name", "stale-line", "no-file", "foreign", "cr"])
def test_the_look_says_what_the_module_would_change(mesh, case):
    path, hosts = mesh["path"], mesh["hosts"]
    if case != "no-file":
        run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": hosts})
    text = path.read_text() if path.exists() else ""
    if case == "mode":
        path.chmod(0o644)
    elif case == "missing-name":
        path.write_text("\n".join(text.splitlines()[1:]) + "\n")
    elif case == "stale-line":
        path.write_text(text + f"node2 {keypair(mesh['tmp'], 'old')}\n")
    elif case == "foreign":
        path.write_text(text + f"gitserver {keypair(mesh['tmp'], 'stranger')}\n")
    elif case == "cr":
        path.write_text(text.replace("\n", "\r\n", 1))
    module = run_module("mncluster.core.mnc_known_hosts", {"path": str(path), "hosts": hosts}, "--check")
    assert "changed" in module, module
    # "cr": the look prints nothing for a file with a carriage return (the module changes it, or
    # not: the look says it would, which only costs a module run)
    assert _pending(path, hosts) == (module["changed"] or case == "cr")
    assert module["changed"] == (case not in ("pinned", "foreign", "cr"))
