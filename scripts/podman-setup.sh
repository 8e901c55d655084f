#!/usr/bin/env bash
# Make rootful podman work on restricted hosts, without clobbering the user's
# own configuration: settings go into a drop-in file
# (/etc/containers/containers.conf.d/50-mncluster.conf) and only those that
# this host needs are written.
#
# Detected problems and what is written for each:
#   * cgroups v1/hybrid (/sys/fs/cgroup is not cgroup2fs): crun fails with
#     "cgroups in hybrid mode not supported"     -> runtime = "runc"
#   * no systemd as PID 1 (containers, CI runners) -> cgroup_manager = "cgroupfs",
#                                                     events_logger = "file"
#   * a hard RLIMIT_NOFILE below podman's default (1048576): "setrlimit
#     RLIMIT_NOFILE: Operation not permitted"    -> default_ulimits at the host's hard limit
#   * podman 4 still on CNI without its plugins   -> network_backend = "netavark"
#
# Prints what it decided; exits 0 when nothing was needed. Idempotent.
set -euo pipefail

DROPIN_DIR=/etc/containers/containers.conf.d
DROPIN="$DROPIN_DIR/50-mncluster.conf"

containers=()
engine=()
network=()

if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
    echo "podman-setup: cgroups v1/hybrid host: using runc (crun does not support hybrid mode)"
    command -v runc >/dev/null || { echo "podman-setup: runc is missing (apt-get install runc)" >&2; exit 1; }
    engine+=('runtime = "runc"')
fi
if [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ]; then
    echo "podman-setup: PID 1 is not systemd: cgroupfs cgroup manager, file events logger"
    engine+=('cgroup_manager = "cgroupfs"' 'events_logger = "file"')
fi
hard_nofile=$(ulimit -Hn)
if [ "$hard_nofile" != unlimited ] && [ "$hard_nofile" -lt 1048576 ]; then
    echo "podman-setup: hard RLIMIT_NOFILE is $hard_nofile (< 1048576): lowering the containers' default ulimits"
    # Podman then also applies its own nproc default, which such a host refuses
    # too ("setrlimit ... type 6"); 32768 is ample for a node and was accepted
    # on every restricted host seen (values above ~35000 were refused).
    nproc=32768
    hard_nproc=$(ulimit -Hu)
    if [ "$hard_nproc" != unlimited ] && [ "$hard_nproc" -lt "$nproc" ]; then nproc=$hard_nproc; fi
    containers+=("default_ulimits = [\"nofile=$hard_nofile:$hard_nofile\", \"nproc=$nproc:$nproc\"]")
fi
if [ -x /usr/lib/podman/netavark ] && ! ls /usr/lib/cni/bridge /usr/libexec/cni/bridge >/dev/null 2>&1; then
    echo "podman-setup: CNI plugins absent, netavark present: using netavark"
    network+=('network_backend = "netavark"')
fi

if [ ${#containers[@]} -eq 0 ] && [ ${#engine[@]} -eq 0 ] && [ ${#network[@]} -eq 0 ]; then
    echo "podman-setup: this host needs no podman configuration"
    [ -f "$DROPIN" ] && rm -f "$DROPIN" && echo "podman-setup: removed stale $DROPIN"
    exit 0
fi

tmp=$(mktemp)
{
    echo "# Managed by mncluster (scripts/podman-setup.sh): only what this host needs."
    echo "# Remove this file to go back to podman's defaults."
    if [ ${#containers[@]} -gt 0 ]; then echo "[containers]"; printf '%s\n' "${containers[@]}"; fi
    if [ ${#engine[@]} -gt 0 ]; then echo "[engine]"; printf '%s\n' "${engine[@]}"; fi
    if [ ${#network[@]} -gt 0 ]; then echo "[network]"; printf '%s\n' "${network[@]}"; fi
} > "$tmp"
mkdir -p "$DROPIN_DIR"
if cmp -s "$tmp" "$DROPIN" 2>/dev/null; then
    rm -f "$tmp"; echo "podman-setup: $DROPIN is up to date"
else
    install -m 0644 "$tmp" "$DROPIN"; rm -f "$tmp"; echo "podman-setup: wrote $DROPIN"
    # A backend switch needs podman to forget networks created by the other one.
    podman system migrate >/dev/null 2>&1 || true
fi
