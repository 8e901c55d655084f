#!/usr/bin/env bash
# Build the sandbox/molecule node image without a registry:
# debootstrap a minimal Debian 12 with systemd, python3, sudo, openssh-server
# and iproute2, then `podman import` it.
#
#   scripts/build-node-image.sh [IMAGE]      (default: $MNC_NODE_IMAGE or
#                                             localhost/mncluster-node:bookworm)
#   MNC_FORCE_IMAGE=1 rebuilds an existing image.
#
# Users with a registry can skip this and point MNC_NODE_IMAGE (and the
# molecule/sandbox `mnc_node_image` variable) at an Ubuntu 22.04/24.04 image
# that runs systemd.
set -euo pipefail

IMAGE="${1:-${MNC_NODE_IMAGE:-localhost/mncluster-node:bookworm}}"
SUITE="${MNC_IMAGE_SUITE:-bookworm}"
MIRROR="${MNC_IMAGE_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="systemd,systemd-sysv,dbus,python3,python3-apt,sudo,openssh-server,openssh-client,iproute2,iputils-ping,ca-certificates,procps,less,locales"

if [ "${MNC_FORCE_IMAGE:-0}" != 1 ] && podman image exists "$IMAGE"; then
    echo "node image $IMAGE already present (MNC_FORCE_IMAGE=1 rebuilds it)"
    exit 0
fi

command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }

root="$(mktemp -d /var/tmp/mncluster-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT

start=$(date +%s)
echo "==> debootstrap $SUITE (minbase + systemd) into $root"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" \
    > "$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

echo "==> configuring the image for systemd in a container"
# The archive the nodes use: main + contrib + non-free (CUDA from the distro) and sources.
cat > "$root/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main contrib non-free non-free-firmware
deb $MIRROR $SUITE-updates main contrib non-free non-free-firmware
deb http://deb.debian.org/debian-security $SUITE-security main contrib non-free non-free-firmware
SRC
echo "mncluster-node" > "$root/etc/hostname"
: > "$root/etc/machine-id"
# Units that make no sense (or hang) in a container.
for unit in systemd-remount-fs.service systemd-udevd.service systemd-udev-trigger.service \
            getty.target console-getty.service sys-kernel-config.mount sys-kernel-debug.mount \
            systemd-firstboot.service systemd-modules-load.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# sshd host keys are generated per container at first boot, not baked into the image.
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system/ssh.service.d"
cat > "$root/etc/systemd/system/ssh.service.d/10-hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
sed -i 's/^# *en_US.UTF-8/en_US.UTF-8/' "$root/etc/locale.gen" && chroot "$root" locale-gen >/dev/null
chroot "$root" apt-get clean
# Keep the package lists: a node must be able to install before its first update.
rm -rf "$root"/var/cache/apt/*.bin

echo "==> podman import -> $IMAGE"
tar -C "$root" -c . | podman import \
    --change 'CMD ["/sbin/init"]' \
    --change 'ENV container=podman' \
    --change 'STOPSIGNAL SIGRTMIN+3' \
    - "$IMAGE" >/dev/null
echo "node image $IMAGE built in $(( $(date +%s) - start ))s"
