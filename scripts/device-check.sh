#!/usr/bin/env bash
# The GPU-side checks of one node that need no second node (CUDA visible,
# cuDNN as CuPy loads it, NCCL single-rank allreduce, a CUDA-aware MPI
# device-buffer send within the node, python -m train --gpu at p=1), one
# line per check: PASS|FAIL|SKIP <check>: <detail>. No network needed. Where
# a piece is missing (no GPU, CuPy, Chainer, mpiexec) the check says SKIP and
# why; the exit status is non-zero only if a check FAILs.
#
#   scripts/device-check.sh                      # with python3 from PATH
#   PYTHON=~/.venvs/mncluster/bin/python scripts/device-check.sh
#
# PYTHON: the interpreter whose packages are checked (the MPI user's
# virtualenv on a node). DEADLINE: seconds for all checks (540, under the
# 10 minutes a device session allows).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
    echo "FAIL python: no interpreter '$python' (set PYTHON)"
    exit 1
fi
exec "$python" "$here/device_check.py" --deadline "${DEADLINE:-540}" "$@"
