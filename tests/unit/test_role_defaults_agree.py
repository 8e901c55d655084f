"""One source of truth per default: defaults/, meta/argument_specs.yml and README agree.

A role's default lives in defaults/main.yml (or defaults/main/*.yml): that is
the value Ansible uses. meta/argument_specs.yml may repeat it for
ansible-doc and the validation message; where it does, it must be the same
value (not a paraphrase, not an older one). A role's README variable tables
(a table whose first column is headed `variable` or `input`) document the
role's options: every name they list is an option of the argument spec, and
every option of the main entry point is listed. Private options (`__*`) are
not documented; `stack` documents its version matrix by file, so only its
shared `mnc_*` defaults must appear in its table.
"""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


def _defaults(role: Path) -> dict:
    files = [role / "defaults" / "main.yml"] if (role / "defaults" / "main.yml").is_file() else []
    if (role / "defaults" / "main").is_dir():
        files += sorted((role / "defaults" / "main").glob("*.yml"))
    out: dict = {}
    for f in files:
        out.update(yaml.safe_load(f.read_text()) or {})
    return out


def _entry_points(role: Path) -> dict:
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    return {name: (entry.get("options") or {}) for name, entry in spec["argument_specs"].items()}


def readme_table_names(text: str) -> set:
    """Backquoted names in the first column of the README's variable/input tables."""
    names: set = set()
    in_table = False
    for line in text.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        first = line.strip().strip("|").split("|")[0].strip()
        if not in_table:
            in_table = first in ("variable", "input")
            continue
        if set(first) <= set("-: "):
            continue
        names.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", first))
    return names


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_spec_defaults_equal_the_role_defaults(role):
    defaults = _defaults(role)
    wrong = []
    for entry, options in _entry_points(role).items():
        for name, opt in options.items():
            if "default" not in (opt or {}):
                continue
            if name not in defaults:
                wrong.append(f"{entry}.{name}: spec default {opt['default']!r}, defaults/ has none")
            elif opt["default"] != defaults[name]:
                wrong.append(f"{entry}.{name}: spec {opt['default']!r} != defaults/ {defaults[name]!r}")
    assert not wrong, f"{role.name}: meta/argument_specs.yml disagrees with defaults/:\n" + "\n".join(wrong)


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_readme_variable_tables_match_the_argument_spec(role):
    entries = _entry_points(role)
    options = {name for opts in entries.values() for name in opts}
    documented = readme_table_names((role / "README.md").read_text())
    assert documented, f"{role.name}: README.md has no variable table (| variable | default | meaning |)"
    unknown = sorted(documented - options)
    assert not unknown, f"{role.name}: README.md documents variables the argument spec lacks: {unknown}"
    wanted = {name for name in entries.get("main", {}) if not name.startswith("__")}
    if role.name == "stack":
        wanted = {name for name in wanted if not name.startswith("stack_")}
    missing = sorted(wanted - documented)
    assert not missing, f"{role.name}: README.md's variable table misses {missing}"


def test_the_acceptance_roles_are_among_the_roles_checked():
    names = {role.name for role in ROLES}
    assert {"stack", "common", "artifacts", "verify", "benchmark"} <= names, names
    # verify's and benchmark's settings are role defaults now: each has some, all in the spec
    for name in ("verify", "benchmark"):
        assert _defaults(ROOT / "roles" / name), name


def test_readme_table_parser_reads_names_in_the_first_column_only():
    text = "\n".join(
        [
            "| variable | default | meaning |",
            "|---|---|---|",
            "| `a_x` / `a_y` | `b_not` | uses `c_not` |",
            "",
            "| file | does |",
            "|---|---|",
            "| `d_not` | x |",
        ]
    )
    assert readme_table_names(text) == {"a_x", "a_y"}
