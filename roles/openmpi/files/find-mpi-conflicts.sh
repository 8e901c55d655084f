#!/bin/bash
# Managed by mncluster (roles/openmpi). Prints one line per MPI installation
# that is not under PREFIX_ROOT and would shadow ours; prints nothing if clean.
#   find-mpi-conflicts.sh PREFIX_ROOT PYTHON...
# Run as root, the Pythons, and ldd on what they import, run as MNC_PYTHON_USER
# (as nobody where it is empty or root): a virtualenv's python and its
# packages are the user's programs, which root never runs (ldd may run what
# it reads).
set -u
root="$1"; shift

ours() { case "$(readlink -f "$1")" in "$root"/*) return 0 ;; *) return 1 ;; esac; }

# Launchers and wrappers in the directories every shell searches.
# (/bin is /usr/bin on merged-/usr systems: each real directory once.)
dirs=$(for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
           [ -d "$d" ] && readlink -f "$d"; done | awk '!seen[$0]++')
for cmd in mpirun mpiexec mpicc orterun orted prterun prted mpichversion mpiexec.hydra; do
    for dir in $dirs; do
        [ -x "$dir/$cmd" ] || continue
        ours "$dir/$cmd" || echo "command $dir/$cmd -> $(readlink -f "$dir/$cmd")"
    done
done

# libmpi in the linker cache: what a program without RUNPATH loads.
ldconfig -p 2>/dev/null | awk '/(libmpi|libmpich)[a-z_]*\.so/ {print $NF}' | sort -u |
while read -r lib; do
    ours "$lib" || echo "ldconfig $lib"
done

# mpi4py linked to a libmpi that is not ours.
scan_mpi4py() {
    root="$1"; shift
    for py in "$@"; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
        dir=$("$py" -c 'import importlib.util as u; s = u.find_spec("mpi4py"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null) || continue
        [ -n "$dir" ] || continue
        for so in "$dir"/MPI*.so; do
            [ -e "$so" ] || continue
            ldd "$so" 2>/dev/null | awk '/libmpi/ {print $3}' | while read -r lib; do
                [ -n "$lib" ] && [ "$lib" != "not" ] || continue
                ours "$lib" || echo "mpi4py $so ($py) -> $lib"
            done
        done
    done
}
if [ "$(id -u)" -eq 0 ]; then
    # Root runs none of them: as MNC_PYTHON_USER, or as nobody where none (or root) is given.
    user="${MNC_PYTHON_USER:-}"
    if [ -z "$user" ] || [ "$user" = root ]; then user=nobody; fi
    (cd / && runuser -u "$user" -- /bin/bash -c "set -u; $(declare -f ours scan_mpi4py); scan_mpi4py \"\$@\"" \
        scan "$root" "$@")
else
    scan_mpi4py "$root" "$@"
fi
exit 0
