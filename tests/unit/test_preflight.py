"""playbooks/preflight.yml: every bad input refused on the controller, before any node is touched.

Real ansible-playbook runs against inventories written into tmp_path whose nodes
are at 192.0.2.0/24 (TEST-NET-1, never routed) over SSH: any attempt to contact
one would hang until ansible.cfg's 20 s timeout and end UNREACHABLE, so a run
that fails in well under 15 s, with no UNREACHABLE, touched no node. The pure
rules (module_utils/mnc_preflight.py) are tested directly first.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible_env import run_playbook
from mnc_battery import record

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

PREFLIGHT = ROOT / "playbooks" / "preflight.yml"
# What "hung" means for one preflight run (normally a few seconds; 32 s seen on a loaded
# 2-core machine): a bound that finds a hang, not a speed the test would then depend on.
BOUND_S = 60


# ---- the pure rules ---------------------------------------------------------------------------


def test_node_rules_name_host_and_variable():
    problems = mnc_preflight.node_problems(
        "n1",
        {
            "mnc_slots_per_node": "0",
            "mnc_mpi_user": "root",
            "bonding_interfaces": ["eth0", "eth1 && reboot"],
            "verify_timeout": "x",
            "mnc_link_gbps": "ten",
            "mnc_private_ip": "10.1.2.256",
            "mnc_private_prefix": 33,
            "benchmark_launcher": "slurm",
            "mnc_scheduler": "none",
        },
    )
    for var in ("mnc_slots_per_node", "mnc_mpi_user", "bonding_interfaces", "verify_timeout",
                "mnc_link_gbps", "mnc_private_ip", "mnc_private_prefix", "benchmark_launcher"):
        assert any(p.startswith(f"n1: {var}: ") for p in problems), (var, problems)


def test_node_rules_accept_good_values():
    assert mnc_preflight.node_problems(
        "gpu01",
        {
            "mnc_slots_per_node": 4,
            "mnc_mpi_user": "mpiuser",
            "bonding_interfaces": ["enp1s0f0", "enp1s0f1"],
            "benchmark_timeout": "900",
            "mnc_link_gbps": "25.5",
            "mnc_private_ip": "192.168.0.1",
            "slurm_cluster_name": "mncluster",
            "benchmark_launcher": "slurm",
            "mnc_scheduler": "slurm",
        },
    ) == []


def test_cluster_rules_missing_and_shared_addresses():
    problems = mnc_preflight.cluster_problems({"a": "10.0.0.1", "b": "10.0.0.1", "c": None, "d": "10.0.0.4"})
    assert any(p.startswith("a: mnc_private_ip: ") and "b" in p for p in problems)
    assert any(p.startswith("b: mnc_private_ip: ") and "a" in p for p in problems)
    assert any(p.startswith("c: mnc_private_ip: not set") for p in problems)
    assert not any(p.startswith("d:") for p in problems)


def test_unsafe_names_is_the_roles_rule():
    assert mnc_preflight.unsafe_names(["eth0", "bond0.100", "eth1;id"], "interface") == ["eth1;id"]
    assert mnc_preflight.unsafe_names("mnc cluster", "name") == ["mnc cluster"]
    assert mnc_preflight.unsafe_names("Mpi", "user") == ["Mpi"]


def test_every_role_spec_is_read_without_defaults():
    specs = mnc_preflight.role_specs(mnc_preflight.read_specs(ROOT / "roles"))
    roles = {s["role"] for s in specs}
    assert roles == {p.parents[1].name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml")}
    assert ("artifacts", "fetch") in {(s["role"], s["entry"]) for s in specs}
    for spec in specs:
        for opt in spec["options"].values():
            assert "default" not in opt and "required" not in opt


# ---- real runs --------------------------------------------------------------------------------


def write_inventory(path: Path, hosts: dict, group_vars: dict | None = None) -> Path:
    """An inventory of unroutable SSH nodes (192.0.2.x) with the given host variables."""
    inv = {
        "mnc_nodes": {
            "vars": {"ansible_connection": "ssh", "ansible_user": "nobody", **(group_vars or {})},
            "hosts": {
                name: {"ansible_host": f"192.0.2.{10 + i}", "mnc_private_ip": f"10.77.0.{10 + i}", **hv}
                for i, (name, hv) in enumerate(hosts.items())
            },
        }
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(yaml.safe_dump(inv, sort_keys=False))
    return path / "hosts.yml"


def problems_of(output: str) -> list[str]:
    """The problem lines of preflight's one failure message (JSON-escaped newlines or real ones)."""
    return [seg.strip()[2:] for seg in re.split(r"\\n|\n", output) if seg.strip().startswith("- ")]


def run(playbook: Path, inventory) -> tuple[int, str, float]:
    proc, wall = run_playbook(playbook, inventory=inventory, timeout=120)
    return proc.returncode, proc.stdout, wall


def assert_no_node_contacted(output: str):
    assert "UNREACHABLE" not in output and "unreachable=1" not in output, output[-3000:]
    assert not re.search(r"changed=[1-9]", output), output[-3000:]


@pytest.mark.battery("site.yml: 7 mistakes on 4 nodes, all named in one failure", bound_s=BOUND_S)
def test_five_mistakes_all_named_in_one_failure_of_site_yml(tmp_path):
    inventory = write_inventory(
        tmp_path / "inv",
        {
            "node-a": {"mnc_slots_per_node": 0, "mnc_link_gbps": "ten"},
            "node-b": {"mnc_mpi_user": "root", "mnc_private_ip": "10.77.0.10"},  # node-a's address
            "node-c": {"mnc_private_ip": "10.77.0.300", "benchmark_timeout": 0},
            "node-d": {"bonding_interfaces": ["eth0;reboot", "eth1"]},
        },
    )
    expected = [
        ("node-a", "mnc_slots_per_node"),
        ("node-a", "mnc_link_gbps"),
        ("node-b", "mnc_mpi_user"),
        ("node-b", "mnc_private_ip"),
        ("node-c", "mnc_private_ip"),
        ("node-c", "benchmark_timeout"),
        ("node-d", "bonding_interfaces"),
    ]
    # site.yml itself: preflight is its first play and nothing after it runs
    rc, out, wall = run(ROOT / "site.yml", inventory)
    problems = problems_of(out)
    print(f"\nsite.yml, {len(expected)} mistakes: rc={rc}, {wall:.1f} s, {len(problems)} problems reported")
    assert rc != 0
    for host, var in expected:
        assert any(p.startswith(f"{host}: ") and var in p for p in problems), (host, var, problems)
    # one failure (ansible-core 2.19 also repeats its message in an "[ERROR]: Task failed" line)
    assert out.count("fatal: ") == 1 and "problem(s)" in out
    assert_no_node_contacted(out)
    # the plays after preflight never started
    assert "PLAY [Base system on every node]" not in out
    assert wall < BOUND_S, f"preflight took {wall:.1f} s"


# One bad input per case: (name, hosts, group_vars, variable the message must name, host it names).
CASES = [
    ("slots of the wrong type", {"n1": {"mnc_slots_per_node": "two"}}, {}, "mnc_slots_per_node", "n1"),
    ("slots 0", {"n1": {"mnc_slots_per_node": 0}}, {}, "mnc_slots_per_node", "n1"),
    ("private IP not an address", {"n1": {"mnc_private_ip": "10.77.0.256"}}, {}, "mnc_private_ip", "n1"),
    ("private IP shared", {"n1": {}, "n2": {"mnc_private_ip": "10.77.0.10"}}, {}, "mnc_private_ip", "n2"),
    ("MPI user root", {"n1": {}}, {"mnc_mpi_user": "root"}, "mnc_mpi_user", "n1"),
    ("shell metacharacters in a cluster name", {"n1": {"slurm_cluster_name": "mnc$(reboot)"}}, {},
     "slurm_cluster_name", "n1"),
    ("shell metacharacters in a NIC name", {"n1": {}}, {"bonding_interfaces": ["eth0", "eth1|id"]},
     "bonding_interfaces", "n1"),
    ("benchmark_timeout 0", {"n1": {"benchmark_timeout": 0}}, {}, "benchmark_timeout", "n1"),
    ("verify_timeout negative", {"n1": {"verify_timeout": "-5"}}, {}, "verify_timeout", "n1"),
    ("link speed not a number", {"n1": {"mnc_link_gbps": "ten"}}, {}, "mnc_link_gbps", "n1"),
    ("argument spec choice", {"n1": {"mnc_accelerator": "tpu"}}, {}, "mnc_accelerator", "n1"),
    ("DCGM diagnostic level 7 (1-4, 0 off)", {"n1": {"verify_dcgm_level": 7}}, {}, "verify_dcgm_level", "n1"),
    ("nccl-tests threshold not a number", {"n1": {}}, {"verify_nccl_min_busbw_gbs": "fast"},
     "verify_nccl_min_busbw_gbs", "n1"),
    ("health check interval not a number", {"n1": {"slurm_health_check_interval": "often"}}, {},
     "slurm_health_check_interval", "n1"),
    ("version matrix: Python 3.12 with Chainer 7", {"n1": {}}, {"stack_python_version": "3.12.1"},
     "stack_python_version", "n1"),
    ("offline with artifacts missing", {"n1": {}}, {"mnc_offline": True, "mnc_artifact_cache": "@CACHE@"},
     "mnc_artifact_cache", "controller"),
    ("MPI user name with shell characters", {"n1": {}}, {"mnc_mpi_user": "mpi;id"}, "mnc_mpi_user", "n1"),
    ("MPI user uid 0", {"n1": {"mnc_mpi_user_uid": 0}}, {}, "mnc_mpi_user_uid", "n1"),
    ("private prefix 33", {"n1": {"mnc_private_prefix": 33}}, {}, "mnc_private_prefix", "n1"),
    ("private IP empty", {"n1": {"mnc_private_ip": ""}}, {}, "mnc_private_ip", "n1"),
    ("host name with a space", {"n1": {"mnc_private_hostname": "a b"}}, {}, "mnc_private_hostname", "n1"),
    ("scheduler neither none nor slurm", {"n1": {}}, {"mnc_scheduler": "pbs"}, "mnc_scheduler", "n1"),
    ("Python provider", {"n1": {}}, {"mnc_python_provider": "conda"}, "mnc_python_provider", "n1"),
    ("benchmark launcher pbs (unsupported)", {"n1": {}}, {"benchmark_launcher": "pbs"},
     "benchmark_launcher", "n1"),
    ("benchmark through Slurm without Slurm", {"n1": {}}, {"benchmark_launcher": "slurm"},
     "benchmark_launcher", "n1"),
    ("benchmark framework neither chainer, pytorch nor both", {"n1": {}},
     {"benchmark_framework": "tensorflow"},
     "benchmark_framework", "n1"),
    ("PyTorch's CUDA build with a driver older than its CUDA needs", {"n1": {}},
     {"chainer_torch": True, "stack_cuda_driver_branch": "570", "stack_cuda_driver_version": "570.195.03"},
     "stack_cuda_driver_version", "n1"),
    ("the MPI user's home as a shared directory (shared_fs mounts after it is written)", {"n1": {}},
     {"mnc_shared_dirs": ["/home"]}, "mnc_shared_dirs", "n1"),
    ("a shared directories' server that is not in the inventory", {"n1": {}},
     {"mnc_shared_dirs": ["/scratch"], "shared_fs_server": "nfs01"}, "shared_fs_server", "n1"),
]


def test_bad_inputs_each_refused_before_any_change(tmp_path):
    lines, refused, hung = [], 0, 0
    failures = []
    for i, (name, hosts, group_vars, var, host) in enumerate(CASES):
        cache = tmp_path / f"cache{i}"
        cache.mkdir()
        gv = {k: (str(cache) if v == "@CACHE@" else v) for k, v in group_vars.items()}
        inventory = write_inventory(tmp_path / f"case{i}", hosts, gv)
        rc, out, wall = run(PREFLIGHT, inventory)
        problems = problems_of(out)
        named = any(p.startswith(f"{host}: ") and var in p for p in problems)
        clean = "UNREACHABLE" not in out and not re.search(r"changed=[1-9]", out)
        ok = rc != 0 and named and clean and wall < BOUND_S
        hung += wall >= BOUND_S
        refused += ok
        lines.append(f"  {'refused' if ok else 'NOT REFUSED'}: {name} ({host}: {var}) rc={rc} {wall:.1f} s")
        record(f"preflight: {name} ({host}: {var})", ok, wall, BOUND_S, "tests/unit/test_preflight.py")
        if not ok:
            failures.append((name, rc, wall, problems or out[-2000:]))
    print("\n" + "\n".join(lines))
    print(f"bad inputs: {len(CASES)} tried, {refused} refused before any change, {hung} hung")
    assert not failures, failures


def test_offline_with_the_cache_the_environment_names_lists_what_it_lacks(tmp_path, monkeypatch):
    """No mnc_artifact_cache in the inventory (the default, or MNC_ARTIFACT_CACHE): the refusal
    still names the cache and every missing artifact, not an undefined variable."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("MNC_ARTIFACT_CACHE", str(cache))
    rc, out, _ = run(PREFLIGHT, write_inventory(tmp_path / "inv", {"n1": {}}, {"mnc_offline": True}))
    lacks = [p for p in problems_of(out) if p.startswith("controller: mnc_artifact_cache")]
    assert rc != 0 and lacks and str(cache) in lacks[0] and "not staged" in lacks[0], out[-3000:]
    assert "undefined" not in out
    assert_no_node_contacted(out)


@pytest.mark.parametrize("torch", [False, True])
def test_offline_requires_the_torch_wheelhouses_only_with_chainer_torch(tmp_path, monkeypatch, torch):
    """PyTorch's wheelhouses (the CUDA build is 2.7 GB) are required offline, and staged, only where
    the chainer role installs torch (chainer_torch): a GPU configuration without it needs neither."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("MNC_ARTIFACT_CACHE", str(cache))
    group = {"mnc_offline": True, **({"chainer_torch": True} if torch else {})}
    rc, out, _ = run(PREFLIGHT, write_inventory(tmp_path / "inv", {"n1": {}}, group))
    missing = set(re.findall(r"wheelhouse ([a-z_]+) - \(", out))
    assert rc != 0 and {"python", "cuda"} <= missing, out[-3000:]
    assert {"torch", "torch_cuda"} & missing == ({"torch", "torch_cuda"} if torch else set()), missing
    assert_no_node_contacted(out)


@pytest.mark.parametrize("name", ["example", "sandbox"])
def test_the_repository_inventories_pass(tmp_path, name):
    inventory = [ROOT / "inventory" / name]
    assert inventory[0].is_dir()
    if name == "sandbox":
        # playbooks/sandbox.yml writes hosts.yml there; the same shape, at unroutable addresses
        nodes = {"mnc-node1": {}, "mnc-node2": {}, "mnc-node3": {}}
        inventory.append(write_inventory(tmp_path / "hosts", nodes))
    rc, out, _ = run(PREFLIGHT, inventory)
    assert rc == 0, out[-3000:]
    assert "no problem" in out
    assert_no_node_contacted(out)
