#!/usr/bin/env bash
# The compatibility lane: the other end of the supported ansible-core range.
# The main controller (.venv) runs the newest core Debian 12's Python 3.11
# can (requirements/controller.txt); this lane runs the newest core on PyPI,
# which needs Python 3.12+, in a Debian 13 controller container with Python
# 3.13 (scripts/build-controller-image.sh; requirements/controller-compat.txt).
#
#   scripts/compat-lane.sh                 the lane, as `make test` runs it:
#       1. the syntax check of every playbook, with no deprecation warning;
#       2. the unit tests that run playbooks or modules on the roles' own
#          logic (preflight's bad inputs among them); what they leave to the
#          main lane, and why: docs/testing.md;
#       3. molecule's compat scenario: the host's molecule creates and
#          prepares one node, molecule in the container converges it and
#          proves idempotence on the newest core, then the host's molecule
#          runs its idempotence step: the older core must change nothing
#          on a node the newer one converged. The host destroys the node.
#   scripts/compat-lane.sh playbook ARGS   scripts/playbook_runner.py ARGS on the
#       newest core (the cluster scenario's verify step runs site.yml so,
#       after a converge by the older one).
#
# The repository, ~/.ansible/tmp (molecule's state and inventories) and the
# artifact cache are mounted at the same paths, so both ends read the same
# files; SSH control sockets (~/.ansible/cp) stay apart.
set -uo pipefail
cd "$(dirname "$0")/.."
IMAGE="${MNC_CONTROLLER_IMAGE:-localhost/mncluster-controller:trixie}"
CACHE="${MNC_ARTIFACT_CACHE:-$HOME/.cache/mncluster/artifacts}"
mkdir -p "$HOME/.ansible/tmp" "$CACHE"

newest() {  # a command on the newest ansible-core, in the controller container
    local tty=() v molecule_env=()
    [ -t 1 ] && tty=(-t)
    # Called from a molecule step (the cluster scenario's verify), molecule's own variables
    # name its files (its inventory reads the platforms through MOLECULE_FILE): pass them on.
    for v in $(compgen -e | grep '^MOLECULE_'); do molecule_env+=(-e "$v"); done
    podman run --rm "${tty[@]}" --pull never --network host --name "mnc-compat-ctl-$$-$RANDOM" \
        -v "$PWD:$PWD" -v "$HOME/.ansible/tmp:$HOME/.ansible/tmp" -v "$CACHE:$CACHE" \
        -e HOME="$HOME" -e MNC_ARTIFACT_CACHE="$CACHE" -e MNC_BATTERY_LOG "${molecule_env[@]}" \
        -e ANSIBLE_FORCE_COLOR=0 -e PY_COLORS=0 -e ANSIBLE_NOCOLOR=1 \
        -w "$PWD" "$IMAGE" "$@"
}

if [ "${1:-}" = playbook ]; then
    shift
    bash scripts/build-controller-image.sh "$IMAGE" >/dev/null || exit 1
    newest python scripts/playbook_runner.py "$@"
    exit
fi

step() {  # name, command...: timed, and the lane fails at the first failing step
    local name=$1 t0=$SECONDS; shift
    echo "==> $name"
    if ! "$@"; then echo "==> FAIL: $name after $(( SECONDS - t0 ))s"; exit 1; fi
    echo "==> ok: $name in $(( SECONDS - t0 ))s"
}

# 1. What a user on the newest core reads first: no deprecation warning.
syntax() {
    newest bash -c '
        ansible --version | head -n 1; python3 --version
        out=$(ansible-playbook --syntax-check site.yml playbooks/*.yml 2>&1) || { echo "$out"; exit 1; }
        if grep -n -i -A3 "deprecat" <<<"$out"; then echo "deprecation warnings on the newest core"; exit 1; fi'
}

# 2. The unit tests that run Ansible (tests/unit/ansible_env.py), on the newest core.
COMPAT_TESTS="test_preflight test_site_tags test_role_acceptance_settings test_stack_gpu_matrix
    test_playbook_runner test_known_hosts_module test_write_files_module test_user_dir_module
    test_verify_table_module test_verify_unreachable test_prune_module"
unit() {
    local t files=()
    for t in $COMPAT_TESTS; do files+=("tests/unit/$t.py"); done
    newest python -m pytest -q -p no:cacheprovider -m "not podman" --durations=10 "${files[@]}"
}

# 3. One node converged by each end, in molecule's own steps.
molecule_cross() {
    local rc=0
    molecule destroy -s compat >/dev/null 2>&1
    molecule create -s compat &&
        newest molecule converge -s compat && newest molecule idempotence -s compat &&
        echo "==> the older core's second converge of what the newest one converged:" &&
        molecule idempotence -s compat || rc=1
    molecule destroy -s compat >/dev/null 2>&1 || true
    return $rc
}

step "controller image" bash scripts/build-controller-image.sh "$IMAGE"
step "syntax check on the newest core" syntax
step "unit tests that run Ansible, on the newest core" unit
step "molecule compat: converge + idempotence on the newest core, idempotence on the older" molecule_cross
