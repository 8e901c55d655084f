"""module_utils/mnc_slurm.py: roles/slurm's look, as its decisions read it."""

from ansible_collections.mncluster.core.plugins.module_utils import mnc_slurm

# What tasks/install.yml's look prints on a compute node that is also the controller, in a
# container, with the files' look (mnc_files_look) lines among its own.
LOOK = [
    "hw: NodeName=mnc-node1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1"
    " RealMemory=7944",
    "limits: 1048576 unlimited unlimited",
    "munge-key: munge:munge:400 " + "ab" * 32,
    "unit: munge active enabled",
    "unit: slurmd inactive",
    "unit: slurmctld",
    "dir: /var/log/slurm slurm:slurm:755:directory",
    "dir: /var/lib/slurm/slurmd root:root:700:directory",
    "exists: /etc/slurm/cgroup.conf",
    "exists: /usr/local/sbin/mncluster-healthcheck",
    "mnc-file: /etc/slurm/slurm.conf 644:root:root " + "cd" * 32,
    "",
]


def test_every_kind_of_line_is_read():
    got = mnc_slurm.seen(LOOK)
    assert got["hw"].startswith("NodeName=mnc-node1 CPUs=2") and got["hw"].endswith("RealMemory=7944")
    assert got["limits"] == "1048576 unlimited unlimited"
    assert got["munge_key"] == "munge:munge:400 " + "ab" * 32
    assert got["munge_sum"] == "ab" * 32
    # a unit systemd knows nothing of prints no state: its value is empty, not missing
    assert got["units"] == {"munge": "active enabled", "slurmd": "inactive", "slurmctld": ""}
    assert got["dirs"] == {
        "/var/log/slurm": "slurm:slurm:755:directory",
        "/var/lib/slurm/slurmd": "root:root:700:directory",
    }
    assert got["exists"] == ["/etc/slurm/cgroup.conf", "/usr/local/sbin/mncluster-healthcheck"]


def test_a_look_that_printed_nothing_finds_nothing():
    empty = {"hw": "", "limits": "", "munge_key": "", "munge_sum": "", "units": {}, "dirs": {}, "exists": []}
    assert mnc_slurm.seen([]) == empty
    assert mnc_slurm.seen(None) == empty
    # a node without a munge key or a slurmd (not a compute node) prints none of those lines
    assert mnc_slurm.seen(["unit: munge active enabled"])["munge_key"] == ""
    assert mnc_slurm.seen(["unit: munge active enabled"])["munge_sum"] == ""
