"""The environment the module tests run `ansible localhost -m <module>` in."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def repo_ansible_env(json_output: bool = True, **extra: str) -> dict:
    """This repository's ansible.cfg, roles, modules and module_utils; results as JSON on stdout
    unless json_output is false (then ansible.cfg's own output)."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        ANSIBLE_LIBRARY=str(ROOT / "library"),
        ANSIBLE_MODULE_UTILS=str(ROOT / "module_utils"),
    )
    if json_output:
        env.update(
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_CALLBACKS_ENABLED=""
        )
    env.update(extra)
    return env
