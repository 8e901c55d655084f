"""mnc_jinja (callback_plugins/mnc_jinja.py): templates compiled once, Jinja's plugins loaded once.

Real ansible-playbook runs on three local hosts with the repository's ansible.cfg. What a
template renders must not depend on the cache (off, cold, warm, or with corrupt entries);
a warm cache compiles nothing again; a directory that another user could write to is not
used; and the forked workers inherit Jinja's filter plugins from the controller instead of
reading them again (a probe callback records every plugin load with its process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible_env import ANSIBLE_PLAYBOOK, ROOT, repo_ansible_env

PLAY = """\
- name: Templates of the kinds the roles use
  hosts: nodes
  gather_facts: false
  vars:
    records: [{name: a, size: 3}, {name: b, size: 12}]
    hostfile_text: "n1 slots=2\\nn2 slots=2\\n"
    joined: "{% for r in records %}{{ r.name }}={{ r.size }};{% endfor %}"
    derived: "{{ records | selectattr('size', 'gt', 5) | map(attribute='name') | list }}"
  tasks:
    - name: A condition with a test, a filter that takes the context, a loop
      ansible.builtin.set_fact:
        rendered: >-
          {{ {'derived': derived,
              'ternary': (inventory_hostname == 'h1') | ternary('first', 'other'),
              'version': '5.0.7' is version('4.1', '>='),
              'loop': lookup('ansible.builtin.items', [1, 2], wantlist=True) | map('string') | join(','),
              'project': hostfile_text | mnc_hostfile_hosts,
              'block': joined,
              'file': lookup('ansible.builtin.template', 'page.j2', template_vars={'extra': 7}),
              'leak': template_path is defined} }}
      when: records | length > 1
    - name: Say what was rendered
      ansible.builtin.debug:
        msg: "{{ rendered | to_json }}"
"""

# A file for the template lookup: the task's variables, the lookup's own and template_vars.
PAGE = "{{ records | map(attribute='name') | join('+') }} {{ template_path | basename }} {{ extra }}"


def _hosts(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "[nodes]\nh1\nh2\nh3\n[nodes:vars]\n"
        f"ansible_connection=local\nansible_python_interpreter={sys.executable}\n"
    )
    return hosts


def _run(tmp_path, cache: str, **extra: str) -> tuple[dict, str]:
    """One run of PLAY; what each host rendered, and the run's output (warnings included)."""
    book = tmp_path / "play.yml"
    if not book.exists():
        book.write_text(PLAY)
        (tmp_path / "templates").mkdir()
        (tmp_path / "templates" / "page.j2").write_text(PAGE)
    env = repo_ansible_env(MNC_JINJA_CACHE=cache, **extra)
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(_hosts(tmp_path)), str(book)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    rendered = {
        host: json.loads(result["msg"])
        for play in doc["plays"]
        for task in play["tasks"]
        if task["task"]["name"] == "Say what was rendered"
        for host, result in task["hosts"].items()
    }
    return rendered, proc.stdout + proc.stderr


def _entries(d) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in d.iterdir() if len(p.name) == 64}


def test_the_cache_renders_what_jinja_renders_and_a_warm_cache_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    off, _ = _run(tmp_path, "off", MNC_JINJA="off")  # Ansible as it is
    assert off["h1"]["ternary"] == "first" and off["h2"]["ternary"] == "other", off
    assert off["h1"]["derived"] == ["b"] and off["h1"]["block"] == "a=3;b=12;", off
    # The template lookup sees the task's variables, its own template_* and template_vars; the
    # task's variables do not gain them.
    assert off["h1"]["file"] == "a+b page.j2 7" and off["h1"]["leak"] is False, off
    assert off["h1"]["project"] == [{"host": "n1", "slots": 2}, {"host": "n2", "slots": 2}], off

    cold, _ = _run(tmp_path, str(cache))
    first = _entries(cache)
    warm, _ = _run(tmp_path, str(cache))
    assert cold == off and warm == off
    assert len(first) >= 5, first
    # Every template of the second run came from the cache: no entry written or rewritten.
    assert _entries(cache) == first
    memory_only, _ = _run(tmp_path, "off")
    assert memory_only == off
    assert oct(cache.stat().st_mode & 0o777) == "0o700"


def test_a_corrupt_entry_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    expected, _ = _run(tmp_path, str(cache))
    for name in _entries(cache):
        (cache / name).write_bytes(b"\x00not marshal data")
    again, _ = _run(tmp_path, str(cache))
    assert again == expected
    assert all((cache / name).read_bytes()[:5] != b"\x00not " for name in _entries(cache))


def test_a_directory_others_can_write_to_is_not_used(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    planted = cache / ("0" * 64)
    planted.write_bytes(b"anything")
    rendered, output = _run(tmp_path, str(cache))
    assert rendered["h1"]["ternary"] == "first"
    assert "mnc_jinja: not using the disk cache" in output and "writable by others" in output, output
    assert _entries(cache) == {planted.name: planted.stat().st_mtime_ns}


PROBE = """\
import os

from ansible.plugins import loader
from ansible.plugins.callback import CallbackBase

CONTROLLER = os.getpid()
_jinja_wrappers = loader.Jinja2Loader._ensure_non_collection_wrappers
_jinja_get_with_context = loader.Jinja2Loader.get_with_context


def _log(line):
    with open(os.environ["PROBE_LOG"], "a") as f:
        f.write(line + "\\n")


def jinja_wrappers(self, *args, **kwargs):
    if not self._cached_non_collection_wrappers:
        _log(f"{'controller' if os.getpid() == CONTROLLER else 'worker'} {self.type}")
    return _jinja_wrappers(self, *args, **kwargs)


def jinja_get_with_context(self, name, *args, **kwargs):
    if os.getpid() != CONTROLLER and name in ("length", "join", "default"):
        _log(f"worker search {name}")
    return _jinja_get_with_context(self, name, *args, **kwargs)


loader.Jinja2Loader._ensure_non_collection_wrappers = jinja_wrappers
loader.Jinja2Loader.get_with_context = jinja_get_with_context


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "probe"
    CALLBACK_NEEDS_ENABLED = False
"""


def test_workers_inherit_the_filter_plugins_and_do_not_search_for_jinjas_own(tmp_path):
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "probe.py").write_text(PROBE)
    loads = {}
    for case, dirs in (("with", [probe, ROOT / "callback_plugins"]), ("without", [probe])):
        log = tmp_path / f"{case}.log"
        _run(tmp_path, "off", ANSIBLE_CALLBACK_PLUGINS=":".join(map(str, dirs)), PROBE_LOG=str(log))
        loads[case] = log.read_text().splitlines() if log.exists() else []
    assert "controller filter" in loads["with"], loads
    assert not [line for line in loads["with"] if line.startswith("worker")], loads
    # Without the plugin, each worker whose task renders a filter reads them all again, and
    # searches Ansible's plugins for Jinja's own filters: the probe sees what the plugin removes.
    assert loads["without"].count("worker filter") >= 3, loads
    assert [line for line in loads["without"] if line.startswith("worker search")], loads
    # MNC_JINJA=off: the plugin does nothing.
    log = tmp_path / "off.log"
    dirs = f"{probe}:{ROOT / 'callback_plugins'}"
    _run(tmp_path, "off", MNC_JINJA="off", ANSIBLE_CALLBACK_PLUGINS=dirs, PROBE_LOG=str(log))
    assert log.read_text().count("worker filter") >= 3
