"""roles/nccl_tests' build request, decided on the controller, and the wiring around it.

The build itself needs nccl-tests' source, which `make test` cannot reach (GitHub), and a CUDA
toolkit with nvcc: it was proved once by hand (the commit that added the role says what ran).
What is checked here is everything the role decides before it builds, with the real
tasks/inputs.yml run by ansible-playbook on localhost, case by case: the source record (URL,
sha256, file name), upstream's make command as the role renders it (MPI=1, MPI_HOME, CUDA_HOME,
NCCL_HOME, NVCC_GENCODE, extra variables), the prefix, the build fingerprint and the build-cache
hash artifacts derives from it, and the refusals. The toolkit, NCCL and OpenMPI are stand-in
directories (include/nccl.h, include/mpi.h, OpenMPI's build marker): the look only reads them.
Then the wiring: playbooks/mpi.yml runs the role in a play whose hosts are the GPU nodes only
(its expression run by Ansible over an inventory of GPU and CPU nodes), stage.yml and preflight
stage and require the source unless the configuration is CPU-only, and verify's
verify_nccl_tests_bin defaults to the role's program on GPU nodes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible_env import CASE_FACTS, CASE_GATHER, CASE_REFUSAL, ROOT, run_cases, run_playbook

VERSION = "2.19.6"
SHA256 = "85c65a240432a5bd8bf8598ac235582921a96e8a968a8a675d23419478a4ab9c"
URL = f"https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v{VERSION}.tar.gz"
OPENMPI_HASH = "9b17e05bda52b423"
OVERRIDE_SHA = "ab" * 32
GPU_ONLY_HOSTS = ROOT / "playbooks" / "mpi.yml"

CASE_TASKS = (
    CASE_GATHER
    + CASE_FACTS
    + """\
- name: "Settle the inputs ({{ case.name }})"
  block:
    - name: "Settle ({{ case.name }})"
      ansible.builtin.include_role:
        name: nccl_tests
        tasks_from: inputs
        # the matrix's defaults (stack_nccl_tests_artifacts) readable below
        public: true
    # What verify's main play sees on this node once the role ran (its export).
    - name: "The facts the role exports ({{ case.name }})"
      ansible.builtin.set_fact:
        mnc_nccl_tests_prefix: "{{ __nccl_tests_prefix }}"
    - name: "verify's defaults ({{ case.name }})"
      ansible.builtin.include_vars:
        file: "{{ case_root }}/roles/verify/defaults/main.yml"
        name: __case_verify_defaults
    - name: "Write what was decided ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: >-
          {{ {'make_args': __nccl_tests_make_args,
              'fingerprint': __nccl_tests_fingerprint,
              'hash': (__nccl_tests_fingerprint | to_json(sort_keys=true)) | hash('sha256')
                      | truncate(16, true, '', 0),
              'prefix': __nccl_tests_prefix,
              'builder': __nccl_tests_builder_host,
              'record': __nccl_tests_artifact,
              'source': __nccl_tests_source,
              'stack_artifacts': stack_nccl_tests_artifacts,
              'verify_bin': __case_verify_defaults.verify_nccl_tests_bin} | to_json }}
        mode: "0644"
"""
    + CASE_REFUSAL
)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """A pip-style CUDA prefix holding NCCL, a repository-style toolkit without it, NCCL on its
    own, and OpenMPI prefixes with and without the build cache's marker."""
    tmp = tmp_path_factory.mktemp("nccl-tests-stand-ins")
    nccl_h = "#define NCCL_MAJOR 2\n#define NCCL_MINOR 23\n#define NCCL_PATCH 4\n#define NCCL_SUFFIX \"\"\n"
    dirs = {
        "cuda_pip": tmp / "cuda-12.6",
        "cuda_repo": tmp / "cuda-repo",
        "nccl": tmp / "nccl",
        "nccl_new": tmp / "nccl-2.27",
        "mpi": tmp / "openmpi" / "5.0.7-cuda12.6",
        "mpi_rebuilt": tmp / "openmpi-rebuilt",
        "mpi_foreign": tmp / "mpich",
    }
    for d in dirs.values():
        (d / "include").mkdir(parents=True)
    (dirs["cuda_pip"] / "include" / "nccl.h").write_text(nccl_h)
    (dirs["nccl"] / "include" / "nccl.h").write_text(nccl_h)
    (dirs["nccl_new"] / "include" / "nccl.h").write_text(nccl_h.replace("MINOR 23", "MINOR 27"))
    for key, fp_hash in (("mpi", OPENMPI_HASH), ("mpi_rebuilt", "0123456789abcdef")):
        (dirs[key] / "include" / "mpi.h").write_text("/* stand-in */\n")
        marker = {"fingerprint": {"version": "5.0.7"}, "fingerprint_hash": fp_hash, "name": "openmpi"}
        (dirs[key] / ".mncluster-build.json").write_text(json.dumps(marker, indent=4))
    (dirs["mpi_foreign"] / "include" / "mpi.h").write_text("/* stand-in */\n")
    return {k: str(v) for k, v in dirs.items()}


def _cases(d):
    base = {
        "mnc_cuda_home": d["cuda_pip"],
        "mnc_cuda_version": "12.6",
        "mnc_openmpi_prefix": d["mpi"],
        "mnc_use_gpu": True,
        "mnc_accelerator": "auto",
        "mnc_artifact_overrides": {},
        "nccl_tests_nccl_home": "",
        "nccl_tests_nvcc_gencode": "",
        "nccl_tests_make_extra_args": [],
        "mnc_private_ip": "10.0.0.1",
        # the stand-in toolkits have no bin/nvcc: "always" checks the request as a real build would
        "nccl_tests_build": "always",
    }

    def case(name, **knobs):
        return {"name": name, "vars": {**base, **knobs}}

    return [
        case("pip"),
        case("repo", mnc_cuda_home=d["cuda_repo"], nccl_tests_nccl_home=d["nccl"]),
        case("gencode", nccl_tests_nvcc_gencode="-gencode=arch=compute_90,code=sm_90"),
        case("extra", nccl_tests_make_extra_args=["CXX=g++-13"]),
        case("cuda-12.4", mnc_cuda_version="12.4"),
        case("nccl-2.27", nccl_tests_nccl_home=d["nccl_new"]),
        case("openmpi-rebuilt", mnc_openmpi_prefix=d["mpi_rebuilt"]),
        case("openmpi-foreign", mnc_openmpi_prefix=d["mpi_foreign"]),
        case("cpu-node", mnc_use_gpu=False),
        case("cpu-only", mnc_accelerator="cpu"),
        case(
            "override",
            mnc_artifact_overrides={
                "nccl-tests": {"path": "/srv/src/nccl-tests-2.19.6.tar.gz", "sha256": OVERRIDE_SHA}
            },
        ),
        case("nccl-nowhere", mnc_cuda_home=d["cuda_repo"]),
        # refused
        case("no-cuda", mnc_cuda_home="", mnc_cuda_version=""),
        case("no-mpi-h", mnc_openmpi_prefix=d["cuda_repo"]),
        case("extra-not-a-variable", nccl_tests_make_extra_args=["install", "-C", "/"]),
        case("gencode-not-nvcc", nccl_tests_nvcc_gencode="; rm -rf /"),
        case("no-sha256", nccl_tests_source={"name": "nccl-tests", "version": VERSION, "filename": "x.tar.gz",
                                             "url": URL, "sha256": ""}),
        # last: its knob stays set as a fact for the cases after it
        case("prefix-above-openmpi", nccl_tests_prefix=str(Path(d["mpi"]).parent)),
    ]


REFUSED = {
    "no-cuda", "no-mpi-h", "extra-not-a-variable", "gencode-not-nvcc", "no-sha256", "prefix-above-openmpi",
}


@pytest.fixture(scope="module")
def decided(tmp_path_factory, stand_ins):
    tmp = tmp_path_factory.mktemp("nccl-tests")
    cases = [dict(c, vars=dict(c["vars"], case_root=str(ROOT))) for c in _cases(stand_ins)]
    results = run_cases(tmp, "Settle nccl-tests' build inputs, case by case", CASE_TASKS, cases)
    for name, got in results.items():
        if name not in REFUSED and name != "nccl-nowhere":
            assert "failed" not in got, (name, got)
    return results


def test_the_source_is_the_pinned_upstream_tag_with_its_sha256(decided):
    got = decided["pip"]
    assert got["record"] == {
        "name": "nccl-tests", "version": VERSION, "filename": f"nccl-tests-{VERSION}.tar.gz",
        "url": URL, "sha256": SHA256,
    }
    assert got["source"]["url"] == URL and got["source"]["sha256"] == SHA256
    assert got["fingerprint"]["source_sha256"] == SHA256 and got["fingerprint"]["version"] == VERSION


def test_upstreams_make_command_with_mpi_against_our_prefixes(decided, stand_ins):
    assert decided["pip"]["make_args"] == [
        "MPI=1", f"MPI_HOME={stand_ins['mpi']}", f"CUDA_HOME={stand_ins['cuda_pip']}",
        f"NCCL_HOME={stand_ins['cuda_pip']}",
    ]
    # the repository's toolkit has no NCCL: the one named (/usr where nothing is)
    assert decided["repo"]["make_args"] == [
        "MPI=1", f"MPI_HOME={stand_ins['mpi']}", f"CUDA_HOME={stand_ins['cuda_repo']}",
        f"NCCL_HOME={stand_ins['nccl']}",
    ]
    assert decided["gencode"]["make_args"][-1] == "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90"
    assert decided["extra"]["make_args"][-1] == "CXX=g++-13"
    assert not any(a.startswith("NVCC_GENCODE") for a in decided["pip"]["make_args"])


def test_the_nccl_home_falls_back_to_usr(decided, stand_ins):
    got = decided["nccl-nowhere"]
    if Path("/usr/include/nccl.h").exists():
        assert "NCCL_HOME=/usr" in got["make_args"]
    else:
        assert f"no include/nccl.h under {stand_ins['cuda_repo']} or /usr" in got["failed"]


def test_the_build_command_is_the_rendered_one():
    """build.yml runs make with exactly the rendered arguments, in the unpacked source, and
    installs build/*_perf into the staged prefix's bin (nccl-tests has no install target)."""
    tasks = yaml.safe_load((ROOT / "roles/nccl_tests/tasks/build.yml").read_text())
    block = next(t for t in tasks if t.get("name", "").startswith("Compile and install"))["block"]
    make = next(t for t in block if t["name"].startswith("Compile nccl-tests"))["ansible.builtin.shell"]
    rendered = "{{ __nccl_tests_make_args | map('quote') | join(' ') }}"
    assert "make -j{{ nccl_tests_make_jobs | int }} " + rendered in make["cmd"]
    assert make["chdir"] == "{{ __nccl_tests_src }}"
    install = next(t for t in block if t["name"].startswith("Install the programs"))["ansible.builtin.shell"]
    assert "install -m 0755 build/*_perf {{ (__nccl_tests_stage ~ '/bin/') | quote }}" in install["cmd"]
    main = yaml.safe_load((ROOT / "roles/nccl_tests/tasks/main.yml").read_text())
    build = next(t for t in main if "block" in t and t["vars"].get("artifacts_build_name") == "nccl-tests")
    assert build["vars"]["artifacts_build_fingerprint"] == "{{ __nccl_tests_fingerprint }}"
    assert build["vars"]["artifacts_build_prefix"] == "{{ __nccl_tests_prefix }}"
    # build_check, then one include where a node lacks the build: the build on the builder
    # (with build_release as its rescue), then build_install
    check, missing = build["block"]
    assert check["ansible.builtin.include_role"]["tasks_from"] == "build_check"
    assert missing["ansible.builtin.include_tasks"] == "build-missing.yml"
    assert missing["when"] == "artifacts_build_result.missing | bool"
    steps = yaml.safe_load((ROOT / "roles/nccl_tests/tasks/build-missing.yml").read_text())
    assert steps[0]["block"][0]["ansible.builtin.include_tasks"] == "build.yml"
    assert steps[0]["rescue"][0]["ansible.builtin.include_role"]["tasks_from"] == "build_release"
    assert steps[1]["ansible.builtin.include_role"]["tasks_from"] == "build_install"


def test_prefix_and_fingerprint(decided):
    got = decided["pip"]
    assert got["prefix"] == f"/opt/nccl-tests/{VERSION}-cuda12.6"
    assert got["builder"] == "localhost"
    fp = got["fingerprint"]
    assert set(fp) == {
        "version", "source_sha256", "make_args", "cuda_version", "nccl_version", "openmpi_build", "os",
    }
    assert fp["make_args"] == got["make_args"]
    assert fp["nccl_version"] == "2.23.4" and fp["cuda_version"] == "12.6"
    assert fp["openmpi_build"] == OPENMPI_HASH
    assert decided["cuda-12.4"]["prefix"] == f"/opt/nccl-tests/{VERSION}-cuda12.4"


def test_every_input_is_a_new_build(decided):
    names = (
        "pip", "repo", "gencode", "extra", "cuda-12.4", "nccl-2.27",
        "openmpi-rebuilt", "openmpi-foreign", "override",
    )
    hashes = {name: decided[name]["hash"] for name in names}
    assert len(set(hashes.values())) == len(hashes), hashes
    assert decided["nccl-2.27"]["fingerprint"]["nccl_version"] == "2.27.4"
    assert decided["openmpi-rebuilt"]["fingerprint"]["openmpi_build"] == "0123456789abcdef"
    assert decided["openmpi-foreign"]["fingerprint"]["openmpi_build"] == "none"
    # a CPU node's facts do not enter the build (it never runs the role): same request, same build
    assert decided["cpu-node"]["hash"] == decided["pip"]["hash"]


def test_the_override_is_the_bytes_built(decided):
    got = decided["override"]
    assert got["source"]["sha256"] == OVERRIDE_SHA and got["fingerprint"]["source_sha256"] == OVERRIDE_SHA
    assert got["record"]["sha256"] == SHA256


def test_refusals_name_what_is_wrong(decided):
    assert "there is no CUDA toolkit to build against" in decided["no-cuda"]["failed"]
    assert "no include/mpi.h under MPI_HOME" in decided["no-mpi-h"]["failed"]
    msg = decided["extra-not-a-variable"]["failed"]
    assert "nccl_tests_make_extra_args must be make variables, NAME=value" in msg and "'-C'" in msg
    msg = decided["gencode-not-nvcc"]["failed"]
    assert "nccl_tests_nvcc_gencode (; rm -rf /) must be nvcc -gencode or -arch" in msg
    assert "must be that release with its sha256" in decided["no-sha256"]["failed"]
    assert "must be a directory of its own" in decided["prefix-above-openmpi"]["failed"]
    for name in REFUSED:
        assert "nccl_tests:" in decided[name]["failed"], name


def test_the_source_is_staged_and_required_unless_cpu_only(decided):
    assert decided["pip"]["stack_artifacts"] == [decided["pip"]["record"]]
    assert decided["cpu-only"]["stack_artifacts"] == []
    stage = yaml.safe_load((ROOT / "playbooks/stage.yml").read_text())[0]
    # -e stage_gpu=false leaves it out with the other GPU components
    assert "nccl_tests" in stage["vars"]["stage_gpu_components"]
    spec = yaml.safe_load((ROOT / "roles/stack/meta/argument_specs.yml").read_text())
    assert "stack_nccl_tests_artifacts" in spec["argument_specs"]["check"]["options"]


def test_verify_runs_the_roles_program_on_gpu_nodes(decided):
    assert decided["pip"]["verify_bin"] == f"/opt/nccl-tests/{VERSION}-cuda12.6/bin/all_reduce_perf"
    assert decided["cpu-node"]["verify_bin"] == ""


def _gpu_play():
    plays = yaml.safe_load(GPU_ONLY_HOSTS.read_text())
    found = [p for p in plays if any(t.get("ansible.builtin.import_role", {}).get("name") == "nccl_tests"
                                     for t in p.get("tasks", []))]
    assert len(found) == 1, "playbooks/mpi.yml runs nccl_tests in one play"
    for play in plays:
        if play is not found[0]:
            assert "nccl_tests" not in yaml.safe_dump(play), play.get("name")
    return found[0]


def test_the_role_runs_in_a_play_of_the_gpu_nodes_only(tmp_path):
    """The play's own hosts expression over an inventory of GPU and CPU nodes (one without the
    fact): only the GPU nodes enter it; an inventory without GPU nodes matches no node at all."""
    play = _gpu_play()
    # the play's only task imports the role (its inputs were checked once for the run: preflight)
    assert [t["ansible.builtin.import_role"] for t in play["tasks"]] == [
        {"name": "nccl_tests", "rolespec_validate": False}] and "when" not in play["tasks"][0]
    # its one role is stack (the matrix and the shared defaults, no task of its own)
    assert play.get("roles") == [{"role": "stack"}] and "when" not in play
    probe = [
        {"name": "Load the mode", "hosts": "mnc_nodes", "gather_facts": False,
         "tasks": [{"name": "Set mnc_use_gpu", "ansible.builtin.set_fact": {"mnc_use_gpu": "{{ gpu }}"},
                    "when": "gpu is defined"}]},
        {"name": "The GPU play's hosts", "hosts": play["hosts"], "gather_facts": False,
         "tasks": [{"name": "Entered", "ansible.builtin.debug": {"msg": "entered"}}]},
    ]
    (tmp_path / "probe.yml").write_text(yaml.safe_dump(probe, sort_keys=False))
    local = f"ansible_connection=local ansible_python_interpreter={sys.executable}"
    for gpus, expected in (({"g1": True, "c1": False, "g2": True, "n1": None}, {"g1", "g2"}),
                           ({"c1": False, "n1": None}, set())):
        lines = ["[mnc_nodes]"] + [
            f"{h} {local}" + ("" if gpu is None else f" gpu={str(gpu).lower()}") for h, gpu in gpus.items()
        ]
        (tmp_path / "hosts").write_text("\n".join(lines) + "\n")
        proc, _ = run_playbook(tmp_path / "probe.yml", inventory=tmp_path / "hosts", timeout=300)
        assert proc.returncode == 0, proc.tail(3000)
        entered = {r["_host"] for r in proc.results("Entered") if r.get("_event") == "runner_on_ok"}
        assert entered == expected, (gpus, entered)


LEAVE_PLAY = """\
- name: nccl-tests where the builder's toolkit has no nvcc
  hosts: localhost
  gather_facts: true
  roles:
    - role: stack
  tasks:
    - name: The role's inputs
      ansible.builtin.include_role:
        name: nccl_tests
        tasks_from: inputs
    - name: Say what was decided
      ansible.builtin.debug:
        msg: "decided={{ __nccl_tests_fingerprint is defined }}"
"""


@pytest.mark.parametrize("build", ["auto", "never"])
def test_without_nvcc_auto_leaves_nccl_tests_out_and_says_why(tmp_path, stand_ins, build):
    """The cuda role's pip method installs no nvcc: auto (the default) and never leave the role
    on every node, saying why, instead of failing the MPI stage; always refuses (above)."""
    hosts = tmp_path / "hosts"
    hosts.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    (tmp_path / "play.yml").write_text(LEAVE_PLAY)
    extra = {"mnc_cuda_home": stand_ins["cuda_pip"], "mnc_cuda_version": "12.6",
             "mnc_openmpi_prefix": stand_ins["mpi"], "mnc_use_gpu": True, "nccl_tests_build": build}
    proc, _ = run_playbook(tmp_path / "play.yml", "-e", json.dumps(extra), inventory=hosts, timeout=300)
    assert proc.returncode == 0, proc.tail(4000)
    assert "nccl-tests is not built" in proc.stdout, proc.tail(4000)
    no_nvcc = "has no " + stand_ins["cuda_pip"] + "/bin/nvcc"
    assert (no_nvcc in proc.stdout) == (build == "auto"), proc.tail(4000)
    assert "decided=False" in proc.stdout, proc.tail(4000)
