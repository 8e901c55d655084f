#!/usr/bin/python
# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: chainermn_benchmark
short_description: Run the ChainerMN training benchmark over a range of process counts
description:
  - Runs C(mpiexec -n p -hostfile H --map-by ppr:<slots>:node python -m train ...) once per process
    count C(p), from the MPI launcher node, and returns the benchmark document of every run.
  - With O(launcher=slurm) each run is a Slurm job instead, C(srun --mpi=pmix --nodes=k --ntasks=p
    --ntasks-per-node=<slots> python -m train ...), the same placement; its job id is in the document.
  - The default sweep is 1, the powers of two below the slot count, and all slots
    (3 nodes x 2 slots gives 1, 2, 4, 6).
  - Computes weak-scaling efficiency (fixed per-process batch) against the smallest C(p), normally 1.
  - A rank that crashes or hangs fails the task with that rank's stderr tail; each run is killed
    after O(timeout) seconds.
  - Asking for more processes than slots fails before anything runs. Check mode runs nothing and
    returns the planned process counts and command lines.
version_added: "0.1.0"
author: mncluster contributors
options:
  chdir:
    description: Directory that holds the C(train) package; C(python -m train) runs here on every node.
    type: path
    required: true
    aliases: [train_dir]
  python:
    description: Python interpreter on the nodes that has Chainer, ChainerMN and mpi4py.
    type: str
    default: python3
  mpiexec:
    description:
      - The C(mpiexec) to launch with (a name on PATH or a path).
      - With O(launcher=slurm), a path puts its directory first on the ranks' C(PATH) (Open MPI's C(bin/), as
        C(module load openmpi) does), so that a rank finds its Open MPI's C(ompi_info).
    type: str
    default: mpiexec
  launcher:
    description:
      - C(mpiexec) over the hostfile, or C(slurm) (one C(srun --mpi=pmix) job per run; Open MPI's ranks
        get their PMIx server from slurmd, so the Open MPI must be one that C(srun --mpi=pmix) can start).
      - With C(slurm) the hostfile still sets the node count and the slots per node; Slurm picks the nodes.
    type: str
    choices: [mpiexec, slurm]
    default: mpiexec
  srun:
    description: The C(srun) to launch with when O(launcher=slurm) (a name on PATH or a path).
    type: str
    default: srun
  srun_extra_args:
    description: More arguments for C(srun), e.g. C([--partition=gpu, --account=lab]).
    type: list
    elements: str
    default: []
  hostfile:
    description:
      - OpenMPI hostfile (C(host slots=N) lines). Without it every rank runs on this node.
      - Read to check that each of the first O(nodes) hosts has O(slots_per_node) slots.
    type: path
  slots_per_node:
    description: Processes per node (C(--map-by ppr:N:node)); default is the first hostfile host's slots.
    type: int
  nodes:
    description: Nodes to use; default is every host in the hostfile (1 without a hostfile).
    type: int
  process_counts:
    description: Process counts to run, in this order; default 1, powers of two, all slots.
    type: list
    elements: int
  model:
    description: Network to train.
    type: str
    choices: [mlp, resnet50]
    default: mlp
  batchsize:
    description: Samples per process per iteration; the benchmark's default when unset.
    type: int
  unit:
    description: Hidden units of the MLP.
    type: int
  iterations:
    description: Timed iterations per pass (the benchmark runs a plain and an instrumented pass).
    type: int
    default: 50
  warmup:
    description: Untimed iterations first (at least 2).
    type: int
    default: 5
  framework:
    description:
      - C(chainer) (ChainerMN), C(pytorch) (PyTorch DDP), or C(both), each process count run with ChainerMN
        then with PyTorch, their documents side by side.
    type: str
    choices: [chainer, pytorch, both]
    default: chainer
  communicator:
    description:
      - ChainerMN communicator; the benchmark picks C(pure_nccl) with O(gpu), C(naive) without.
      - For PyTorch the process group's backend, C(gloo) or C(nccl) (default C(nccl) with O(gpu),
        C(gloo) without); with O(framework=both) each framework takes the value that is one of its own
        and its default otherwise.
    type: str
    choices: [naive, flat, non_cuda_aware, pure_nccl, gloo, nccl]
  gpu:
    description: One GPU per process.
    type: bool
    default: false
  data:
    description: C(synthetic), or a path on the nodes to MNIST IDX/npz files or an image list file.
    type: str
    default: synthetic
  extra_args:
    description: More arguments for C(python -m train), e.g. C([--insize, "128"]).
    type: list
    elements: str
    default: []
  mpiexec_extra_args:
    description: More arguments for C(mpiexec), e.g. C([--mca, btl_tcp_if_include, bond0]).
    type: list
    elements: str
    default: []
  mpi_yield_when_idle:
    description:
      - Pass C(--mca mpi_yield_when_idle 1) to mpiexec, so that ranks waiting in MPI yield their
        core instead of busy-polling.
      - For ranks that outnumber the cores they really have, e.g. the sandbox's containers sharing
        one host. The benchmark sets it by itself where a node has fewer usable CPUs than ranks, and
        records in each document who decided.
    type: bool
    default: false
  environment:
    description: Environment variables for every rank (set here and exported with C(-x)).
    type: dict
    default: {}
  timeout:
    description:
      - Seconds one run may take before the task fails. Passed to mpiexec as C(MPIEXEC_TIMEOUT)
        (OpenMPI and MPICH abort every rank of the job), to srun as C(--time) in whole minutes,
        with C(timeout) 60 s later as a backstop.
    type: int
    default: 900
  out_dir:
    description: Directory on this node for C(p<N>.json) (and C(trace-p<N>.json) with O(trace)).
    type: path
  trace:
    description: Also write a Chrome trace per run into O(out_dir) (written by rank 0).
    type: bool
    default: false
notes:
  - Uses OpenMPI's C(--map-by ppr) and C(-x) options; C(srun --export=ALL) passes O(environment) on.
  - Per-run numbers (phase statistics, algbw, busbw) come from the benchmark itself; see train/README.md.
seealso:
  - module: ansible.builtin.command
"""

EXAMPLES = r"""
- name: Benchmark the MLP at 1, 2, 4 and 6 processes
  mncluster.core.chainermn_benchmark:
    chdir: /usr/local/lib/mncluster
    python: /home/mpiuser/.venvs/mncluster/bin/python
    hostfile: /home/mpiuser/mncluster/hostfile
    slots_per_node: 2
    model: mlp
    iterations: 50
    out_dir: /home/mpiuser/mncluster/results
  register: bench

- name: One process count per task, so progress shows
  mncluster.core.chainermn_benchmark:
    chdir: /usr/local/lib/mncluster
    hostfile: /home/mpiuser/mncluster/hostfile
    process_counts: ["{{ item }}"]
    model: resnet50
    gpu: true
  loop: [1, 2, 4, 8]
"""

RETURN = r"""
process_counts:
  description: The process counts run (or planned, in check mode).
  returned: always
  type: list
  elements: int
  sample: [1, 2, 4, 6]
commands:
  description: The argv of each run.
  returned: always
  type: list
  elements: list
documents:
  description:
    - The benchmark document (schema C(mncluster.benchmark/1)) of each run, in run order.
    - Each carries C(launch), how it was started (C(launcher), C(command)); the ranks' own record of
      their Slurm or PBS job is C(environment.scheduler).
  returned: success, not in check mode
  type: list
  elements: dict
scaling:
  description: Per process count, throughput, ideal throughput, speedup and weak-scaling efficiency.
  returned: success, not in check mode
  type: list
  elements: dict
  sample:
    - {processes: 1, samples_per_s: 610.2, ideal_samples_per_s: 610.2, speedup: 1.0, efficiency: 1.0,
       baseline_processes: 1}
    - {processes: 2, samples_per_s: 1100.5, ideal_samples_per_s: 1220.4, speedup: 1.8, efficiency: 0.9,
       baseline_processes: 1}
files:
  description: Files written into O(out_dir).
  returned: when out_dir is set
  type: list
  elements: str
failed_processes:
  description: The process count whose run failed.
  returned: failure of a run
  type: int
failed_rank:
  description: The rank the output blames for the failure, when it can tell.
  returned: failure of a run
  type: int
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import (
    check_process_counts,
    launcher_env,
    mpiexec_argv,
    parse_hostfile,
    process_counts,
    srun_argv,
    train_argv,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_parse import (
    failing_rank,
    parse_document,
    stderr_tail,
    timed_out,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_report import scaling

TRAIN_OPTIONS = ("model", "batchsize", "unit", "iterations", "warmup", "communicator", "gpu", "data")
BACKENDS = ("gloo", "nccl")


def frameworks(framework):
    return ["chainer", "pytorch"] if framework == "both" else [framework]


def _options(p, framework):
    """``python -m train`` options of one framework's run (no --framework for Chainer, the default)."""
    options = {k: p[k] for k in TRAIN_OPTIONS}
    if framework == "pytorch":
        options = {"framework": "pytorch", **options}
    chosen = options["communicator"]
    if chosen is not None and (chosen in BACKENDS) != (framework == "pytorch"):
        if p["framework"] != "both":
            return None
        options["communicator"] = None  # the other framework's choice: this one takes its default
    return options


def runs(p, counts):
    """(processes, framework) in the order they run: each count with every framework."""
    return [(n, fw) for n in counts for fw in frameworks(p["framework"])]


def _plan(module):
    """(counts, nodes, slots, hostfile hosts) or fail_json; touches nothing."""
    p = module.params
    hosts = None
    if p["hostfile"]:
        try:
            with open(p["hostfile"], encoding="utf-8") as f:
                hosts = parse_hostfile(f.read())
        except (OSError, ValueError) as e:
            module.fail_json(msg=f"cannot read hostfile {p['hostfile']}: {e}")
        if not hosts:
            module.fail_json(msg=f"hostfile {p['hostfile']} lists no hosts")
    slots = p["slots_per_node"] or (hosts[0][1] if hosts else None)
    if not slots or slots < 1:
        module.fail_json(msg="slots_per_node must be set (and at least 1) when there is no hostfile")
    nodes = p["nodes"] or (len(hosts) if hosts else 1)
    counts = p["process_counts"] or process_counts(nodes * slots)
    problem = check_process_counts(counts, nodes, slots, hosts)
    if problem:
        module.fail_json(msg=problem, process_counts=counts)
    if p["trace"] and not p["out_dir"]:
        module.fail_json(msg="trace needs out_dir")
    if _options(p, p["framework"] if p["framework"] != "both" else "chainer") is None:
        module.fail_json(msg=f"communicator {p['communicator']} is not one of {p['framework']}'s: "
                             + ("gloo or nccl" if p["framework"] == "pytorch" else
                                "naive, flat, non_cuda_aware or pure_nccl") + "; nothing was run")
    # What earlier tasks install: in check mode they have not run yet, so only warn.
    missing = []
    if not os.path.isfile(os.path.join(p["chdir"], "train", "__main__.py")):
        missing.append(f"{p['chdir']} holds no train package (train/__main__.py)")
    if os.path.isabs(p["python"]) and not os.access(p["python"], os.X_OK):
        missing.append(f"python {p['python']} is not an executable on this node")
    option = "srun" if p["launcher"] == "slurm" else "mpiexec"
    launcher = p[option]
    if not os.path.isabs(launcher) and module.get_bin_path(launcher) is None:
        missing.append(f"{launcher} is not on PATH here (set {option} to its full path)")
    for problem in missing:
        if module.check_mode:
            module.warn(problem)
        else:
            module.fail_json(msg=f"{problem}; nothing was run")
    return counts, nodes, slots


def _commands(module, counts, slots):
    p = module.params
    timeout_bin = module.get_bin_path("timeout")
    cmds = []
    for n, fw in runs(p, counts):
        options = _options(p, fw)
        extra = list(p["extra_args"])
        suffix = "" if fw == "chainer" else f"-{fw}"
        if p["trace"]:
            extra += ["--trace", os.path.join(p["out_dir"], f"trace-p{n}{suffix}.json")]
        command = train_argv(p["python"], options, extra)
        if p["launcher"] == "slurm":
            cmds.append(srun_argv(p["srun"], n, slots, command, extra_args=p["srun_extra_args"],
                                  timeout=p["timeout"], timeout_bin=timeout_bin, gpu=p["gpu"]))
            continue
        cmds.append(mpiexec_argv(p["mpiexec"], n, slots, command, hostfile=p["hostfile"],
                                 export=sorted(p["environment"]), extra_args=p["mpiexec_extra_args"],
                                 timeout=p["timeout"], timeout_bin=timeout_bin,
                                 yield_when_idle=p["mpi_yield_when_idle"]))
    return cmds


def _fail_run(module, n, argv, rc, out, err, timed_out, framework="chainer"):
    rank = failing_rank(err)
    tail = stderr_tail(err, rank)
    who = f"rank {rank}" if rank is not None else "a rank"
    if module.params["framework"] == "both":
        who += f" ({'ChainerMN' if framework == 'chainer' else 'PyTorch DDP'})"
    if timed_out:
        msg = (f"the run with {n} processes did not finish within {module.params['timeout']} s "
               f"and was killed (a hung rank or a network that does not connect?); stderr tail:\n{tail}")
    else:
        msg = f"the run with {n} processes failed (rc={rc}) in {who}; stderr tail:\n{tail}"
    module.fail_json(msg=msg, rc=rc, cmd=argv, stdout=out[-4000:], stderr=err[-8000:],
                     failed_processes=n, failed_rank=rank)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            chdir=dict(type="path", required=True, aliases=["train_dir"]),
            python=dict(type="str", default="python3"),
            mpiexec=dict(type="str", default="mpiexec"),
            launcher=dict(type="str", choices=["mpiexec", "slurm"], default="mpiexec"),
            srun=dict(type="str", default="srun"),
            srun_extra_args=dict(type="list", elements="str", default=[]),
            hostfile=dict(type="path"),
            slots_per_node=dict(type="int"),
            nodes=dict(type="int"),
            process_counts=dict(type="list", elements="int"),
            model=dict(type="str", choices=["mlp", "resnet50"], default="mlp"),
            batchsize=dict(type="int"),
            unit=dict(type="int"),
            iterations=dict(type="int", default=50),
            warmup=dict(type="int", default=5),
            framework=dict(type="str", choices=["chainer", "pytorch", "both"], default="chainer"),
            communicator=dict(type="str",
                              choices=["naive", "flat", "non_cuda_aware", "pure_nccl", "gloo", "nccl"]),
            gpu=dict(type="bool", default=False),
            data=dict(type="str", default="synthetic"),
            extra_args=dict(type="list", elements="str", default=[]),
            mpiexec_extra_args=dict(type="list", elements="str", default=[]),
            mpi_yield_when_idle=dict(type="bool", default=False),
            environment=dict(type="dict", default={}),
            timeout=dict(type="int", default=900),
            out_dir=dict(type="path"),
            trace=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    counts, _nodes, slots = _plan(module)
    commands = _commands(module, counts, slots)
    if module.check_mode:
        module.exit_json(changed=False, process_counts=counts, commands=commands)

    env = {k: str(v) for k, v in p["environment"].items()}
    env.update(launcher_env(p["timeout"], p["launcher"], p["mpi_yield_when_idle"]))
    if p["launcher"] == "slurm" and os.path.isabs(p["mpiexec"]):
        # srun's ranks keep this PATH (--export=ALL): Open MPI's bin/ first, as `module load openmpi`
        # puts it, so that a rank finds the ompi_info of its own Open MPI (CUDA-awareness, pinning).
        env["PATH"] = os.pathsep.join([os.path.dirname(p["mpiexec"]), os.environ.get("PATH", os.defpath)])
    if p["out_dir"]:
        os.makedirs(p["out_dir"], exist_ok=True)
    documents, files = [], []
    for i, (n, fw) in enumerate(runs(p, counts)):
        argv = commands[i]
        start = time.monotonic()
        rc, out, err = module.run_command(argv, cwd=p["chdir"], environ_update=env, check_rc=False)
        if rc != 0:
            stopped = timed_out(rc, out + err, time.monotonic() - start, p["timeout"])
            _fail_run(module, n, argv, rc, out, err, stopped, fw)
        try:
            doc = parse_document(out)
        except ValueError as e:
            module.fail_json(msg=f"the run with {n} processes gave no benchmark document: {e}",
                             rc=rc, cmd=argv, stdout=out[-8000:], stderr=err[-8000:], failed_processes=n)
        doc["launch"] = {"launcher": p["launcher"], "command": argv}
        documents.append(doc)
        if p["out_dir"]:
            path = os.path.join(p["out_dir"], f"p{n}{'' if fw == 'chainer' else '-' + fw}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)
            files.append(path)

    result = dict(
        changed=True,
        process_counts=counts,
        commands=commands,
        documents=documents,
        scaling=scaling([(d["config"]["processes"], d["throughput"]["samples_per_s"]) for d in documents
                         if (d["config"].get("framework") or "chainer") == frameworks(p["framework"])[0]]),
    )
    if p["out_dir"]:
        result["files"] = files
    module.exit_json(**result)


if __name__ == "__main__":
    main()
