#!/usr/bin/env bash
# The whole test suite, stage by stage, with each stage's wall time.
#   scripts/test.sh                       everything (what `make test` and CI run)
#   scripts/test.sh lint unit             only those stages
#   MNC_SCENARIOS="default openmpi" scripts/test.sh molecule
#   MNC_TEST_FULL=0 scripts/test.sh       without the OpenMPI/Python/cluster chain
#
# Two lanes run side by side (MNC_TEST_JOBS=1 runs everything in one):
#   build lane: openmpi -> python -> cluster. The OpenMPI build lands in the
#               artifact cache in `openmpi` and the later scenarios reuse it
#               (same fingerprint), so it is built once per run.
#   light lane: lint, pytest, the compatibility lane (scripts/compat-lane.sh:
#               the newest ansible-core, in a Debian 13 controller container)
#               and the scenarios that build nothing. `slurm`
#               installs the build lane's OpenMPI from the cache (the same
#               fingerprint): it is last in the queue, and should the build
#               still be running it waits for it through the cache's lock.
# The scenarios that build nothing wait in one queue that both lanes take
# from: whichever lane is free runs the next one (the build lane once its
# chain is done), so the lanes end together on a warm cache (chain ~31 min)
# and on a cold one (OpenMPI and mpi4py built: ~50 min) alike.
# The long build is CPU-bound while the light lane mostly waits on podman and
# apt, so two lanes finish in about the time of the longer one.
# Every stage runs even when another one failed (one run shows every
# failure); each stage's log is kept in .cache/test-logs/, and the tail of a
# failed stage's log is printed. Exit status: non-zero when any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -n "${VIRTUAL_ENV:-}" ] || source .venv/bin/activate

BUILD_LANE="openmpi python cluster"
LIGHT_LANE="default artifacts gpu_pip gpu_render wiring compat slurm"
# Scenarios `make test` (and CI) runs: both lanes. MNC_TEST_FULL=0 leaves
# out the build lane (a quick run while working on a light role).
DEFAULT_SCENARIOS="$BUILD_LANE $LIGHT_LANE"
[ "${MNC_TEST_FULL:-1}" = 0 ] && DEFAULT_SCENARIOS="$LIGHT_LANE"
SCENARIOS="${MNC_SCENARIOS:-$DEFAULT_SCENARIOS}"
JOBS="${MNC_TEST_JOBS:-2}"
export MNC_ARTIFACT_CACHE="${MNC_ARTIFACT_CACHE:-$HOME/.cache/mncluster/artifacts}"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 ANSIBLE_NOCOLOR=1
LOGS=.cache/test-logs
mkdir -p "$LOGS"
RESULTS="$LOGS/results.txt"
: > "$RESULTS"
# Issue 16's fault and bad-input battery: every marked case of every stage
# (pytest and each scenario's testinfra run) appends one line here; printed
# at the end (tests/unit/mnc_battery.py).
export MNC_BATTERY_LOG="$PWD/$LOGS/battery.jsonl"
: > "$MNC_BATTERY_LOG"

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(lint unit molecule)
want() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
for s in "${stages[@]}"; do
    case "$s" in lint|unit|molecule) ;; *) echo "unknown stage '$s' (lint, unit, molecule)"; exit 2 ;; esac
done

lint() {
    yamllint --strict -f parsable . &&
    ruff check . &&
    ansible-playbook --syntax-check site.yml playbooks/*.yml >/dev/null &&
    ansible-lint --profile production -q &&
    for m in collections/ansible_collections/mncluster/core/plugins/modules/*.py; do
        ansible-doc "mncluster.core.$(basename "$m" .py)" >/dev/null || { echo "ansible-doc cannot render $m"; return 1; }
    done
}
unit() { pytest -q --durations=20 tests; }
scenario() {
    # compat is the compatibility lane: molecule's compat scenario driven from both ends and the
    # newest core's own checks (scripts/compat-lane.sh), not one `molecule test`.
    if [ "$1" = compat ]; then bash scripts/compat-lane.sh; else molecule test -s "$1"; fi
}

run_stage() {  # name, command... ; output goes to the stage's log
    local name=$1; shift
    local log="$LOGS/${name//:/-}.log" t0 dt status
    t0=$(date +%s)
    echo "[$(date -u +%H:%M:%S)] start  $name (log: $log)"
    if "$@" > "$log" 2>&1; then status=PASS; else status=FAIL; fi
    dt=$(( $(date +%s) - t0 ))
    echo "[$(date -u +%H:%M:%S)] $status   $name in ${dt}s"
    if [ $status = FAIL ]; then
        echo "----- last 60 lines of $log -----"; tail -n 60 "$log"; echo "-----"
    fi
    printf '%-24s %-5s %6ss\n' "$name" "$status" "$dt" >> "$RESULTS"
}

chosen() { case " $SCENARIOS " in *" $1 "*) [ -f "molecule/$1/molecule.yml" ] ;; *) return 1 ;; esac; }

lane() {  # scenario names, run in this order
    local s
    for s in "$@"; do chosen "$s" && run_stage "molecule:$s" scenario "$s"; done
}

# The shared queue: the light lane's scenarios, then any scenario named in
# MNC_SCENARIOS that belongs to no lane. take() pops one under a lock.
QUEUE="$LOGS/queue"
: > "$QUEUE"
if want molecule; then
    for s in $LIGHT_LANE; do chosen "$s" && echo "$s" >> "$QUEUE"; done
    for s in $SCENARIOS; do
        case " $BUILD_LANE $LIGHT_LANE " in *" $s "*) continue ;; esac
        chosen "$s" && echo "$s" >> "$QUEUE"
    done
fi
take() { flock "$QUEUE.lock" sh -c 'head -n 1 "$1"; sed -i 1d "$1"' take "$QUEUE"; }
drain() {
    local s
    while s=$(take) && [ -n "$s" ]; do run_stage "molecule:$s" scenario "$s"; done
}

build_lane() { want molecule && lane $BUILD_LANE; drain; }
light_lane() {
    want lint && run_stage lint lint
    want unit && run_stage pytest unit
    drain
}

t_all=$(date +%s)
if [ "$JOBS" -ge 2 ]; then
    build_lane & pid=$!
    light_lane
    wait $pid
else
    light_lane
    build_lane
fi

echo
echo "stage                    result   time"
cat "$RESULTS"
echo "total wall time: $(( $(date +%s) - t_all ))s"
echo
echo "fault and bad-input battery (issue 16), every stage:"
python tests/unit/mnc_battery.py "$MNC_BATTERY_LOG" || true
! grep -q ' FAIL ' "$RESULTS"
