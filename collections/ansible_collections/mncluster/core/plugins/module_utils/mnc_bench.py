# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers for the ChainerMN benchmark modules: no Ansible, no I/O. This one launches the runs:

* the names the other parts share (the document's and the report's schema, the phases),
* the process-count sweep and hostfile slot checks,
* the launcher's command line of one benchmark run (mpiexec, or Slurm's srun) and its environment.

The other parts, one module each: a run's output (``mnc_bench_parse``), the report dict and
scaling efficiency (``mnc_bench_report``), its Markdown (``mnc_bench_markdown``, from the parts in
``mnc_bench_markdown_sections``) and the Chrome trace (``mnc_bench_trace``).

The per-run numbers (phase statistics, algbw/busbw) are computed by the
benchmark itself (``train/metrics.py``) and read from its documents.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_hostfile import (
    parse_hostfile as parse_hostfile,
)

SCHEMA = "mncluster.benchmark/1"
REPORT_SCHEMA = "mncluster.report/1"
JSON_PREFIX = "MNCBENCH_JSON "
PHASES = ("compute", "wait", "allreduce", "update")
BACKSTOP_S = 60


# -- sweep and slots ----------------------------------------------------------
def process_counts(total_slots):
    """1, then powers of two below ``total_slots``, then ``total_slots`` itself."""
    if total_slots < 1:
        raise ValueError("there must be at least one slot")
    counts, p = [], 1
    while p < total_slots:
        counts.append(p)
        p *= 2
    counts.append(total_slots)
    return counts


def check_process_counts(counts, nodes, slots_per_node, hostfile_hosts=None):
    """None when every count fits the slots, else a message saying what does not."""
    if not counts:
        return "process_counts is empty"
    capacity = nodes * slots_per_node
    bad = [p for p in counts if p < 1]
    if bad:
        return f"process counts must be at least 1, got {bad}"
    too_many = [p for p in counts if p > capacity]
    if too_many:
        listed = ", ".join(str(p) for p in too_many)
        return (f"{listed} processes requested but there are only {capacity} slots "
                f"({nodes} nodes x {slots_per_node} slots per node); nothing was run")
    if hostfile_hosts is not None:
        if len(hostfile_hosts) < nodes:
            return f"the hostfile lists {len(hostfile_hosts)} hosts but nodes is {nodes}; nothing was run"
        short = [(h, s) for h, s in hostfile_hosts[:nodes] if s < slots_per_node]
        if short:
            listed = ", ".join(f"{h} (slots={s})" for h, s in short)
            return f"hostfile gives {listed} fewer than slots_per_node={slots_per_node}; nothing was run"
    return None


# -- one run ------------------------------------------------------------------
def train_argv(python, options, extra_args=()):
    """``python -m train ...`` with a flag per set option (None and False are left out)."""
    argv = [python, "-m", "train"]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        argv.append(flag) if value is True else argv.extend([flag, str(value)])
    argv.append("--json-stdout")
    argv.extend(extra_args)
    return argv


def _backstop(timeout, timeout_bin):
    """``timeout`` around the launcher, BACKSTOP_S after the job's own limit: for a launcher
    that itself hangs (ssh, a dead node). The job's own limit (mpiexec's MPIEXEC_TIMEOUT, see
    launcher_env, or srun's --time) is what takes every rank down."""
    if timeout and timeout_bin:
        return [timeout_bin, "--kill-after=30", str(int(timeout) + BACKSTOP_S)]
    return []


def mpiexec_argv(mpiexec, processes, slots_per_node, command, hostfile=None, export=(),
                 extra_args=(), timeout=None, timeout_bin=None, yield_when_idle=False):
    """The launcher's argv: ``[timeout] mpiexec -n p [-hostfile H] --map-by ppr:s:node ... command``.

    ``yield_when_idle`` adds ``--mca mpi_yield_when_idle 1``: ranks waiting in MPI give
    their core away instead of busy-polling, which is what ranks sharing fewer cores
    than there are ranks need (the benchmark also sets it itself when a node has fewer
    CPUs than ranks, but cannot see nodes that share one host's cores).
    """
    argv = [*_backstop(timeout, timeout_bin), mpiexec, "-n", str(processes)]
    if hostfile:
        argv += ["-hostfile", hostfile]
    argv += ["--map-by", f"ppr:{slots_per_node}:node"]
    for name in export:
        argv += ["-x", name]
    if yield_when_idle:
        argv += ["--mca", "mpi_yield_when_idle", "1"]
    argv += list(extra_args)
    argv += list(command)
    return argv


def srun_argv(srun, processes, slots_per_node, command, extra_args=(), timeout=None,
              timeout_bin=None, gpu=False, job_name="mncluster-benchmark"):
    """Slurm's argv: ``[timeout] srun --mpi=pmix --nodes=k --ntasks=p ... command``, a job per run.

    The same placement as ``mpiexec --map-by ppr:s:node``: the fewest nodes that hold ``p``
    ranks at ``s`` per node, filled in order (``--distribution=block``). Slurm stops the job at
    ``--time`` (whole minutes, rounded up); ``--kill-on-bad-exit`` takes every rank down when
    one fails, as mpiexec does. srun passes the caller's environment on (``--export=ALL``), so
    ranks see the same variables as under mpiexec's ``-x``. With ``gpu`` every task gets one GPU.
    """
    nodes = -(-processes // slots_per_node)
    argv = [*_backstop(timeout, timeout_bin), srun, "--mpi=pmix", f"--nodes={nodes}",
            f"--ntasks={processes}", f"--ntasks-per-node={min(slots_per_node, processes)}",
            "--distribution=block", "--kill-on-bad-exit=1", f"--job-name={job_name}", "--export=ALL"]
    if timeout:
        argv.append(f"--time={-(-int(timeout) // 60)}")
    if gpu:
        argv.append("--gpus-per-task=1")
    argv += list(extra_args)
    argv += list(command)
    return argv


def launcher_env(timeout, launcher="mpiexec", yield_when_idle=False):
    """Environment for the launcher.

    mpiexec: OpenMPI and MPICH both abort the whole job at MPIEXEC_TIMEOUT (srun has
    ``--time`` instead). Under srun, Open MPI's ranks read MCA settings from the
    environment, so ``mpi_yield_when_idle`` goes there rather than on mpiexec's line.
    """
    env = {}
    if launcher == "mpiexec" and timeout:
        env["MPIEXEC_TIMEOUT"] = str(int(timeout))
    if launcher == "slurm" and yield_when_idle:
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    return env
