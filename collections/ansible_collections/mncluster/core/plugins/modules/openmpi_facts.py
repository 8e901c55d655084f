#!/usr/bin/python
# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: openmpi_facts
short_description: Structured facts about an Open MPI installation from ompi_info
description:
  - Runs C(ompi_info --parsable --all) of one Open MPI installation and returns its version,
    prefix, configure command line, CUDA support (built in, and usable at run time) and the
    transports (BTL, PML, MTL, OSC components; UCX) it was built with.
  - Read-only; runs the same in check mode.
  - Parsing lives in C(module_utils/mnc_ompi_info.py), tested on real C(ompi_info) output.
version_added: "0.1.0"
author: mncluster contributors
options:
  prefix:
    description:
      - Installation prefix; runs C(<prefix>/bin/ompi_info).
      - Mutually exclusive with O(ompi_info).
    type: path
  ompi_info:
    description: The C(ompi_info) to run (a name on PATH or a path). Default C(ompi_info).
    type: str
  environment:
    description: Extra environment variables for C(ompi_info) (for example C(LD_LIBRARY_PATH)).
    type: dict
    default: {}
notes:
  - In Open MPI 5 the CUDA code is the C(accelerator/cuda) plugin, which only opens where the
    NVIDIA driver's C(libcuda.so.1) loads. On a node without a driver
    RV(ansible_facts.openmpi.cuda_support.built_with) is true and
    RV(ansible_facts.openmpi.cuda_support.runtime) is false.
"""

EXAMPLES = r"""
- name: Read the facts of the OpenMPI the openmpi role built
  mncluster.core.openmpi_facts:
    prefix: /opt/openmpi/5.0.7-cuda12.6

- name: Refuse an OpenMPI without CUDA support
  ansible.builtin.assert:
    that: ansible_facts.openmpi.cuda_support.built_with
    fail_msg: "{{ ansible_facts.openmpi.prefix }} was configured without --with-cuda"

- name: Inspect whatever ompi_info is on PATH
  mncluster.core.openmpi_facts:
    ompi_info: ompi_info
"""

RETURN = r"""
ansible_facts:
  description: Facts about the installation.
  returned: success
  type: dict
  contains:
    openmpi:
      description: The parsed C(ompi_info) output.
      type: dict
      contains:
        version:
          description: Open MPI version.
          type: str
          sample: 5.0.7
        major:
          description: Major version.
          type: int
          sample: 5
        package:
          description: Package string (C(Open MPI root@host Distribution), C(Debian OpenMPI)).
          type: str
        prefix:
          description: Installation prefix.
          type: str
          sample: /opt/openmpi/5.0.7-cuda12.6
        libdir:
          description: Library directory.
          type: str
        configure_cli:
          description: The configure command line, as ompi_info prints it (shell-quoted).
          type: str
        configure_args:
          description: The configure arguments, unquoted.
          type: list
          elements: str
          sample: ["--prefix=/opt/openmpi/5.0.7-cuda12.6", "--with-cuda=/opt/cuda"]
        cuda_support:
          description: CUDA support.
          type: dict
          contains:
            built_with:
              description: C(opal_built_with_cuda_support) (synonym C(mpi_built_with_cuda_support)).
              type: bool
            enabled:
              description: C(opal_cuda_support) (synonym C(mpi_cuda_support)).
              type: bool
            runtime:
              description: Built with CUDA, enabled, and (5.x) the C(accelerator/cuda) plugin opened.
              type: bool
            accelerators:
              description: Accelerator components that opened (5.x), for example C([null, cuda]).
              type: list
              elements: str
        transports:
          description: Transport components by framework, and whether UCX is among them.
          type: dict
          sample: {btl: [self, sm, tcp], pml: [cm, ob1], mtl: [], osc: [sm, rdma], ucx: false}
        components:
          description: Every component ompi_info lists, by framework.
          type: dict
cmd:
  description: The command that ran.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_ompi_info import (
    OmpiInfoParseError,
    parse_ompi_info,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "prefix": {"type": "path"},
            "ompi_info": {"type": "str"},
            "environment": {"type": "dict", "default": {}},
        },
        mutually_exclusive=[("prefix", "ompi_info")],
        supports_check_mode=True,
    )
    prefix = module.params["prefix"]
    if prefix:
        binary = os.path.join(prefix, "bin", "ompi_info")
        if not os.path.exists(binary):
            module.fail_json(msg=f"no ompi_info in {prefix}/bin: is Open MPI installed there?", cmd=[binary])
    else:
        name = module.params["ompi_info"] or "ompi_info"
        binary = name if os.sep in name else module.get_bin_path(name)
        if not binary:
            module.fail_json(msg=f"{name} is not on PATH", cmd=[name])

    argv = [binary, "--parsable", "--all"]
    environ = {str(k): str(v) for k, v in module.params["environment"].items()}
    rc, out, err = module.run_command(argv, check_rc=False, environ_update=environ)
    if rc != 0:
        module.fail_json(msg=f"{binary} failed with rc {rc}", rc=rc, stdout=out, stderr=err, cmd=argv)
    try:
        facts = parse_ompi_info(out)
    except OmpiInfoParseError as exc:
        module.fail_json(
            msg=f"cannot parse the output of {binary}: {exc}", rc=rc, stdout=out, stderr=err, cmd=argv
        )
    module.exit_json(changed=False, cmd=argv, ansible_facts={"openmpi": facts})


if __name__ == "__main__":
    main()
