"""Jinja filters over mncluster's module_utils: one implementation of each idea.

Playbooks and roles reach the pure helpers in the collection's module_utils through
these filters (``mncluster.core.<filter>``), so a rule such as
"an artifact override replaces the record's source" or "what a hostfile
lists" lives in Python once, with its unit tests, and nowhere in Jinja.

Each filter imports the module_utils it needs when it runs: a task's worker process loads this
file for any one of its filters, and importing all of them there is a fixed cost per task.
"""

import ipaddress


def mnc_artifact_source(artifact, overrides=None):
    """The artifact record after mnc_artifact_overrides:
    ``record | mncluster.core.mnc_artifact_source(overrides)``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_artifacts

    return mnc_artifacts.apply_override(artifact, overrides)


def mnc_malformed_artifacts(artifacts):
    """The artifact records that are incomplete or malformed (roles/stack's check of the matrix)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_artifacts

    return mnc_artifacts.malformed_artifacts(artifacts)


def mnc_files_look(files, dirs=None):
    """The shell lines a role's look runs to read what ``mncluster.core.mnc_write_files`` with
    these ``files`` (dicts with ``dest``, or paths) and ``dirs`` would compare."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_file_state

    return mnc_file_state.look_script(files, dirs or ())


def mnc_files_pending(files, look_lines, dirs=None):
    """The paths ``mncluster.core.mnc_write_files`` with ``files`` and ``dirs`` would change, as the
    look's lines (``mnc_files_look``) show them: ``files | mncluster.core.mnc_files_pending(
    look.stdout_lines)``; every path where the look has no lines."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_file_state

    return mnc_file_state.pending(files, look_lines, dirs or ())


def mnc_blocks_look(blocks):
    """The shell lines a role's look runs to read what ``ansible.builtin.blockinfile`` with these
    ``blocks`` (dicts with its ``path``, ``marker`` and ``block``) would compare."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_file_state

    return mnc_file_state.blocks_look_script(blocks)


def mnc_blocks_pending(blocks, look_lines):
    """The blocks (the dicts of ``blocks``) ``ansible.builtin.blockinfile`` would change, as the
    look's lines (``mnc_blocks_look``) show them: a role loops its blockinfile task over them.
    Every block the look printed nothing for (no look, a link, another kind of file)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_file_state

    return mnc_file_state.blocks_pending(blocks, look_lines)


def mnc_known_hosts_pending(look_lines, hosts, prefix="mncluster-known-hosts"):
    """Whether ``mncluster.core.mnc_known_hosts`` with ``hosts`` (and its default mode, 0600) would
    change the file a look printed: its lines as ``<prefix>: <line>``, its mode as
    ``<prefix>-mode: <octal>`` (no mode line: no file, so it would)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_known_hosts

    mode_tag, line_tag = prefix + "-mode: ", prefix + ": "
    mode = next((line[len(mode_tag) :] for line in look_lines or () if line.startswith(mode_tag)), None)
    if mode is None:
        return True
    lines = [line[len(line_tag) :] for line in look_lines or () if line.startswith(line_tag)]
    return not mnc_known_hosts.unchanged(lines, hosts, int(mode, 8))


def mnc_hostfile_hosts(text, strict=True):
    """``[{host, slots}]`` of an MPI hostfile's text, in file order (``strict=False``: an
    unreadable field is skipped, as the acceptance checks read it, instead of raising)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_hostfile

    hosts = mnc_hostfile.parse_hostfile(text, strict=strict)
    return [{"host": host, "slots": slots} for host, slots in hosts]


def mnc_network(address, prefix):
    """The network an address is on, as CIDR: ``'10.0.0.11' | mncluster.core.mnc_network(24)`` is
    ``10.0.0.0/24``."""
    return str(ipaddress.ip_interface(f"{address}/{int(prefix)}").network)


def mnc_unsafe_names(values, kind="name"):
    """The values (a string or a list) that are not a safe name of ``kind`` (user, interface, name)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.unsafe_names(values, kind)


def mnc_preflight_specs(roles_dir):
    """``[{role, entry, options}]`` of every ``<roles_dir>/*/meta/argument_specs.yml`` (every entry
    point), defaults and required dropped:
    ``(playbook_dir ~ '/../roles') | mncluster.core.mnc_preflight_specs``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.role_specs(mnc_preflight.read_specs(roles_dir))


def mnc_preflight_provided(specs, values):
    """The specs of which ``values`` (what a node's inventory sets) holds an option, each with
    ``provided``: those values."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.provided(specs, values)


def mnc_preflight_names(names):
    """The variable names, of those given, that preflight's cross-checks have a rule for."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.checked_names(names)


def mnc_preflight_node(values, host, nodes=None):
    """Problems of one node's inventory values:
    ``values | mncluster.core.mnc_preflight_node(inventory_hostname, groups['mnc_nodes'])``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.node_problems(host, values, nodes)


def mnc_preflight_cluster(private_ips):
    """Problems across the nodes ``{host: mnc_private_ip or None}``: missing and shared addresses."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.cluster_problems(private_ips)


def mnc_preflight_spec_problems(results, host):
    """One line per distinct argument-spec error in validate_argument_spec loop results."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.spec_problems(host, results)


def mnc_slots_over_gpus(slots, host, variable, gpus):
    """In GPU mode, a rank count per node above the node's counted GPUs, named (empty: fine):
    ``mnc_slots_per_node
    | mncluster.core.mnc_slots_over_gpus(inventory_hostname, 'mnc_slots_per_node', mnc_gpu_count)``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.slots_over_gpus(host, variable, slots, gpus)


def mnc_launcher_without_scheduler(launcher, host, scheduler):
    """``benchmark_launcher: slurm`` on a cluster without Slurm, named (empty: fine):
    ``benchmark_launcher
    | mncluster.core.mnc_launcher_without_scheduler(inventory_hostname, mnc_scheduler)``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.launcher_without_scheduler(host, launcher, scheduler)


def mnc_shared_fs_problems(dirs, host, home, options, server="", nodes=None):
    """What is wrong with the shared directories, their export options and server, named (empty:
    fine): ``mnc_shared_dirs | mncluster.core.mnc_shared_fs_problems(inventory_hostname, mnc_mpi_home,
    shared_fs_export_options, shared_fs_server, groups['mnc_nodes'])``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

    return mnc_preflight.shared_fs_problems(host, dirs, home, options, server, nodes)


def mnc_gpu_stack_problems(support, cuda_version, cupy_package, cupy_version, cudnn_version, nccl_version):
    """Why the pinned CUDA / cuDNN / NCCL / CuPy do not load together (empty: they do)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_gpu_matrix

    return mnc_gpu_matrix.gpu_stack_problems(
        support, cuda_version, cupy_package, cupy_version, cudnn_version, nccl_version
    )


def mnc_cuda_matrix_problems(inputs):
    """The broken rules of the GPU roles' install choices, one message each (empty: they fit):
    ``{...} | mncluster.core.mnc_cuda_matrix_problems`` (roles/cuda_matrix names the keys)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_cuda_matrix

    return mnc_cuda_matrix.cuda_matrix_problems(inputs)


def mnc_driver_gpu_problems(lspci_text, branch):
    """Why driver branch ``branch`` cannot drive the GPUs of ``lspci -n`` (empty: it can):
    ``out.stdout | mncluster.core.mnc_driver_gpu_problems(nvidia_driver_branch)``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_gpu_arch

    return mnc_gpu_arch.driver_gpu_problems(branch, lspci_text)


def mnc_pci_devices(text, vendor="", class_prefix=""):
    """``[{slot, class, vendor, device}]`` of ``lspci -n`` output, of ``vendor`` and a class
    starting with ``class_prefix`` when given:
    ``out.stdout | mncluster.core.mnc_pci_devices('10de', '0680')``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_hw

    return mnc_hw.pci_devices(text, vendor, class_prefix)


def mnc_ibv_ports(text):
    """``[{device, port, state, active, link_layer}]`` of ``ibv_devinfo`` output, one per port."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_hw

    return mnc_hw.ibv_ports(text)


def mnc_rdma_link(rdma_mode, lspci_text=""):
    """``infiniband``, ``roce`` or ``none``:
    ``rdma_mode | mncluster.core.mnc_rdma_link(lspci.stdout)``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_rdma

    return mnc_rdma.link(rdma_mode, lspci_text)


def mnc_rdma_plan(rdma_mode, lspci_text="", memlock="", memlock_systemd=True, use_gpu=False,
                  in_container=False, gpudirect=True):
    """roles/rdma's ``{rdma, memlock, nvidia-peermem}``, each ``{state, reason}``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_rdma

    return mnc_rdma.plan(rdma_mode, lspci_text, memlock, memlock_systemd, use_gpu, in_container, gpudirect)


def mnc_slurm_seen(lines):
    """roles/slurm's look as ``{hw, limits, munge_key, munge_sum, units, dirs, exists}``:
    ``__slurm_look.stdout_lines | mncluster.core.mnc_slurm_seen``."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_slurm

    return mnc_slurm.seen(lines)


def mnc_missing_packages(names, local_facts=None):
    """The ``names`` that the node's package fact does not list as installed:
    ``pkgs | mncluster.core.mnc_missing_packages(ansible_local | default({}))`` (empty: apt can be
    skipped)."""
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_packages

    return mnc_packages.missing_packages(names, local_facts)


class FilterModule:
    def filters(self):
        return {
            "mnc_missing_packages": mnc_missing_packages,
            "mnc_artifact_source": mnc_artifact_source,
            "mnc_gpu_stack_problems": mnc_gpu_stack_problems,
            "mnc_cuda_matrix_problems": mnc_cuda_matrix_problems,
            "mnc_driver_gpu_problems": mnc_driver_gpu_problems,
            "mnc_files_look": mnc_files_look,
            "mnc_files_pending": mnc_files_pending,
            "mnc_blocks_look": mnc_blocks_look,
            "mnc_blocks_pending": mnc_blocks_pending,
            "mnc_known_hosts_pending": mnc_known_hosts_pending,
            "mnc_hostfile_hosts": mnc_hostfile_hosts,
            "mnc_ibv_ports": mnc_ibv_ports,
            "mnc_pci_devices": mnc_pci_devices,
            "mnc_rdma_link": mnc_rdma_link,
            "mnc_rdma_plan": mnc_rdma_plan,
            "mnc_slurm_seen": mnc_slurm_seen,
            "mnc_network": mnc_network,
            "mnc_malformed_artifacts": mnc_malformed_artifacts,
            "mnc_unsafe_names": mnc_unsafe_names,
            "mnc_preflight_specs": mnc_preflight_specs,
            "mnc_preflight_provided": mnc_preflight_provided,
            "mnc_preflight_names": mnc_preflight_names,
            "mnc_preflight_node": mnc_preflight_node,
            "mnc_preflight_cluster": mnc_preflight_cluster,
            "mnc_preflight_spec_problems": mnc_preflight_spec_problems,
            "mnc_slots_over_gpus": mnc_slots_over_gpus,
            "mnc_launcher_without_scheduler": mnc_launcher_without_scheduler,
            "mnc_shared_fs_problems": mnc_shared_fs_problems,
        }
