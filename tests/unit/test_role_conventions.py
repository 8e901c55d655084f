"""House rules every role keeps, checked mechanically (CONTRIBUTING.md, docs/architecture.md).

ansible-lint's own role-prefix rule is off because the `mnc_` variables are a
contract between roles; this test is the stricter replacement: a role's
defaults carry its own prefix (or the shared `mnc_` one), every default is
declared with a type in meta/argument_specs.yml (so bad inventory input fails
before anything changes) and documented in the role's README.
"""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


def _defaults(role: Path) -> dict:
    files = []
    if (role / "defaults" / "main.yml").is_file():
        files.append(role / "defaults" / "main.yml")
    if (role / "defaults" / "main").is_dir():
        files += sorted((role / "defaults" / "main").glob("*.yml"))
    out = {}
    for f in files:
        out.update(yaml.safe_load(f.read_text()) or {})
    return out


def _spec_options(role: Path) -> dict:
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    options = {}
    for entry in spec["argument_specs"].values():
        options.update(entry.get("options") or {})
    return options


# Roles that hold another prefix's shared values: stack the matrix (stack_*), cuda_matrix
# the GPU roles' CUDA choices (cuda_install_method, cuda_version, ...), which the roles
# below it read and users set by those names.
SHARED_PREFIX = {"stack": "stack_", "cuda_matrix": "cuda_"}


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_defaults_carry_the_role_prefix(role):
    allowed = (f"{role.name}_", "mnc_") + ((SHARED_PREFIX[role.name],) if role.name in SHARED_PREFIX else ())
    bad = [name for name in _defaults(role) if not name.startswith(allowed)]
    assert not bad, f"{role.name}: defaults without the {allowed} prefix: {bad}"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_every_default_is_declared_in_argument_specs(role):
    assert (role / "meta" / "argument_specs.yml").is_file(), f"{role.name} has no meta/argument_specs.yml"
    options = _spec_options(role)
    missing = sorted(set(_defaults(role)) - set(options))
    assert not missing, f"{role.name}: defaults missing from meta/argument_specs.yml: {missing}"
    untyped = sorted(name for name, opt in options.items() if "type" not in (opt or {}))
    assert not untyped, f"{role.name}: argument_specs options without a type: {untyped}"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_readme_documents_every_default(role):
    readme = role / "README.md"
    assert readme.is_file(), f"{role.name} has no README.md"
    text = readme.read_text()
    undocumented = sorted(name for name in _defaults(role) if name not in text)
    # The version matrix documents its fields by component, not one by one.
    if role.name != "stack":
        assert not undocumented, f"{role.name}: README.md does not mention {undocumented}"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_templates_say_they_are_managed(role):
    """Every file a role renders says who manages it: its templates/ and the files it renders on
    every run, which are values of its vars/main.yml (__<role>_tpl_<file>)."""
    templates = [t for t in (role / "templates").glob("*.j2") if not t.name.endswith(".json.j2")]
    texts = {t.name: t.read_text() for t in templates}
    role_vars = role / "vars" / "main.yml"
    if role_vars.is_file():
        values = yaml.safe_load(role_vars.read_text()) or {}
        texts |= {k: v for k, v in values.items() if k.startswith(f"__{role.name}_tpl_")}
    unmarked = sorted(name for name, text in texts.items() if "managed by mncluster" not in text.lower())
    assert not unmarked, f"{role.name}: rendered files without a 'managed by mncluster' header: {unmarked}"


def test_no_task_renders_a_template_lookup():
    """The files a run renders are role values (vars/main.yml), not the template lookup, which
    deep-copies every variable of the task before it renders (about 5 CPU-s of a 3-node no-op
    of site.yml: docs/architecture.md, "Files a run renders"). The template module stays for
    files written only when something changes."""
    files = [*ROOT.glob("roles/*/**/*.yml"), *ROOT.glob("playbooks/**/*.yml"), *ROOT.glob("*.yml")]
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in files}
    uses = ("ansible.builtin.template'", "lookup('template'")
    users = [name for name, text in texts.items() if any(use in text for use in uses)]
    assert not users, f"the template lookup in {users}"


FILTER = "{{ (lookup('ansible.builtin.file', 'vars/facts.yml') | from_yaml).mnc_gather_facts_filter }}"
# Facts that modules set (not gathered): getent, openmpi_facts.
_SET_BY_TASKS = {"getent_passwd", "getent_group", "openmpi"}


def test_every_fact_the_roles_read_is_gathered():
    """playbooks/vars/facts.yml filters what the stages gather: a fact read but not listed is undefined."""
    import fnmatch
    import re

    patterns = yaml.safe_load((ROOT / "playbooks/vars/facts.yml").read_text())["mnc_gather_facts_filter"]
    read = set()
    files = [*ROOT.glob("roles/*/**/*.yml"), *ROOT.glob("roles/*/**/*.j2"), *ROOT.glob("playbooks/**/*.yml")]
    for path in files:
        names = re.findall(r"ansible_facts(?:\.|\[')([a-z_0-9]+)", path.read_text())
        read |= {(name, path.relative_to(ROOT)) for name in names}
    assert len(read) > 20  # the roles read facts (the pattern still matches how they do)
    missing = sorted(f"{name} ({where})" for name, where in read
                     if name not in _SET_BY_TASKS
                     and not any(fnmatch.fnmatch(f"ansible_{name}", p) for p in patterns))
    assert not missing, f"read but not in playbooks/vars/facts.yml: {missing}"


def test_every_play_that_gathers_filters_the_facts():
    """A play that gathers on the nodes without the filter would copy every fact again for every task."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if not isinstance(play, dict) or "hosts" not in play or play.get("connection") == "local":
                continue
            gathers = play.get("gather_facts", True) or any(
                "ansible.builtin.setup" in str(t) for t in play.get("tasks", []) + play.get("pre_tasks", []))
            roles_gather = {"verify", "benchmark"} & {r["role"] if isinstance(r, dict) else r
                                                     for r in play.get("roles", [])}
            if gathers or roles_gather:
                setup = play.get("module_defaults", {}).get("ansible.builtin.setup", {})
                assert setup.get("filter") == FILTER, (path.name, play["name"])
