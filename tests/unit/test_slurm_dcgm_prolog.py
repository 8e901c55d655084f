"""roles/slurm's DCGM prolog (slurm_dcgm_prolog): slurm.conf's Prolog line, the program installed
and removed by the role's own task files, and the program itself.

slurm.conf is rendered by a real ansible-playbook on localhost from the role's template, the nodes'
records set as install.yml records them (`__slurm_node`), for a cluster with a GPU node and a CPU
node (setting on and off) and for a CPU-only cluster; where this runs as root (CI), the role's
tasks/dcgm-prolog.yml and tasks/dcgm-prolog-off.yml install and remove the prolog under a scratch
directory. The program runs with the recorded real `dcgmi diag` outputs of tests/unit/fixtures/gpu
(the parser is module_utils/mnc_dcgm.py, tested in test_gpu_parsers.py; the drain rules are the
health check's, roles/slurm/files/healthcheck/mnc_slurm_health.py), on a PATH where `dcgmi`
and `scontrol` are stand-ins that print a recorded output and log their arguments. What slurmd
does with the exit code (drain, requeue) is Slurm's; molecule/slurm runs slurmd without GPUs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import mnc_slurm_health as rules
import pytest
import yaml
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "slurm"
PROGRAM = ROLE / "files" / "dcgm-prolog" / "mncluster-dcgm-prolog.py"
# the parsers a node program imports too: mncluster.core's module_utils
MODULE_UTILS = ROOT / "collections/ansible_collections/mncluster/core/plugins/module_utils"
GPU = Path(__file__).parent / "fixtures" / "gpu"
SLURM = Path(__file__).parent / "fixtures" / "slurm"
PASS_DCGM3 = GPU / "dcgmi-diag-r3-pass-570-blackwell.txt"
PASS_DCGM4 = GPU / "dcgmi-diag-r3-pass-dcgm4.txt"
FAIL_PERSISTENCE = GPU / "dcgmi-diag-r4-fail-persistence.txt"
# scontrol -o show node of Slurm 22.05.8 (molecule/slurm): an idle node, one an administrator drained.
IDLE = (SLURM / "scontrol-o-show-node-idle-22.05.txt").read_text().replace("mnc-slurm-3", "gpu1")
ADMIN_DRAINED = (SLURM / "scontrol-o-show-node-admin-drained-22.05.txt").read_text()
ADMIN_DRAINED = ADMIN_DRAINED.replace("mnc-slurm-2", "gpu1")
INSTALLED = yaml.safe_load((ROLE / "tasks" / "dcgm-prolog.yml").read_text())


# --- the files the role installs, from its own task file ------------------------------------------


def installed_files() -> dict[str, tuple[Path | None, str]]:
    """{file name in the prolog's directory: (the repository file it is, or None for the
    settings; its mode)} from tasks/dcgm-prolog.yml's mnc_write_files task: a role file
    (``lookup('ansible.builtin.file', 'dcgm-prolog/...')``, under files/) or a module_utils file of
    mncluster.core found through Ansible's collections path (``first_found`` over
    ``__slurm_module_utils``)."""
    task = next(t for t in INSTALLED if "mncluster.core.mnc_write_files" in t)
    out = {}
    for f in task["mncluster.core.mnc_write_files"]["files"]:
        name = f["dest"].removeprefix("{{ __slurm_dcgm_prolog_dir }}/")
        role_file = re.fullmatch(
            r"\{\{ lookup\('ansible\.builtin\.file', '([^'/][^']*)'\) \}\}\n", f["content"]
        )
        shared = re.fullmatch(
            r"\{\{ lookup\('ansible\.builtin\.file', lookup\('ansible\.builtin\.first_found', '(\w+\.py)', "
            r"paths=__slurm_module_utils\)\) \}\}\n",
            f["content"],
        )
        src = None
        if role_file:
            src = ROLE / "files" / role_file.group(1)
        elif shared:
            src = MODULE_UTILS / shared.group(1)
        else:
            assert "lookup(" not in f["content"], f["content"]  # the settings: no file read
        out[name] = (src, f.get("mode", "0644"))
    return out


def test_the_role_installs_the_program_and_every_module_it_imports():
    files = installed_files()
    assert files["mncluster-dcgm-prolog"] == (PROGRAM, "0755")
    imported = set(re.findall(r"^import (mnc_\w+)", PROGRAM.read_text(), re.M))
    assert imported == {"mnc_dcgm", "mnc_slurm_health"}
    # the health check's drain rules, a role file; DCGM's parser, verify's one copy in module_utils
    assert files["mnc_slurm_health.py"] == (ROLE / "files" / "healthcheck" / "mnc_slurm_health.py", "0644")
    assert files["mnc_dcgm.py"] == (MODULE_UTILS / "mnc_dcgm.py", "0644")
    for src, _mode in files.values():
        assert src is None or src.is_file(), src
    assert files["settings.json"][0] is None
    # root's directory, root's mode, never under a path a user may write
    directory = INSTALLED[0]["ansible.builtin.file"]
    assert directory == {
        "path": "{{ __slurm_dcgm_prolog_dir }}", "state": "directory", "owner": "root", "group": "root",
        "mode": "0755",
    }  # fmt: skip
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert role_vars["__slurm_dcgm_prolog_dir"] == "/usr/local/lib/mncluster/dcgm-prolog"


def test_main_installs_before_slurm_conf_names_it_and_removes_after_the_restart():
    def files(name):
        tasks = yaml.safe_load((ROLE / "tasks" / name).read_text())
        modules = ("ansible.builtin.", "mncluster.")
        return tasks, [str(next(v for k, v in t.items() if k.startswith(modules))) for t in tasks]

    converge, names = files("converge.yml")
    install = names.index("dcgm-prolog.yml")
    assert converge[install]["when"] == "__slurm_todo.dcgm_prolog"
    # installed before slurm.conf names it, and before the daemons start
    assert names.index("dcgm-prolog.yml") < names.index("config.yml") < names.index("start.yml")
    # the include that holds them is taken wherever the prolog is wanted
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    todo = role_vars["__slurm_todo"]
    assert "'dcgm_prolog': __slurm_dcgm_prolog | bool and compute," in todo
    assert "or todo.dcgm_prolog or" in todo
    # removed only after the restart applied the slurm.conf that no longer names it
    _, names = files("main.yml")
    assert names.index("converge.yml") < names.index("flush_handlers") < names.index("dcgm-prolog-off.yml")


# --- slurm.conf, and the role's install and removal, by a real ansible-playbook --------------------

PLAY = """\
- name: "Case {case}"
  hosts: {case}
  gather_facts: false
  roles:
    - role: stack
  vars:
    slurm_group: {case}
    slurm_dcgm_prolog: {on}
  tasks:
    - name: Read the host name slurm.conf names the controller by
      ansible.builtin.setup:
        gather_subset: [min]
    - name: Choose the controller (the role's inputs)
      ansible.builtin.include_role:
        name: slurm
        tasks_from: inputs
        public: true
    - name: Record the nodes as install.yml does (slurmd -C and the GPU count aside)
      ansible.builtin.set_fact:
        __slurm_node:
          name: "{{{{ inventory_hostname }}}}"
          addr: "{{{{ mnc_private_ip }}}}"
          hw: {{CPUs: 4, Boards: 1, SocketsPerBoard: 1, CoresPerSocket: 4, ThreadsPerCore: 1}}
          memory: 15000
          gpus: "{{{{ node_gpus }}}}"
        __slurm_proctrack: proctrack/cgroup
        __slurm_task: task/cgroup,task/affinity
        scratch_dir: "{{{{ scratch }}}}/{{{{ inventory_hostname }}}}/dcgm-prolog"
    - name: Make the directory of a prolog of an earlier run
      ansible.builtin.file:
        path: "{{{{ scratch_dir }}}}"
        state: directory
        mode: "0755"
      when: install | bool and not slurm_dcgm_prolog | bool
    - name: Leave a prolog of an earlier run with the setting on
      ansible.builtin.copy:
        dest: "{{{{ scratch_dir }}}}/mncluster-dcgm-prolog"
        content: "stale\\n"
        mode: "0755"
      when: install | bool and not slurm_dcgm_prolog | bool
    - name: Install the prolog (the role's task file, as main.yml includes it)
      ansible.builtin.include_role:
        name: slurm
        tasks_from: dcgm-prolog
      vars:
        __slurm_dcgm_prolog_dir: "{{{{ scratch_dir }}}}"
      when: install | bool and __slurm_dcgm_prolog | bool and __slurm_is_compute
    - name: Remove it where it does not apply (the role's task file)
      ansible.builtin.include_role:
        name: slurm
        tasks_from: dcgm-prolog-off
      vars:
        __slurm_dcgm_prolog_dir: "{{{{ scratch_dir }}}}"
      when: install | bool
    - name: Write what was decided and rendered
      ansible.builtin.copy:
        dest: "{{{{ scratch }}}}/{{{{ inventory_hostname }}}}.json"
        content: >-
          {{{{ {{'prolog': __slurm_dcgm_prolog | bool,
              'conf': __slurm_tpl_slurm_conf}} | to_json }}}}
        mode: "0644"
"""

# case: (setting, {host: GPUs})
CASES = {
    "mixed_on": (True, {"gpu1": 2, "cpu1": 0}),
    "mixed_off": (False, {"gpu2": 2, "cpu2": 0}),
    "cpu_on": (True, {"cpu3": 0, "cpu4": 0}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dcgm_prolog_render")
    lines, ip = [], 10
    for case, (_on, hosts) in CASES.items():
        lines.append(f"[{case}]")
        for host, gpus in hosts.items():
            lines.append(
                f"{host} ansible_connection=local ansible_python_interpreter={sys.executable} "
                f"mnc_private_ip=10.77.0.{ip} node_gpus={gpus}"
            )
            ip += 1
    (tmp / "hosts").write_text("\n".join(lines) + "\n")
    play = "".join(PLAY.format(case=c, on=str(on).lower()) for c, (on, _) in CASES.items())
    (tmp / "play.yml").write_text(play)
    install = os.geteuid() == 0  # the task file makes root's directory: CI runs as root
    extra = json.dumps({"scratch": str(tmp / "out"), "install": install})
    proc, _ = run_playbook(tmp / "play.yml", "-e", extra, inventory=tmp / "hosts", timeout=600)
    assert proc.returncode == 0, proc.tail(9000)
    docs = {p.stem: json.loads(p.read_text()) for p in (tmp / "out").glob("*.json")}
    assert set(docs) == {h for _, hosts in CASES.values() for h in hosts}
    return docs, tmp / "out", install


PROLOG_LINES = [
    "Prolog=/usr/local/lib/mncluster/dcgm-prolog/mncluster-dcgm-prolog",
    "PrologFlags=Alloc",
]


def prolog_lines(conf):
    return [line for line in conf.splitlines() if line.startswith("Prolog")]


def test_on_with_a_gpu_node_every_node_gets_the_same_prolog_line(rendered):
    docs, _, _ = rendered
    assert docs["gpu1"]["prolog"] and docs["cpu1"]["prolog"]
    # slurm.conf is the same on every node (Slurm compares its hash): the CPU node names the prolog too
    assert docs["gpu1"]["conf"] == docs["cpu1"]["conf"]
    assert prolog_lines(docs["gpu1"]["conf"]) == PROLOG_LINES
    assert "Gres=gpu:2" in docs["gpu1"]["conf"]


def test_off_or_without_gpu_nodes_no_prolog_line(rendered):
    docs, _, _ = rendered
    for host in ("gpu2", "cpu2", "cpu3", "cpu4"):
        assert not docs[host]["prolog"], host
        assert prolog_lines(docs[host]["conf"]) == [], host
        health = "HealthCheckProgram=/usr/local/lib/mncluster/healthcheck/mncluster-healthcheck"
        assert health in docs[host]["conf"]


def test_the_role_installs_root_owned_files_and_turning_it_off_removes_them(rendered):
    _, out, install = rendered
    if not install:
        pytest.skip("installing root's files needs root (CI: root)")
    directory = out / "gpu1" / "dcgm-prolog"
    st = directory.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    assert sorted(p.name for p in directory.iterdir()) == sorted(installed_files())
    program = directory / "mncluster-dcgm-prolog"
    assert (program.stat().st_uid, stat.S_IMODE(program.stat().st_mode)) == (0, 0o755)
    assert program.read_text() == PROGRAM.read_text()
    settings = json.loads((directory / "settings.json").read_text())
    assert settings == {"node": "gpu1", "gpus": 2, "level": 1, "timeout": 120}
    assert json.loads((out / "cpu1" / "dcgm-prolog" / "settings.json").read_text())["gpus"] == 0
    # off (the stale program of an earlier run gone) and on a CPU-only cluster: nothing there
    for host in ("gpu2", "cpu2", "cpu3", "cpu4"):
        assert not (out / host / "dcgm-prolog").exists(), host


def test_the_installed_prolog_runs_from_its_directory(rendered, tmp_path):
    _, out, install = rendered
    if not install:
        pytest.skip("installing root's files needs root (CI: root)")
    installed = out / "gpu1" / "dcgm-prolog"
    prolog = Prolog(tmp_path, source=installed)
    prolog.dcgmi(PASS_DCGM3)
    assert prolog.run().returncode == 0
    assert prolog.scontrol_calls() == [] and prolog.dcgmi_calls() == ["diag -r 1"]


# --- the program, with recorded dcgmi outputs ------------------------------------------------------


class Prolog:
    """The prolog's directory (the files the role installs, or an installed directory) under
    ``tmp``, its settings pointing at a PATH of stand-ins: ``dcgmi`` prints a recorded output and
    exits with a code (or hangs), ``scontrol`` answers ``show node`` with a recorded node and logs
    every call."""

    def __init__(self, tmp: Path, gpus: int = 2, timeout: int = 30, source: Path | None = None):
        self.dir, self.bin, self.log = tmp / "prolog", tmp / "bin", tmp / "calls.log"
        self.dir.mkdir()
        self.bin.mkdir()
        if source:
            for p in source.iterdir():
                shutil.copy(p, self.dir / p.name)
        else:
            for name, (src, _mode) in installed_files().items():
                if src:
                    shutil.copy(src, self.dir / name)
        settings = {"node": "gpu1", "gpus": gpus, "level": 1, "timeout": timeout}
        settings.update({"path": str(self.bin), "state": str(tmp / "state")})
        (self.dir / "settings.json").write_text(json.dumps(settings))
        self.node(IDLE)

    def _script(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)

    def dcgmi(self, fixture: Path | None, rc: int = 0, hang: bool = False, delay: float = 0) -> None:
        log = f'echo "dcgmi $*" >> {self.log}\n'
        if fixture is None and not hang:  # dcgmi missing
            (self.bin / "dcgmi").unlink(missing_ok=True)
            return
        # A child of the shell holds the pipe: the timeout must kill the whole group.
        body = log + (f"/bin/sleep 600 &\necho $! > {self.bin / 'child.pid'}\nwait\n" if hang else "")
        if delay:
            body += f"/bin/sleep {delay}\n"
        if fixture is not None:
            body += f"/bin/cat {fixture}\n"
        self._script("dcgmi", body + f"exit {rc}\n")

    def node(self, show_node: str) -> None:
        (self.bin / "show-node.txt").write_text(show_node)
        self._script(
            "scontrol",
            f'echo "scontrol $*" >> {self.log}\n'
            f'if [ "$1 $2 $3" = "-o show node" ]; then /bin/cat {self.bin / "show-node.txt"}; fi\n',
        )

    def popen(self) -> subprocess.Popen:
        env = {"SLURMD_NODENAME": "gpu1", "SLURM_JOB_ID": "42", "PATH": "/nonexistent"}
        argv = [sys.executable, str(self.dir / "mncluster-dcgm-prolog")]
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self) -> subprocess.CompletedProcess:
        p = self.popen()
        out, err = p.communicate(timeout=120)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def dcgmi_calls(self) -> list[str]:
        return [c.removeprefix("dcgmi ") for c in self.calls() if c.startswith("dcgmi ")]

    def scontrol_calls(self) -> list[str]:
        return [c.removeprefix("scontrol ") for c in self.calls() if c.startswith("scontrol ")]

    def drains(self) -> list[str]:
        """The Reason= of every drain the prolog asked for."""
        out = []
        for c in self.scontrol_calls():
            if c.startswith("update NodeName=gpu1 State=DRAIN Reason="):
                out.append(c.removeprefix("update NodeName=gpu1 State=DRAIN Reason="))
            else:
                assert c == "-o show node gpu1", c
        return out


@pytest.mark.parametrize("fixture", [PASS_DCGM3, PASS_DCGM4], ids=["dcgm3", "dcgm4"])
def test_a_pass_exits_0_at_once_and_calls_no_scontrol(tmp_path, fixture):
    prolog = Prolog(tmp_path)
    prolog.dcgmi(fixture)
    started = time.monotonic()
    done = prolog.run()
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 10
    assert prolog.dcgmi_calls() == ["diag -r 1"]
    assert prolog.scontrol_calls() == []
    last = json.loads((tmp_path / "state" / "last.json").read_text())
    assert (last["failures"], last["job"]) == ([], "42")


# dcgmi exits non-zero when a test fails; the table's Fail counts even where it does not.
@pytest.mark.parametrize("rc", [0, 226])
def test_a_failing_test_drains_once_naming_it_and_exits_non_zero(tmp_path, rc):
    prolog = Prolog(tmp_path)
    prolog.dcgmi(FAIL_PERSISTENCE, rc=rc)
    done = prolog.run()
    assert done.returncode == 1
    [reason] = prolog.drains()
    assert reason.startswith("mncluster dcgm: Persistence Mode failed: Persistence mode for GPU 0 is")
    assert len(reason) <= rules.REASON_WIDTH
    assert "mncluster dcgm: Persistence Mode failed" in done.stdout


def test_dcgmi_missing_is_a_failure_not_a_pass(tmp_path):
    prolog = Prolog(tmp_path)
    prolog.dcgmi(None)
    assert prolog.run().returncode == 1
    assert prolog.drains() == ["mncluster dcgm: dcgmi not found (DCGM not installed on this node?)"]


def test_a_hanging_dcgmi_is_killed_at_the_timeout_and_drains(tmp_path):
    prolog = Prolog(tmp_path, timeout=2)
    prolog.dcgmi(PASS_DCGM3, hang=True)
    started = time.monotonic()
    done = prolog.run()
    took = time.monotonic() - started
    assert done.returncode == 1
    assert prolog.drains() == ["mncluster dcgm: dcgmi diag -r 1 gave no answer in 2 s"]
    assert took < 20, f"the prolog took {took:.1f} s with a 2 s timeout"
    # dcgmi's whole process group was killed, not dcgmi alone
    child = int((prolog.bin / "child.pid").read_text())
    try:
        assert not alive(child, within=5), "dcgmi's child outlived the timeout"
    finally:
        if alive(child, within=0):
            os.kill(child, 9)


def alive(pid: int, within: float) -> bool:
    """Whether ``pid`` still runs (a zombie does not) after up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.1)


def test_no_result_table_drains_with_what_dcgmi_said(tmp_path):
    prolog = Prolog(tmp_path)
    no_engine = tmp_path / "no-engine.txt"
    no_engine.write_text("Error: unable to establish a connection to the specified host: localhost\n")
    prolog.dcgmi(no_engine, rc=255)
    assert prolog.run().returncode == 1
    assert prolog.drains() == [
        "mncluster dcgm: dcgmi diag -r 1 gave no result table (exit 255: Error: unable to establish a "
        "connection to the specified host: localhost)"
    ]


def test_a_node_an_administrator_drained_keeps_its_reason(tmp_path):
    prolog = Prolog(tmp_path)
    prolog.dcgmi(FAIL_PERSISTENCE, rc=226)
    prolog.node(ADMIN_DRAINED)
    assert prolog.run().returncode == 1
    assert prolog.drains() == []
    assert prolog.scontrol_calls() == ["-o show node gpu1"]


def test_a_node_without_gpus_passes_without_dcgmi(tmp_path):
    """A CPU node of a cluster with GPU nodes: slurm.conf names the prolog there too."""
    prolog = Prolog(tmp_path, gpus=0)
    prolog.dcgmi(FAIL_PERSISTENCE, rc=226)
    assert prolog.run().returncode == 0
    assert prolog.calls() == []


def test_prologs_starting_together_run_the_diagnostic_once(tmp_path):
    prolog = Prolog(tmp_path)
    prolog.dcgmi(PASS_DCGM4, delay=3)
    started = [prolog.popen(), prolog.popen()]
    outs = [p.communicate(timeout=60)[0] for p in started]
    assert [p.returncode for p in started] == [0, 0], outs
    assert sum("a prolog that ran meanwhile" in out for out in outs) == 1, outs
    assert prolog.dcgmi_calls() == ["diag -r 1"]
    assert prolog.scontrol_calls() == []


# --- the reasons: the health check never resumes a DCGM drain ---------------------------------------


def node_with(reason):
    return rules.parse_node(ADMIN_DRAINED.replace("Reason=disk swap planned", f"Reason={reason}"))


def test_the_health_check_leaves_a_dcgm_drain_to_an_administrator():
    dcgm = "mncluster dcgm: Persistence Mode failed"
    assert rules.decide(node_with(dcgm), [])[0] == "keep"
    assert rules.decide(node_with(dcgm), ["shared directory /shared not mounted"])[0] == "keep"


def test_a_dcgm_failure_replaces_the_health_checks_drain_but_not_an_administrators():
    failures = ["Persistence Mode failed"]
    assert rules.decide_dcgm(node_with("mncluster: shared directory /shared not mounted"), failures) == (
        "drain",
        "mncluster dcgm: Persistence Mode failed",
    )
    assert rules.decide_dcgm(node_with("mncluster dcgm: Persistence Mode failed"), failures)[0] == "keep"
    assert rules.decide_dcgm(node_with("mncluster dcgm: PCIe failed"), failures)[0] == "drain"
    assert rules.decide_dcgm(rules.parse_node(ADMIN_DRAINED), failures)[0] == "keep"
    assert rules.decide_dcgm(rules.parse_node(IDLE), failures)[0] == "drain"
