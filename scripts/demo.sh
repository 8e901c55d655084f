#!/usr/bin/env bash
# `make demo`: sandbox cluster up, the whole site.yml on it (which ends with
# verify + benchmark), then where the report is and its headline table.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${VIRTUAL_ENV:-}" ] || source .venv/bin/activate
nodes="${1:-3}"
# The benchmark's launcher: empty = the inventory's (slurm in the sandbox), or mpiexec / slurm.
launcher="${2:-}"
t0=$(date +%s)
stage() { echo; echo "=================== $1 ($(( $(date +%s) - t0 ))s) ==================="; }

# Each playbook through ansible-runner (scripts/playbook_runner.py): Ansible's output as it runs,
# then the slowest tasks and any failure by node; its events stay under reports/runs/.
play() { python3 scripts/playbook_runner.py "$@"; }
stage "sandbox: $nodes node(s)"
play playbooks/sandbox.yml -e sandbox_nodes="$nodes"
stage "site.yml on inventory/sandbox (benchmark launcher: ${launcher:-as the inventory sets})"
# A demo always measures (a site.yml re-run skips an unchanged cluster).
play site.yml -i inventory/sandbox/ -e benchmark_only_when_changed=false \
    ${launcher:+-e benchmark_launcher="$launcher"}
stage "done in $(( $(date +%s) - t0 ))s"
if [ -f reports/latest/report.md ]; then
    echo "Report: $(readlink -f reports/latest)/report.md (plots: reports/latest/*.png)"
    # The headline: the verdict per process count (what the time went to, and whether the
    # network is the bottleneck, in words and numbers), then the throughput table.
    awk '/^## Verdict/{p=1; next} p&&/^## /{exit} p' reports/latest/report.md
    awk '/^\|/{p=1} p&&!/^\|/{exit} p' reports/latest/report.md
fi
