"""State the wiring roles leave on three containers, and verify.yml across them.

testinfra from outside; for the failure paths the real playbooks are run
again against the molecule inventory with bad inventory values, and once
with a stopped container.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

INVENTORY_FILE = os.environ["MOLECULE_INVENTORY_FILE"]
ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts, run_playbook

# One `podman exec` per check.
testinfra_hosts = podman_hosts("mnc_nodes")

SCENARIO = Path(__file__).resolve().parents[1]
NODES = {"mnc-wiring-1": "10.89.78.11", "mnc-wiring-2": "10.89.78.12", "mnc-wiring-3": "10.89.78.13"}
SLOTS = {"mnc-wiring-1": 2, "mnc-wiring-2": 3, "mnc-wiring-3": 2}
USER = "mpiuser"


def playbook(path, *extra, timeout=600, inventory=None):
    """Run a real playbook against this scenario's containers (``inventory``: the
    sources to use instead of the scenario's, in order); the run and its wall time."""
    sources = inventory or [Path(INVENTORY_FILE).parent]
    return run_playbook(path, *extra, inventory=sources, timeout=timeout)


# --- ssh_mesh -----------------------------------------------------------------------------------


@pytest.mark.parametrize("peer", sorted(NODES))
def test_ssh_to_every_peer_without_prompt(host, peer):
    # BatchMode=yes: a password or host-key prompt makes ssh fail instead of waiting.
    for target in (NODES[peer], peer):
        cmd = host.run(f"sudo -u {USER} ssh -o BatchMode=yes -o ConnectTimeout=10 {target} uname -n")
        assert cmd.rc == 0, f"{host.backend.hostname} -> {target}: {cmd.stderr}"
        assert cmd.stdout.strip() == peer


def test_known_hosts_hashed_and_complete(host):
    path = f"/home/{USER}/.ssh/known_hosts"
    kh = host.file(path)
    assert kh.user == USER and kh.mode in (0o600, 0o644)
    lines = [line for line in kh.content_string.splitlines() if line.strip()]
    assert lines and all(line.startswith("|1|") for line in lines), "known_hosts has unhashed names"
    for name, ip in NODES.items():
        assert ip not in kh.content_string and name not in kh.content_string
        for target in (ip, name):
            found = host.run(f"ssh-keygen -F {target} -f {path}")
            assert found.rc == 0, f"{target} not in known_hosts"
            # ... with that node's real host key.
            real = host.run(f"ssh-keyscan -t ed25519 {ip} 2>/dev/null").stdout.split()[1:3]
            assert " ".join(real) in found.stdout


def test_no_host_key_checking_switched_off(host):
    cfg = host.run(f"cat /etc/ssh/ssh_config /etc/ssh/ssh_config.d/* /home/{USER}/.ssh/config 2>/dev/null")
    assert "stricthostkeychecking no" not in " ".join(cfg.stdout.lower().split())
    # ... and in nothing this project runs (the READMEs may say it is not used).
    mine = subprocess.run(
        ["grep", "-rlE", "--include=*.yml", "--include=*.j2", "--include=*.sh", "--include=*.cfg",
         r"StrictHostKeyChecking[= ]+no", "roles/ssh_mesh", "roles/mpi_hostfile", "roles/bonding",
         "playbooks", "molecule/wiring", "ansible.cfg"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert mine.stdout == "", mine.stdout


def test_authorized_keys_hold_every_node(host):
    keys = host.file(f"/home/{USER}/.ssh/authorized_keys")
    assert keys.user == USER
    mesh = [line for line in keys.content_string.splitlines() if line.endswith("(mncluster)")]
    for name in NODES:
        assert any(line.endswith(f"{USER}@{name} (mncluster)") for line in mesh), name
    # A mesh key logs in from the private network only.
    assert all(line.startswith('from="10.89.78.0/24" ') for line in mesh), mesh


@pytest.mark.battery("stale key: a reinstalled node's old mesh key is no longer authorised", bound_s=600)
def test_a_reinstalled_nodes_old_mesh_key_is_taken_out(host):
    """Issue 38, item 11: a mesh key that is no node's key now (a reinstalled node's old one, with
    the mesh's comment) stays authorised under state: present; ssh_mesh now takes it out, and a
    key the user added itself stays."""
    node = "mnc-wiring-1"
    if host.backend.hostname != node:
        pytest.skip("runs once, against its node")
    keys = f"/home/{USER}/.ssh/authorized_keys"
    old = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE9sZE9sZE9sZE9sZE9sZE9sZE9sZE9sZE9sZE9sZE9s"
    own = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFVzZXJVc2VyVXNlclVzZXJVc2VyVXNlclVzZXJVc2Vy"
    lines = f'from="10.89.78.0/24" {old} {USER}@mnc-wiring-2 (mncluster)\n{own} me@laptop\n'
    subprocess.run(["podman", "exec", "-i", "-u", USER, node, "sh", "-c", f"cat >> {keys}"], input=lines,
                   text=True, check=True, timeout=60)  # fmt: skip
    try:
        proc, _ = playbook(SCENARIO / "ssh_mesh_only.yml")
        assert proc.returncode == 0, proc.tail(5000)
        after = _sh(node, f"cat {keys}")
        assert old not in after and f"{own} me@laptop" in after, after
        mesh = [line for line in after.splitlines() if line.endswith("(mncluster)")]
        assert len(mesh) == len(NODES), mesh
    finally:
        _sh(node, f"su -s /bin/sh {USER} -c \"sed -i '/me@laptop$/d' {keys}\"")


# --- mpi_hostfile -------------------------------------------------------------------------------


def test_hostfile_lists_every_node_with_its_slots(host):
    expected = [f"{ip} slots={SLOTS[name]}" for name, ip in NODES.items()]
    for path, owner in ((f"/home/{USER}/mncluster/hostfile", USER), ("/etc/mncluster/hostfile", "root")):
        f = host.file(path)
        assert f.user == owner and f.mode == 0o644
        lines = [line for line in f.content_string.splitlines() if line and not line.startswith("#")]
        assert lines == expected
        assert "managed by mncluster" in f.content_string


# --- mpi_network: every job pinned to the private network -------------------------------------


def test_mpi_and_nccl_traffic_pinned_to_the_private_network(host):
    # Debian's OpenMPI 4.1 stands in here: one MCA file (sysconfdir /etc/openmpi).
    mca = host.file("/etc/openmpi/openmpi-mca-params.conf").content_string
    for line in ("btl_tcp_if_include = 10.89.78.0/24", "oob_tcp_if_include = 10.89.78.0/24",
                 "plm_rsh_args = -o BatchMode=yes -o ConnectTimeout=10"):  # fmt: skip
        assert line in mca.splitlines(), line
    # What every job of the MPI user sees, not only what the file says.
    out = host.check_output(f"sudo -u {USER} ompi_info --parsable --param btl tcp --level 9")
    assert "mca:btl:tcp:param:btl_tcp_if_include:value:10.89.78.0/24" in out.splitlines()
    nccl = host.file("/etc/nccl.conf")
    assert nccl.user == "root" and "NCCL_SOCKET_IFNAME==eth0" in nccl.content_string.splitlines()
    fact = json.loads(host.file("/etc/ansible/facts.d/mncluster_network.fact").content_string)
    assert fact["mnc_private_iface"] == "eth0" and fact["mnc_private_cidr"] == "10.89.78.0/24"
    assert fact["mnc_mpi_pinned"] is True and fact["mnc_nccl_pinned"] is True


# --- bonding: render + validate, never applied here ---------------------------------------------


def _renderer(host):
    return "netplan" if host.backend.hostname == "mnc-wiring-3" else "ifupdown"


STAGED = {
    "ifupdown": "/etc/mncluster/network/mncluster-bond0",
    "netplan": "/etc/mncluster/network/60-mncluster-bond0.yaml",
}
LIVE = {
    "ifupdown": "/etc/network/interfaces.d/mncluster-bond0",
    "netplan": "/etc/netplan/60-mncluster-bond0.yaml",
}
VALIDATOR = "/usr/local/libexec/mncluster/mnc-bond-validate"


def test_bond_rendered_validated_and_not_applied(host):
    r = _renderer(host)
    staged = host.file(STAGED[r])
    assert staged.exists
    assert f"{NODES[host.backend.hostname]}/24" in staged.content_string
    assert "802.3ad" in staged.content_string and "layer3+4" in staged.content_string
    # Every listed NIC is a link of the bond (three here: not only two).
    for nic in ("eth1", "eth2", "eth3"):
        assert nic in staged.content_string, (nic, staged.content_string)
    # The container kernel has no bonding driver: nothing live, no bond device.
    assert not host.file(LIVE[r]).exists
    assert host.run("ip link show bond0").rc != 0
    # The staged file passes the real tool (netplan generate / ifquery + ifup --no-act).
    ok = host.run(f"{VALIDATOR} --renderer {r} --bond bond0 {STAGED[r]}")
    assert ok.rc == 0, ok.stderr


def _task_script(role_file: str, task: str, var: str) -> str:
    """A task's shell script (a vars entry), as the role has it, quoted for ``host.run``."""
    tasks = yaml.safe_load((ROOT / "roles" / role_file).read_text())
    script = next(t for t in tasks if t["name"] == task)["vars"][var]
    return "'" + script.replace("'", "'\\''") + "'"


# An address on the scenario's network that no container has.
NOBODY = "10.89.78.250"


def test_the_peer_ping_pings_every_peer_in_one_run(host):
    """bonding's peer check (tasks/verify.yml, after a bond goes live; the containers have none)
    is one script for all peers: its real text, run on a node through eth0, gives one line per
    peer, ok for the nodes and FAILED for an address nobody answers."""
    script = _task_script("bonding/tasks/verify.yml", "Ping every peer over the private network",
                          "__bonding_ping_script")
    peers = [ip for name, ip in NODES.items() if name != host.backend.hostname]
    out = host.run(f"bash -c {script} ping eth0 {' '.join([*peers, NOBODY])}")
    assert out.rc == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == sorted([f"ok {ip}" for ip in peers] + [f"FAILED {NOBODY}"])


def test_the_key_scan_and_the_logins_report_every_peer(host):
    """ssh_mesh's key scan (scanned again for an address that gave no key, up to three tries)
    and its login check (a login sshd closed early tried again; other errors at once): their
    real scripts on a node, with an address nobody answers among the peers, end and report
    each peer: every node's key and login, no key and one FAILED line for the silent address."""
    if host.backend.hostname != "mnc-wiring-2":
        pytest.skip("runs once, against its node")
    scan = _task_script("ssh_mesh/tasks/known_hosts.yml",
                        "Read this node's own host key, and scan every peer's over the private network",
                        "__ssh_mesh_scan_script")
    out = host.run(f"bash -c {scan} scan 1 ed25519 {' '.join([*NODES.values(), NOBODY])}")
    assert out.rc == 0, out.stderr
    own, *scanned = out.stdout.splitlines()
    # First its own host key, read from its file: the reference the peers' answers are checked against.
    key = host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.splitlines()[0]
    assert own == f"own-host-key: {key}", out.stdout
    assert sorted(line.split()[0] for line in scanned) == sorted(NODES.values()), out.stdout
    login = _task_script("ssh_mesh/tasks/verify.yml",
                         "Log in to every node over the private network without a prompt",
                         "__ssh_mesh_login_script")
    out = host.run(f"sudo -u {USER} bash -c {login} login {NOBODY} {' '.join(NODES.values())}")
    assert out.rc == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sorted(lines[1:]) == sorted(f"ok {ip} {name}" for name, ip in NODES.items()), out.stdout
    assert lines[0].startswith(f"FAILED {NOBODY} "), out.stdout


@pytest.mark.parametrize(
    ("sed", "message"),
    [
        (
            r"s#\(10\.89\.78\.\)1[0-9]/24#\1300/24#",
            {
                "netplan": "malformed address '10.89.78.300/24'",
                "ifupdown": "address '10.89.78.300' is not a valid",
            },
        ),
        (
            "s#eth2#eth2-much-too-long#g",
            {
                "netplan": "interface name 'eth2-much-too-long' is longer than 15 bytes",
                "ifupdown": "interface name 'eth2-much-too-long' is longer than 15 bytes",
            },
        ),
    ],
    ids=["bad-address", "bad-interface-name"],
)
def test_validator_rejects_broken_files(host, sed, message):
    r = _renderer(host)
    bad = f"/tmp/bad-{r}" + (".yaml" if r == "netplan" else "")
    assert host.run(f"sed '{sed}' {STAGED[r]} > {bad}").rc == 0
    res = host.run(f"{VALIDATOR} --renderer {r} --bond bond0 {bad}")
    assert res.rc == 1
    assert message[r] in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("node", "extra", "message"),
    [
        ("mnc-wiring-1", {"mnc_private_ip": "10.89.78.300"}, "address '10.89.78.300' is not a valid"),
        ("mnc-wiring-3", {"mnc_private_ip": "10.89.78.300"}, "malformed address '10.89.78.300/24'"),
        ("mnc-wiring-3", {"bonding_interfaces": ["eth1", "eth2-much-too-long"]}, "longer than 15 bytes"),
    ],
    ids=["ifupdown-address", "netplan-address", "netplan-interface"],
)
@pytest.mark.battery("node: a bad bond address or interface fails validation, not applied", bound_s=300)
def test_bad_inventory_fails_and_changes_nothing(host, node, extra, message):
    if host.backend.hostname != node:
        pytest.skip("runs once, against its node")
    r = _renderer(host)
    before = host.file(STAGED[r]).sha256sum
    proc, _ = playbook(SCENARIO / "bonding_only.yml", "--limit", node, "-e", json.dumps(extra))
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "failed to validate" in out and message in out, out
    assert host.file(STAGED[r]).sha256sum == before
    assert not host.file(LIVE[r]).exists


@pytest.mark.battery("node: shell characters in an interface name refused before rendering", bound_s=300)
def test_shell_characters_in_an_interface_name_are_refused_before_rendering(host):
    if host.backend.hostname != "mnc-wiring-1":
        pytest.skip("runs once, against its node")
    r = _renderer(host)
    before = host.file(STAGED[r]).sha256sum
    extra = {"bonding_name": "bond0;touch /tmp/mnc-pwned"}
    proc, _ = playbook(SCENARIO / "bonding_only.yml", "--limit", "mnc-wiring-1", "-e", json.dumps(extra))
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "interface names may only hold letters, digits" in out and "bond0;touch /tmp/mnc-pwned" in out, out
    assert host.file(STAGED[r]).sha256sum == before
    assert not host.file("/tmp/mnc-pwned").exists


@pytest.mark.battery("node: a bonding NIC the node does not have refused before anything", bound_s=300)
def test_a_nic_the_node_does_not_have_is_refused_before_anything(host):
    """bonding_enabled (the bond is to go live) with a NIC name the node does not have (eth7, a
    typo): refused, naming the node and the NIC, before anything is installed, rendered or
    applied (changed=0, the staged file as it was); the containers have only eth0."""
    node = "mnc-wiring-1"
    if host.backend.hostname != node:
        pytest.skip("runs once, against its node")
    r = _renderer(host)
    before = host.file(STAGED[r]).sha256sum
    extra = {"bonding_enabled": True, "bonding_interfaces": ["eth0", "eth7"]}
    proc, _ = playbook(SCENARIO / "bonding_only.yml", "--limit", node, "-e", json.dumps(extra))
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    assert f"{node}: bonding_interfaces lists eth7, not a NIC of this node (it has eth0" in out, out[-3000:]
    assert "nothing was installed, rendered or applied" in out
    assert proc.recap()[node]["changed"] == 0
    assert host.file(STAGED[r]).sha256sum == before
    assert not host.file(LIVE[r]).exists and host.run("ip link show bond0").rc != 0


@pytest.mark.parametrize(
    ("interfaces", "rc", "message"),
    [
        ([], 0, "no bond (bonding_interfaces is empty)"),
        (["eth1"], 2, "two or more different NIC names"),
    ],
    ids=["no-bond", "one-nic"],
)
def test_no_bond_changes_nothing_and_one_nic_is_refused(host, interfaces, rc, message):
    """A node with one private NIC (or IPoIB) lists no interfaces: the role says so and leaves the
    staged and live files as they were; a "bond" of one NIC is refused, named, before rendering."""
    if host.backend.hostname != "mnc-wiring-2":
        pytest.skip("runs once, against its node")
    r = _renderer(host)
    before = host.file(STAGED[r]).sha256sum
    extra = {"bonding_interfaces": interfaces}
    proc, _ = playbook(SCENARIO / "bonding_only.yml", "--limit", "mnc-wiring-2", "-e", json.dumps(extra))
    out = proc.stdout
    assert proc.returncode == rc, out
    assert " ".join(message.split()) in " ".join(out.split()), out
    assert host.file(STAGED[r]).sha256sum == before
    assert not host.file(LIVE[r]).exists


# --- common with --limit --------------------------------------------------------------------------


@pytest.mark.battery("fault: a --limit base run keeps every node in /etc/hosts", bound_s=300)
def test_limited_base_run_keeps_every_node_in_etc_hosts(host):
    """`base.yml --limit <node>` (re-running one node) changes nothing and keeps the
    other nodes' names: /etc/hosts lists the inventory's mnc_nodes, not the play's."""
    if host.backend.hostname != "mnc-wiring-2":
        pytest.skip("runs once, against its node")
    proc, _ = playbook(ROOT / "playbooks" / "base.yml", "--limit", "mnc-wiring-2")
    assert proc.returncode == 0, proc.tail(6000)
    stats = proc.recap()
    assert list(stats) == ["mnc-wiring-2"] and stats["mnc-wiring-2"]["changed"] == 0, stats
    hosts = host.file("/etc/hosts").content_string
    for name, ip in NODES.items():
        assert f"{ip} {name}" in hosts, hosts


# --- root and the MPI user's home -----------------------------------------------------------------


@pytest.mark.battery("link: a ~/.bashrc linked to a root file is not followed by root", bound_s=300)
def test_a_bashrc_linked_to_a_root_file_is_not_followed_by_root(host):
    """The MPI user makes ~/.bashrc a link to a root-owned file: the ~/.bashrc block
    (openmpi's here; cuda's and pyenv's are written the same way, as the user) leaves the
    file as it was, where root once wrote the block into it and gave it to the user."""
    node = "mnc-wiring-2"
    if host.backend.hostname != node:
        pytest.skip("runs once, against its node")
    home = f"/home/{USER}"
    _sh(node, "printf 'root only\\n' > /etc/mnc-victim-bashrc && chmod 0644 /etc/mnc-victim-bashrc")
    before = _sh(node, "sha256sum < /etc/mnc-victim-bashrc")
    plant = "mv ~/.bashrc ~/.bashrc.mnc-saved 2>/dev/null; ln -sfn /etc/mnc-victim-bashrc ~/.bashrc"
    _sh(node, f"su -s /bin/sh {USER} -c '{plant}'")
    try:
        proc, _ = playbook(SCENARIO / "bashrc_only.yml", "--limit", node)
        out = proc.stdout
        # Root neither re-owned the link's target nor wrote into it.
        assert _sh(node, "stat -c '%U:%G %a' /etc/mnc-victim-bashrc") == "root:root 644"
        assert _sh(node, "sha256sum < /etc/mnc-victim-bashrc") == before
        # Written as the user, the block cannot go into root's file: the task fails, named.
        assert proc.returncode != 0, out[-3000:]
        assert "Put OpenMPI on PATH at the top of the MPI users' ~/.bashrc" in out, out[-3000:]
    finally:
        saved = f"{home}/.bashrc.mnc-saved"
        _sh(node, f"rm -f {home}/.bashrc /etc/mnc-victim-bashrc")
        _sh(node, f"! [ -e {saved} ] || mv {saved} {home}/.bashrc")
    # The user's own ~/.bashrc gets the block, and stays the user's.
    try:
        proc, _ = playbook(SCENARIO / "bashrc_only.yml", "--limit", node)
        assert proc.returncode == 0, proc.tail(6000)
        bashrc = host.file(f"{home}/.bashrc")
        assert bashrc.user == USER and not bashrc.is_symlink
        assert bashrc.content_string.startswith("# BEGIN mncluster openmpi\n")
    finally:
        block = "/^# BEGIN mncluster openmpi$/,/^# END mncluster openmpi$/d"
        left = (
            "/etc/ld.so.conf.d/mncluster-openmpi.conf /etc/profile.d/mncluster-openmpi.sh"
            " /opt/mnc-bashrc-check"
        )
        _sh(node, f"sed -i '{block}' {home}/.bashrc; rm -rf {left}; ldconfig")


@pytest.mark.battery("hang: a ~/.bashrc that never returns fails the run in a bounded time, named",
                     bound_s=300)  # fmt: skip
def test_a_bashrc_that_hangs_fails_the_task_naming_the_node(host):
    """Issue 38, item 7: the MPI user puts `sleep 100000` at the top of its ~/.bashrc. A task that
    starts the user's login shell (mpi_network's ompi_info check) fails after
    mnc_user_task_timeout, naming the node and the task; with ansible.cfg's task_timeout = 0 and
    no timeout on the task, the run hung."""
    node = "mnc-wiring-3"
    if host.backend.hostname != node:
        pytest.skip("runs once, against its node")
    home = f"/home/{USER}"
    plant = 'touch ~/.bashrc && cp ~/.bashrc ~/.bashrc.mnc-saved && sed -i "1i sleep 100000" ~/.bashrc'
    _sh(node, f"su -s /bin/sh {USER} -c '{plant}'")
    try:
        short = "mnc_user_task_timeout=15"
        proc, _ = playbook(SCENARIO / "user_shell_only.yml", "--limit", node, "-e", short, timeout=280)
        out = proc.stdout
        assert proc.returncode != 0, out[-3000:]
        assert "TASK [mpi_network : Check that OpenMPI reads the pinning]" in out, out[-3000:]
        # ansible-core 2.19+: "Timed out after 15 second(s)"; 2.18: "... expected time frame (15) ..."
        timed_out = "Timed out after 15 second(s)" in out or "expected time frame (15)" in out
        assert f"fatal: [{node}]" in out and timed_out, out[-3000:]
    finally:
        _sh(node, f"pkill -u {USER} -x sleep; mv {home}/.bashrc.mnc-saved {home}/.bashrc")


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ("install -d -o mpiuser -g mpiuser -m 0755 /var/lib/mncluster/build", "belongs to mpiuser, not root"),
        ("install -d -m 0755 /etc/mnc-victim-build && ln -sfn /etc/mnc-victim-build /var/lib/mncluster/build",
         "is a symbolic link (to /etc/mnc-victim-build)"),
    ],
    ids=["another-owner", "link"],
)  # fmt: skip
@pytest.mark.battery("scratch: a build scratch planted before the build is refused, kept as was", bound_s=300)
def test_a_build_scratch_planted_before_the_build_is_refused(host, plant, message):
    """The build scratch is root's own, outside /tmp and /var/tmp: one another user made
    first, or a link, is refused, named, before anything is built, and left as it was."""
    node = "mnc-wiring-3"
    if host.backend.hostname != node:
        pytest.skip("runs once, against its node")
    scratch = "/var/lib/mncluster/build"
    _sh(node, f"mkdir -p /var/lib/mncluster && rm -rf {scratch} && {plant}")
    try:
        proc, _ = playbook(SCENARIO / "build_scratch_only.yml", "--limit", node)
        out = proc.stdout
        assert proc.returncode != 0, out[-3000:]
        assert f"{scratch} on {node} {message}" in out, out[-3000:]
        assert _sh(node, f"stat -c '%U %F' {scratch}") == (
            "mpiuser directory" if "mpiuser" in plant else "root symbolic link"
        )
        # Nothing was made in the planted directory, nor through the link (find does not follow it).
        assert _sh(node, f"find {scratch} /etc/mnc-victim-build -mindepth 1 2>/dev/null; true") == ""
        assert not host.file("/opt/mnc-scratch-check").exists
    finally:
        _sh(node, f"rm -rf {scratch} /etc/mnc-victim-build")


# --- verify.yml across the containers -----------------------------------------------------------

VERIFY_VARS = [
    "-e",
    "mnc_python=/usr/bin/python3",
    "-e",
    "mnc_openmpi_prefix=/usr",
    # Two busy cores shared by three containers: judge the machinery, not this host's speed.
    "-e",
    "mnc_link_gbps=1",
    "-e",
    "verify_p2p_median_fraction=0.01",
]


def _judged(proc):
    judged = proc.results("Judge the checks", host="localhost")
    if not judged:
        raise AssertionError(proc.tail(6000))
    return judged[-1]


def _placement(launcher):
    """The ranks OpenMPI gives each node for verify.yml's mapping: the launcher's node
    first, then the hostfile's order (the converge wrote it in inventory order), each
    node's slots in turn."""
    order = [launcher] + [n for n in NODES if n != launcher]
    out, first = [], 0
    for name in order:
        last = first + SLOTS[name] - 1
        out.append(f"{name}: {first}-{last}" if last > first else f"{name}: {first}")
        first = last + 1
    return "; ".join(out)


def _launcher(proc):
    """The node the MPI checks ran on (the others skip them), from the run's events."""
    ran = proc.results("Check that every rank starts once, on the expected hosts")
    if not ran:
        raise AssertionError("no rank check in the run")
    return sorted(r["_host"] for r in ran if not r["skipped"])


def _sh(node, script):
    """Run a root shell command in a container; its stdout, stripped."""
    proc = subprocess.run(["podman", "exec", node, "sh", "-c", script],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return proc.stdout.strip()


def test_verify_playbook_across_containers(host):
    if host.backend.hostname != "mnc-wiring-1":
        pytest.skip("runs once")
    # The MPI user plants a link where verify.yml once wrote its programs as root.
    for node in NODES:
        _sh(node, "install -d -o root -g root -m 0755 /etc/mnc-victim")
        plant = "mkdir -p ~/mncluster && ln -sfn /etc/mnc-victim ~/mncluster/verify"
        _sh(node, f"su -s /bin/sh {USER} -c '{plant}'")
    proc, elapsed = playbook(ROOT / "playbooks" / "verify.yml", *VERIFY_VARS)
    res = _judged(proc)
    rows = {(r["check"], r["subject"]): r for r in res["rows"]}
    print(res["table"], f"\n(verify.yml took {elapsed:.0f}s)")
    for node in NODES:
        # Root neither re-owned the link's target nor wrote into it.
        assert _sh(node, "stat -c '%U:%G' /etc/mnc-victim; ls -A /etc/mnc-victim") == "root:root", node
        _sh(node, f"rm -f /home/{USER}/mncluster/verify; rmdir /etc/mnc-victim")
    for name in NODES:
        assert rows[("node answers", name)]["status"] == "PASS"
    assert rows[("hostfile", "cluster")]["status"] == "PASS"
    # The launcher is the first node of mnc_nodes in inventory order, whoever answers first.
    assert _launcher(proc) == ["mnc-wiring-1"]
    ranks = rows[("ranks", "cluster")]
    assert ranks["status"] == "PASS", ranks
    assert "7 ranks, 0..6 once each" in ranks["detail"]
    assert ranks["detail"].endswith(_placement("mnc-wiring-1")), ranks
    pairs = [r for (check, _), r in rows.items() if check == "p2p bandwidth"]
    assert sorted(r["subject"] for r in pairs) == [
        "mnc-wiring-1 <-> mnc-wiring-2",
        "mnc-wiring-1 <-> mnc-wiring-3",
        "mnc-wiring-2 <-> mnc-wiring-3",
    ]
    assert all(r["status"] == "PASS" and "GB/s" in r["detail"] for r in pairs), pairs
    # Every pair judged against the median pair too (the inventory's fraction reached the judge).
    assert all("of the median pair" in r["detail"] for r in pairs), pairs
    # The whole table and the N x N matrix are written on the controller, with a heat map.
    report = ROOT / "reports" / "verify-latest"
    doc = json.loads((report / "verify.json").read_text())
    assert doc["rows"] == res["rows"]
    assert doc["p2p_matrix"]["hosts"] == list(NODES)
    assert all(doc["p2p_matrix"]["gbps"][i][j] > 0 for i in range(3) for j in range(3) if i != j)
    md = (report / "verify.md").read_text()
    assert "| GB/s | mnc-wiring-1 | mnc-wiring-2 | mnc-wiring-3 |" in md
    assert (report / "p2p-matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Debian's OpenMPI in CPU mode: reported, not required.
    assert {rows[("openmpi cuda", n)]["status"] for n in NODES} <= {"PASS", "SKIP"}
    # No Chainer in these containers (the chainer role is not part of this scenario):
    # the versions check must say so, per node, and fail the run.
    for name in NODES:
        assert any(
            r["subject"] == name and "chainer: error: ModuleNotFoundError" in r["detail"]
            for r in res["rows"]
            if r["check"] == "versions"
        )
    assert res["passed"] is False and proc.returncode != 0


def test_verify_with_another_node_first_in_the_play(host, tmp_path):
    """mnc-wiring-3 first in mnc_nodes (the hostfile still lists it last): it launches,
    OpenMPI starts the ranks on it, and the rank check expects exactly that."""
    if host.backend.hostname != "mnc-wiring-1":
        pytest.skip("runs once")
    first = ["mnc-wiring-3", "mnc-wiring-1", "mnc-wiring-2"]
    reordered = tmp_path / "reordered.yml"
    reordered.write_text(json.dumps({"mnc_nodes": {"hosts": {n: {} for n in first}}}))
    proc, _ = playbook(ROOT / "playbooks" / "verify.yml", *VERIFY_VARS,
                       inventory=[reordered, Path(INVENTORY_FILE).parent])  # fmt: skip
    res = _judged(proc)
    assert _launcher(proc) == ["mnc-wiring-3"]
    rows = {(r["check"], r["subject"]): r for r in res["rows"]}
    ranks = rows[("ranks", "cluster")]
    assert ranks["status"] == "PASS", ranks
    assert ranks["detail"].endswith(_placement("mnc-wiring-3")), ranks
    assert rows[("hostfile", "cluster")]["status"] == "PASS"


def _wait_until_reachable(node, timeout=180):
    """After a restart: systemd boots again, and the peers must reach its sshd over
    the private network again (their neighbour caches still hold the old MAC)."""
    deadline = time.monotonic() + timeout
    peers = [p for p in NODES if p != node]
    probe = f"exec 3<>/dev/tcp/{NODES[node]}/22"
    while time.monotonic() < deadline:
        ok = all(
            subprocess.run(["podman", "exec", p, "timeout", "3", "bash", "-c", probe],
                           capture_output=True, check=False).returncode == 0
            for p in peers
        )  # fmt: skip
        if ok:
            return
        time.sleep(3)
    raise AssertionError(f"{node}: sshd not reachable from {peers} {timeout}s after restart")


@pytest.mark.battery("fault: a node down during verify.yml is named in the table", bound_s=300)
def test_verify_names_a_node_that_does_not_answer(host):
    if host.backend.hostname != "mnc-wiring-1":
        pytest.skip("runs once")
    subprocess.run(["podman", "stop", "-t", "5", "mnc-wiring-3"], check=True, capture_output=True)
    try:
        proc, elapsed = playbook(ROOT / "playbooks" / "verify.yml", *VERIFY_VARS, timeout=300)
    finally:
        subprocess.run(["podman", "start", "mnc-wiring-3"], check=True, capture_output=True)
        _wait_until_reachable("mnc-wiring-3")
    res = _judged(proc)
    assert proc.returncode != 0
    assert res["not_answering"] == ["mnc-wiring-3"]
    rows = {(r["check"], r["subject"]): r for r in res["rows"]}
    assert rows[("node answers", "mnc-wiring-3")]["status"] == "FAIL"
    assert rows[("node answers", "mnc-wiring-1")]["status"] == "PASS"
    assert rows[("ranks", "cluster")]["detail"] == "not run: mnc-wiring-3 did not answer"
    assert elapsed < 240, f"verify.yml took {elapsed:.0f}s with one node down"
