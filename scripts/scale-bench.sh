#!/usr/bin/env bash
# The scale benchmark (`make scale-bench`; not part of `make test`): for each
# N, a fresh sandbox of N nodes, each capped to the same CPU share, then
#   1. the stages before the network one (preflight, base, gpu, mpi, python)
#   2. the network stage, cold (timed)
#   3. chainer and scheduler
#   4. the verify stage, cold (timed)
#   5. site.yml once to converge (with a one-process benchmark sweep)
#   6. site.yml again, which must report changed=0 (timed; a run that
#      changes or fails anything stops the benchmark)
# and the sandbox is destroyed (also on failure or Ctrl-C). Every run goes
# through ansible-runner; its events are kept (reports/scale-*/runs/) with its CPU time (the controller's,
# each node's); scripts/scale_bench.py counts the tasks per node and the
# slowest tasks, and writes the table (scale.md) and
# the picture (scale.png, time vs N) under reports/scale-<UTC time>/.
#
#   scripts/scale-bench.sh                 N = 1 3 8 16, 0.5 CPU per node
#   scripts/scale-bench.sh -c 1 1 3        N = 1 3, 1 CPU per node
#   SCALE_NODES="1 3" SCALE_CPUS=1 scripts/scale-bench.sh
#
# The sandbox is its own: containers mnc-scale<i> (label mncluster.scale-bench)
# on the podman network mnc-scale (10.89.140.0/24), inventory and keys under
# .cache/scale-bench/, reports under reports/scale-*/: it never touches the
# default sandbox (make sandbox) or a molecule scenario. One benchmark at a
# time (a lock in .cache/).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${VIRTUAL_ENV:-}" ] || source .venv/bin/activate

usage() {
    echo "usage: $0 [-c CPUS_PER_NODE] [N ...]   (default: -c ${SCALE_CPUS:-0.5} ${SCALE_NODES:-1 3 8 16})" >&2
    exit 2
}
cpus="${SCALE_CPUS:-0.5}"
while getopts "c:h" opt; do
    case "$opt" in
        c) cpus="$OPTARG" ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -gt 0 ]; then nodes=("$@"); else read -r -a nodes <<< "${SCALE_NODES:-1 3 8 16}"; fi

# Refuse bad input before anything is created.
[ ${#nodes[@]} -gt 0 ] || { echo "no N given" >&2; usage; }
for n in "${nodes[@]}"; do
    if ! [[ "$n" =~ ^[1-9][0-9]*$ ]] || [ "$n" -gt 200 ]; then
        echo "N must be a whole number from 1 to 200 (the sandbox's limit), got '$n'; nothing was created" >&2
        exit 2
    fi
done
if ! [[ "$cpus" =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v c="$cpus" 'BEGIN { exit !(c > 0) }'; then
    echo "the CPU share per node must be a number above 0 such as 0.5, got '$cpus'; nothing was created" >&2
    exit 2
fi

mkdir -p .cache
exec 9> .cache/scale-bench.lock
flock -n 9 || { echo "another scale benchmark is running (lock .cache/scale-bench.lock)" >&2; exit 1; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$PWD/reports/scale-$stamp"
inv="$PWD/.cache/scale-bench/inventory"
results="$out/results.jsonl"
label=mncluster.scale-bench
network=mnc-scale
mkdir -p "$out/logs" "$out/runs"
: > "$results"
t0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - t0 ))s] $*"; }

# The sandbox's own names and places; the reports of verify and the benchmark
# go under this run's directory (reports/latest and verify-latest stay as they are).
sandbox_vars() {  # N
    printf '{"sandbox_nodes": %s, "sandbox_node_cpus": "%s", "sandbox_name_prefix": "mnc-scale",
"sandbox_network": "%s", "sandbox_net_prefix": "10.89.140", "sandbox_label": "%s",
"sandbox_inventory_dir": "%s"}\n' "$1" "$cpus" "$network" "$label" "$inv"
}
site_vars() {  # N
    # A one-process sweep: the converge's benchmark is not what is measured here.
    printf '{"verify_report_root": "%s", "benchmark_report_root": "%s",
"benchmark_process_counts": [1], "benchmark_iterations": 10, "benchmark_warmup": 2}\n' \
        "$out/n$1" "$out/n$1"
}

current_n=""
watcher=""
destroy() {  # N: the sandbox gone, whatever state it is in
    local n=$1
    say "N=$n: destroying the sandbox"
    sandbox_vars "$n" > "$out/sandbox-vars.json"
    python3 scripts/playbook_runner.py --quiet --artifacts "$out/runs/n$n-destroy" playbooks/sandbox.yml \
        -e @"$out/sandbox-vars.json" -e sandbox_state=absent > "$out/logs/n$n-destroy.log" 2>&1 || say "N=$n: sandbox.yml could not remove everything (log: $out/logs/n$n-destroy.log)"
    # Whatever the playbook left (it failed, or was interrupted itself).
    podman ps -aq --filter "label=$label" | xargs -r podman rm -f > /dev/null || true
    ! podman network exists "$network" || podman network rm -f "$network" > /dev/null || true
    rm -rf "$inv"
    current_n=""
}
cleanup() {
    local status=$?
    trap '' INT TERM
    [ -z "$watcher" ] || kill "$watcher" 2> /dev/null || true
    [ -z "$current_n" ] || destroy "$current_n"
    # The table of what was measured, also when a run failed.
    [ ! -s "$results" ] || python3 scripts/scale_bench.py report "$results" "$out" > /dev/null || true
    case $status in
        0) ;;
        130|143) say "interrupted; logs and what was measured: $out" ;;
        *) say "FAILED (exit $status); logs and what was measured: $out" ;;
    esac
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The CPU time each node of the sandbox has used since it started, one
# "name seconds" line per node: its container's cgroup (v1 cpuacct, or v2
# cpu.stat), so everything the node ran counts (modules, sshd, sudo, mpiexec).
node_cpu() {
    podman ps -q --filter "label=$label" | xargs -r podman inspect --format '{{.Name}} {{.State.CgroupPath}}' |
        while read -r name path; do
            if [ -r "/sys/fs/cgroup/cpuacct$path/cpuacct.usage" ]; then
                echo "$name $(awk '{ print $1 / 1e9 }' "/sys/fs/cgroup/cpuacct$path/cpuacct.usage")"
            elif [ -r "/sys/fs/cgroup$path/cpu.stat" ]; then
                echo "$name $(awk '$1 == "usage_usec" { print $2 / 1e6 }' "/sys/fs/cgroup$path/cpu.stat")"
            fi
        done
}

# One playbook run through ansible-runner (scripts/playbook_runner.py), its
# events and output kept in the run's artifacts directory; prints a line a
# minute while it runs (the task it is at) so a long converge shows progress.
# Its CPU time is kept too: the controller's (ansible-runner, ansible-playbook
# and every process they waited for: workers, ssh clients; bash's `times` in
# the subshell) and each node's (node_cpu before and after).
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
play() {  # N, run name, then the ansible-playbook arguments
    local n=$1 run=$2; shift 2
    local log="$out/runs/n$n-$run" start end status=0
    local cpu="$out/logs/n$n-$run.cpu"
    say "N=$n: ${run} ..."
    node_cpu > "$cpu.nodes-before"
    start=$(date +%s.%N)
    ( while sleep 60; do
          say "N=$n: ${run} still running, at: $(cat "$log"/artifacts/*/stdout 2>/dev/null | grep -o 'TASK \[[^]]*\]' | tail -n 1)"
      done ) &
    watcher=$!
    ( rc=0
      python3 scripts/playbook_runner.py --quiet --artifacts "$log" "$@" > "$out/logs/n$n-$run.summary" 2>&1 || rc=$?
      times > "$cpu.controller"
      exit $rc ) || status=$?
    kill "$watcher" 2> /dev/null || true
    wait "$watcher" 2> /dev/null || true
    watcher=""
    end=$(date +%s.%N)
    node_cpu > "$cpu.nodes-after"
    local expect=()
    [ "$run" != noop ] || expect=(--expect-unchanged)
    python3 scripts/scale_bench.py record --log "$log" --run "$run" --n "$n" --cpus "$cpus" \
        --wall "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" \
        --controller-cpu "$cpu.controller" --node-cpu "$cpu.nodes-before" "$cpu.nodes-after" \
        "${expect[@]}" "$results" || { [ "$status" -ne 0 ] || status=1; }
    if [ "$status" -ne 0 ]; then
        say "N=$n: ${run} FAILED (exit $status); events and output: $log"
        tail -n 20 "$out/logs/n$n-$run.summary" >&2 || true
        return 1
    fi
}

host_cpus=$(nproc)
say "scale benchmark: N = ${nodes[*]}, $cpus CPU per node, host $host_cpus CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); report: $out"
for n in "${nodes[@]}"; do
    if awk -v n="$n" -v c="$cpus" -v h="$host_cpus" 'BEGIN { exit !(n * c > h) }'; then
        say "note: N=$n x $cpus CPU is more than the host's $host_cpus CPUs: the nodes cannot all get their share at once"
    fi
done

for n in "${nodes[@]}"; do
    # A sandbox left by an interrupted run goes first: every N starts cold.
    current_n=$n
    destroy "$n"
    current_n=$n
    sandbox_vars "$n" > "$out/sandbox-vars.json"
    site_vars "$n" > "$out/site-vars-n$n.json"
    mkdir -p "$inv" "$out/n$n"
    cp -r inventory/sandbox/group_vars "$inv/"
    site=(-i "$inv/" -e @"$out/site-vars-n$n.json")
    play "$n" sandbox playbooks/sandbox.yml -e @"$out/sandbox-vars.json"
    play "$n" prepare site.yml "${site[@]}" --tags base,gpu,mpi,python
    play "$n" network-cold playbooks/network.yml "${site[@]}"
    play "$n" middle site.yml "${site[@]}" --tags chainer,scheduler --skip-tags preflight
    play "$n" verify-cold playbooks/verify.yml "${site[@]}"
    play "$n" converge site.yml "${site[@]}"
    play "$n" noop site.yml "${site[@]}"
    destroy "$n"
    python3 scripts/scale_bench.py report "$results" "$out" > /dev/null
done
trap - EXIT

say "done in $(( $(date +%s) - t0 ))s"
python3 scripts/scale_bench.py report "$results" "$out"
