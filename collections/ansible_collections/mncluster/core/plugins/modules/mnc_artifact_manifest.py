#!/usr/bin/python
"""Check a staged artifact cache and write its manifest."""

DOCUMENTATION = r"""
---
module: mnc_artifact_manifest
short_description: Check that artifacts are staged in the mncluster cache and write manifest.json
description:
  - Resolves each artifact record against the per-artifact source overrides,
    checks that its file is in the cache (C(<cache>/<name>/<version>/<filename>))
    with the pinned sha256, and lists every distribution of the named
    wheelhouses (C(<cache>/wheels/<name>/)).
  - With O(write=true) writes C(<cache>/manifest.json) (name, version, file,
    sha256, source); the document is deterministic, so an unchanged cache
    reports no change. Entries of an earlier manifest whose files are still
    in the cache unchanged are kept (staging components one at a time).
  - Never touches the network. Runs where the cache is (the controller).
options:
  cache:
    description: The artifact cache directory.
    type: path
    required: true
  artifacts:
    description: "Artifact records, C({name, version, filename, url, sha256})."
    type: list
    elements: dict
    default: []
  overrides:
    description: "Per-artifact source overrides, C({name: {url | path, sha256, filename}})."
    type: dict
    default: {}
  wheelhouses:
    description: Wheelhouse names under C(<cache>/wheels/) to list (write) or require (check).
    type: list
    elements: str
    default: []
  write:
    description: Write the manifest; when false only check that everything is staged.
    type: bool
    default: false
  stage_command:
    description: Command quoted in the failure message for unstaged artifacts.
    type: str
    default: ansible-playbook playbooks/stage.yml
author: mncluster
"""

EXAMPLES = r"""
- name: Fail early, listing every artifact that is not staged
  mncluster.core.mnc_artifact_manifest:
    cache: "{{ mnc_artifact_cache }}"
    artifacts: "{{ stack_openmpi_artifacts + stack_python_artifacts }}"
    overrides: "{{ mnc_artifact_overrides }}"
  delegate_to: localhost
  run_once: true

- name: Write the manifest of the staged cache
  mncluster.core.mnc_artifact_manifest:
    cache: "{{ mnc_artifact_cache }}"
    artifacts: "{{ stage_artifacts }}"
    wheelhouses: [python]
    write: true
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: Path of the manifest (written only with write=true).
  type: str
  returned: always
missing:
  description: Artifacts not staged, each with name, version, filename, sha256, source and reason.
  type: list
  elements: dict
  returned: always
manifest:
  description: The manifest document (format, artifacts[]).
  type: dict
  returned: when write=true
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_artifacts import (
    ArtifactError,
    build_manifest,
    format_missing,
    missing_artifacts,
    render_manifest,
    resolve_artifact,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "cache": {"type": "path", "required": True},
            "artifacts": {"type": "list", "elements": "dict", "default": []},
            "overrides": {"type": "dict", "default": {}},
            "wheelhouses": {"type": "list", "elements": "str", "default": []},
            "write": {"type": "bool", "default": False},
            "stage_command": {"type": "str", "default": "ansible-playbook playbooks/stage.yml"},
        },
        supports_check_mode=True,
    )
    cache = module.params["cache"]
    path = os.path.join(cache, "manifest.json")
    try:
        resolved = [resolve_artifact(a, module.params["overrides"]) for a in module.params["artifacts"]]
    except ArtifactError as exc:
        module.fail_json(msg=f"mnc_artifact_manifest: {exc}", path=path, missing=[])

    problems = missing_artifacts(cache, resolved)
    wheel_root = os.path.join(cache, "wheels")
    for name in module.params["wheelhouses"]:
        directory = os.path.join(wheel_root, name)
        if not os.path.isdir(directory) or not os.listdir(directory):
            entry = {"name": f"wheelhouse {name}", "version": "-", "filename": directory + "/",
                     "sha256": "-", "source": "pypi"}
            problems.append((entry, "missing"))
    missing = [dict(artifact, reason=reason) for artifact, reason in problems]
    if problems:
        module.fail_json(
            msg="mnc_artifact_manifest: " + format_missing(cache, problems, module.params["stage_command"]),
            path=path,
            missing=missing,
        )
    if not module.params["write"]:
        module.exit_json(changed=False, path=path, missing=[])

    current = None
    previous = None
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            current = handle.read()
        try:
            previous = json.loads(current)
        except ValueError:
            module.warn(f"{path} is not valid JSON; writing a new manifest")
    try:
        manifest = build_manifest(cache, resolved, module.params["wheelhouses"], previous=previous)
    except (ArtifactError, KeyError, TypeError) as exc:
        module.fail_json(msg=f"mnc_artifact_manifest: {exc}", path=path, missing=[])
    text = render_manifest(manifest)
    changed = current != text
    if changed and not module.check_mode:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    module.exit_json(changed=changed, path=path, missing=[], manifest=manifest)


if __name__ == "__main__":
    main()
