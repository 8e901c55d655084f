"""State the `common` role leaves on a node, checked from outside with testinfra, on a Debian 12
and a Debian 13 node; the account-clash cases run the real converge again against the molecule
inventory (once, against the Debian 12 node: they test the roles' refusals, not the release)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts, run_playbook

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

# The scenario's nodes: {name: (private address, Debian major)}.
NODES = {"mnc-default-node": ("10.89.81.11", "12"), "mnc-default-trixie": ("10.89.81.12", "13")}
# The node the cases that run playbooks again use; they run once, limited to it.
FIRST = "mnc-default-node"
LIMIT = ("--limit", FIRST)


def _once(host):
    """Skip a case that runs playbooks again on every node but the first (it runs once)."""
    if host.backend.hostname != FIRST:
        pytest.skip(f"runs once, against {FIRST}")


def test_node_runs_its_debian_release(host):
    # The image is the release the scenario says: bookworm (12) and trixie (13).
    major = NODES[host.backend.hostname][1]
    assert host.file("/etc/debian_version").content_string.split(".")[0].strip() == major
    assert host.system_info.distribution == "debian"


def test_node_runs_systemd(host):
    # The image is booted with systemd as PID 1, like a real node.
    assert host.run("cat /proc/1/comm").stdout.strip() == "systemd"
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), state
    failed = host.run("systemctl --failed --no-legend --plain").stdout
    assert failed.strip() == "", f"failed units: {failed}"


def test_build_toolchain_works(host):
    cmd = host.run("printf 'int main(void){return 0;}' | gcc -x c - -o /tmp/t && /tmp/t")
    assert cmd.rc == 0, cmd.stderr


def test_mpi_user_and_work_dir(host):
    user = host.user("mpiuser")
    assert user.exists
    assert user.uid == 2000
    assert user.shell == "/bin/bash"
    work = host.file("/home/mpiuser/mncluster")
    assert work.is_directory
    assert work.user == "mpiuser"


def test_hosts_entry_for_private_address(host):
    name = host.backend.hostname
    hosts = host.file("/etc/hosts").content_string
    assert f"{NODES[name][0]} {name}" in hosts


def test_cpu_mode_without_gpu(host):
    # No NVIDIA device in the test bed: the role must not claim one.
    assert host.run("lspci -n | grep -c ' 10de:' || true").stdout.strip() == "0"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mnc_mpi_user_uid": 2001}, "the account mpiuser exists with uid 2000, not mnc_mpi_user_uid 2001"),
        ({"mnc_mpi_user": "www-data", "mnc_mpi_user_uid": 2000}, "the account www-data exists with uid 33"),
        ({"mnc_mpi_user": "mpiadmin", "mnc_mpi_user_uid": 0}, "uid 0 belongs to root"),
    ],
    ids=["renumber-the-mpi-user", "take-an-existing-account", "take-roots-uid"],
)
@pytest.mark.battery("node: an mnc_mpi_user that clashes with an existing account")
def test_an_mpi_user_that_clashes_is_refused_before_any_change(host, extra, message):
    _once(host)
    accounts = host.check_output("getent passwd; getent group")
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    proc, _ = run_playbook(Path(__file__).parents[1] / "converge.yml", "-e", json.dumps(extra), *LIMIT,
                           inventory=inventory)  # fmt: skip
    out = proc.stdout
    assert proc.returncode != 0 and message in out, out[-3000:]
    assert all(s["changed"] == 0 for s in proc.recap().values())
    assert host.check_output("getent passwd; getent group") == accounts


# What a run of `common` may touch, read back so a check run can be shown to leave it as it was.
TOUCHED = (
    "getent passwd; getent group; dpkg-query -W -f '${Package} ${Version}\\n' | md5sum; "
    "stat -c '%n %U %G %a %s %Y' /home /home/* /home/*/mncluster /etc/hosts /etc/ansible/facts.d "
    "/etc/ansible/facts.d/* 2>&1; md5sum /etc/hosts /etc/ansible/facts.d/* 2>&1"
)


def _touched():
    """TOUCHED on every node of the scenario, {node: listing}."""
    return {node: _sh(TOUCHED, node=node) for node in NODES}


def _check_run(*extra):
    """converge.yml with --check --diff on every node: (process, {task name: [result per host]},
    listings before, after)."""
    before = _touched()
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    proc, _ = run_playbook(Path(__file__).parents[1] / "converge.yml", "--check", "--diff", *extra,
                           inventory=inventory)  # fmt: skip
    return proc, _tasks(proc), before, _touched()


def test_a_check_run_on_the_converged_node_reports_no_change(host):
    # Drift detection: on a converged node `--check --diff` reports changed=0, runs the read-only
    # probes (a skipped GPU count would decide CPU mode on a GPU node and report the recorded
    # mode as a change) and writes nothing. One run over both nodes (Debian 12 and 13).
    _once(host)
    proc, tasks, before, after = _check_run()
    assert proc.returncode == 0, proc.tail(3000)
    stats = proc.recap()
    assert sorted(stats) == sorted(NODES), stats
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in stats.values()), stats
    probe = tasks["Count NVIDIA 3D/VGA controllers"]
    assert len(probe) == len(NODES) and not any(r.get("skipped") for r in probe), probe
    assert after == before


def test_a_check_run_for_an_mpi_user_not_created_yet_changes_nothing(host):
    # What a fresh node looks like to `common` in check mode: the account does not exist yet, so
    # the work directory cannot be made as it (sudo to an unknown user). The check says so,
    # reports the account as a change, and creates nothing.
    _once(host)
    fresh = json.dumps({"mnc_mpi_user": "mnccheck", "mnc_mpi_user_uid": 2100})
    proc, tasks, before, after = _check_run("-e", fresh, *LIMIT)
    assert proc.returncode == 0, proc.tail(3000)
    assert "check mode: mnccheck does not exist on mnc-default-node yet" in proc.stdout
    assert any(r.get("changed") for r in tasks["Create the MPI user"])
    assert after == before
    assert host.run("getent passwd mnccheck").rc == 2


def test_a_check_run_of_site_yml_on_a_node_without_the_mpi_user_changes_nothing(host, tmp_path):
    # The whole of site.yml in check mode, as on a fresh node (its MPI user does not exist yet):
    # the base stage says what it would change, every later stage stops for the node saying why
    # (they run as that user), verify measures nothing, the benchmark plans nothing; rc 0 and
    # nothing touched. site.yml's plays are on mnc_nodes: the node joins that group here.
    _once(host)
    (tmp_path / "nodes.yml").write_text("mnc_nodes:\n  hosts:\n    mnc-default-node:\n")
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    before = host.run(TOUCHED).stdout
    fresh = "mnc_mpi_user=mnccheck mnc_mpi_user_uid=2100"
    proc, wall = run_playbook(ROOT / "site.yml", "--check", "--diff", "-e", fresh,
                              inventory=[inventory, tmp_path / "nodes.yml"])  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    assert host.run(TOUCHED).stdout == before
    stopped = "check mode: mnc-default-node has no MPI user mnccheck yet"
    # gpu, mpi, python, network, chainer, scheduler (2 plays) and the benchmark's nodes' play
    assert out.count(stopped) >= 8, out[-3000:]
    assert "check mode: verify measures" in out
    assert "check mode: benchmark not planned, mnc-default-node" in out
    print(f"site.yml --check --diff on a node without the MPI user: {wall:.0f} s, rc 0, nothing touched")


def _tasks(proc):
    """{task name without the role prefix: [result per host]} of a run, from its events."""
    tasks = {}
    for result in proc.results():
        tasks.setdefault(result["_task"].split(" : ")[-1], []).append(result)
    return tasks


def _sh(script, stdin=None, node=FIRST):
    """A root shell command in a node's container (``stdin``: its input); its stdout, stripped."""
    proc = subprocess.run(["podman", "exec", "-i", node, "sh", "-c", script], input=stdin,
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return proc.stdout.strip()


def _plant_program(path, text):
    """A stand-in program on the node, ahead of the real one on PATH (/usr/local/bin)."""
    _sh(f"cat > {path} && chmod 0755 {path}", stdin=text)


# lspci -n of a node with two PCIe NVIDIA GPUs (3D controllers), for common's GPU count.
FAKE_LSPCI = """#!/bin/sh
cat <<'EOF'
00:00.0 0600: 8086:29c0
01:00.0 0302: 10de:20b5 (rev a1)
02:00.0 0302: 10de:20b5 (rev a1)
EOF
"""


@pytest.mark.battery("node: mnc_slots_per_node > the GPUs lspci counts, refused at base", bound_s=300)
def test_more_slots_than_gpus_is_refused_before_any_change(host):
    """A GPU node (two NVIDIA 3D controllers in lspci: a stand-in lspci ahead of the real one on
    PATH) with mnc_slots_per_node 4: common refuses it as soon as the GPUs are counted, naming the
    node, the variable and the count, before it records the mode or creates anything."""
    _once(host)
    _plant_program("/usr/local/bin/lspci", FAKE_LSPCI)
    try:
        assert _sh("lspci -n | grep -c ' 10de:'") == "2"
        before = host.run(TOUCHED).stdout
        inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
        proc, wall = run_playbook(Path(__file__).parents[1] / "converge.yml", "-e", "mnc_slots_per_node=4",
                                  *LIMIT, inventory=inventory)  # fmt: skip
        out = proc.stdout
        assert proc.returncode != 0, out[-3000:]
        named = "mnc-default-node: mnc_slots_per_node: 4 ranks per node but the node has 2 GPU(s)"
        assert named in out, out[-3000:]
        assert all(s["changed"] == 0 for s in proc.recap().values())
        assert host.run(TOUCHED).stdout == before
        # The recorded mode is still the CPU mode of the converge: nothing was recorded.
        fact = json.loads(host.file("/etc/ansible/facts.d/mncluster_common.fact").content_string)
        assert fact["mnc_use_gpu"] is False
        print(f"refused in {wall:.0f} s")
    finally:
        _sh("rm -f /usr/local/bin/lspci")


# What nvidia-smi prints while the loaded module is not the installed driver's, and for a GPU
# that has fallen off the bus (a failure no reboot fixes).
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
OFF_THE_BUS = "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"


def _fake_smi(output, rc):
    _plant_program("/usr/local/bin/nvidia-smi", f"#!/bin/sh\necho '{output}'\nexit {rc}\n")


def _pid1_start():
    """When the node's PID 1 started (clock ticks since the host booted): a reboot changes it."""
    return _sh("cut -d' ' -f22 /proc/1/stat")


@pytest.mark.battery("fault: nvidia-smi failing, the driver not changed: no reboot", bound_s=300)
def test_a_failing_nvidia_smi_without_a_driver_change_does_not_reboot(host):
    """nvidia_driver_reboot: true and nvidia-smi failing (a GPU off the bus, then a version
    mismatch the role did not cause): the role reboots nothing, where it once rebooted on any
    nvidia-smi failure. A real run, over SSH (a remote node, which the role would reboot)."""
    _once(host)
    started = _pid1_start()
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    playbook = Path(__file__).parents[1] / "driver_reboot_only.yml"
    try:
        for output, rc in ((OFF_THE_BUS, 255), (MISMATCH, 18)):
            _fake_smi(output, rc)
            proc, _ = run_playbook(playbook, *LIMIT, inventory=inventory, timeout=300)
            assert proc.returncode == 0, proc.tail(3000)
            tasks = _tasks(proc)
            probe = tasks["Ask nvidia-smi whether the installed driver is the loaded one"]
            assert [r.get("rc") for r in probe] == [rc], probe
            reboot = tasks["Reboot into the new driver"]
            assert reboot and all(r.get("skipped") for r in reboot), reboot
            assert all(r.get("skipped") for r in tasks["Report that the node must be rebooted"])
            assert all(s["changed"] == 0 for s in proc.recap().values())
            assert _pid1_start() == started, "the node was rebooted"
    finally:
        _sh("rm -f /usr/local/bin/nvidia-smi")


def test_a_driver_change_that_needs_the_new_module_plans_the_reboot(host):
    """The driver changed in this run and NVML reports the mismatch: a reboot is what loads the
    new module. --check plans it (the reboot task reports the change) and reboots nothing."""
    _once(host)
    started = _pid1_start()
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    _fake_smi(MISMATCH, 18)
    try:
        playbook = Path(__file__).parents[1] / "driver_reboot_only.yml"
        changed = ["-e", "mnc_test_driver_changed=true"]
        proc, _ = run_playbook(playbook, "--check", *changed, *LIMIT, inventory=inventory)
        assert proc.returncode == 0, proc.tail(3000)
        tasks = _tasks(proc)
        reboot = tasks["Reboot into the new driver"]
        assert reboot and all(r.get("changed") and not r.get("skipped") for r in reboot), reboot
        assert _pid1_start() == started
    finally:
        _sh("rm -f /usr/local/bin/nvidia-smi")


# Where root wrote as the MPI user's work directory's subdirectories before (verify's checks,
# the benchmark's train package) and where the benchmark writes its results.
PLANTED = ("verify", "train", "results")
VICTIM = "/etc/mnc-victim"
VICTIM_STATE = (
    f"stat -c '%n %U:%G %a %s %Y' {VICTIM} {VICTIM}/*; sha256sum {VICTIM}/*; ls -A {VICTIM}"
)


@pytest.mark.battery("link: ~/mncluster/verify (train, results) planted to a root directory, not followed",
                     bound_s=600)  # fmt: skip
def test_links_planted_in_the_work_directory_are_not_followed_by_root(host, tmp_path):
    """The MPI user makes ~/mncluster/verify (and train, results) links to a root-owned directory
    with a root-only file: verify.yml and benchmark.yml write their programs (root's own copies)
    and run, and the link's target keeps its owner, mode and content. Reproduces issue 16's
    attack, where verify.yml left the target owned by the MPI user with the checks in it."""
    _once(host)
    (tmp_path / "nodes.yml").write_text("mnc_nodes:\n  hosts:\n    mnc-default-node:\n")
    inventory = [Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent, tmp_path / "nodes.yml"]
    _sh(f"install -d -o root -g root -m 0750 {VICTIM} && cat > {VICTIM}/secret && chmod 0600 {VICTIM}/secret",
        stdin="root only\n")
    plant = " && ".join(f"ln -sfn {VICTIM} ~/mncluster/{name}" for name in PLANTED)
    _sh(f"su -s /bin/sh mpiuser -c '{plant}'")
    before = _sh(VICTIM_STATE)
    try:
        reports = tmp_path / "reports"
        verify, _ = run_playbook(ROOT / "playbooks" / "verify.yml", "-e", "mnc_python=/usr/bin/python3",
                                 "-e", f"verify_report_root={reports}", inventory=inventory)  # fmt: skip
        bench, _ = run_playbook(ROOT / "playbooks" / "benchmark.yml", "-e", "benchmark_trace=true",
                                "-e", f"benchmark_report_root={reports}", inventory=inventory)  # fmt: skip
        # Root neither re-owned the links' target nor wrote into it.
        after = _sh(VICTIM_STATE)
        tail = verify.tail(2000)
        assert after == before, f"before:\n{before}\nafter:\n{after}\n{tail}"
        assert before.splitlines()[0].startswith(f"{VICTIM} root:root 750 ")
        for name in PLANTED:  # still the user's links (stat without -L: the link itself)
            link = f"/home/mpiuser/mncluster/{name}"
            assert _sh(f"stat -c '%U %F' {link}; readlink {link}") == f"mpiuser symbolic link\n{VICTIM}"
        # The playbooks did write their programs: root's own copies, outside the home.
        for path in ("verify/mnc_versions.py", "train/__main__.py"):
            assert host.file(f"/usr/local/lib/mncluster/{path}").user == "root", path
        assert "PLAY RECAP" in verify.stdout and "PLAY RECAP" in bench.stdout
    finally:
        links = " ".join(f"/home/mpiuser/mncluster/{name}" for name in PLANTED)
        _sh(f"rm -f {links}; rm -rf {VICTIM} /usr/local/lib/mncluster")


CANARY = "/opt/mnc-canary"
CANARY_STATE = f"stat -c '%n %U:%G %a' {CANARY} {CANARY}/*; sha256sum {CANARY}/*"


@pytest.mark.battery("link: a work directory outside the home planted by the MPI user to a root directory",
                     bound_s=600)  # fmt: skip
def test_a_work_directory_link_outside_the_home_is_refused_and_its_target_unchanged(host, tmp_path):
    """Issue 38, item 1, as the issue reproduced it: the MPI user makes /scratch/mpiuser/mncluster a
    link to a root-only directory, then base.yml runs with mnc_work_dir there. The builtin file
    module (follow: true by default) made the target mpiuser's, mode 0755; now the run fails,
    naming the link, and the target keeps its owner, mode and content."""
    _once(host)
    (tmp_path / "nodes.yml").write_text("mnc_nodes:\n  hosts:\n    mnc-default-node:\n")
    inventory = [Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent, tmp_path / "nodes.yml"]
    _sh(f"install -d -o root -g root -m 0700 {CANARY} && cat > {CANARY}/secret && chmod 0600 {CANARY}/secret"
        " && install -d -m 0755 /scratch && install -d -o mpiuser -g mpiuser -m 0755 /scratch/mpiuser",
        stdin="root only\n")  # fmt: skip
    _sh(f"su -s /bin/sh mpiuser -c 'ln -sfn {CANARY} /scratch/mpiuser/mncluster'")
    before = _sh(CANARY_STATE)
    try:
        work = "mnc_work_dir=/scratch/mpiuser/mncluster"
        proc, _ = run_playbook(ROOT / "playbooks" / "base.yml", "-e", work, inventory=inventory)
        out = proc.stdout
        assert proc.returncode != 0, out[-3000:]
        assert f"/scratch/mpiuser/mncluster is a link (owned by mpiuser, to {CANARY})" in out, out[-3000:]
        assert _sh(CANARY_STATE) == before
        assert before.startswith(f"{CANARY} root:root 700")
    finally:
        _sh(f"rm -rf /scratch {CANARY}")


@pytest.mark.battery("usercustomize: a usercustomize.py of the MPI user runs in no module of base.yml",
                     bound_s=600)  # fmt: skip
def test_a_usercustomize_of_the_mpi_user_runs_in_no_module(host, tmp_path):
    """Issue 38, item 10: modules run as the MPI user (common's home check runs the command
    module as that user) started Python with the user's site directory, where a
    usercustomize.py it planted ran inside the module and could add ansible_facts to its
    result, which later root stages read. The stage plays now set PYTHONNOUSERSITE."""
    _once(host)
    (tmp_path / "nodes.yml").write_text("mnc_nodes:\n  hosts:\n    mnc-default-node:\n")
    inventory = [Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent, tmp_path / "nodes.yml"]
    site = _sh("su -s /bin/sh mpiuser -c 'python3 -m site --user-site'")
    mark = "/tmp/mnc-usercustomize-ran"
    _sh(f"su -s /bin/sh mpiuser -c 'mkdir -p {site} && cat > {site}/usercustomize.py'",
        stdin=f"open('{mark}', 'a').write('ran\\n')\n")  # fmt: skip
    _sh(f"rm -f {mark}")
    try:
        assert _sh(f"su -s /bin/sh mpiuser -c 'python3 -c 0'; cat {mark}") == "ran"  # the plant works
        _sh(f"rm -f {mark}")
        proc, _ = run_playbook(ROOT / "playbooks" / "base.yml", inventory=inventory)
        assert proc.returncode == 0, proc.tail(3000)
        assert "Find the nodes whose token is in the MPI user's home" in proc.stdout  # ran as the user
        assert _sh(f"test -e {mark} && echo present || echo absent") == "absent"
    finally:
        _sh(f"rm -f {site}/usercustomize.py {mark}")
