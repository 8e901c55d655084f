#!/usr/bin/env bash
# Everything the two README commands need on a fresh Debian 12 (or Ubuntu)
# controller, installed from this repository's own files:
#   1. Debian packages (podman, runc, debootstrap, an MPI for the controller-side
#      benchmark tests, ...) -- only those missing; apt-get update only then.
#   2. podman configured for restricted hosts (scripts/podman-setup.sh).
#   3. .venv with the pinned controller tools (requirements/*.txt); skipped when
#      the pins have not changed since the last install.
#   4. the node image (scripts/build-node-image.sh), when it is missing, and the
#      compatibility lane's Debian 13 controller image (scripts/build-controller-image.sh,
#      which also builds the Debian 13 node image), when missing or its pins changed.
# Re-running is fast and changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PY="${MNC_PYTHON:-python3}"
t0=$(date +%s)

packages=(podman runc netavark aardvark-dns iptables slirp4netns debootstrap
          openmpi-bin libopenmpi-dev build-essential python3-venv python3-dev
          ca-certificates curl xz-utils openssh-client rsync git)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> apt-get install ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "==> Debian packages: all present"
fi

echo "==> podman"
$SUDO bash scripts/podman-setup.sh

stamp_want=$(cat requirements/controller.txt requirements/controller-nobuildiso.txt requirements/controller-torch.txt \
             | sha256sum | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ "$(cat .venv/.mncluster-stamp 2>/dev/null)" = "$stamp_want" ]; then
    echo "==> .venv: up to date"
else
    echo "==> .venv: installing pinned controller tools"
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements/controller.txt
    # chainer needs pkg_resources at build time; mpi4py builds against the MPI on PATH.
    .venv/bin/pip install -q --no-build-isolation -r requirements/controller-nobuildiso.txt
    # torch's declared setuptools>=77 would break Chainer's import: its pins, without dependencies.
    .venv/bin/pip install -q --no-deps -r requirements/controller-torch.txt
    echo "$stamp_want" > .venv/.mncluster-stamp
fi

echo "==> node image"
$SUDO bash scripts/build-node-image.sh "${MNC_NODE_IMAGE:-localhost/mncluster-node:bookworm}"
echo "==> compatibility lane's controller image (Debian 13, the newest ansible-core)"
$SUDO bash scripts/build-controller-image.sh
echo "==> bootstrap done in $(( $(date +%s) - t0 ))s"
