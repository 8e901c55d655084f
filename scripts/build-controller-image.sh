#!/usr/bin/env bash
# Build the compatibility lane's controller image without a registry: the
# Debian 13 node image (scripts/build-node-image.sh, suite trixie) plus a venv
# with requirements/controller-compat.txt on Debian 13's Python 3.13, the
# newest ansible-core a user gets from `pip install ansible` there.
#
#   scripts/build-controller-image.sh [IMAGE]   (default localhost/mncluster-controller:trixie)
#   MNC_FORCE_IMAGE=1 rebuilds it.
#
# The image is labelled with a fingerprint of the pins and of this script; a
# present image with the same fingerprint is kept. The wheels are fetched by
# the host's pip (containers of the test bed cannot reach PyPI over TLS) for
# CPython 3.13 on x86_64, and installed with --no-index inside the image.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${1:-${MNC_CONTROLLER_IMAGE:-localhost/mncluster-controller:trixie}}"
BASE="${MNC_NODE_TRIXIE_IMAGE:-localhost/mncluster-node:trixie}"
PINS=requirements/controller-compat.txt
PIP="${MNC_PIP:-pip}"
[ -n "${MNC_PIP:-}" ] || [ ! -x .venv/bin/pip ] || PIP=.venv/bin/pip
fp=$(cat "$PINS" "$0" | sha256sum | cut -c1-16)

# The Debian 13 node image first: the default scenario's trixie node runs it too.
MNC_IMAGE_SUITE=trixie bash scripts/build-node-image.sh "$BASE"
have=$(podman image inspect --format '{{ index .Labels "mncluster.fingerprint" }}' "$IMAGE" 2>/dev/null || true)
if [ "${MNC_FORCE_IMAGE:-0}" != 1 ] && [ "$have" = "$fp" ]; then
    echo "controller image $IMAGE already present (fingerprint $fp; MNC_FORCE_IMAGE=1 rebuilds it)"
    exit 0
fi
start=$(date +%s)

ctx="$(mktemp -d /var/tmp/mncluster-controller.XXXXXX)"
trap 'rm -rf "$ctx"' EXIT
echo "==> wheels of $PINS for CPython 3.13"
"$PIP" download -q -d "$ctx/wheels" --only-binary=:all: \
    --python-version 3.13 --implementation cp --abi cp313 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 \
    -r "$PINS" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
cp "$PINS" "$ctx/requirements.txt"
cat > "$ctx/Containerfile" <<CF
FROM $BASE
# python3-venv for the venv; rsync and git as on the main controller.
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        python3-venv rsync git && apt-get clean && rm -rf /var/cache/apt/*.bin
COPY wheels /tmp/wheels
COPY requirements.txt /tmp/requirements.txt
RUN python3 -m venv /opt/mncluster \
    && /opt/mncluster/bin/pip install -q --no-index --find-links /tmp/wheels -r /tmp/requirements.txt \
    && rm -rf /tmp/wheels /tmp/requirements.txt /root/.cache
ENV PATH=/opt/mncluster/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/mncluster
LABEL mncluster.fingerprint=$fp
CMD ["/bin/bash"]
CF
echo "==> podman build -> $IMAGE"
podman build -q --network host -t "$IMAGE" "$ctx" >/dev/null
# The image this one replaced, now untagged.
podman image prune -f --filter label=mncluster.fingerprint >/dev/null || true
podman run --rm "$IMAGE" ansible --version | head -n 1
echo "controller image $IMAGE built in $(( $(date +%s) - start ))s"
