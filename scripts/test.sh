#!/usr/bin/env bash
# The whole test suite, stage by stage, with each stage's wall time.
#   scripts/test.sh                 all stages
#   scripts/test.sh lint unit       only those stages
#   MNC_SCENARIOS="default openmpi" scripts/test.sh molecule
# Every stage runs even when an earlier one failed (one run shows every
# failure); the exit status is non-zero when any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -n "${VIRTUAL_ENV:-}" ] || source .venv/bin/activate

# Molecule scenarios in dependency order: the OpenMPI build lands in the
# artifact cache in `openmpi` and is reused (same fingerprint) by `python`
# and `cluster`.
DEFAULT_SCENARIOS="default artifacts gpu_pip gpu_render openmpi python wiring cluster"
SCENARIOS="${MNC_SCENARIOS:-$DEFAULT_SCENARIOS}"
export MNC_ARTIFACT_CACHE="${MNC_ARTIFACT_CACHE:-$HOME/.cache/mncluster/artifacts}"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(lint unit molecule)

results=()
failed=0
run_stage() {  # name, command...
    local name=$1; shift
    local t0; t0=$(date +%s)
    echo "=================== stage: $name ($(date -u +%H:%M:%S)) ==================="
    if "$@"; then status=PASS; else status=FAIL; failed=1; fi
    local dt=$(( $(date +%s) - t0 ))
    results+=("$(printf '%-28s %-5s %5ss' "$name" "$status" "$dt")")
    echo "=================== stage: $name: $status in ${dt}s ==================="
}

lint() {
    yamllint --strict -f parsable . &&
    ruff check . &&
    ansible-playbook --syntax-check site.yml playbooks/*.yml >/dev/null &&
    ansible-lint --profile production -q &&
    for m in library/*.py; do
        ansible-doc -M library "$(basename "$m" .py)" >/dev/null || { echo "ansible-doc cannot render $m"; return 1; }
    done
}

unit() {
    pytest -q tests
}

scenario() {
    molecule test -s "$1"
}

t_all=$(date +%s)
for stage in "${stages[@]}"; do
    case "$stage" in
        lint) run_stage lint lint ;;
        unit) run_stage "pytest" unit ;;
        molecule)
            for s in $SCENARIOS; do
                if [ -f "molecule/$s/molecule.yml" ]; then
                    run_stage "molecule:$s" scenario "$s"
                fi
            done ;;
        *) echo "unknown stage $stage (lint, unit, molecule)"; exit 2 ;;
    esac
done

echo
echo "stage                        result  time"
printf '%s\n' "${results[@]}"
echo "total: $(( $(date +%s) - t_all ))s"
exit $failed
