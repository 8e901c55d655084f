"""module_utils/mnc_packages.py and roles/common's package fact: what a role's apt task still needs."""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from ansible_collections.mncluster.core.plugins.module_utils import mnc_packages

FACT = {"mncluster-packages": {"installed": "lmod munge libc6 python3-venv"}}
# What a node's fact said before the names became one string.
LIST_FACT = {"mncluster-packages": {"installed": ["lmod", "munge", "libc6", "python3-venv"]}}


def test_installed_names_are_not_missing_and_the_others_are():
    assert mnc_packages.missing_packages(["lmod", "munge"], FACT) == []
    wanted = ["lmod", "slurmd", "munge", "slurmctld"]
    assert mnc_packages.missing_packages(wanted, FACT) == ["slurmd", "slurmctld"]
    assert mnc_packages.missing_packages("lmod", FACT) == []
    assert mnc_packages.missing_packages([], FACT) == []
    assert mnc_packages.missing_packages(wanted, LIST_FACT) == ["slurmd", "slurmctld"]


def test_without_the_fact_every_name_is_missing():
    """A node the common role has not set up yet (or no dpkg): apt decides."""
    for local in (None, {}, {"mncluster-packages": {}}, {"mncluster-packages": "x"}, {"other": FACT}):
        assert mnc_packages.missing_packages(["lmod", "munge"], local) == ["lmod", "munge"]


def test_what_it_cannot_judge_counts_as_missing():
    """Versions, releases and globs are apt's to compare; an architecture is judged by the name."""
    names = ["lmod=8.6*", "munge/bookworm", "libc*", "libc6:amd64", "python3-venv"]
    assert mnc_packages.missing_packages(names, FACT) == ["lmod=8.6*", "munge/bookworm", "libc*"]


def test_the_fact_script_lists_what_dpkg_has_installed():
    """The script fact gathering runs: JSON with this machine's installed packages, and only those."""
    script = ROOT / "roles/common/files/mncluster-packages.fact"
    out = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True).stdout
    installed = json.loads(out)["installed"]
    assert isinstance(installed, str)  # one object for Ansible to copy per task, not one per package
    installed = installed.split()
    status = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package}\\n"],
                            capture_output=True, text=True, check=False).stdout  # fmt: skip
    expected = {line.split()[1] for line in status.splitlines() if line.startswith("ii")}
    assert set(installed) == expected
    assert "dpkg" in installed
    fact = json.loads(f'{{"mncluster-packages": {out}}}')
    assert mnc_packages.missing_packages(["dpkg", "mnc-no-such-package"], fact) == ["mnc-no-such-package"]
